//! Admission of connections that have not logged in yet.
//!
//! A connection holds a pending slot from accept until its `Hello` is accepted (or it closes):
//! at most `max_pending` such connections at once, and at most `max_per_ip` from one address,
//! so clients that connect and never log in cannot lock players out. Logged-in players hold no
//! slot; the player cap bounds them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::metrics::NetMetrics;

/// Refusals are logged at most this often, with how many there were.
const WARN_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Pending {
    /// Where the total is reported (`gatehouse_pending_connections`).
    metrics: NetMetrics,
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    refused: u64,
    last_warn: Option<Instant>,
}

/// Counts pending connections; held by the network driver, each slot by its connection.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    pending: Arc<Mutex<Pending>>,
    max_pending: usize,
    max_per_ip: usize,
}

/// A pending slot, released when dropped.
#[derive(Debug)]
pub(crate) struct PendingSlot {
    pending: Arc<Mutex<Pending>>,
    ip: IpAddr,
}

impl Admission {
    /// Admission of at most `max_pending` connections, `max_per_ip` from one address,
    /// reporting the pending count to `metrics`.
    pub(crate) fn new(max_pending: usize, max_per_ip: usize, metrics: NetMetrics) -> Self {
        let pending =
            Pending { metrics, total: 0, per_ip: HashMap::new(), refused: 0, last_warn: None };
        Admission { pending: Arc::new(Mutex::new(pending)), max_pending, max_per_ip }
    }

    fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
        // The counters stay consistent even if a holder panicked: recover the guard.
        pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a new connection from `ip`, or `None` (refuse it) when the server or that
    /// address has too many connections that have not logged in.
    pub(crate) fn admit(&self, ip: IpAddr) -> Option<PendingSlot> {
        let mut p = Self::lock(&self.pending);
        let from_ip = p.per_ip.get(&ip).copied().unwrap_or(0);
        if p.total >= self.max_pending || from_ip >= self.max_per_ip {
            p.refused += 1;
            let now = Instant::now();
            if p.last_warn.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
                tracing::warn!(refused = p.refused, latest_ip = %ip, pending = p.total,
                    "refused connections since the last warning: too many have not logged in");
                p.refused = 0;
                p.last_warn = Some(now);
            }
            return None;
        }
        p.total += 1;
        p.metrics.set_pending_connections(p.total);
        *p.per_ip.entry(ip).or_default() += 1;
        Some(PendingSlot { pending: self.pending.clone(), ip })
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut p = Admission::lock(&self.pending);
        p.total = p.total.saturating_sub(1);
        p.metrics.set_pending_connections(p.total);
        if let Some(n) = p.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                p.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_cannot_take_every_pending_slot() {
        let admission = Admission::new(4, 2, crate::metrics::Metrics::new().net().clone());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = admission.admit(a).unwrap();
        let _second = admission.admit(a).unwrap();
        assert!(admission.admit(a).is_none(), "per-address cap");
        let _c = admission.admit(b).unwrap();
        let _d = admission.admit(b).unwrap();
        assert!(admission.admit("10.0.0.3".parse().unwrap()).is_none(), "total cap");
        drop(first);
        assert!(admission.admit(a).is_some(), "a released slot is free again");
    }
}

//! Admission of connections that have not logged in yet (docs/security.md, "The front door").
//!
//! A connection holds a pending slot from accept until its `Hello` is accepted (or it closes):
//! at most `max_pending` such connections at once, and at most `max_per_ip` from one address
//! group, so clients that connect and never log in cannot lock players out. An address group
//! is an IPv4 address, or an IPv6 /64 (one host or site usually holds a whole /64, so
//! counting single IPv6 addresses would cap nothing). Logged-in players hold no slot; the
//! player cap bounds them.
//!
//! When every slot is taken, a newcomer within its group's cap is not refused: the oldest
//! pending connection of the group holding the most is evicted for it, so no group, however
//! many addresses it spreads over, keeps the door shut. Each group also has a handshake rate
//! (`network.handshake_burst`, `handshakes_per_ip_per_s`): a handshake costs the one network
//! thread about 0.7 ms of TLS work, so a refusal is made before `accept`, where it is cheap.
//! The rate is checked only for addresses QUIC's retry has proven, so spoofed packets cannot
//! spend another address's handshakes.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::NetMetrics;
use crate::config::NetworkConfig;
use crate::rate::{Rate, Rates};

/// Refusals are logged at most this often, with how many there were.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The address group `ip` is counted in: an IPv4 address (an IPv4-mapped IPv6 address
/// included), or the /64 of an IPv6 address.
pub(crate) fn group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

/// The caps and rates admission applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AdmissionRules {
    /// Pending connections at once (`network.max_pending_connections`).
    pub(crate) max_pending: usize,
    /// Of those, from one address group (`network.max_pending_per_ip`).
    pub(crate) max_per_group: usize,
    /// Handshakes one address group may start (`network.handshake_burst`,
    /// `handshakes_per_ip_per_s`).
    pub(crate) handshakes: Rate,
}

#[derive(Debug)]
struct Pending {
    /// Where the total is reported (`gatehouse_pending_connections`).
    metrics: NetMetrics,
    total: usize,
    /// Each group's pending slots, oldest first (by admission order), with the driver's handle
    /// of their connection once it is known.
    per_group: HashMap<IpAddr, BTreeMap<u64, Option<usize>>>,
    next_seq: u64,
    refused: u64,
    last_warn: Option<Instant>,
}

impl Pending {
    /// Frees slot `seq` of `group`, if it still holds it (an evicted slot holds nothing).
    fn release(&mut self, group: IpAddr, seq: u64) {
        let Some(slots) = self.per_group.get_mut(&group) else { return };
        if slots.remove(&seq).is_none() {
            return;
        }
        if slots.is_empty() {
            self.per_group.remove(&group);
        }
        self.total = self.total.saturating_sub(1);
        self.metrics.set_pending_connections(self.total);
    }

    /// Takes the oldest slot whose connection is known from the group holding the most, and
    /// returns that connection's handle: it is evicted. `None` when no slot has a handle yet.
    fn evict_one(&mut self) -> Option<usize> {
        let (group, seq, handle) = self
            .per_group
            .iter()
            .filter_map(|(group, slots)| {
                let (seq, handle) = slots.iter().find_map(|(s, h)| h.map(|h| (*s, h)))?;
                Some((slots.len(), *group, seq, handle))
            })
            .max_by_key(|(len, _, seq, _)| (*len, std::cmp::Reverse(*seq)))
            .map(|(_, group, seq, handle)| (group, seq, handle))?;
        self.release(group, seq);
        Some(handle)
    }
}

/// What admission decided for a new connection.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Accept it with this slot.
    Slot(PendingSlot),
    /// Accept it with this slot, and close the connection whose driver handle is given: the
    /// oldest pending one of the group holding the most, evicted for it.
    Evicting(PendingSlot, usize),
    /// Refuse it: its group holds its cap, or started handshakes faster than its rate.
    Refused,
}

/// Counts pending connections and handshake rates; held by the network driver, each slot by
/// its connection.
#[derive(Debug)]
pub(crate) struct Admission {
    pending: Arc<Mutex<Pending>>,
    rules: AdmissionRules,
    /// Each group's handshake rate, while it is not full again.
    handshakes: Rates<IpAddr>,
}

/// A pending slot, released when dropped.
#[derive(Debug)]
pub(crate) struct PendingSlot {
    pending: Arc<Mutex<Pending>>,
    group: IpAddr,
    seq: u64,
}

impl PendingSlot {
    /// Names the connection holding this slot (the driver's handle), so it can be evicted.
    pub(crate) fn bind(&self, handle: usize) {
        let mut p = Admission::lock(&self.pending);
        if let Some(slot) = p.per_group.get_mut(&self.group).and_then(|s| s.get_mut(&self.seq)) {
            *slot = Some(handle);
        }
    }
}

impl PendingSlot {
    /// Its connection logged in: the slot still counts (until the game takes the login) but
    /// can no longer be evicted.
    pub(crate) fn unbind(&self) {
        let mut p = Admission::lock(&self.pending);
        if let Some(slot) = p.per_group.get_mut(&self.group).and_then(|s| s.get_mut(&self.seq)) {
            *slot = None;
        }
    }
}

impl AdmissionRules {
    /// The pending caps and the handshake rate per address group of `network`.
    pub(crate) fn of(network: &NetworkConfig) -> Self {
        AdmissionRules {
            max_pending: network.max_pending_connections,
            max_per_group: network.max_pending_per_ip,
            handshakes: Rate {
                burst: network.handshake_burst,
                interval: Duration::from_secs(1) / network.handshakes_per_ip_per_s.max(1),
            },
        }
    }
}

impl Admission {
    /// Admission under `rules`, reporting the pending count to `metrics`.
    pub(crate) fn new(rules: AdmissionRules, metrics: NetMetrics) -> Self {
        let pending = Pending {
            metrics,
            total: 0,
            per_group: HashMap::new(),
            next_seq: 0,
            refused: 0,
            last_warn: None,
        };
        Admission {
            pending: Arc::new(Mutex::new(pending)),
            rules,
            handshakes: Rates::new(rules.handshakes),
        }
    }

    fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
        // The counters stay consistent even if a holder panicked: recover the guard.
        pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new connection from `ip` (proven by a retry) at `now`: a slot, a slot for which an
    /// older pending connection is evicted, or a refusal.
    pub(crate) fn admit(&mut self, ip: IpAddr, now: Instant) -> Admitted {
        let group = group(ip);
        let pending = self.pending.clone();
        let mut p = Self::lock(&pending);
        let held = p.per_group.get(&group).map_or(0, BTreeMap::len);
        let refusal = if held >= self.rules.max_per_group {
            Some(
                "its address group holds network.max_pending_per_ip connections that have not logged in",
            )
        } else if !self.take_handshake(group, now) {
            Some("its address group starts handshakes faster than network.handshakes_per_ip_per_s")
        } else {
            None
        };
        if let Some(why) = refusal {
            drop(p);
            self.warn_refused(ip, why, now);
            return Admitted::Refused;
        }
        let evicted = if p.total >= self.rules.max_pending { p.evict_one() } else { None };
        if p.total >= self.rules.max_pending {
            // Every slot belongs to a connection still being accepted: nothing to evict.
            drop(p);
            self.warn_refused(ip, "every pending slot is taken", now);
            return Admitted::Refused;
        }
        let seq = p.next_seq;
        p.next_seq += 1;
        p.total += 1;
        let total = p.total;
        p.metrics.set_pending_connections(total);
        p.per_group.entry(group).or_default().insert(seq, None);
        drop(p);
        let slot = PendingSlot { pending: self.pending.clone(), group, seq };
        match evicted {
            Some(handle) => Admitted::Evicting(slot, handle),
            None => Admitted::Slot(slot),
        }
    }

    /// One handshake of `group` at `now`, if its rate allows.
    fn take_handshake(&mut self, group: IpAddr, now: Instant) -> bool {
        self.handshakes.take(&group, now).is_ok()
    }

    /// Logs refusals at most every [`WARN_EVERY`], with how many there were.
    fn warn_refused(&mut self, ip: IpAddr, why: &str, now: Instant) {
        let mut p = Self::lock(&self.pending);
        p.refused += 1;
        if p.last_warn.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
            tracing::warn!(refused = p.refused, latest_ip = %ip, latest_cause = why,
                pending = p.total, "refused connections since the last warning");
            p.refused = 0;
            p.last_warn = Some(now);
        }
    }

    /// Admission with these caps and a handshake rate no test reaches.
    #[cfg(test)]
    pub(crate) fn with_caps(max_pending: usize, max_per_group: usize, metrics: NetMetrics) -> Self {
        let handshakes = Rate { burst: u32::MAX, interval: Duration::from_nanos(1) };
        Self::new(AdmissionRules { max_pending, max_per_group, handshakes }, metrics)
    }

    /// Whether `admit` would give a slot (a test's shorthand, consuming a handshake).
    #[cfg(test)]
    pub(crate) fn admits(&mut self, ip: IpAddr) -> Option<PendingSlot> {
        match self.admit(ip, Instant::now()) {
            Admitted::Slot(slot) | Admitted::Evicting(slot, _) => Some(slot),
            Admitted::Refused => None,
        }
    }

    /// Handshake rates kept now.
    #[cfg(test)]
    fn rates_kept(&self) -> usize {
        self.handshakes.kept()
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        Admission::lock(&self.pending).release(self.group, self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(max_pending: usize, max_per_group: usize, burst: u32) -> Admission {
        let handshakes = Rate { burst, interval: Duration::from_millis(10) };
        let rules = AdmissionRules { max_pending, max_per_group, handshakes };
        Admission::new(rules, crate::metrics::Metrics::new().net().clone())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Admits a connection from `from` at `now`, expecting a slot, and binds it to `handle`.
    fn slot(a: &mut Admission, from: &str, now: Instant, handle: usize) -> PendingSlot {
        match a.admit(ip(from), now) {
            Admitted::Slot(slot) => {
                slot.bind(handle);
                slot
            }
            other => panic!("a slot for {from} expected: {other:?}"),
        }
    }

    #[test]
    fn one_address_cannot_take_every_pending_slot() {
        let now = Instant::now();
        let mut a = admission(4, 2, 100);
        let first = slot(&mut a, "10.0.0.1", now, 1);
        let _second = slot(&mut a, "10.0.0.1", now, 2);
        assert!(matches!(a.admit(ip("10.0.0.1"), now), Admitted::Refused), "per-address cap");
        drop(first);
        let _again = slot(&mut a, "10.0.0.1", now, 3);
    }

    #[test]
    fn ipv6_addresses_are_counted_by_their_64() {
        assert_eq!(group(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(group(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        let now = Instant::now();
        let mut a = admission(16, 2, 100);
        let _one = slot(&mut a, "2001:db8:1:2::1", now, 1);
        let _two = slot(&mut a, "2001:db8:1:2:ffff::2", now, 2);
        assert!(
            matches!(a.admit(ip("2001:db8:1:2:1234::3"), now), Admitted::Refused),
            "a third address of the same /64 is over its cap"
        );
        let _other = slot(&mut a, "2001:db8:1:3::1", now, 3);
    }

    #[test]
    fn a_full_table_evicts_the_oldest_pending_connection_of_the_group_holding_the_most() {
        let now = Instant::now();
        let mut a = admission(4, 3, 100);
        let _a1 = slot(&mut a, "10.0.0.1", now, 11);
        let _b1 = slot(&mut a, "10.0.0.2", now, 21);
        let _a2 = slot(&mut a, "10.0.0.1", now, 12);
        let _a3 = slot(&mut a, "10.0.0.1", now, 13);
        // Full: the newcomer gets a slot, and a's oldest is evicted for it.
        let newcomer = match a.admit(ip("10.0.0.9"), now) {
            Admitted::Evicting(slot, 11) => slot,
            other => panic!("a's oldest evicted expected: {other:?}"),
        };
        newcomer.bind(91);
        let p = Admission::lock(&a.pending);
        assert_eq!(p.total, 4);
        assert_eq!(p.per_group[&ip("10.0.0.1")].len(), 2);
        drop(p);
        // The evicted connection's slot, dropped later, frees nothing twice.
        drop(_a1);
        assert_eq!(Admission::lock(&a.pending).total, 4);
        // The next eviction takes a's next oldest: a still holds the most.
        assert!(matches!(a.admit(ip("10.0.0.8"), now), Admitted::Evicting(_, 12)));
    }

    #[test]
    fn a_slot_whose_connection_logged_in_is_never_evicted() {
        let now = Instant::now();
        let mut a = admission(2, 2, 100);
        let logged_in = slot(&mut a, "10.0.0.1", now, 1);
        logged_in.unbind();
        let _pending = slot(&mut a, "10.0.0.1", now, 2);
        let Admitted::Evicting(_newcomer, 2) = a.admit(ip("10.0.0.2"), now) else {
            panic!("the pending connection evicted, not the logged-in one");
        };
        // The newcomer is still being accepted (unbound), the other logged in: nothing to evict.
        assert!(matches!(a.admit(ip("10.0.0.3"), now), Admitted::Refused));
    }

    #[test]
    fn a_full_table_of_connections_still_being_accepted_refuses() {
        let now = Instant::now();
        let mut a = admission(1, 1, 100);
        let Admitted::Slot(_unbound) = a.admit(ip("10.0.0.1"), now) else { panic!() };
        assert!(matches!(a.admit(ip("10.0.0.2"), now), Admitted::Refused));
    }

    #[test]
    fn an_address_group_past_its_handshake_rate_is_refused_before_accept() {
        let now = Instant::now();
        let mut a = admission(1_000, 1_000, 3);
        let mut held = Vec::new();
        for i in 0..3 {
            held.push(slot(&mut a, "10.0.0.1", now, i));
        }
        assert!(matches!(a.admit(ip("10.0.0.1"), now), Admitted::Refused), "past its burst");
        let _other = slot(&mut a, "10.0.0.2", now, 10);
        let _later = slot(&mut a, "10.0.0.1", now + Duration::from_millis(10), 11);
    }

    #[test]
    fn what_the_handshake_rates_keep_is_bounded_by_the_recent_groups() {
        let start = Instant::now();
        let mut a = admission(100_000, 10, 2);
        for i in 0..20_000u32 {
            let now = start + Duration::from_millis(u64::from(i));
            let from = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let Admitted::Slot(slot) = a.admit(from, now) else { panic!("{from} admitted") };
            drop(slot);
            assert!(
                a.rates_kept() <= 2 * crate::rate::FIRST_SWEEP_AT,
                "{} kept at {i}",
                a.rates_kept()
            );
        }
    }
}

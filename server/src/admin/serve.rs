//! The admin endpoint's connections (docs/security.md, "The admin endpoint"): at most
//! `admin.max_connections` at once, plus a few kept for loopback so the container's health
//! check is answered while remote peers hold every other; each must send its request head
//! within `admin.header_timeout_ms`, which also closes a keep-alive connection idle that long,
//! and ends within `admin.connection_timeout_ms` whatever it does. A connection over the cap is
//! closed at once rather than left in the kernel's queue. Accept errors (out of file
//! descriptors, above all) are logged, at most every few seconds, and retried after a pause.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::ConnectionLimits;

/// Connections kept for loopback peers beyond `admin.max_connections`: the health check and
/// an operator's probe on the same host.
pub const LOOPBACK_RESERVE: usize = 4;

/// How long the accept loop pauses after an error (it is usually out of file descriptors,
/// which only a closing connection frees).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accept errors and refusals are logged at most this often, with how many there were.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How long in-flight requests may finish once the endpoint stops.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Counts what is logged at most every [`WARN_EVERY`].
#[derive(Debug, Default)]
struct Throttled {
    count: u64,
    last: Option<Instant>,
}

impl Throttled {
    /// Counts one; `Some(count)` when it is time to log them.
    fn note(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        if self.last.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.count))
    }
}

/// Serves `app` on `listener` within `limits` until `stop`; then in-flight requests get
/// [`STOP_GRACE`] to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let general = Arc::new(Semaphore::new(limits.max_connections));
    let loopback = Arc::new(Semaphore::new(LOOPBACK_RESERVE));
    let mut connections = JoinSet::new();
    let (mut accept_errors, mut refused) = (Throttled::default(), Throttled::default());
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        // Finished connections' tasks are collected as new ones come.
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                if let Some(count) = accept_errors.note(Instant::now()) {
                    tracing::warn!(error = %e, count, "admin endpoint: accept failed; pausing");
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                }
            }
        };
        let Some(permit) = permit(&general, &loopback, peer) else {
            if let Some(count) = refused.note(Instant::now()) {
                tracing::warn!(%peer, count, max = limits.max_connections,
                    "admin endpoint: connections refused since the last warning: too many open");
            }
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        connections.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            // Whatever the peer does, the slot is free again by then.
            let _ = tokio::time::timeout(limits.connection_timeout, connection).await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(STOP_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}

/// A slot for a connection from `peer`: a general one, or for a loopback peer one of the
/// reserve; `None` when it must be refused.
fn permit(
    general: &Arc<Semaphore>,
    loopback: &Arc<Semaphore>,
    peer: SocketAddr,
) -> Option<OwnedSemaphorePermit> {
    general.clone().try_acquire_owned().ok().or_else(|| {
        peer.ip().is_loopback().then(|| loopback.clone().try_acquire_owned().ok()).flatten()
    })
}

/// Raises this process's soft limit on open files to its hard limit, so the admin endpoint, the
/// store and the network never share a small default (often 1,024, in some containers 256).
/// Returns the limit now in force, or the error why it could not be read or raised (the server
/// runs on with what it has).
pub(crate) fn raise_open_files_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_peer_gets_the_reserve_once_the_general_slots_are_taken() {
        let general = Arc::new(Semaphore::new(1));
        let loopback = Arc::new(Semaphore::new(1));
        let (local, remote): (SocketAddr, SocketAddr) =
            ("127.0.0.1:1".parse().unwrap(), "192.0.2.1:1".parse().unwrap());
        let first = permit(&general, &loopback, remote).expect("a general slot");
        assert!(permit(&general, &loopback, remote).is_none(), "remote peers share the cap");
        let reserved = permit(&general, &loopback, local).expect("the loopback reserve");
        assert!(permit(&general, &loopback, local).is_none(), "the reserve is bounded too");
        drop(first);
        assert!(permit(&general, &loopback, remote).is_some(), "a freed slot is free again");
        drop(reserved);
    }

    #[test]
    fn the_open_files_soft_limit_is_raised_to_the_hard_one() {
        let limit = raise_open_files_limit().unwrap();
        let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert_eq!(soft, limit);
        assert_eq!(soft, hard);
    }

    #[test]
    fn throttled_warnings_count_what_they_skipped() {
        let start = Instant::now();
        let mut t = Throttled::default();
        assert_eq!(t.note(start), Some(1));
        assert_eq!(t.note(start + Duration::from_secs(1)), None);
        assert_eq!(t.note(start + Duration::from_secs(2)), None);
        assert_eq!(t.note(start + WARN_EVERY), Some(3));
    }
}

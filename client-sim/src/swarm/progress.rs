//! Live counts of a running swarm for its progress line, and what each connection last told
//! them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::figures::ScreenKind;
use crate::interval::{IntervalFigures, IntervalReport};
use crate::session::ClientSession;

/// Live counts of a running swarm, for a progress line during a long run, and the figures
/// of the current interval ([`IntervalFigures`]): updated by the clients as they go, read by
/// whoever displays them.
#[derive(Debug, Default)]
pub struct Progress {
    connected: AtomicU64,
    placed: AtomicU64,
    transitions: AtomicU64,
    errors: AtomicU64,
    interval: Mutex<IntervalFigures>,
}

/// A moment of a [`Progress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Clients connected and welcomed now.
    pub connected: u64,
    /// Clients placed now (a possessed, acknowledged pawn; no loading screen).
    pub placed: u64,
    /// Transitions ended so far, as the client that saw the most counts them.
    pub transitions: u64,
    /// Errors recorded so far, over all clients.
    pub errors: u64,
}

impl Progress {
    /// The figures of the interval ending at `now`, `at_s` seconds into the run; the next
    /// interval starts.
    pub fn take_interval(&self, now: std::time::Instant, at_s: u64) -> IntervalReport {
        self.interval().take(now, at_s)
    }

    /// The current interval's figures, to record into (a client that panicked holding them
    /// left them usable: they are counts).
    pub(super) fn interval(&self) -> std::sync::MutexGuard<'_, IntervalFigures> {
        self.interval.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counts now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            connected: self.connected.load(Ordering::Relaxed),
            placed: self.placed.load(Ordering::Relaxed),
            transitions: self.transitions.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What one connection last told its [`Progress`], so each change is counted once and a
/// connection's end takes back what it added.
#[derive(Debug)]
pub(super) struct Reported {
    /// The client's index.
    index: usize,
    connected: bool,
    placed: bool,
    errors: usize,
    /// How many of the session's screens that came down were counted already.
    screens_down: usize,
    /// The loading screen up at the last update: its kind and when it went up.
    screen: Option<(ScreenKind, std::time::Instant)>,
}

impl Reported {
    pub(super) fn new(index: usize) -> Self {
        Reported {
            index,
            connected: false,
            placed: false,
            errors: 0,
            screens_down: 0,
            screen: None,
        }
    }

    /// Counts what changed in `session` since the last update.
    pub(super) fn update(&mut self, progress: Option<&Progress>, session: &ClientSession) {
        let Some(progress) = progress else { return };
        let up = session.screen_up();
        let screens = &session.stats().screens;
        if self.screen != up || screens.len() > self.screens_down {
            let mut interval = progress.interval();
            // Every screen that came down since, each at its own instants: one that went up
            // and down between two updates too.
            for screen in screens.iter().skip(self.screens_down) {
                if let Some(ended) = screen.ended {
                    interval.screen_down(self.index, screen.kind, screen.shown, ended, false);
                }
            }
            self.screens_down = screens.len();
            if let Some((_, raised)) = up {
                interval.screen_up(self.index, raised);
            }
            self.screen = up;
        }
        let flip = |counter: &AtomicU64, was: &mut bool, now: bool| {
            if *was != now {
                match now {
                    true => counter.fetch_add(1, Ordering::Relaxed),
                    false => counter.fetch_sub(1, Ordering::Relaxed),
                };
                *was = now;
            }
        };
        flip(&progress.connected, &mut self.connected, session.player().is_some());
        flip(&progress.placed, &mut self.placed, session.is_placed());
        let stats = session.stats();
        let errors = stats.errors.len();
        if errors > self.errors {
            progress.errors.fetch_add((errors - self.errors) as u64, Ordering::Relaxed);
            self.errors = errors;
        }
        progress.transitions.fetch_max(stats.transitions_ended.len() as u64, Ordering::Relaxed);
    }

    /// The connection is gone: it is neither connected nor placed any more, and a screen it
    /// had up was cut short.
    pub(super) fn end(&mut self, progress: Option<&Progress>) {
        let Some(progress) = progress else { return };
        if let Some((kind, raised)) = self.screen.take() {
            let now = std::time::Instant::now();
            progress.interval().screen_down(self.index, kind, raised, now, true);
        }
        if std::mem::take(&mut self.connected) {
            progress.connected.fetch_sub(1, Ordering::Relaxed);
        }
        if std::mem::take(&mut self.placed) {
            progress.placed.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Counts `errors` connection-level errors (refused, lost, unreachable) into `progress`, beside
/// the sessions' own that [`Reported`] counts.
pub(super) fn count_errors(progress: Option<&Progress>, errors: usize) {
    if let Some(progress) = progress {
        progress.errors.fetch_add(errors as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use gatehouse_protocol::ServerMessage;

    use super::*;
    use crate::session::SessionConfig;

    /// The progress counts follow each connection, and a connection's end takes back what it added.
    #[test]
    fn progress_counts_connections_and_takes_them_back_at_the_end() {
        let progress = Progress::default();
        let now = std::time::Instant::now();
        let thin = SessionConfig { full: false, ..Default::default() };
        let mut session = super::super::welcomed(now, thin, "sim-0000");
        let mut reported = Reported::new(0);
        session.handle(
            now,
            ServerMessage::EndTransition { transition_id: gatehouse_protocol::TransitionId(9) },
        );
        reported.update(Some(&progress), &session);
        reported.update(Some(&progress), &session);
        let seen = progress.snapshot();
        assert_eq!((seen.connected, seen.placed, seen.errors), (1, 0, 1), "{seen:?}");
        reported.end(Some(&progress));
        assert_eq!(progress.snapshot().connected, 0);
        assert_eq!(progress.snapshot().errors, 1, "errors stay counted");
    }

    /// Each client's loading screen reaches the interval figures: up while it is up, down when
    /// it comes down, cut short (counted toward the longest, not as down) when the connection
    /// ends with it up.
    #[test]
    fn the_progress_follows_each_clients_screen_into_the_interval() {
        use gatehouse_protocol::{LevelName, NodeId, TransitionId};
        let progress = Progress::default();
        let show = |id| ServerMessage::ShowTransition {
            transition_id: TransitionId(id),
            target_node: NodeId::new("harbor").unwrap(),
            levels: vec![LevelName::new("harbor_docks").unwrap()],
            rooms: Vec::new(),
        };
        let start = std::time::Instant::now();
        let mut runs = Vec::new();
        for cut in [false, true] {
            let thin = SessionConfig { full: false, ..Default::default() };
            let mut session = super::super::welcomed(start, thin, "sim-0007");
            let mut reported = Reported::new(7);
            session.handle(start, show(1));
            reported.update(Some(&progress), &session);
            let up = progress.take_interval(std::time::Instant::now(), 1);
            assert_eq!((up.screens_up, up.screens_down), (1, 0), "{up:?}");
            if cut {
                reported.end(Some(&progress));
            } else {
                // Placed in it, so its end drops the screen.
                let possessed = ServerMessage::Possessed { pawn_id: gatehouse_protocol::PawnId(1) };
                session.handle(start, possessed);
                session
                    .handle(start, ServerMessage::EndTransition { transition_id: TransitionId(1) });
                reported.update(Some(&progress), &session);
            }
            runs.push(progress.take_interval(std::time::Instant::now(), 2));
        }
        let (down, cut) = (&runs[0], &runs[1]);
        assert_eq!((down.screens_up, down.screens_down, down.shown_to_ended.count), (0, 1, 1));
        assert_eq!((cut.screens_up, cut.screens_down, cut.shown_to_ended.count), (0, 0, 0));
        assert!(cut.longest_loading_screen_ms <= start.elapsed().as_millis() as u64);
        // A screen that goes up and comes down between two updates is counted all the same,
        // with its own instants.
        let thin = SessionConfig { full: false, ..Default::default() };
        let mut session = super::super::welcomed(start, thin, "sim-0008");
        let mut reported = Reported::new(8);
        reported.update(Some(&progress), &session);
        session.handle(start, show(2));
        let ended = start + Duration::from_millis(1500);
        let possessed = ServerMessage::Possessed { pawn_id: gatehouse_protocol::PawnId(2) };
        session.handle(start, possessed);
        session.handle(ended, ServerMessage::EndTransition { transition_id: TransitionId(2) });
        reported.update(Some(&progress), &session);
        let quick = progress.take_interval(ended, 3);
        assert_eq!((quick.screens_up, quick.screens_down), (0, 1), "{quick:?}");
        assert_eq!(quick.shown_to_ended.max_us / 1000, 1500, "{quick:?}");
    }
}

//! Possessions awaiting their client's acknowledgement, by when they were possessed (issue 13
//! item 4: a client that never acknowledges must not hold a transition it was not possessed in).
//!
//! A player counts as placed only once its client acknowledged the pawn it possesses (DESIGN
//! §4). A transition bounds that wait with its settle timeout; a possession outside one (a join,
//! a respawn) had no bound, so a client that never acknowledges carried its unacknowledged pawn
//! into the next transition and held it for a whole settle timeout. Every possession now has a
//! deadline of its own, a settle timeout after it was sent; the game applies the client-ready
//! policy to whoever misses it, wherever it was possessed. Inside a transition the settle
//! deadline comes first (the possession happens after Completing began), so nothing changes
//! there.
//!
//! [`Acknowledgements`] is an index the game keeps as possessions and acknowledgements happen,
//! so the earliest deadline is found without a scan of every player (issue 12 item 3). It sees no
//! roster and emits nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gatehouse_protocol::PlayerId;

/// The possessions not acknowledged yet.
#[derive(Debug, Default)]
pub(crate) struct Acknowledgements {
    /// When each waiting player's current pawn was possessed.
    since: BTreeMap<PlayerId, Instant>,
    /// The same, ordered by when: their deadlines in order.
    by_time: BTreeSet<(Instant, PlayerId)>,
}

impl Acknowledgements {
    /// `player` was possessed a pawn at `now`: its acknowledgement is awaited from now (a
    /// possession still awaited before is replaced).
    pub(crate) fn possessed(&mut self, player: &PlayerId, now: Instant) {
        self.forget(player);
        self.since.insert(player.clone(), now);
        self.by_time.insert((now, player.clone()));
    }

    /// `player`'s possession is no longer awaited: acknowledged, the player left, or excused.
    pub(crate) fn forget(&mut self, player: &PlayerId) {
        if let Some(at) = self.since.remove(player) {
            self.by_time.remove(&(at, player.clone()));
        }
    }

    /// The earliest deadline, `timeout` after the oldest possession still awaited.
    pub(crate) fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at + timeout)
    }

    /// The players whose possession is awaited for `timeout` or more at `now`, oldest first.
    pub(crate) fn late(&self, now: Instant, timeout: Duration) -> Vec<PlayerId> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at + timeout <= now)
            .map(|(_, player)| player.clone())
            .collect()
    }

    /// Whether `player`'s possession is awaited.
    #[cfg(test)]
    pub(crate) fn is_awaited(&self, player: &PlayerId) -> bool {
        self.since.contains_key(player)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    /// The deadline follows the oldest possession still awaited; a newer possession of the same
    /// player replaces its older one, and a forgotten one counts no more.
    #[test]
    fn the_deadline_follows_the_oldest_possession_still_awaited() {
        let t0 = Instant::now();
        let (s, timeout) = (Duration::from_secs(1), Duration::from_secs(10));
        let mut acks = Acknowledgements::default();
        assert_eq!(acks.deadline(timeout), None);
        acks.possessed(&pid("a"), t0);
        acks.possessed(&pid("b"), t0 + s);
        assert_eq!(acks.deadline(timeout), Some(t0 + timeout));
        assert_eq!(acks.late(t0 + timeout, timeout), [pid("a")]);
        acks.possessed(&pid("a"), t0 + s * 2);
        assert_eq!(acks.deadline(timeout), Some(t0 + s + timeout), "b's now");
        assert_eq!(acks.late(t0 + s * 20, timeout), [pid("b"), pid("a")]);
        acks.forget(&pid("b"));
        acks.forget(&pid("nobody"));
        assert!(!acks.is_awaited(&pid("b")) && acks.is_awaited(&pid("a")));
        assert_eq!(acks.deadline(timeout), Some(t0 + s * 2 + timeout));
        acks.forget(&pid("a"));
        assert_eq!((acks.deadline(timeout), acks.late(t0 + s * 99, timeout)), (None, vec![]));
    }
}

//! Answers awaited from players, each by when it was asked for: an index the game keeps as it
//! asks and as answers come, so the earliest deadline is found without a scan of every player.
//! It sees no roster and emits nothing.
//!
//! `Responses` (`responses.rs`) keeps four of these, one per kind of answer and bound.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gatehouse_protocol::PlayerId;

/// The players an answer is awaited from, each with when it was asked for.
#[derive(Debug, Default)]
pub(crate) struct Awaited {
    /// When each player was asked.
    since: BTreeMap<PlayerId, Instant>,
    /// The same, ordered by when: their deadlines in order.
    by_time: BTreeSet<(Instant, PlayerId)>,
}

impl Awaited {
    /// `player` was asked at `now`: its answer is awaited from now (an answer still awaited
    /// before is replaced).
    pub(crate) fn ask(&mut self, player: &PlayerId, now: Instant) {
        self.forget(player);
        self.since.insert(player.clone(), now);
        self.by_time.insert((now, player.clone()));
    }

    /// `player`'s answer is no longer awaited: it answered, left, or was dealt with. Returns
    /// when it was asked, if it was awaited.
    pub(crate) fn forget(&mut self, player: &PlayerId) -> Option<Instant> {
        let at = self.since.remove(player)?;
        self.by_time.remove(&(at, player.clone()));
        Some(at)
    }

    /// How many answers are awaited.
    pub(crate) fn len(&self) -> usize {
        self.since.len()
    }

    /// The earliest deadline, `timeout` after the oldest question still open.
    pub(crate) fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at + timeout)
    }

    /// The players whose answer is awaited for `timeout` or more at `now`, oldest first.
    pub(crate) fn late(&self, now: Instant, timeout: Duration) -> Vec<PlayerId> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at + timeout <= now)
            .map(|(_, player)| player.clone())
            .collect()
    }

    /// The players awaited, in id order.
    pub(crate) fn players(&self) -> impl Iterator<Item = &PlayerId> {
        self.since.keys()
    }

    /// Whether `player`'s answer is awaited.
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
        let mut acks = Awaited::default();
        assert_eq!(acks.deadline(timeout), None);
        acks.ask(&pid("a"), t0);
        acks.ask(&pid("b"), t0 + s);
        assert_eq!(acks.deadline(timeout), Some(t0 + timeout));
        assert_eq!(acks.late(t0 + timeout, timeout), [pid("a")]);
        acks.ask(&pid("a"), t0 + s * 2);
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

//! How often one player may log in (docs/protocol.md 4, "Session tokens"): a login costs a
//! save load, a broadcast to every client and, for a relaunch, the older connection. A leaked
//! or replayed token must not turn that into a flood, so each player id may log in
//! `login_burst` times in a row and then once per `login_interval` (a [`Rate`]); a login past
//! that is refused before it changes anything (the older connection stays).
//!
//! What is kept is bounded by the logins within the last `burst` intervals ([`Rates`]).

use std::time::{Duration, Instant};

use gatehouse_protocol::PlayerId;

use crate::rate::{Rate, Rates};

/// The login rate of every player id that logged in lately.
#[derive(Debug)]
pub(crate) struct LoginRate(Rates<PlayerId>);

impl LoginRate {
    /// `burst` logins in a row (at least 1), then one per `interval`.
    pub(crate) fn new(burst: u32, interval: Duration) -> Self {
        Self(Rates::new(Rate { burst, interval }))
    }

    /// A login of `player` at `now`: `Ok` counts it; `Err` holds how long until one more
    /// would be admitted, and counts nothing.
    pub(crate) fn admit(&mut self, player: &PlayerId, now: Instant) -> Result<(), Duration> {
        self.0.take(player, now)
    }

    /// How many ids are kept.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.0.kept()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(name: &str) -> PlayerId {
        PlayerId::new(name).unwrap()
    }

    #[test]
    fn each_player_id_has_a_rate_of_its_own() {
        let start = Instant::now();
        let mut rate = LoginRate::new(2, Duration::from_secs(2));
        let a = pid("a");
        assert_eq!(rate.admit(&a, start), Ok(()));
        assert_eq!(rate.admit(&a, start), Ok(()));
        assert_eq!(rate.admit(&a, start), Err(Duration::from_secs(2)));
        assert_eq!(rate.admit(&pid("b"), start), Ok(()), "b is not held by a's logins");
        assert_eq!(rate.admit(&a, start + Duration::from_secs(2)), Ok(()));
    }

    #[test]
    fn what_the_login_rate_keeps_is_bounded_by_the_recent_logins() {
        let start = Instant::now();
        let mut rate = LoginRate::new(2, Duration::from_millis(10));
        for i in 0..20_000u32 {
            // One new id a millisecond: at most about 20 ms of them are still refilling.
            let now = start + Duration::from_millis(u64::from(i));
            assert_eq!(rate.admit(&pid(&format!("p{i}")), now), Ok(()));
            assert!(rate.kept() <= 2 * crate::rate::FIRST_SWEEP_AT, "{} kept at {i}", rate.kept());
        }
    }
}

//! The session's named deadlines: one enum, one table (the server core's habit, after
//! quinn-proto).
//!
//! The session never sleeps; it records deadlines here and the shell wakes it at the earliest
//! ([`crate::Session::poll_timeout`]).

use std::time::Instant;

/// Every deadline the session arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// `Welcome` (or `Rejected`) must have come by now, counted from the session's start
    /// ([`crate::SessionConfig::welcome_timeout`]); the server closes a silent client at its
    /// hello timeout, and this bounds a client whose server never answers at all.
    Welcome = 0,
    /// After [`crate::Session::leave`], the server's close must have come by now
    /// ([`crate::SessionConfig::leave_linger`]); the session closes itself then.
    Leave = 1,
    /// A transition ended before this client was placed, its screen held for the join of its
    /// own that comes next: by now that join has come, or the screen drops
    /// ([`crate::session::JOIN_AFTER_END`]).
    JoinAfterEnd = 2,
    /// A move's destination must have welcomed the client by now, counted from the `TravelTo`
    /// ([`crate::SessionConfig::connect_timeout`], or the seat's `valid_ms` if shorter): past
    /// it the move is given up (docs/spec/travel.md V3).
    Admission = 3,
    /// The destination placed a moving client: the server it left must have let it go
    /// (`Closing { 11 }`) by now, or its link is closed anyway
    /// ([`crate::session::SOURCE_RELEASE`]).
    SourceRelease = 4,
}

/// How many timers there are.
const TIMER_COUNT: usize = 5;

/// Every timer, in table order.
const ALL: [Timer; TIMER_COUNT] =
    [Timer::Welcome, Timer::Leave, Timer::JoinAfterEnd, Timer::Admission, Timer::SourceRelease];

/// A deadline per [`Timer`].
#[derive(Debug, Default, Clone)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; TIMER_COUNT],
}

impl TimerTable {
    /// Arms `timer` at `at`, replacing any earlier setting.
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer as usize] = Some(at);
    }

    /// Disarms `timer`.
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = None;
    }

    /// Disarms every timer.
    pub(crate) fn stop_all(&mut self) {
        self.deadlines = [None; TIMER_COUNT];
    }

    /// The earliest armed deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Disarms and returns every timer whose deadline is at or before `now`, in enum order.
    pub(crate) fn take_expired(&mut self, now: Instant) -> impl Iterator<Item = Timer> + use<> {
        let mut expired = [None; TIMER_COUNT];
        for timer in ALL {
            let slot = &mut self.deadlines[timer as usize];
            if slot.is_some_and(|at| at <= now) {
                *slot = None;
                expired[timer as usize] = Some(timer);
            }
        }
        expired.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Only deadlines at or before `now` expire, each once, and the next is the earliest left.
    #[test]
    fn only_due_deadlines_expire_and_each_once() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        timers.set(Timer::Leave, t0 + Duration::from_secs(2));
        timers.set(Timer::Welcome, t0 + Duration::from_secs(1));
        assert_eq!(timers.next(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(timers.take_expired(t0).count(), 0);
        let due: Vec<_> = timers.take_expired(t0 + Duration::from_secs(1)).collect();
        assert_eq!(due, [Timer::Welcome]);
        assert_eq!(timers.next(), Some(t0 + Duration::from_secs(2)));
        timers.stop(Timer::Leave);
        assert_eq!(timers.next(), None);
    }
}

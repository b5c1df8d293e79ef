//! The game core's named timers: one enum, one table of deadlines (quinn-proto's habit).
//!
//! The core never sleeps; it records deadlines here and the shell wakes it at the earliest one
//! (`Game::poll_timeout`).

use std::time::Instant;

/// Every timer the game core arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Re-run spawn processing: a node's spawn points are not registered and no event will
    /// announce them (`[game] spawn_retry_ms`, 100 ms; a registration that is announced wakes
    /// the queue itself, no retry poll: docs/spec/transitions.md T2).
    SpawnRetry = 0,
    /// The settle-hold deadline of a transition in Completing (docs/spec/transitions.md T7).
    SpawnSettle = 1,
    /// The earliest client-ready deadline among players that have not reported ready.
    ClientReady = 2,
    /// The next travel along the world's route.
    RouteTravel = 3,
    /// The earliest pending game-effect event (hazard exposure, damage tick, effect expiry).
    Effects = 4,
    /// The hard maximum of the transition in flight (`[game] transition_max_ms`).
    TransitionLimit = 5,
    /// The earliest deadline of a possession not acknowledged yet, a settle timeout after it
    /// (docs/spec/transitions.md T9).
    PossessionAck = 6,
    /// The earliest response deadline: a client shown a transition that has not answered
    /// `TransitionShown`, or possessed a pawn it has not acknowledged, a response timeout after
    /// (docs/spec/transitions.md T9).
    ClientResponse = 7,
    /// The earliest deadline of a seat granted to another server's travel: its confirmation,
    /// its redemption, or its traveller's relaunch (`fleet.seat_hold_ms`, docs/spec/travel.md
    /// V16).
    SeatHold = 8,
    /// The travel to another server in flight: its candidate's silence (`fleet.peer_timeout_ms`),
    /// the retry of the candidates that refused `Busy`, or its resolve bound
    /// (`fleet.resolve_timeout_ms`, docs/spec/travel.md V7, V16).
    Outbound = 9,
}

/// How many timers there are.
const TIMER_COUNT: usize = 10;

/// Every timer, in table order.
const ALL: [Timer; TIMER_COUNT] = [
    Timer::SpawnRetry,
    Timer::SpawnSettle,
    Timer::ClientReady,
    Timer::RouteTravel,
    Timer::Effects,
    Timer::TransitionLimit,
    Timer::PossessionAck,
    Timer::ClientResponse,
    Timer::SeatHold,
    Timer::Outbound,
];

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

    /// Arms `timer` at `at` unless it is already armed earlier.
    pub(crate) fn set_earliest(&mut self, timer: Timer, at: Instant) {
        let slot = &mut self.deadlines[timer as usize];
        if slot.is_none_or(|t| at < t) {
            *slot = Some(at);
        }
    }

    /// Arms `timer` at `at`, or disarms it when `at` is `None`.
    pub(crate) fn arm(&mut self, timer: Timer, at: Option<Instant>) {
        self.deadlines[timer as usize] = at;
    }

    /// When `timer` is armed for, if it is.
    #[cfg(test)]
    pub(crate) fn deadline(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer as usize]
    }

    /// The earliest armed deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Disarms and returns every timer whose deadline is at or before `now`, in enum order.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<Timer> {
        ALL.into_iter()
            .filter(|&t| {
                let slot = &mut self.deadlines[t as usize];
                if slot.is_some_and(|d| d <= now) {
                    *slot = None;
                    true
                } else {
                    false
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// `set_earliest` keeps a deadline armed earlier and takes one that comes sooner; `arm` with none
    /// disarms.
    #[test]
    fn set_earliest_keeps_the_sooner_deadline_and_arming_none_disarms() {
        let t0 = Instant::now();
        let mut timers = TimerTable::default();
        timers.set_earliest(Timer::SpawnRetry, t0 + Duration::from_millis(100));
        timers.set_earliest(Timer::SpawnRetry, t0 + Duration::from_millis(150));
        assert_eq!(timers.deadline(Timer::SpawnRetry), Some(t0 + Duration::from_millis(100)));
        timers.set_earliest(Timer::SpawnRetry, t0 + Duration::from_millis(50));
        assert_eq!(timers.deadline(Timer::SpawnRetry), Some(t0 + Duration::from_millis(50)));
        timers.arm(Timer::SpawnRetry, None);
        assert_eq!(timers.deadline(Timer::SpawnRetry), None, "stopped");
    }
}

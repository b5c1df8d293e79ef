//! Observations: durations and decisions the core measured from the `now` it was given, for the
//! shell to record as metrics (docs/operations.md, "Metrics"). The core never touches a metric
//! itself.
//!
//! [`Observations`] is a bounded queue: the shell drains it every wake with
//! [`Game::poll_observation`](super::Game::poll_observation); a core nobody drains (a scenario
//! test) keeps only the newest [`OBSERVATIONS_KEPT`].

use std::collections::VecDeque;
use std::time::Duration;

/// How many undrained observations are kept; older ones are dropped first.
pub(crate) const OBSERVATIONS_KEPT: usize = 4096;

/// Something the core measured or decided, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// A transition left `phase` (to the next phase, or ending, failing or being superseded in
    /// it) after `duration` in it.
    PhaseEnded {
        /// The phase's name, as in the snapshot: `Freezing`, `Loading`, `WaitingForClients`,
        /// `Completing`.
        phase: &'static str,
        /// Time spent in it.
        duration: Duration,
    },
    /// A transition ended, `duration` after it started.
    TransitionEnded {
        /// How.
        outcome: TransitionOutcome,
        /// From its start to its end.
        duration: Duration,
    },
    /// A client reported ready for the transition in flight, `waited` after it was sent
    /// `ShowTransition` (the later of the destination's resolution and its login).
    ClientReady {
        /// From `ShowTransition` to the report.
        waited: Duration,
    },
    /// A spawn request was placed (a pawn spawned or teleported), `waited` after it was queued.
    SpawnPlaced {
        /// Time in the spawn queue.
        waited: Duration,
    },
    /// A spawn attempt was refused and its request kept queued.
    SpawnRefused {
        /// Why.
        cause: SpawnRefusal,
    },
    /// A login was refused by the core (the network side counts its own refusals).
    LoginRefused {
        /// Why.
        reason: LoginRefusal,
    },
}

/// How a transition ended (the `outcome` label of the transition metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransitionOutcome {
    /// Every player placed.
    Completed,
    /// Ended at the settle timeout with players unplaced.
    SettleTimeout,
    /// A newer travel superseded it.
    Superseded,
    /// It reached the hard maximum (`TransitionFailed`).
    Failed,
}

impl TransitionOutcome {
    /// Every outcome, for metrics that list each one from the start.
    pub const ALL: [TransitionOutcome; 4] = [
        TransitionOutcome::Completed,
        TransitionOutcome::SettleTimeout,
        TransitionOutcome::Superseded,
        TransitionOutcome::Failed,
    ];

    /// The metric label value: `completed`, `settle_timeout`, `superseded`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionOutcome::Completed => "completed",
            TransitionOutcome::SettleTimeout => "settle_timeout",
            TransitionOutcome::Superseded => "superseded",
            TransitionOutcome::Failed => "failed",
        }
    }
}

/// Why a spawn attempt was refused and kept queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpawnRefusal {
    /// The level-ready gate refused the pawn (docs/spec/transitions.md T2: kept queued).
    LevelNotReady,
    /// The node had no registered spawn point: a retry is scheduled.
    NoSpawnPoint,
}

impl SpawnRefusal {
    /// Every cause, for metrics that list each one from the start.
    pub const ALL: [SpawnRefusal; 2] = [SpawnRefusal::LevelNotReady, SpawnRefusal::NoSpawnPoint];

    /// The metric label value: `level_not_ready`, `no_spawn_point`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpawnRefusal::LevelNotReady => "level_not_ready",
            SpawnRefusal::NoSpawnPoint => "no_spawn_point",
        }
    }
}

/// Why the core refused a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoginRefusal {
    /// The server holds its player cap.
    ServerFull,
    /// The player logged in too often lately (`[auth] login_burst`, `login_interval_ms`).
    TooManyLogins,
}

impl LoginRefusal {
    /// The metric label value: `server_full`, `too_many_logins`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginRefusal::ServerFull => "server_full",
            LoginRefusal::TooManyLogins => "too_many_logins",
        }
    }
}

/// The bounded queue behind [`Game::poll_observation`](super::Game::poll_observation).
#[derive(Debug, Default)]
pub(crate) struct Observations {
    queue: VecDeque<Observation>,
}

impl Observations {
    /// Queues `observation`, dropping the oldest beyond [`OBSERVATIONS_KEPT`].
    pub(crate) fn push(&mut self, observation: Observation) {
        if self.queue.len() == OBSERVATIONS_KEPT {
            self.queue.pop_front();
        }
        self.queue.push_back(observation);
    }

    /// The oldest observation not yet taken.
    pub(crate) fn pop(&mut self) -> Option<Observation> {
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label values the metrics (and dashboards) name: snake_case, one per cause.
    #[test]
    fn refusal_label_values_are_the_documented_names() {
        let spawn: Vec<&str> = SpawnRefusal::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(spawn, ["level_not_ready", "no_spawn_point"]);
        assert_eq!(LoginRefusal::ServerFull.as_str(), "server_full");
    }

    #[test]
    fn an_undrained_queue_keeps_only_the_newest_observations() {
        let mut queue = Observations::default();
        for i in 0..OBSERVATIONS_KEPT as u64 + 10 {
            queue.push(Observation::ClientReady { waited: Duration::from_millis(i) });
        }
        assert_eq!(queue.queue.len(), OBSERVATIONS_KEPT);
        assert_eq!(
            queue.pop(),
            Some(Observation::ClientReady { waited: Duration::from_millis(10) })
        );
    }
}

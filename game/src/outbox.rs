//! What the core's steps produce for the world outside it: the outputs the shell carries out,
//! the observations metrics are made of, and the decision counters. Handlers only append here;
//! the shell drains it (`Game::poll_output`, `Game::poll_observation`, `Game::counters`).

use std::collections::VecDeque;

use super::interface::{Counters, Output};
use super::observe::{Observation, Observations};

/// The outputs, observations and counters the steps produced and the shell has not taken yet.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    outputs: VecDeque<Output>,
    observations: Observations,
    /// Decision counters, edited in place by the handlers that decide.
    pub(crate) counters: Counters,
}

impl Outbox {
    /// Queues `output` for the shell.
    pub(crate) fn push(&mut self, output: Output) {
        self.outputs.push_back(output);
    }

    /// The oldest output not yet taken.
    pub(crate) fn next_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Records `observation` for metrics.
    pub(crate) fn observe(&mut self, observation: Observation) {
        self.observations.push(observation);
    }

    /// The oldest observation not yet taken.
    pub(crate) fn next_observation(&mut self) -> Option<Observation> {
        self.observations.pop()
    }
}

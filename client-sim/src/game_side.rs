//! A full session's game side, behind its protocol duties: the [`ClientSession`] queues what
//! the game side must do with each event, streamed report and deadline ([`GameStep`]), and the shell runs the
//! queue ([`GameSide::run`]) after it has written the session's replies. A game side does
//! O(players) work at a travel or a UI rebuild (every remote pawn's gates torn down and
//! registered again); run first, it held the client's `TransitionShown` or acknowledgement
//! behind that work. The steps run in order, each at the instant it was queued, so the game side
//! sees what it saw before, a moment later.
//!
//! [`ClientSession`]: crate::session::ClientSession

use std::collections::VecDeque;
use std::time::Instant;

use gatehouse_client::{Event, Load};

use crate::client::Client;

/// One thing the game side has yet to do.
#[derive(Debug)]
pub(crate) enum GameStep {
    /// Apply and announce what a session event changes in the replicated world.
    Replicate(Event),
    /// The simulated game streamed this load: a transition's destination begins play.
    Streamed(Load),
    /// The game side's own deadlines that passed.
    Timers,
}

/// A full session's game side and the steps it has yet to run.
#[derive(Debug)]
pub(crate) struct GameSide {
    pub(crate) client: Client,
    /// Steps not run yet, each with the instant it was queued at.
    pending: VecDeque<(Instant, GameStep)>,
}

impl GameSide {
    pub(crate) fn new(client: Client) -> Self {
        GameSide { client, pending: VecDeque::new() }
    }

    /// Queues `step`, as of `now`.
    pub(crate) fn queue(&mut self, now: Instant, step: GameStep) {
        self.pending.push_back((now, step));
    }

    /// Whether steps wait to run.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// When the game side's own timers next need running; `None` while steps wait (running
    /// them comes first and may move the deadlines).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.has_pending() {
            return None;
        }
        self.client.poll_timeout()
    }

    /// Runs every queued step, in order, each at the instant it was queued.
    pub(crate) fn run(&mut self) {
        while let Some((at, step)) = self.pending.pop_front() {
            match step {
                GameStep::Replicate(event) => self.client.replicate(at, &event),
                GameStep::Streamed(load) => self.client.levels_streamed(at, load),
                GameStep::Timers => {
                    if self.client.poll_timeout().is_some_and(|due| due <= at) {
                        self.client.handle_timeout(at);
                    }
                }
            }
        }
    }
}

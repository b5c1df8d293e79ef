//! The store worker: runs loads and saves outside the game task and answers each request with
//! a [`StoreReply`] through a channel the shell provides.
//!
//! Owns ordering, timeouts, retries and the shutdown drain. The game task only calls
//! [`StoreHandle::submit`], which never blocks; it never waits on the store.
//!
//! - Requests for one key (a player, or a session) run one at a time in submission order, so
//!   two saves of one player apply in order and a load sees every save submitted before it.
//!   Requests for different keys run concurrently.
//! - A load is answered within `load_timeout` of its submission, even while it waits behind
//!   another request for the same key: [`LoadOutcome::Failed`] when it fails or times out.
//! - A save that fails is retried every `save_retry`, up to `save_attempts` attempts in all,
//!   each attempt bounded by `load_timeout`; a conflict is reported, not retried.
//! - Saves of one key chain: the worker remembers the versions it wrote, so a save based on a
//!   version this worker already replaced (the game saves twice before hearing back) is
//!   rebased onto the newest one instead of conflicting with its own earlier save. A save
//!   based on a version another process wrote still conflicts. (This memory is two numbers
//!   per key seen, kept for the worker's life.)
//! - Sessions chain the same way: send the version from [`StoreReply::SessionLoaded`] (0 when
//!   nothing was found) in every [`SessionSave`].
//! - A travel's handoff save ([`StoreRequest::SaveHandoff`], docs/spec/travel.md V2) is an
//!   ordinary player save in every rule above (its lane, order, batch, rebasing, retries,
//!   conflict); only its reply, [`StoreReply::HandoffSaved`], carries the request's ticket.
//! - A claim or a recall ([`StoreRequest::Handover`], docs/spec/travel.md V5) waits in its
//!   player's lane like a save and joins batches like one, but is written only if the stored
//!   version is exactly its own `version`: never rebased, even onto this worker's own earlier
//!   save. A conflict is [`HandoverOutcome::Lost`] at once, never retried; a failure is retried
//!   as a save's (every `save_retry`, up to `save_attempts`, each attempt bounded by
//!   `load_timeout`), then [`HandoverOutcome::Failed`]; an attempt whose answer was lost is
//!   recognised as a save's is. A handover won chains like a save: later saves of that player
//!   based on a version up to the one it replaced are rebased onto the one it wrote. A handover
//!   lost teaches nothing, so no later save is rebased past the other side's write.
//! - Player saves of different players that are ready to start together (the heads of idle
//!   lanes, taken in one wake: a [`StoreRequest::SavePlayers`] at a transition's end, or a
//!   burst of single saves) are written as one batch, up to [`SAVE_BATCH_MAX`] saves in one
//!   transaction ([`SaveBackend::save_players`], which writes them a few hundred rows per
//!   statement), keeping every rule above per save: its own
//!   attempts, timeout budget, rebasing, conflict and recognition. A save whose attempt failed
//!   waits `save_retry` in its lane, then joins whatever batch starts next.
//!
//! `dispatch` owns the lanes and deadlines; `job` runs a load or a session save to its reply;
//! `batch` runs one attempt of a batch of player saves.

mod batch;
mod dispatch;
mod job;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::PlayerId;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::StoreMetrics;
use super::{Store, StoreError};
use crate::model::{LoadOutcome, PlayerSave, SessionSave};
pub use batch::SAVE_BATCH_MAX;
use dispatch::Dispatcher;
use job::Ctx;

/// What the worker needs from a store. [`Store`] is the real one; tests substitute their own
/// to inject failures and delays.
pub trait SaveBackend: Send + Sync + 'static {
    /// As [`Store::load_player`].
    fn load_player(
        &self,
        player: &PlayerId,
    ) -> impl Future<Output = Result<Option<PlayerSave>, StoreError>> + Send;
    /// As [`Store::save_players`]: every save in one transaction, one result per save in the
    /// order given; the outer error is the transaction's.
    fn save_players(
        &self,
        saves: &[PlayerSave],
    ) -> impl Future<Output = Result<Vec<Result<u64, StoreError>>, StoreError>> + Send;
    /// As [`Store::load_session`].
    fn load_session(
        &self,
        session: &str,
    ) -> impl Future<Output = Result<Option<SessionSave>, StoreError>> + Send;
    /// As [`Store::save_session`].
    fn save_session(
        &self,
        save: &SessionSave,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

impl SaveBackend for Store {
    fn load_player(
        &self,
        player: &PlayerId,
    ) -> impl Future<Output = Result<Option<PlayerSave>, StoreError>> + Send {
        Store::load_player(self, player)
    }
    fn save_players(
        &self,
        saves: &[PlayerSave],
    ) -> impl Future<Output = Result<Vec<Result<u64, StoreError>>, StoreError>> + Send {
        Store::save_players(self, saves)
    }
    fn load_session(
        &self,
        session: &str,
    ) -> impl Future<Output = Result<Option<SessionSave>, StoreError>> + Send {
        Store::load_session(self, session)
    }
    fn save_session(
        &self,
        save: &SessionSave,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        Store::save_session(self, save)
    }
}

/// The worker's timings (config `[store]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// A load is answered within this of its submission; also bounds each save attempt.
    pub load_timeout: Duration,
    /// Delay between save attempts.
    pub save_retry: Duration,
    /// Attempts per save, the first included (at least 1).
    pub save_attempts: u32,
}

impl From<&crate::config::StoreConfig> for StoreSettings {
    fn from(config: &crate::config::StoreConfig) -> Self {
        StoreSettings {
            load_timeout: config.load_timeout,
            save_retry: config.save_retry,
            save_attempts: config.save_attempts,
        }
    }
}

/// A request to the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRequest {
    /// Load a player's save; answered with [`StoreReply::PlayerLoaded`].
    LoadPlayer {
        /// Whose.
        player: PlayerId,
        /// Echoed in the reply, so the caller can match it to its request.
        ticket: u64,
    },
    /// Write a player's save; answered with [`StoreReply::PlayerSaved`].
    SavePlayer(PlayerSave),
    /// Write many players' saves, each as [`StoreRequest::SavePlayer`] would (in its player's
    /// lane, in order); answered once, with [`StoreReply::PlayersSaved`], when every one has
    /// finished. One request for a transition's end, so the game task submits once, not once
    /// per player.
    SavePlayers(Vec<PlayerSave>),
    /// Load a session's save (by session name); answered with [`StoreReply::SessionLoaded`].
    LoadSession(String),
    /// Write a session's save; answered with [`StoreReply::SessionSaved`].
    SaveSession(SessionSave),
    /// Write a moving player's handoff save (`save.handoff` set, docs/spec/travel.md V2)
    /// exactly as [`StoreRequest::SavePlayer`] would; answered with
    /// [`StoreReply::HandoffSaved`].
    SaveHandoff {
        /// The save.
        save: PlayerSave,
        /// Echoed in the reply, so the caller can match it to its request.
        ticket: u64,
    },
    /// A claim or a recall (docs/spec/travel.md V5): write `save` only if the stored version is
    /// exactly `save.version`, in its player's lane, never rebased nor retried after a conflict
    /// (see the module doc); answered with [`StoreReply::HandoverDecided`].
    Handover {
        /// The save, based on the handoff save's version.
        save: PlayerSave,
        /// Echoed in the reply, so the caller can match it to its request.
        ticket: u64,
    },
}

/// The answer to one [`StoreRequest`]; every request gets exactly one (a
/// [`StoreRequest::SavePlayers`] one for all its saves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreReply {
    /// A player's load finished.
    PlayerLoaded {
        /// Whose.
        player: PlayerId,
        /// The request's ticket.
        ticket: u64,
        /// What was found.
        outcome: LoadOutcome<PlayerSave>,
    },
    /// A player's save finished.
    PlayerSaved {
        /// Whose.
        player: PlayerId,
        /// Whether it was written.
        outcome: SaveOutcome,
    },
    /// Every save of a [`StoreRequest::SavePlayers`] finished.
    PlayersSaved {
        /// Each save's player and outcome, in the order of the request.
        outcomes: Vec<(PlayerId, SaveOutcome)>,
    },
    /// A session's load finished.
    SessionLoaded {
        /// Which session.
        session: String,
        /// What was found.
        outcome: LoadOutcome<SessionSave>,
    },
    /// A session's save finished.
    SessionSaved {
        /// Which session.
        session: String,
        /// Whether it was written.
        outcome: SaveOutcome,
    },
    /// A [`StoreRequest::SaveHandoff`] finished.
    HandoffSaved {
        /// Whose.
        player: PlayerId,
        /// The request's ticket.
        ticket: u64,
        /// Whether it was written, and at which version.
        outcome: SaveOutcome,
    },
    /// A [`StoreRequest::Handover`] was decided, or given up.
    HandoverDecided {
        /// Whose.
        player: PlayerId,
        /// The request's ticket.
        ticket: u64,
        /// What the store decided.
        outcome: HandoverOutcome,
    },
}

/// How a save ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveOutcome {
    /// Written; the stored version is now `version`.
    Saved {
        /// The new stored version.
        version: u64,
        /// Attempts it took (1 when the first succeeded).
        attempts: u32,
    },
    /// Not written: another writer saved since the version the save was based on.
    Conflict {
        /// The version the save was based on (after rebasing onto this worker's own saves).
        expected: u64,
        /// The stored version; `None` when nothing is stored.
        found: Option<u64>,
    },
    /// Not written after every attempt, or refused outright; the last reason.
    Failed {
        /// Attempts made.
        attempts: u32,
        /// Why the last one failed.
        reason: String,
    },
}

/// How a claim or a recall ([`StoreRequest::Handover`]) ended (docs/spec/travel.md V5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandoverOutcome {
    /// Written at exactly the version it was based on: the player is this server's.
    Won {
        /// The new stored version.
        version: u64,
    },
    /// Not written: the stored version was not the one it was based on (the other side's
    /// write came first). Never retried.
    Lost {
        /// The stored version; `None` when nothing is stored.
        found: Option<u64>,
    },
    /// Undecided: not written after every attempt, or refused outright; the last reason.
    Failed {
        /// Attempts made.
        attempts: u32,
        /// Why the last one failed.
        reason: String,
    },
}

impl HandoverOutcome {
    /// A handover's outcome from the outcome of its write as a save.
    fn of(outcome: SaveOutcome) -> HandoverOutcome {
        match outcome {
            SaveOutcome::Saved { version, .. } => HandoverOutcome::Won { version },
            SaveOutcome::Conflict { found, .. } => HandoverOutcome::Lost { found },
            SaveOutcome::Failed { attempts, reason } => {
                HandoverOutcome::Failed { attempts, reason }
            }
        }
    }
}

/// Starts the store worker.
#[derive(Debug)]
pub struct StoreWorker;

impl StoreWorker {
    /// Spawns the worker on the current tokio runtime. Each reply goes to `replies` as
    /// `wrap(reply)`, so the shell can carry replies in its own event enum, e.g.
    /// `StoreWorker::spawn(store, settings, events.clone(), ShellEvent::Store)`. Replies wait
    /// in the worker's own queue, never blocking a load or save, while `replies` is full; once
    /// its receiver is gone they are dropped.
    ///
    /// The worker stops when every [`StoreHandle`] is dropped and every request has been
    /// answered; the returned task then finishes.
    pub fn spawn<B, E, F>(
        backend: B,
        settings: StoreSettings,
        replies: mpsc::Sender<E>,
        wrap: F,
    ) -> (StoreHandle, JoinHandle<()>)
    where
        B: SaveBackend,
        E: Send + 'static,
        F: Fn(StoreReply) -> E + Send + 'static,
    {
        Self::spawn_measured(backend, settings, StoreMetrics::default(), replies, wrap)
    }

    /// As [`StoreWorker::spawn`], recording store latencies and save outcomes in `metrics`
    /// (docs/operations.md, "Metrics").
    pub fn spawn_measured<B, E, F>(
        backend: B,
        settings: StoreSettings,
        metrics: StoreMetrics,
        replies: mpsc::Sender<E>,
        wrap: F,
    ) -> (StoreHandle, JoinHandle<()>)
    where
        B: SaveBackend,
        E: Send + 'static,
        F: Fn(StoreReply) -> E + Send + 'static,
    {
        let settings = StoreSettings { save_attempts: settings.save_attempts.max(1), ..settings };
        let (requests_tx, requests_rx) = mpsc::unbounded_channel();
        let (forward_tx, forward_rx) = mpsc::unbounded_channel();
        let pending = Arc::new(watch::Sender::new(0usize));
        let forwarder = tokio::spawn(dispatch::forward(forward_rx, replies, wrap));
        let ctx = Ctx { backend, settings, replies: forward_tx, pending: pending.clone(), metrics };
        let dispatcher = Dispatcher::new(ctx);
        let join = tokio::spawn(async move {
            dispatcher.run(requests_rx).await;
            let _ = forwarder.await;
        });
        let handle = StoreHandle { requests: requests_tx, pending };
        (handle, join)
    }
}

/// Submits requests to the worker and waits for its saves at shutdown. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StoreHandle {
    requests: mpsc::UnboundedSender<StoreRequest>,
    pending: Arc<watch::Sender<usize>>,
}

impl StoreHandle {
    /// Queues a request; never blocks. Its reply comes through the worker's reply channel.
    ///
    /// # Errors
    /// [`StoreError::WorkerStopped`] if the worker is gone (it panicked or its runtime shut
    /// down); the request is dropped.
    pub fn submit(&self, request: StoreRequest) -> Result<(), StoreError> {
        let saves = request.save_count();
        if saves > 0 {
            self.pending.send_modify(|n| *n += saves);
        }
        self.requests.send(request).map_err(|_| {
            if saves > 0 {
                self.pending.send_modify(|n| *n = n.saturating_sub(saves));
            }
            StoreError::WorkerStopped
        })
    }

    /// Saves submitted and not yet finished (written, refused or given up); each save of a
    /// [`StoreRequest::SavePlayers`] counts, and so do handoff saves and handovers.
    pub fn pending_saves(&self) -> usize {
        *self.pending.borrow()
    }

    /// Waits until every submitted save has finished, at most `timeout`; returns how many
    /// were still pending (0: all finished). For the shutdown drain: submit the final saves,
    /// then drain.
    pub async fn drain(&self, timeout: Duration) -> usize {
        let mut pending = self.pending.subscribe();
        let _ = tokio::time::timeout(timeout, pending.wait_for(|n| *n == 0)).await;
        let left = *pending.borrow();
        if left > 0 {
            tracing::warn!(
                left,
                timeout_ms = timeout.as_millis(),
                "store drain timed out with saves still pending"
            );
        }
        left
    }
}

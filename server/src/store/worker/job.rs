//! One request run alone to its reply (a load, or a session save): loads bounded by their
//! deadline, saves retried, rebased onto this worker's own earlier writes, and recognised when a
//! lost answer had in fact saved. Player saves run in batches (`batch`), with the same rebasing
//! and recognition from here.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use gatehouse_protocol::PlayerId;

use crate::store::StoreMetrics;

use super::{
    LoadOutcome, PlayerSave, SaveBackend, SaveOutcome, SessionSave, StoreError, StoreReply,
    StoreSettings,
};

/// What the jobs share.
pub(super) struct Ctx<B> {
    pub(super) backend: B,
    pub(super) settings: StoreSettings,
    pub(super) replies: mpsc::UnboundedSender<StoreReply>,
    pub(super) pending: Arc<watch::Sender<usize>>,
    /// Store latencies and save outcomes (docs/operations.md, "Metrics").
    pub(super) metrics: StoreMetrics,
}

impl<B> Ctx<B> {
    pub(super) fn reply(&self, reply: StoreReply) {
        // The forwarder outlives every job; a send error means the runtime is shutting down.
        let _ = self.replies.send(reply);
    }

    pub(super) fn save_finished(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Versions this worker wrote for one key, consecutively: `low` was the base of the first
/// save of the chain (or the version a load saw), `latest` is stored now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lineage {
    low: u64,
    latest: u64,
}

/// What a finished job learned about its key's stored version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Learned {
    /// Nothing (a failure or conflict).
    Nothing,
    /// A load saw this version (0: nothing stored).
    Observed(u64),
    /// A save (or a handover won) replaced `base` with `new`.
    Saved { base: u64, new: u64 },
}

impl Learned {
    pub(super) fn apply(self, lineage: Option<Lineage>) -> Option<Lineage> {
        match (self, lineage) {
            (Learned::Nothing, lineage) => lineage,
            (Learned::Observed(v), Some(l)) if l.latest == v => Some(l),
            (Learned::Observed(v), _) => Some(Lineage { low: v, latest: v }),
            (Learned::Saved { base, new }, Some(l)) if l.latest == base => {
                Some(Lineage { low: l.low, latest: new })
            }
            (Learned::Saved { base, new }, _) => Some(Lineage { low: base, latest: new }),
        }
    }
}

/// A request that runs alone, one job to one reply: every request but a player save.
#[derive(Debug, Clone)]
pub(super) enum Alone {
    /// As [`super::StoreRequest::LoadPlayer`].
    LoadPlayer { player: PlayerId, ticket: u64 },
    /// As [`super::StoreRequest::LoadSession`].
    LoadSession(String),
    /// As [`super::StoreRequest::SaveSession`].
    SaveSession(SessionSave),
}

impl Alone {
    pub(super) fn is_load(&self) -> bool {
        !matches!(self, Alone::SaveSession(_))
    }

    /// The reply for a request that cannot run: a failed load or save.
    pub(super) fn failed(&self, reason: String) -> StoreReply {
        match self {
            Alone::LoadPlayer { player, ticket } => StoreReply::PlayerLoaded {
                player: player.clone(),
                ticket: *ticket,
                outcome: LoadOutcome::Failed(reason),
            },
            Alone::LoadSession(session) => StoreReply::SessionLoaded {
                session: session.clone(),
                outcome: LoadOutcome::Failed(reason),
            },
            Alone::SaveSession(save) => StoreReply::SessionSaved {
                session: save.session.clone(),
                outcome: SaveOutcome::Failed { attempts: 0, reason },
            },
        }
    }
}

/// Runs one request submitted at `submitted` to its reply; returns what it learned about the
/// key's version.
pub(super) async fn run_job<B: SaveBackend>(
    ctx: Arc<Ctx<B>>,
    request: Alone,
    submitted: Instant,
    lineage: Option<Lineage>,
) -> Learned {
    let deadline = submitted + ctx.settings.load_timeout;
    match request {
        Alone::LoadPlayer { player, ticket } => {
            let (outcome, learned) =
                load(&ctx, deadline, || ctx.backend.load_player(&player), |s| s.version).await;
            ctx.reply(StoreReply::PlayerLoaded { player, ticket, outcome });
            learned
        }
        Alone::LoadSession(session) => {
            let (outcome, learned) =
                load(&ctx, deadline, || ctx.backend.load_session(&session), |s| s.version).await;
            ctx.reply(StoreReply::SessionLoaded { session, outcome });
            learned
        }
        Alone::SaveSession(save) => {
            let session = save.session.clone();
            let (outcome, learned) = save_with_retry(&ctx, rebase(save, lineage)).await;
            ctx.save_finished();
            ctx.metrics.count_save(&outcome);
            ctx.reply(StoreReply::SessionSaved { session, outcome });
            learned
        }
    }
}

/// Loads until found, not found, or `deadline`; a transient failure is retried after
/// `save_retry` while the deadline allows.
async fn load<B, T, L, Fut>(
    ctx: &Ctx<B>,
    deadline: Instant,
    attempt: L,
    version: impl Fn(&T) -> u64,
) -> (LoadOutcome<T>, Learned)
where
    L: Fn() -> Fut,
    Fut: Future<Output = Result<Option<T>, StoreError>>,
{
    let timeout = ctx.settings.load_timeout;
    loop {
        let began = Instant::now();
        let answered = tokio::time::timeout_at(deadline, attempt()).await;
        ctx.metrics.observe_load(began.elapsed());
        match answered {
            Ok(Ok(Some(found))) => {
                let v = version(&found);
                return (LoadOutcome::Found(found), Learned::Observed(v));
            }
            Ok(Ok(None)) => return (LoadOutcome::NotFound, Learned::Observed(0)),
            Ok(Err(e))
                if e.is_transient() && Instant::now() + ctx.settings.save_retry < deadline =>
            {
                tracing::warn!(error = %e, "load failed; retrying");
                tokio::time::sleep(ctx.settings.save_retry).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "load failed");
                return (LoadOutcome::Failed(e.to_string()), Learned::Nothing);
            }
            Err(_) => {
                let reason = format!("timed out after {} ms", timeout.as_millis());
                tracing::warn!(%reason, "load failed");
                return (LoadOutcome::Failed(reason), Learned::Nothing);
            }
        }
    }
}

/// A save record the worker can rebase and read back: a player's or a session's.
pub(super) trait Record: Clone + PartialEq + Send + Sync + 'static {
    fn version(&self) -> u64;
    fn set_version(&mut self, version: u64);
    fn read_back<B: SaveBackend>(
        &self,
        backend: &B,
    ) -> impl Future<Output = Result<Option<Self>, StoreError>> + Send;
}

impl Record for PlayerSave {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, version: u64) {
        self.version = version;
    }
    fn read_back<B: SaveBackend>(
        &self,
        backend: &B,
    ) -> impl Future<Output = Result<Option<Self>, StoreError>> + Send {
        backend.load_player(&self.player)
    }
}

impl Record for SessionSave {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, version: u64) {
        self.version = version;
    }
    fn read_back<B: SaveBackend>(
        &self,
        backend: &B,
    ) -> impl Future<Output = Result<Option<Self>, StoreError>> + Send {
        backend.load_session(&self.session)
    }
}

/// A save based on a version this worker already replaced is based on the newest instead.
pub(super) fn rebase<T: Record>(mut save: T, lineage: Option<Lineage>) -> T {
    if let Some(l) = lineage {
        let v = save.version();
        if l.low <= v && v < l.latest {
            tracing::debug!(
                from = v,
                to = l.latest,
                "save based on a version this worker replaced; rebased"
            );
            save.set_version(l.latest);
        }
    }
    save
}

/// Writes a session save, retrying transient failures; see the module doc.
///
/// After an attempt whose fate is unknown (an error or timeout after the write may have
/// committed), a conflict that finds exactly the next version holding exactly this save is
/// that attempt's success, not a conflict.
async fn save_with_retry<B: SaveBackend>(
    ctx: &Ctx<B>,
    save: SessionSave,
) -> (SaveOutcome, Learned) {
    let StoreSettings { load_timeout, save_retry, save_attempts } = ctx.settings;
    let base = save.version();
    let mut uncertain = false;
    let mut last_error = String::new();
    for attempt in 1..=save_attempts {
        let began = Instant::now();
        let answered = tokio::time::timeout(load_timeout, ctx.backend.save_session(&save)).await;
        ctx.metrics.observe_save(began.elapsed());
        let error = match answered {
            Ok(Ok(version)) => {
                tracing::debug!(version, attempt, "saved");
                return (
                    SaveOutcome::Saved { version, attempts: attempt },
                    Learned::Saved { base, new: version },
                );
            }
            Ok(Err(StoreError::Conflict { expected, found, .. })) => {
                if uncertain
                    && found == Some(base.saturating_add(1))
                    && stored_is(ctx, &save, base.saturating_add(1)).await
                {
                    tracing::info!(
                        version = base + 1,
                        attempt,
                        "an earlier attempt had saved after all"
                    );
                    return (
                        SaveOutcome::Saved { version: base + 1, attempts: attempt },
                        Learned::Saved { base, new: base + 1 },
                    );
                }
                tracing::warn!(
                    expected,
                    found,
                    "save conflict: another writer saved meanwhile; not retried"
                );
                return (SaveOutcome::Conflict { expected, found }, Learned::Nothing);
            }
            Ok(Err(e)) if !e.is_transient() => {
                tracing::error!(error = %e, attempt, "save refused; not retried");
                return (
                    SaveOutcome::Failed { attempts: attempt, reason: e.to_string() },
                    Learned::Nothing,
                );
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("timed out after {} ms", load_timeout.as_millis()),
        };
        uncertain = true;
        if attempt < save_attempts {
            tracing::warn!(error = %error, attempt, attempts = save_attempts,
                retry_ms = save_retry.as_millis(), "save failed; retrying");
            tokio::time::sleep(save_retry).await;
        }
        last_error = error;
    }
    tracing::error!(error = %last_error, attempts = save_attempts, "save failed; giving up");
    (SaveOutcome::Failed { attempts: save_attempts, reason: last_error }, Learned::Nothing)
}

/// Whether the store holds `save` at `version`.
pub(super) async fn stored_is<B: SaveBackend, T: Record>(
    ctx: &Ctx<B>,
    save: &T,
    version: u64,
) -> bool {
    let mut expected = save.clone();
    expected.set_version(version);
    matches!(
        tokio::time::timeout(ctx.settings.load_timeout, save.read_back(&ctx.backend)).await,
        Ok(Ok(Some(stored))) if stored == expected
    )
}

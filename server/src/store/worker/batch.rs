//! One attempt of a batch of player saves: every save of the batch in one transaction
//! ([`SaveBackend::save_players`]), each judged on its own.
//!
//! Owns the per-save verdict of an attempt: written, conflict (recognised as this save's own
//! earlier write after an uncertain attempt), refused, retry, or given up. Does not own lanes,
//! ordering, waiting between attempts or replies: the dispatcher does, so a save that landed
//! frees its lane at once, whatever the rest of its batch still has to do.

use std::sync::Arc;

use gatehouse_protocol::PlayerId;
use tracing::Instrument as _;

use super::job::{Ctx, Learned, stored_is};
use super::{PlayerSave, SaveBackend, SaveOutcome, StoreError, StoreSettings};

/// Most player saves written in one transaction. A burst larger than this starts as several
/// batches at once; the bound keeps one transaction (and the write lock it holds on the
/// embedded store) short.
pub const SAVE_BATCH_MAX: usize = 256;

/// Who hears a player save's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// Its own [`super::StoreReply::PlayerSaved`].
    Alone,
    /// Its place in a [`super::StoreRequest::SavePlayers`]'s one reply.
    Gathered {
        /// The request's gather.
        gather: u64,
        /// The save's index in the request.
        index: usize,
    },
    /// A [`super::StoreReply::HandoffSaved`] with the request's ticket.
    Handoff {
        /// The request's ticket.
        ticket: u64,
    },
    /// A [`super::StoreReply::HandoverDecided`] with the request's ticket.
    Handover {
        /// The request's ticket.
        ticket: u64,
    },
}

impl Answer {
    /// Whether the save is written at exactly its own version: a handover is never rebased,
    /// not even onto this worker's own earlier save (docs/spec/travel.md V5).
    pub(super) fn exact(self) -> bool {
        matches!(self, Answer::Handover { .. })
    }
}

/// A player save between its lane and its outcome: taken from its lane (which stays busy),
/// rebased, and carrying what its attempts so far have taught.
#[derive(Debug)]
pub(super) struct Pending {
    /// The save, rebased when it left its lane (a handover never is: [`Answer::exact`]).
    pub(super) save: PlayerSave,
    /// Who hears its outcome.
    pub(super) answer: Answer,
    /// Attempts made.
    pub(super) attempts: u32,
    /// An earlier attempt may have written it (it failed or timed out after sending).
    pub(super) uncertain: bool,
    /// Why the last attempt failed.
    pub(super) last_error: String,
}

impl Pending {
    /// A save no attempt has touched yet.
    pub(super) fn new(save: PlayerSave, answer: Answer) -> Self {
        Pending { save, answer, attempts: 0, uncertain: false, last_error: String::new() }
    }

    pub(super) fn player(&self) -> &PlayerId {
        &self.save.player
    }
}

/// One save's verdict after an attempt.
#[derive(Debug)]
pub(super) enum Attempted {
    /// Its outcome is final: answer it and free its lane with what it learned.
    Finished {
        /// The save.
        pending: Pending,
        /// Its outcome.
        outcome: SaveOutcome,
        /// What its lane learned.
        learned: Learned,
    },
    /// It failed and has attempts left: try again after `save_retry`.
    Retry(Pending),
}

/// Makes one attempt at every save of `batch`, as one transaction bounded by `load_timeout`.
///
/// 1. Write the batch; count the attempt for every save.
/// 2. The transaction failed or timed out: every save failed this attempt (and may have been
///    written: its attempt is uncertain), or is refused outright by an error that will not
///    pass.
/// 3. Otherwise judge each save by its own result: written; a conflict (the next version
///    holding exactly this save, after an uncertain attempt, is this save's own write); refused;
///    failed.
pub(super) async fn attempt<B: SaveBackend>(
    ctx: Arc<Ctx<B>>,
    mut batch: Vec<Pending>,
) -> Vec<Attempted> {
    let StoreSettings { load_timeout, .. } = ctx.settings;
    let saves: Vec<PlayerSave> = batch.iter().map(|p| p.save.clone()).collect();
    let began = tokio::time::Instant::now();
    let answered = tokio::time::timeout(load_timeout, ctx.backend.save_players(&saves)).await;
    ctx.metrics.observe_save(began.elapsed());
    for pending in &mut batch {
        pending.attempts += 1;
    }
    let results = match answered {
        Ok(Ok(results)) if results.len() == batch.len() => results,
        Ok(Ok(results)) => {
            let error = format!(
                "the store answered {} results for a batch of {} saves",
                results.len(),
                batch.len()
            );
            return failed_together(&ctx, batch, &error);
        }
        Ok(Err(e)) if !e.is_transient() => {
            tracing::error!(error = %e, saves = batch.len(), "save batch refused; not retried");
            return batch.into_iter().map(|p| refused(p, &e)).collect();
        }
        Ok(Err(e)) => return failed_together(&ctx, batch, &e.to_string()),
        Err(_) => {
            let error = format!("timed out after {} ms", load_timeout.as_millis());
            return failed_together(&ctx, batch, &error);
        }
    };
    tracing::debug!(saves = batch.len(), "save batch committed");
    let mut verdicts = Vec::with_capacity(batch.len());
    for (pending, result) in batch.into_iter().zip(results) {
        let span = save_span(pending.player());
        verdicts.push(judge(&ctx, pending, result).instrument(span).await);
    }
    verdicts
}

/// The span of one player's save, as the worker's other logs of that player.
fn save_span(player: &PlayerId) -> tracing::Span {
    tracing::info_span!("store", player = %player)
}

/// One save's verdict from its own result in a committed batch.
async fn judge<B: SaveBackend>(
    ctx: &Ctx<B>,
    mut pending: Pending,
    result: Result<u64, StoreError>,
) -> Attempted {
    let (base, attempts) = (pending.save.version, pending.attempts);
    match result {
        Ok(version) => {
            tracing::debug!(version, attempts, "saved");
            let outcome = SaveOutcome::Saved { version, attempts };
            Attempted::Finished { pending, outcome, learned: Learned::Saved { base, new: version } }
        }
        Err(StoreError::Conflict { expected, found, .. }) => {
            let next = base.saturating_add(1);
            if pending.uncertain && found == Some(next) && stored_is(ctx, &pending.save, next).await
            {
                tracing::info!(version = next, attempts, "an earlier attempt had saved after all");
                let outcome = SaveOutcome::Saved { version: next, attempts };
                return Attempted::Finished {
                    pending,
                    outcome,
                    learned: Learned::Saved { base, new: next },
                };
            }
            if pending.answer.exact() {
                tracing::info!(expected, found, "handover lost: the other side wrote first");
            } else {
                tracing::warn!(
                    expected,
                    found,
                    "save conflict: another writer saved meanwhile; not retried"
                );
            }
            // A conflict teaches nothing: the stored version is another writer's, and no later
            // save may be rebased onto it (a lost handover included).
            let outcome = SaveOutcome::Conflict { expected, found };
            Attempted::Finished { pending, outcome, learned: Learned::Nothing }
        }
        Err(e) if !e.is_transient() => {
            tracing::error!(error = %e, attempts, "save refused; not retried");
            refused(pending, &e)
        }
        Err(e) => {
            pending.last_error = e.to_string();
            retry_or_give_up(ctx, pending)
        }
    }
}

/// Every save of a batch failed this attempt together, with `error`.
fn failed_together<B>(ctx: &Ctx<B>, batch: Vec<Pending>, error: &str) -> Vec<Attempted> {
    tracing::warn!(%error, saves = batch.len(), retry_ms = ctx.settings.save_retry.as_millis(),
        "save batch failed; its saves with attempts left are retried");
    batch
        .into_iter()
        .map(|mut pending| {
            pending.last_error = error.to_owned();
            retry_or_give_up(ctx, pending)
        })
        .collect()
}

/// A failed attempt, whose write may have applied: retried while the save has attempts left.
fn retry_or_give_up<B>(ctx: &Ctx<B>, mut pending: Pending) -> Attempted {
    pending.uncertain = true;
    let attempts = pending.attempts;
    if attempts < ctx.settings.save_attempts {
        return Attempted::Retry(pending);
    }
    save_span(pending.player()).in_scope(|| {
        tracing::error!(error = %pending.last_error, attempts, "save failed; giving up");
    });
    let outcome = SaveOutcome::Failed { attempts, reason: pending.last_error.clone() };
    Attempted::Finished { pending, outcome, learned: Learned::Nothing }
}

/// A save refused by an error that will not pass.
fn refused(pending: Pending, error: &StoreError) -> Attempted {
    let outcome = SaveOutcome::Failed { attempts: pending.attempts, reason: error.to_string() };
    Attempted::Finished { pending, outcome, learned: Learned::Nothing }
}

//! What the store worker records: save and load latencies, saves by outcome. Registered by
//! `crate::metrics`, which assembles every subsystem's families.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::SaveOutcome;

/// Bucket bounds of the store latency histograms, seconds: from 0.5 ms to 10 s.
pub const STORE_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// What the store worker records. [`StoreMetrics::default`] is detached: it
/// records into metrics no registry encodes (for workers started without the server's
/// `crate::metrics::Metrics`).
#[derive(Debug, Clone)]
pub struct StoreMetrics {
    save: Histogram,
    load: Histogram,
    saves: Family<[(&'static str, &'static str); 1], Counter>,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        StoreMetrics {
            save: Histogram::new(STORE_BUCKETS),
            load: Histogram::new(STORE_BUCKETS),
            saves: Family::default(),
        }
    }
}

impl StoreMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = StoreMetrics::default();
        for outcome in ["ok", "retried", "given_up", "conflict"] {
            drop(m.saves.get_or_create(&[("outcome", outcome)]));
        }
        registry.register(
            "gatehouse_store_save_seconds",
            "Store write latency, seconds: one write transaction (a batch of player saves, or a session save), each attempt",
            m.save.clone(),
        );
        registry.register(
            "gatehouse_store_load_seconds",
            "Store read latency, seconds: one load of a player's or the session's save, each attempt",
            m.load.clone(),
        );
        registry.register(
            "gatehouse_saves",
            "Saves finished (each player save of a batch counts), by outcome: ok (written at the first attempt), retried (written after a failed attempt), given_up (not written after every attempt, or refused), conflict (another writer saved first)",
            m.saves.clone(),
        );
        m
    }

    /// Records one write transaction's latency.
    pub fn observe_save(&self, took: Duration) {
        self.save.observe(took.as_secs_f64());
    }

    /// Records one load attempt's latency.
    pub fn observe_load(&self, took: Duration) {
        self.load.observe(took.as_secs_f64());
    }

    /// Counts a finished save by its outcome.
    pub fn count_save(&self, outcome: &SaveOutcome) {
        let label = match outcome {
            SaveOutcome::Saved { attempts, .. } if *attempts <= 1 => "ok",
            SaveOutcome::Saved { .. } => "retried",
            SaveOutcome::Conflict { .. } => "conflict",
            SaveOutcome::Failed { .. } => "given_up",
        };
        self.saves.get_or_create(&[("outcome", label)]).inc();
    }
}

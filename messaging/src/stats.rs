//! Counters: what the router did, including every refusal and mismatch, so none is silent.

use std::cell::Cell;

/// Totals since the router was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Broadcasts accepted (delivered to however many listeners, possibly none).
    pub broadcasts: u64,
    /// Callbacks run, replays included (a broadcast's are added when it returns).
    pub deliveries: u64,
    /// Sticky messages replayed to late listeners.
    pub replays: u64,
    /// Listeners skipped because the payload did not fit their expected type (each also logged).
    pub mismatches: u64,
    /// Broadcasts refused (undeclared channel, payload mismatch, depth), each also logged.
    pub refused_broadcasts: u64,
    /// Registrations refused, each also logged.
    pub refused_registrations: u64,
    /// Deliveries refused because they would nest deeper than configured.
    pub depth_exceeded: u64,
}

/// What one broadcast did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Listeners whose callback ran.
    pub delivered: usize,
    /// Listeners skipped because the payload did not fit their expected type.
    pub mismatched: usize,
}

/// The router's live counters, one cell each, so counting a delivery is one add.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) broadcasts: Cell<u64>,
    pub(crate) deliveries: Cell<u64>,
    pub(crate) replays: Cell<u64>,
    pub(crate) mismatches: Cell<u64>,
    pub(crate) refused_broadcasts: Cell<u64>,
    pub(crate) refused_registrations: Cell<u64>,
    pub(crate) depth_exceeded: Cell<u64>,
}

/// Adds one to `counter`.
pub(crate) fn bump(counter: &Cell<u64>) {
    counter.set(counter.get() + 1);
}

impl Counters {
    /// The totals so far.
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            broadcasts: self.broadcasts.get(),
            deliveries: self.deliveries.get(),
            replays: self.replays.get(),
            mismatches: self.mismatches.get(),
            refused_broadcasts: self.refused_broadcasts.get(),
            refused_registrations: self.refused_registrations.get(),
            depth_exceeded: self.depth_exceeded.get(),
        }
    }
}

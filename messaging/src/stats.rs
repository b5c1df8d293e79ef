//! Counters: what the router did, including every refusal and mismatch, so none is silent.

/// Totals since the router was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Broadcasts accepted (delivered to however many listeners, possibly none).
    pub broadcasts: u64,
    /// Callbacks run, replays included.
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

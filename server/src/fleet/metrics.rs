//! What the orchestrator's SDK task records: its failed calls, by call. Registered by
//! `crate::metrics`, which assembles every subsystem's families (docs/operations.md, "Metrics").

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// An orchestrator SDK call, for `gatehouse_fleet_sdk_errors_total{call}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SdkCall {
    /// Ready (at start, or again when an empty server goes back to the pool).
    Ready,
    /// Allocate (the server's first player, under `fleet.allocation = "self"`).
    Allocate,
    /// A Health ping (its stream found closed).
    Health,
    /// A change to the `players` List (a value added or removed).
    List,
    /// Shutdown.
    Shutdown,
}

impl SdkCall {
    /// Every call, each listed from the start.
    pub const ALL: [SdkCall; 5] =
        [SdkCall::Ready, SdkCall::Allocate, SdkCall::Health, SdkCall::List, SdkCall::Shutdown];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SdkCall::Ready => "ready",
            SdkCall::Allocate => "allocate",
            SdkCall::Health => "health",
            SdkCall::List => "list",
            SdkCall::Shutdown => "shutdown",
        }
    }
}

/// What the orchestrator's SDK task records. The family is registered, every call at 0, in
/// every build: without the `agones` feature (or with `fleet.orchestrator = "none"`) it stays 0.
#[derive(Debug, Clone)]
pub struct FleetMetrics {
    errors: Family<[(&'static str, &'static str); 1], Counter>,
}

impl FleetMetrics {
    /// Registers `gatehouse_fleet_sdk_errors_total` in `registry`, every call at 0.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = FleetMetrics { errors: Family::default() };
        for call in SdkCall::ALL {
            drop(m.errors.get_or_create(&[("call", call.as_str())]));
        }
        registry.register(
            "gatehouse_fleet_sdk_errors",
            "Orchestrator SDK calls that failed or timed out (fleet.sdk_timeout_ms), by call: ready, allocate, health (the Health stream found closed), list (a players List change), shutdown; 0 without an orchestrator",
            m.errors.clone(),
        );
        m
    }

    /// Counts one failed `call`.
    pub fn count_error(&self, call: SdkCall) {
        self.errors.get_or_create(&[("call", call.as_str())]).inc();
    }

    /// How many `call`s failed so far (the counter's value, for tests).
    #[cfg(test)]
    pub(crate) fn errors(&self, call: SdkCall) -> u64 {
        self.errors.get_or_create(&[("call", call.as_str())]).get()
    }
}

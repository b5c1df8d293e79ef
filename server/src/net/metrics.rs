//! What the net side records: connection closes by code and side, refused `Hello`s, pending
//! connections. Registered by `crate::metrics`, which assembles every subsystem's families.

use gatehouse_protocol::CloseCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Which side closed a connection, for `gatehouse_connection_closes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseSide {
    /// The server closed it with one of our close codes.
    Server,
    /// The client closed it (with a close code of ours, or another) or it timed out.
    Client,
}

impl CloseSide {
    fn as_str(self) -> &'static str {
        match self {
            CloseSide::Server => "server",
            CloseSide::Client => "client",
        }
    }
}

/// What the net side records.
#[derive(Debug, Clone)]
pub struct NetMetrics {
    closes: Family<[(&'static str, &'static str); 2], Counter>,
    logins_refused: Family<[(&'static str, &'static str); 1], Counter>,
    pending: Gauge,
}

impl NetMetrics {
    /// Registers the network's families in `registry` (the close counts, every server-side
    /// code at 0 from the start; the pending connections), with `logins_refused`, which the
    /// game's refusals count in too.
    pub(crate) fn register(
        registry: &mut Registry,
        logins_refused: Family<[(&'static str, &'static str); 1], Counter>,
    ) -> Self {
        let m = NetMetrics { closes: Family::default(), logins_refused, pending: Gauge::default() };
        for code in ALL_CLOSE_CODES {
            drop(m.closes.get_or_create(&[("code", close_code_name(code)), ("side", "server")]));
        }
        registry.register(
            "gatehouse_connection_closes",
            "Connections closed, by close code (leave, shutting_down, rejected, protocol_violation, server_full, replaced, ready_timeout, slow_consumer, hello_timeout, abuse; timed_out or other for a client side without one of ours) and by the side that closed (server, client)",
            m.closes.clone(),
        );
        registry.register(
            "gatehouse_pending_connections",
            "Connections accepted that have not logged in yet (each holds a pending slot)",
            m.pending.clone(),
        );
        m
    }

    /// Counts a connection closed by `side` with `code`.
    pub fn count_close(&self, code: CloseCode, side: CloseSide) {
        self.count_close_named(close_code_name(code), side);
    }

    /// Counts a connection closed by `side` for a reason outside [`CloseCode`] (`timed_out`,
    /// `other`).
    pub fn count_close_named(&self, code: &'static str, side: CloseSide) {
        self.closes.get_or_create(&[("code", code), ("side", side.as_str())]).inc();
    }

    /// Counts a `Hello` refused for `reason` (a label value such as `bad_signature`).
    pub fn count_login_refused(&self, reason: &'static str) {
        self.logins_refused.get_or_create(&[("reason", reason)]).inc();
    }

    /// Sets how many connections hold a pending slot.
    pub fn set_pending_connections(&self, pending: usize) {
        self.pending.set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// How many connections hold a pending slot, as last set (the gauge's value, without
    /// encoding the whole registry: the driver's harness reads it after every fuzz run).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn pending_connections(&self) -> i64 {
        self.pending.get()
    }
}

/// Every close code, for the families that list each one from the start.
pub(crate) const ALL_CLOSE_CODES: [CloseCode; 11] = [
    CloseCode::Leave,
    CloseCode::ShuttingDown,
    CloseCode::Rejected,
    CloseCode::ProtocolViolation,
    CloseCode::ServerFull,
    CloseCode::Replaced,
    CloseCode::ReadyTimeout,
    CloseCode::SlowConsumer,
    CloseCode::HelloTimeout,
    CloseCode::Abuse,
    CloseCode::WorldUnavailable,
];

/// A close code's label value: its name in snake case.
pub fn close_code_name(code: CloseCode) -> &'static str {
    match code {
        CloseCode::Leave => "leave",
        CloseCode::ShuttingDown => "shutting_down",
        CloseCode::Rejected => "rejected",
        CloseCode::ProtocolViolation => "protocol_violation",
        CloseCode::ServerFull => "server_full",
        CloseCode::Replaced => "replaced",
        CloseCode::ReadyTimeout => "ready_timeout",
        CloseCode::SlowConsumer => "slow_consumer",
        CloseCode::HelloTimeout => "hello_timeout",
        CloseCode::Abuse => "abuse",
        CloseCode::WorldUnavailable => "world_unavailable",
        // A code added to the protocol later, until it is named here.
        _ => "other",
    }
}

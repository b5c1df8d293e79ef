//! What the net side records: connection closes by code and side, refused `Hello`s, pending
//! connections, and quinn's path statistics (round-trip time, packets sent and lost, bytes
//! lost, congestion events) summed over every connection, without a per-connection label.
//! Registered by `crate::metrics`, which assembles every subsystem's families.

use std::time::Duration;

use gatehouse_protocol::CloseCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Bucket bounds of `gatehouse_quic_rtt_seconds`, seconds: from 1 ms (loopback, a LAN) to 2 s
/// (a path about to time out).
pub const RTT_BUCKETS: [f64; 13] =
    [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.2, 0.3, 0.5, 2.0];

/// How often one connection's path is sampled, at most: its round-trip time observed once, its
/// packet counts added (they are added once more when it is forgotten, so none is lost).
pub(crate) const QUIC_SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// quinn's path statistics of one connection (`quinn_proto::Connection::stats().path`), as
/// counted since the connection opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicSample {
    /// The smoothed round-trip time.
    pub rtt: Duration,
    /// Packets sent.
    pub sent_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes in the packets declared lost.
    pub lost_bytes: u64,
    /// Congestion events (each halves the congestion window).
    pub congestion_events: u64,
}

impl QuicSample {
    /// The sample of quinn's statistics.
    pub(crate) fn of(stats: &quinn_proto::ConnectionStats) -> QuicSample {
        QuicSample {
            rtt: stats.path.rtt,
            sent_packets: stats.path.sent_packets,
            lost_packets: stats.path.lost_packets,
            lost_bytes: stats.path.lost_bytes,
            congestion_events: stats.path.congestion_events,
        }
    }
}

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
    tickets_refused: Counter,
    pending: Gauge,
    rtt: Histogram,
    sent_packets: Counter,
    lost_packets: Counter,
    lost_bytes: Counter,
    congestion_events: Counter,
}

impl NetMetrics {
    /// Registers the network's families in `registry` (the close counts, every server-side
    /// code at 0 from the start; the pending connections), with `logins_refused`, which the
    /// game's refusals count in too, and `tickets_refused`, the tickets refused at the `Hello`,
    /// which `gatehouse_tickets_refused_total` adds to the core's count.
    pub(crate) fn register(
        registry: &mut Registry,
        logins_refused: Family<[(&'static str, &'static str); 1], Counter>,
        tickets_refused: Counter,
    ) -> Self {
        let m = NetMetrics {
            closes: Family::default(),
            logins_refused,
            tickets_refused,
            pending: Gauge::default(),
            rtt: Histogram::new(RTT_BUCKETS),
            sent_packets: Counter::default(),
            lost_packets: Counter::default(),
            lost_bytes: Counter::default(),
            congestion_events: Counter::default(),
        };
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
        registry.register(
            "gatehouse_quic_rtt_seconds",
            "QUIC round-trip times (quinn's smoothed RTT), seconds: each connection sampled at most every 5 s, every connection in one histogram",
            m.rtt.clone(),
        );
        registry.register(
            "gatehouse_quic_sent_packets",
            "QUIC packets sent, over every connection (added at most every 5 s per connection, and when it is forgotten)",
            m.sent_packets.clone(),
        );
        registry.register(
            "gatehouse_quic_lost_packets",
            "QUIC packets declared lost (and their data sent again), over every connection; with gatehouse_quic_sent_packets_total, the loss ratio",
            m.lost_packets.clone(),
        );
        registry.register(
            "gatehouse_quic_lost_bytes",
            "Bytes in the QUIC packets declared lost, over every connection",
            m.lost_bytes.clone(),
        );
        registry.register(
            "gatehouse_quic_congestion_events",
            "QUIC congestion events (each cuts a connection's congestion window), over every connection",
            m.congestion_events.clone(),
        );
        m
    }

    /// Records one connection's path: `now` as sampled, `before` as last recorded (the default
    /// for a connection not recorded yet). The counters take the differences, so each packet is
    /// counted once however often the connection is sampled; the round-trip time is observed
    /// if `observe_rtt` (not for the last sample of a closed connection, whose RTT says nothing
    /// new). O(1).
    pub(crate) fn record_quic(&self, before: &QuicSample, now: &QuicSample, observe_rtt: bool) {
        if observe_rtt && !now.rtt.is_zero() {
            self.rtt.observe(now.rtt.as_secs_f64());
        }
        let delta = |now: u64, before: u64| now.saturating_sub(before);
        self.sent_packets.inc_by(delta(now.sent_packets, before.sent_packets));
        self.lost_packets.inc_by(delta(now.lost_packets, before.lost_packets));
        self.lost_bytes.inc_by(delta(now.lost_bytes, before.lost_bytes));
        self.congestion_events.inc_by(delta(now.congestion_events, before.congestion_events));
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

    /// Counts a travel ticket refused at the `Hello` (another server's, malformed, badly signed,
    /// expired; docs/spec/travel.md V8, V9), beside its count in `logins_refused`.
    pub fn count_ticket_refused(&self) {
        self.tickets_refused.inc();
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
pub(crate) const ALL_CLOSE_CODES: [CloseCode; 13] = [
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
    CloseCode::Travelled,
    CloseCode::Recalled,
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
        CloseCode::Travelled => "travelled",
        CloseCode::Recalled => "recalled",
        // A code added to the protocol later, until it is named here.
        _ => "other",
    }
}

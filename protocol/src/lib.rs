//! What crosses the gatehouse wire, and nothing else.
//!
//! - [`messages`]: the control-channel messages of docs/protocol.md, client to server and back.
//! - [`ids`]: the ids those messages carry; [`runs`]: sets of pawn ids as runs of consecutive ids.
//! - [`snapshot`]: the world as it stands, compact, for a client that just logged in;
//!   `replicated`: the changes of a replication interval as they lie on the wire, their names
//!   as indices.
//! - [`codec`]: framing (`u32` little-endian length + bincode body) with a size limit; the one
//!   module that knows the encoding.
//! - [`token`]: the HS256 session token carried by `Hello`; [`ticket`]: the travel ticket it may
//!   carry instead (docs/spec/travel.md V8), the same form under the fleet's key.
//! - [`fleet`]: the peer link between a fleet's servers (docs/spec/travel.md V14): its
//!   messages and the proof of the fleet key.
//!
//! Constants: [`PROTOCOL_VERSION`], [`ALPN`], and the connection [`CloseCode`]s. The wire is
//! specified for implementers in other languages in `docs/protocol.md`.

#![forbid(unsafe_code)]

pub mod borrowed;
pub mod codec;
pub mod fleet;
pub mod ids;
pub mod messages;
pub(crate) mod replicated;
pub mod runs;
pub mod samples;
pub mod snapshot;
pub mod ticket;
pub mod token;

pub use codec::{FrameDecoder, FrameError, decode_body, encode_frame, encode_frame_into};
pub use ids::{
    CharacterDef, JoinId, LevelName, NameError, NodeId, PawnId, PlayerId, ServerId, TeamId,
    TransitionId,
};
pub use messages::{
    CertificateSha256, ClientMessage, ErrorCode, PawnView, PlayerStateView, RejectReason,
    ReplicatedChange, ServerMessage, TransitionFailure, TravelTo,
};
pub use runs::{PawnIdRun, PawnIdRuns, RunsError};
pub use snapshot::{SnapshotBuilder, SnapshotEntry, WorldSnapshot};

/// The protocol version a client announces in `Hello`. The server refuses any other.
///
/// Version 2 (incompatible with 1): a player who logs in while no transition runs streams
/// before it gets a pawn (`ShowJoin`, `JoinReady`, `EndJoin`: a version-1 client would never
/// answer and never get a pawn), a transition can fail (`TransitionFailed`), and `ErrorCode`
/// gained `UnknownJoin`.
///
/// Version 3 (incompatible with 2): `PawnTeleported` (index 8) became `PawnsTeleported`, every
/// pawn one spawn pass moves to a node in one message.
///
/// Version 4: the server sends `Closing` (index 20), the close code and reason, last on the
/// stream before it closes a connection (docs/protocol.md section 6); a version-3 client would
/// fail to decode it.
///
/// Version 5: a client answers every `ShowTransition` at once with `TransitionShown` (client
/// index 6); a server sets aside a client that does not answer within its response timeout
/// (docs/spec/transitions.md T9), so a version-4 client would be set aside at every transition.
///
/// Version 6 (incompatible with 5): `PawnsTeleported` names its pawns as runs of consecutive ids
/// ([`PawnIdRuns`]), so a transition that moves every kept pawn costs each client a few bytes,
/// not 8 per pawn.
///
/// Version 7: `RejectReason::TokenLifetime` and `TooManyLogins` (docs/protocol.md 4, "Session
/// tokens"); a version-6 client fails to decode them, only when it is refused.
///
/// Version 8 (incompatible with 7): `Welcome` tells the server's frame limit
/// (`max_frame_len`), `ShowTransition` names the destination's dungeon rooms (`rooms`), as
/// `ShowJoin` does, and close code 10 (`WorldUnavailable`) ends a world that cannot load.
///
/// Version 9 (incompatible with 8): a newcomer gets the world as it stands in a
/// `WorldSnapshot` (index 21) instead of one message per player and pawn, and the replicated
/// broadcasts of one replication interval come as one `Replicated` (index 22) per client
/// (docs/protocol.md 4.4, 4.5): admission costs O(N) frames, not O(N²).
///
/// Version 10 (incompatible with 9): integers, lengths and variant indices are variable-length
/// (docs/protocol.md 3): a value under 251 is one byte, so a name costs its length and one byte,
/// not eight. A newcomer is announced once, when its class is known (docs/protocol.md 5,
/// `PlayerStateUpdated`), not at login and again at its save: with its pawn, 52 bytes to every
/// other client where version 9 sent 121.
///
/// Version 11 (incompatible with 10): travel between servers (docs/spec/travel.md V15). The
/// server may send `TravelTo` (index 23) in place of `ShowTransition`, which a client answers,
/// dials and, failing, gives up with `TravelAbandoned` (client index 7); `RejectReason` gains
/// `TicketUsed` and `TicketStale`, `TransitionFailure` `DestinationUnavailable` and
/// `DestinationLost`, and [`CloseCode`] `Travelled` and `Recalled`. A version-10 client would
/// never follow a `TravelTo`, holding its seat to the end. `Hello` keeps its layout, so every
/// version reads `protocol_version` first.
///
/// Version 12 (incompatible with 11): a `Replicated` message lists the character definitions
/// and nodes its changes name once, before them, and each change names them by index
/// (docs/protocol.md 4.4, 5): a newcomer with its pawn costs every other client 30 bytes where
/// version 11 sent 52.
pub const PROTOCOL_VERSION: u32 = 12;

/// Most runs in one `PawnsTeleported`: 512 runs (6 KiB) fit the smallest frame limit a server
/// accepts (8 KiB); a set of more runs comes in several messages.
pub const MAX_TELEPORT_RUNS_PER_MESSAGE: usize = 512;

/// The TLS ALPN protocol id of the control connection.
pub const ALPN: &[u8] = b"gatehouse/1";

/// QUIC application close codes used by both sides (the `error_code` of CONNECTION_CLOSE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum CloseCode {
    /// Normal close: the client left, or the client closed after `Leave`.
    Leave = 0,
    /// The server is shutting down.
    ShuttingDown = 1,
    /// `Hello` was refused (a bad token or version, or too many logins of one player); a
    /// `Rejected` message preceded the close.
    Rejected = 2,
    /// The peer sent bytes that are not valid frames or messages.
    ProtocolViolation = 3,
    /// The server holds its player cap.
    ServerFull = 4,
    /// The same player logged in on another connection, which replaces this one.
    Replaced = 5,
    /// The client never reported ready within the client-ready timeout, or never acknowledged
    /// its pawn within a settle timeout (kick policy).
    ReadyTimeout = 6,
    /// The client did not read its messages fast enough; its send queue overflowed.
    SlowConsumer = 7,
    /// No `Hello` arrived within the handshake timeout.
    HelloTimeout = 8,
    /// The client kept sending refused requests beyond the rate limit, or more messages than
    /// its connection's budget.
    Abuse = 9,
    /// The world cannot be loaded: several transitions in a row failed at their hard maximum,
    /// and the server stops (docs/protocol.md 5, "Every transition is bounded"; version 8).
    WorldUnavailable = 10,
    /// The player travelled to another server of the fleet and is placed there: the source
    /// releases it (docs/spec/travel.md V6; version 11).
    Travelled = 11,
    /// A destination closes a traveller the source took back before it was placed there: the
    /// client follows the source connection (docs/spec/travel.md V4, V5; version 11).
    Recalled = 12,
}

impl CloseCode {
    /// The code as sent on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The close code with this wire value, if it is one of ours.
    pub fn from_code(code: u64) -> Option<CloseCode> {
        use CloseCode::*;
        [
            Leave,
            ShuttingDown,
            Rejected,
            ProtocolViolation,
            ServerFull,
            Replaced,
            ReadyTimeout,
            SlowConsumer,
            HelloTimeout,
            Abuse,
            WorldUnavailable,
            Travelled,
            Recalled,
        ]
        .into_iter()
        .find(|c| u64::from(c.code()) == code)
    }

    /// The reason phrase sent with the close.
    pub fn reason(self) -> &'static str {
        match self {
            CloseCode::Leave => "leave",
            CloseCode::ShuttingDown => "server shutting down",
            CloseCode::Rejected => "hello rejected",
            CloseCode::ProtocolViolation => "protocol violation",
            CloseCode::ServerFull => "server full",
            CloseCode::Replaced => "replaced by a newer connection of the same player",
            CloseCode::ReadyTimeout => "client-ready timeout",
            CloseCode::SlowConsumer => "slow consumer",
            CloseCode::HelloTimeout => "hello timeout",
            CloseCode::Abuse => "too many refused requests",
            CloseCode::WorldUnavailable => "the world cannot be loaded; the server is stopping",
            CloseCode::Travelled => "travelled to another server",
            CloseCode::Recalled => "recalled by the server the player travelled from",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CloseCode;

    /// Every close code reads back from its wire value (docs/protocol.md 6), 0 to 12, and no
    /// other value is one of ours.
    #[test]
    fn every_close_code_reads_back_from_its_wire_value() {
        for code in 0..=12u64 {
            let read = CloseCode::from_code(code).expect("codes 0 to 12 are ours");
            assert_eq!(u64::from(read.code()), code);
        }
        assert_eq!(CloseCode::from_code(10), Some(CloseCode::WorldUnavailable));
        assert_eq!(CloseCode::from_code(11), Some(CloseCode::Travelled));
        assert_eq!(CloseCode::from_code(12), Some(CloseCode::Recalled));
        assert_eq!(CloseCode::from_code(13), None);
    }

    /// Each close code has a reason phrase of its own (docs/protocol.md 6).
    #[test]
    fn every_close_code_has_a_reason_of_its_own() {
        let reasons: std::collections::BTreeSet<&str> =
            (0..=12u64).filter_map(CloseCode::from_code).map(CloseCode::reason).collect();
        assert_eq!(reasons.len(), 13);
    }
}

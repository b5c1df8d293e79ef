//! The control-channel messages (docs/protocol.md section 5).
//!
//! One bidirectional QUIC stream per connection carries these, reliable and ordered, because
//! phase order matters. Every message that refers to a transition or a pawn carries its id, so a
//! late or stale message is recognised and ignored rather than applied to a newer one.
//!
//! The variant order is the wire format (bincode encodes the variant index): append new
//! variants at the end and bump [`crate::PROTOCOL_VERSION`] when a variant changes.

use gatehouse_tags::GameplayTag;
use serde::{Deserialize, Serialize};

use crate::ids::{CharacterDef, JoinId, LevelName, NodeId, PawnId, PlayerId, TeamId, TransitionId};
use crate::runs::PawnIdRuns;
use crate::snapshot::WorldSnapshot;
use crate::ticket::MAX_TICKET_LEN;

/// A message from a client to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMessage {
    /// First frame of every connection: the protocol version the client speaks and its session
    /// token (an HS256 JWT whose `uid` claim is the player id). Anything else first is refused.
    Hello {
        /// Must equal [`crate::PROTOCOL_VERSION`].
        protocol_version: u32,
        /// The session token, in JWT compact form.
        token: String,
    },
    /// The client finished streaming the levels of this transition. A report for a superseded
    /// transition is ignored (docs/spec/transitions.md T5).
    TransitionReady {
        /// The transition the client streamed for.
        transition_id: TransitionId,
    },
    /// The owning client accepted this pawn: it is now the player's camera and input target.
    /// Only then does the server count the player as placed (docs/spec/transitions.md T8).
    PossessionAcknowledged {
        /// The pawn the client now controls.
        pawn_id: PawnId,
    },
    /// Respawn after death (docs/spec/transitions.md T13). Accepted only while the player's
    /// ability state holds `State.Dead`; otherwise answered with [`ErrorCode::RestartRejected`].
    RestartRequest,
    /// The client is leaving; the server removes the player and closes with
    /// [`crate::CloseCode::Leave`].
    Leave,
    /// The client finished streaming the levels (and rooms) of its join
    /// ([`ServerMessage::ShowJoin`]); only then does the server spawn its pawn. A report for a
    /// join the server no longer runs is ignored.
    JoinReady {
        /// The join the client streamed for.
        join_id: JoinId,
    },
    /// The client put up the loading screen of this transition: sent at once on
    /// [`ServerMessage::ShowTransition`], before any streaming. It proves the client is
    /// responsive; one that does not send it within the server's response timeout is set aside
    /// from the transition (nothing waits for it) and placed by a join of its own afterwards
    /// (docs/spec/transitions.md T9). One for a superseded transition is ignored.
    TransitionShown {
        /// The transition whose `ShowTransition` arrived.
        transition_id: TransitionId,
    },
    /// Sent on the source connection: the client gives up the travel of
    /// [`ServerMessage::TravelTo`], because the destination was unreachable, refused its ticket
    /// or did not admit it in time (docs/spec/travel.md V3, V7, V15; version 11). A source sends
    /// such a player back. One naming another move is ignored; one naming a transition never
    /// issued is answered [`ErrorCode::UnknownTransition`].
    TravelAbandoned {
        /// The transition of the `TravelTo` given up.
        transition_id: TransitionId,
    },
}

/// A message from the server to one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerMessage {
    /// Answer to an accepted `Hello`: the connection is now this player.
    Welcome {
        /// The player id taken from the token.
        player_id: PlayerId,
        /// The node whose level is streamed now, if any.
        current_node: Option<NodeId>,
        /// The largest frame body this server sends and accepts, bytes (its
        /// `network.max_frame_len`, 8,192 to 1,048,576): a client accepts frames up to it and
        /// sends none larger (docs/protocol.md 2; version 8).
        max_frame_len: u32,
    },
    /// Answer to a refused `Hello`; the server closes the connection right after with
    /// [`crate::CloseCode::Rejected`] (or `ServerFull` / `ShuttingDown`).
    Rejected {
        /// Why.
        reason: RejectReason,
        /// A human-readable explanation.
        detail: String,
    },
    /// Freeze every character (docs/spec/transitions.md T12): each client zeroes gravity on every
    /// pawn locally and disables input only on its locally controlled pawn.
    FreezeCharacters {
        /// The transition that froze them.
        transition_id: TransitionId,
    },
    /// Show the loading screen and stream these levels. A second `ShowTransition` while the
    /// screen is up supersedes the first (docs/spec/transitions.md T5): keep the screen, drop the
    /// old streaming, stream the new levels and report ready with the new id.
    ShowTransition {
        /// The transition to report ready for.
        transition_id: TransitionId,
        /// The destination node.
        target_node: NodeId,
        /// The levels the client streams before reporting ready.
        levels: Vec<LevelName>,
        /// The destination's dungeon rooms, streamed after `levels` and before the ready report
        /// (empty for a node that is not a dungeon; version 8).
        rooms: Vec<LevelName>,
    },
    /// Unfreeze every character and hide the loading screen (docs/spec/transitions.md T7, T12).
    EndTransition {
        /// The transition that ended.
        transition_id: TransitionId,
    },
    /// A player state appeared or changed (replicated to every client).
    PlayerStateUpdated(PlayerStateView),
    /// A player's connection is gone and it is out of the world; the server may keep its player
    /// state for a relaunch, which announces it again (docs/protocol.md 5).
    PlayerLeft {
        /// Who left.
        player_id: PlayerId,
    },
    /// A pawn exists (replicated to every client; the owner's is an autonomous proxy, the others
    /// simulated proxies).
    PawnSpawned(PawnView),
    /// Pawns moved to another node (level-transition spawn requests; a player who already has a
    /// pawn is teleported, not spawned twice: docs/spec/transitions.md T4). Every pawn
    /// one spawn pass moves to a node comes in one message of at most
    /// [`MAX_TELEPORT_RUNS_PER_MESSAGE`](crate::MAX_TELEPORT_RUNS_PER_MESSAGE) runs (protocol 3;
    /// as runs of ids since protocol 6).
    PawnsTeleported {
        /// Where they stand now.
        node: NodeId,
        /// The pawns, as runs of consecutive ids.
        pawn_ids: PawnIdRuns,
    },
    /// A pawn's owner died; the pawn stays until its respawn replaces it.
    PawnDied {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// A pawn was destroyed.
    PawnDestroyed {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// Sent to the owning client only: the server possessed this pawn for you. Answer with
    /// `PossessionAcknowledged`.
    Possessed {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// Sent to the owning client only: the server unpossessed this pawn.
    Unpossessed {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// The full set of ability-state tags a player holds now (e.g. `State.Dead`), replicated to
    /// every client.
    AbilityTagsChanged {
        /// Whose ability state.
        player_id: PlayerId,
        /// Every tag held now.
        tags: Vec<GameplayTag>,
    },
    /// A player's health changed (replicated to every client).
    HealthChanged {
        /// Whose health.
        player_id: PlayerId,
        /// Health now, 0 ..= max.
        health: u32,
    },
    /// Sent to the owning client only: ability kits granted to your player state (the
    /// ability-kit latch, docs/spec/transitions.md T15, T16). Granted at most once per kit per
    /// player state; a relaunch is told every kit its player holds, once (docs/protocol.md 4.3).
    KitsGranted {
        /// The kits granted by this grant.
        kits: Vec<GameplayTag>,
    },
    /// A client message was refused; only the sender is affected and the connection stays open
    /// unless the message says otherwise.
    Error {
        /// What kind of refusal.
        code: ErrorCode,
        /// A human-readable explanation naming what was wrong.
        detail: String,
    },
    /// Sent to a joiner only (a player who logged in while no transition runs, or, right after
    /// `EndTransition`, one the transition did not place: docs/protocol.md 4.2): raise the
    /// loading screen and stream the levels, then the rooms, of the world's current node, then
    /// answer `JoinReady`. The pawn comes after; `EndJoin` drops the screen. Players already in
    /// the world are not frozen. A transition starting meanwhile supersedes the join: follow
    /// the transition instead.
    ShowJoin {
        /// The join to report ready for.
        join_id: JoinId,
        /// The node the world stands on.
        node: NodeId,
        /// Its levels.
        levels: Vec<LevelName>,
        /// Its dungeon rooms (empty for a node that is not a dungeon).
        rooms: Vec<LevelName>,
    },
    /// Sent to a joiner only: its join is over (it acknowledged its pawn): drop the loading
    /// screen and enable input. Ignore it if the id is not the join on screen.
    EndJoin {
        /// The join that ended.
        join_id: JoinId,
    },
    /// The transition hit the server's hard maximum and failed: nobody is spawned into its
    /// levels. Drop its streaming and keep the loading screen up: the server starts its
    /// recovery travel (back to the last node a transition reached) at once, with a new
    /// `FreezeCharacters` and `ShowTransition`.
    TransitionFailed {
        /// The transition that failed.
        transition_id: TransitionId,
        /// Why.
        reason: TransitionFailure,
        /// A human-readable explanation (the phase it was stuck in, what was loading).
        detail: String,
    },
    /// The server is closing this connection, with the application close code and reason its
    /// CONNECTION_CLOSE will carry (docs/protocol.md section 6). It comes last on this stream,
    /// which is delivered reliably, because a lossy path can drop the CONNECTION_CLOSE itself,
    /// and a client that missed it would otherwise learn of the close only at its idle timeout.
    Closing {
        /// The application close code (`CloseCode`, docs/protocol.md §6).
        code: u32,
        /// The reason text of the CONNECTION_CLOSE.
        reason: String,
    },
    /// Sent to a newcomer only, after its `Welcome`: part of the world as it stood when it
    /// logged in (every player state, with its tags and health, and every pawn), in one or a few
    /// messages; the replicated changes after it follow as usual (docs/protocol.md 4.5;
    /// version 9). Boxed: it is far larger than the other messages.
    WorldSnapshot(Box<WorldSnapshot>),
    /// Replicated state of one replication interval, broadcast to every client: the changes in
    /// the order the server made them, applied as their own messages would be (docs/protocol.md
    /// 4.4; version 9).
    ///
    /// On the wire the changes name their classes and nodes by index into two lists written
    /// before them (version 12; docs/protocol.md 4.4, 5); a body whose index names nothing does
    /// not decode, naming the change.
    Replicated {
        /// The changes, oldest first.
        #[serde(with = "crate::replicated")]
        changes: Vec<ReplicatedChange>,
    },
    /// Sent to a moving player in place of `ShowTransition`: its transition goes to a node
    /// another server hosts, which holds a seat for it for `valid_ms` from now. Answer
    /// `TransitionShown` at once, keep the loading screen up, dial `address` as `server_name`
    /// and log in there with `Hello { protocol_version: 12, token: ticket }`; if that fails,
    /// send `TravelAbandoned` here (docs/spec/travel.md V3, V15; version 11).
    ///
    /// Its strings are bounded: a body whose `address` is longer than [`MAX_ADDRESS_LEN`]
    /// bytes, `server_name` longer than [`MAX_SERVER_NAME_LEN`] or `ticket` longer than
    /// [`MAX_TICKET_LEN`] does not decode, naming the field (nor does such a message encode).
    TravelTo(Box<TravelTo>),
}

/// The body of [`ServerMessage::TravelTo`] (docs/spec/travel.md V15), boxed so the rarest
/// message does not make every `ServerMessage` larger; on the wire its fields follow the
/// variant index as any struct variant's would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TravelTo {
    /// The transition this travel is (the source's id).
    pub transition_id: TransitionId,
    /// The destination node.
    pub node: NodeId,
    /// The destination's game port, `host:port`, at most [`MAX_ADDRESS_LEN`] bytes.
    #[serde(serialize_with = "bounded::ser_address", deserialize_with = "bounded::de_address")]
    pub address: String,
    /// The name the destination's certificate is checked against (a DNS name or an IP
    /// address), at most [`MAX_SERVER_NAME_LEN`] bytes.
    #[serde(
        serialize_with = "bounded::ser_server_name",
        deserialize_with = "bounded::de_server_name"
    )]
    pub server_name: String,
    /// The SHA-256 of the destination's certificate, to pin; none: trust it as the first
    /// connection was trusted.
    pub certificate_sha256: Option<CertificateSha256>,
    /// The travel ticket to log in with (docs/spec/travel.md V8), at most
    /// [`MAX_TICKET_LEN`] bytes.
    #[serde(serialize_with = "bounded::ser_ticket", deserialize_with = "bounded::de_ticket")]
    pub ticket: String,
    /// How long the destination holds the seat from now, milliseconds.
    pub valid_ms: u32,
}

/// The longest `TravelTo.address`, bytes (docs/spec/travel.md V12, V15).
pub const MAX_ADDRESS_LEN: usize = 255;

/// The longest `TravelTo.server_name`, bytes (docs/protocol.md 5).
pub const MAX_SERVER_NAME_LEN: usize = 255;

/// A certificate's SHA-256 digest, as a client pins it (`TravelTo.certificate_sha256`): 32
/// bytes with no length prefix on the wire (docs/spec/travel.md V15). Shown as 64 lowercase
/// hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CertificateSha256(pub [u8; 32]);

impl std::fmt::Display for CertificateSha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl std::fmt::Debug for CertificateSha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CertificateSha256({self})")
    }
}

/// The bounds of `TravelTo`'s strings, kept on both ways: a sender cannot encode what a
/// receiver would refuse, and a receiver refuses, as a body that does not decode, a string
/// above its bound, with an error naming the field, its length and its bound.
mod bounded {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{MAX_ADDRESS_LEN, MAX_SERVER_NAME_LEN, MAX_TICKET_LEN};

    /// What is wrong with `field`, `len` bytes long, if it is above `max`.
    fn excess(field: &str, len: usize, max: usize) -> Option<String> {
        (len > max).then(|| format!("TravelTo.{field} is {len} bytes long, the maximum is {max}"))
    }

    fn ser<S: Serializer>(field: &str, max: usize, text: &str, s: S) -> Result<S::Ok, S::Error> {
        match excess(field, text.len(), max) {
            Some(why) => Err(serde::ser::Error::custom(why)),
            None => s.serialize_str(text),
        }
    }

    fn de<'de, D: Deserializer<'de>>(field: &str, max: usize, d: D) -> Result<String, D::Error> {
        let text = String::deserialize(d)?;
        match excess(field, text.len(), max) {
            Some(why) => Err(serde::de::Error::custom(why)),
            None => Ok(text),
        }
    }

    pub(super) fn ser_address<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        ser("address", MAX_ADDRESS_LEN, text, s)
    }

    pub(super) fn de_address<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        de("address", MAX_ADDRESS_LEN, d)
    }

    pub(super) fn ser_server_name<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        ser("server_name", MAX_SERVER_NAME_LEN, text, s)
    }

    pub(super) fn de_server_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        de("server_name", MAX_SERVER_NAME_LEN, d)
    }

    pub(super) fn ser_ticket<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        ser("ticket", MAX_TICKET_LEN, text, s)
    }

    pub(super) fn de_ticket<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        de("ticket", MAX_TICKET_LEN, d)
    }
}

/// One change of replicated state inside [`ServerMessage::Replicated`]: the broadcasts a
/// client needs to mirror the world (docs/protocol.md 4.4). Each means exactly what the
/// [`ServerMessage`] of the same name means. It has no encoding of its own: on the wire it
/// is written inside a `Replicated` message, its names as indices (docs/protocol.md 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicatedChange {
    /// As [`ServerMessage::PlayerStateUpdated`].
    PlayerStateUpdated(PlayerStateView),
    /// As [`ServerMessage::PlayerLeft`].
    PlayerLeft {
        /// Who left.
        player_id: PlayerId,
    },
    /// As [`ServerMessage::PawnSpawned`].
    PawnSpawned(PawnView),
    /// As [`ServerMessage::PawnDestroyed`].
    PawnDestroyed {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// As [`ServerMessage::AbilityTagsChanged`].
    AbilityTagsChanged {
        /// Whose ability state.
        player_id: PlayerId,
        /// Every tag held now.
        tags: Vec<GameplayTag>,
    },
    /// As [`ServerMessage::HealthChanged`].
    HealthChanged {
        /// Whose health.
        player_id: PlayerId,
        /// Health now, 0 ..= max.
        health: u32,
    },
    /// As [`ServerMessage::PawnDied`].
    PawnDied {
        /// The pawn.
        pawn_id: PawnId,
    },
    /// As [`ServerMessage::PawnsTeleported`].
    PawnsTeleported {
        /// Where they stand now.
        node: NodeId,
        /// The pawns, as runs of consecutive ids.
        pawn_ids: PawnIdRuns,
    },
}

impl ReplicatedChange {
    /// Whether a client waits on it to make progress, so a server sends it at the end of the
    /// step that made it rather than at the replication deadline: a death (its owner restarts)
    /// and a teleport (part of a transition's spawn pass). docs/protocol.md 4.4.
    pub fn is_urgent(&self) -> bool {
        matches!(self, ReplicatedChange::PawnDied { .. } | ReplicatedChange::PawnsTeleported { .. })
    }

    /// The change `message` stands for, if it is one of the replicated broadcasts; otherwise
    /// the message back.
    ///
    /// # Errors
    /// `message` itself when it is not a replicated change.
    pub fn from_message(message: ServerMessage) -> Result<ReplicatedChange, ServerMessage> {
        Ok(match message {
            ServerMessage::PlayerStateUpdated(view) => ReplicatedChange::PlayerStateUpdated(view),
            ServerMessage::PlayerLeft { player_id } => ReplicatedChange::PlayerLeft { player_id },
            ServerMessage::PawnSpawned(view) => ReplicatedChange::PawnSpawned(view),
            ServerMessage::PawnDestroyed { pawn_id } => ReplicatedChange::PawnDestroyed { pawn_id },
            ServerMessage::AbilityTagsChanged { player_id, tags } => {
                ReplicatedChange::AbilityTagsChanged { player_id, tags }
            }
            ServerMessage::HealthChanged { player_id, health } => {
                ReplicatedChange::HealthChanged { player_id, health }
            }
            ServerMessage::PawnDied { pawn_id } => ReplicatedChange::PawnDied { pawn_id },
            ServerMessage::PawnsTeleported { node, pawn_ids } => {
                ReplicatedChange::PawnsTeleported { node, pawn_ids }
            }
            other => return Err(other),
        })
    }
}

impl From<ReplicatedChange> for ServerMessage {
    fn from(change: ReplicatedChange) -> ServerMessage {
        match change {
            ReplicatedChange::PlayerStateUpdated(view) => ServerMessage::PlayerStateUpdated(view),
            ReplicatedChange::PlayerLeft { player_id } => ServerMessage::PlayerLeft { player_id },
            ReplicatedChange::PawnSpawned(view) => ServerMessage::PawnSpawned(view),
            ReplicatedChange::PawnDestroyed { pawn_id } => ServerMessage::PawnDestroyed { pawn_id },
            ReplicatedChange::AbilityTagsChanged { player_id, tags } => {
                ServerMessage::AbilityTagsChanged { player_id, tags }
            }
            ReplicatedChange::HealthChanged { player_id, health } => {
                ServerMessage::HealthChanged { player_id, health }
            }
            ReplicatedChange::PawnDied { pawn_id } => ServerMessage::PawnDied { pawn_id },
            ReplicatedChange::PawnsTeleported { node, pawn_ids } => {
                ServerMessage::PawnsTeleported { node, pawn_ids }
            }
        }
    }
}

/// Why a transition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransitionFailure {
    /// It ran for the server's maximum transition time (`game.transition_max_ms`), extensions
    /// included, without ending.
    TimedOut,
    /// A travel to another server failed before this player's ticket: no server granted its
    /// seat within `fleet.resolve_timeout_ms`, or its handoff save was not acknowledged within
    /// its seat's hold. The player stays on this server (docs/spec/travel.md V7; version 11).
    DestinationUnavailable,
    /// A travel to another server failed after this player's ticket, before it was placed
    /// there: the destination went silent, lost its seat, the client abandoned the travel, or
    /// the transition ran out of time. The player is sent back (docs/spec/travel.md V7;
    /// version 11).
    DestinationLost,
}

/// The replicated part of a player state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerStateView {
    /// Whose player state.
    pub player_id: PlayerId,
    /// The match team, once processed.
    pub team: Option<TeamId>,
    /// The character definition, once the preset resolved.
    pub character_def: Option<CharacterDef>,
}

/// The replicated part of a pawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PawnView {
    /// The pawn.
    pub pawn_id: PawnId,
    /// The player whose pawn it is.
    pub owner: PlayerId,
    /// The pawn's class.
    pub character_def: CharacterDef,
    /// The node it stands on.
    pub node: NodeId,
    /// False once its owner died in it.
    pub alive: bool,
}

/// Why a `Hello` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RejectReason {
    /// The client speaks another protocol version.
    UnsupportedVersion,
    /// The token was empty.
    MissingToken,
    /// The token is not a well-formed HS256 JWT with a valid `uid` claim.
    MalformedToken,
    /// The token's signature does not verify with the server's key.
    BadSignature,
    /// The token's `exp` claim is in the past.
    Expired,
    /// The server holds its player cap.
    ServerFull,
    /// The server is draining.
    ShuttingDown,
    /// The first frame was not `Hello`.
    HelloExpected,
    /// The token's times are out of bounds: issued in the future beyond the clock-skew
    /// allowance, or living longer than the server accepts (version 7).
    TokenLifetime,
    /// This player logged in too often lately; try again in a few seconds (version 7).
    TooManyLogins,
    /// The travel ticket was redeemed already: a ticket is good for one login
    /// (docs/spec/travel.md V9; version 11).
    TicketUsed,
    /// The travel ticket names another server, or a seat this server no longer holds for it
    /// (expired, released, recalled, or of an older generation; docs/spec/travel.md V9;
    /// version 11).
    TicketStale,
}

/// Why a client message was refused after login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The message is not valid now (e.g. a second `Hello`).
    UnexpectedMessage,
    /// The transition id is newer than any the server started.
    UnknownTransition,
    /// The pawn id names no pawn the server ever possessed for this player (another player's
    /// pawn, or one never issued).
    UnknownPawn,
    /// `RestartRequest` without `State.Dead`.
    RestartRejected,
    /// Too many refused requests; further ones are dropped for a while.
    RateLimited,
    /// The join id is newer than any the server started.
    UnknownJoin,
}

/// Names for logs (no Debug formatting in log fields): the variant's name.
macro_rules! display_by_name {
    ($($name:ident),*) => {$(
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // A unit variant's Debug is exactly its name.
                std::fmt::Debug::fmt(self, f)
            }
        }
    )*};
}
display_by_name!(RejectReason, ErrorCode);

impl ServerMessage {
    /// The message's name as `docs/protocol.md` gives it, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            ServerMessage::Welcome { .. } => "Welcome",
            ServerMessage::Rejected { .. } => "Rejected",
            ServerMessage::FreezeCharacters { .. } => "FreezeCharacters",
            ServerMessage::ShowTransition { .. } => "ShowTransition",
            ServerMessage::EndTransition { .. } => "EndTransition",
            ServerMessage::PlayerStateUpdated(_) => "PlayerStateUpdated",
            ServerMessage::PlayerLeft { .. } => "PlayerLeft",
            ServerMessage::PawnSpawned(_) => "PawnSpawned",
            ServerMessage::PawnsTeleported { .. } => "PawnsTeleported",
            ServerMessage::PawnDied { .. } => "PawnDied",
            ServerMessage::PawnDestroyed { .. } => "PawnDestroyed",
            ServerMessage::Possessed { .. } => "Possessed",
            ServerMessage::Unpossessed { .. } => "Unpossessed",
            ServerMessage::AbilityTagsChanged { .. } => "AbilityTagsChanged",
            ServerMessage::HealthChanged { .. } => "HealthChanged",
            ServerMessage::KitsGranted { .. } => "KitsGranted",
            ServerMessage::Error { .. } => "Error",
            ServerMessage::ShowJoin { .. } => "ShowJoin",
            ServerMessage::EndJoin { .. } => "EndJoin",
            ServerMessage::TransitionFailed { .. } => "TransitionFailed",
            ServerMessage::Closing { .. } => "Closing",
            ServerMessage::WorldSnapshot(_) => "WorldSnapshot",
            ServerMessage::Replicated { .. } => "Replicated",
            ServerMessage::TravelTo { .. } => "TravelTo",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{DEFAULT_MAX_FRAME_LEN, FrameError, decode_body, encode_frame};

    fn round_trip<M>(message: &M) -> Vec<u8>
    where
        M: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let frame = encode_frame(message, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_body::<M>(&frame[4..]).as_ref(), Ok(message));
        frame
    }

    fn travel_to(address: String, server_name: String, ticket: String) -> ServerMessage {
        ServerMessage::TravelTo(Box::new(crate::messages::TravelTo {
            transition_id: TransitionId(7),
            node: NodeId::new("crypt").unwrap(),
            address,
            server_name,
            certificate_sha256: None,
            ticket,
            valid_ms: 10_000,
        }))
    }

    /// `TravelTo` is server message 23 and round-trips with a pinned certificate and without
    /// (docs/spec/travel.md V15).
    #[test]
    fn travel_to_round_trips_at_index_23_with_and_without_a_pin() {
        let pinned = crate::samples::travel_to();
        assert_eq!(round_trip(&pinned)[4], 23);
        let ServerMessage::TravelTo(travel) = &pinned else { unreachable!() };
        let certificate_sha256 = &travel.certificate_sha256;
        assert!(certificate_sha256.is_some());
        let unpinned = travel_to("h:1".into(), "h".into(), "a.b.c".into());
        assert_eq!(round_trip(&unpinned)[4], 23);
    }

    /// `TravelAbandoned` is client message 7 and round-trips (docs/spec/travel.md V15).
    #[test]
    fn travel_abandoned_round_trips_at_index_7() {
        let message = ClientMessage::TravelAbandoned { transition_id: TransitionId(300) };
        assert_eq!(round_trip(&message), [4, 0, 0, 0, 7, 0xfb, 0x2c, 0x01]);
    }

    /// A certificate's SHA-256 is its 32 bytes, with no length prefix (docs/spec/travel.md V15):
    /// a pin costs the option byte and 32 bytes.
    #[test]
    fn a_certificate_sha256_is_32_bytes_with_no_length_prefix() {
        let digest = CertificateSha256(std::array::from_fn(|i| i as u8));
        let mut pinned = travel_to("h:1".into(), "h".into(), "t".into());
        if let ServerMessage::TravelTo(travel) = &mut pinned {
            let certificate_sha256 = &mut travel.certificate_sha256;
            *certificate_sha256 = Some(digest);
        }
        let unpinned = travel_to("h:1".into(), "h".into(), "t".into());
        let (with, without) = (round_trip(&pinned), round_trip(&unpinned));
        assert_eq!(with.len(), without.len() + 32);
        let at = with.windows(32).position(|w| w == digest.0).expect("the digest, as is");
        assert_eq!(with[at - 1], 1, "the option byte right before it: no length between");
        assert_eq!(digest.to_string(), (0..32).map(|i| format!("{i:02x}")).collect::<String>());
    }

    /// The ticket reasons are `RejectReason` 10 and 11 (docs/spec/travel.md V9, V15).
    #[test]
    fn the_ticket_reject_reasons_round_trip_at_indices_10_and_11() {
        for (reason, index) in [(RejectReason::TicketUsed, 10), (RejectReason::TicketStale, 11)] {
            let frame = round_trip(&ServerMessage::Rejected { reason, detail: String::new() });
            assert_eq!(frame[4..], [1, index, 0], "{reason}");
        }
    }

    /// The destination failures are `TransitionFailure` 1 and 2 (docs/spec/travel.md V7, V15).
    #[test]
    fn the_destination_failures_round_trip_at_indices_1_and_2() {
        for (reason, index) in [
            (TransitionFailure::DestinationUnavailable, 1),
            (TransitionFailure::DestinationLost, 2),
        ] {
            let message = ServerMessage::TransitionFailed {
                transition_id: TransitionId(5),
                reason,
                detail: String::new(),
            };
            assert_eq!(round_trip(&message)[4..], [19, 5, index, 0], "{reason:?}");
        }
    }

    /// Each string of `TravelTo` is read at its bound and refused one byte above it, as a body
    /// that does not decode, naming the field; nor does such a message encode.
    #[test]
    fn a_travel_to_string_above_its_bound_does_not_decode_nor_encode() {
        let at = |n: usize| "h".repeat(n);
        let longest = travel_to(at(MAX_ADDRESS_LEN), at(MAX_SERVER_NAME_LEN), at(MAX_TICKET_LEN));
        assert_eq!(forge_body(&longest), round_trip(&longest)[4..], "the forger writes the wire");
        let cases = [
            ("address", MAX_ADDRESS_LEN),
            ("server_name", MAX_SERVER_NAME_LEN),
            ("ticket", MAX_TICKET_LEN),
        ];
        for (field, max) in cases {
            let ServerMessage::TravelTo(travel) = longest.clone() else { unreachable!() };
            let (mut address, mut server_name, mut ticket) =
                (travel.address, travel.server_name, travel.ticket);
            match field {
                "address" => address.push('h'),
                "server_name" => server_name.push('h'),
                _ => ticket.push('h'),
            }
            let above = travel_to(address, server_name, ticket);
            let why = format!("TravelTo.{field} is {} bytes long, the maximum is {max}", max + 1);
            let Err(FrameError::Encode(refused)) = encode_frame(&above, DEFAULT_MAX_FRAME_LEN)
            else {
                panic!("{field} above its bound encoded")
            };
            assert!(refused.contains(&why), "{refused}");
            let body = forge_body(&above);
            let err = decode_body::<ServerMessage>(&body).unwrap_err();
            assert!(matches!(err, FrameError::Malformed { .. }), "{err}");
            assert!(err.to_string().contains(&why), "{err}");
        }
    }

    /// The body of `message`, a `TravelTo` with no pin, transition id below 251 and `valid_ms`
    /// from 251 to 65,535, written by hand from docs/protocol.md 3: the codec refuses to encode
    /// a string above its bound.
    fn forge_body(message: &ServerMessage) -> Vec<u8> {
        let ServerMessage::TravelTo(travel) = message else { unreachable!() };
        let TravelTo { transition_id, node, address, server_name, ticket, valid_ms, .. } =
            &**travel;
        assert_eq!(travel.certificate_sha256, None);
        let varint = |v: usize| -> Vec<u8> {
            match v {
                0..=250 => vec![v as u8],
                _ => [vec![0xfb], (v as u16).to_le_bytes().to_vec()].concat(),
            }
        };
        let string = |s: &str| [varint(s.len()), s.as_bytes().to_vec()].concat();
        let mut body = vec![23, transition_id.0 as u8];
        body.extend(string(node.as_str()));
        body.extend(string(address));
        body.extend(string(server_name));
        body.push(0);
        body.extend(string(ticket));
        body.extend([0xfb]);
        body.extend((*valid_ms as u16).to_le_bytes());
        body
    }
}

//! The peer link between the servers of one fleet (docs/spec/travel.md V14): its messages and
//! the proof of the fleet key each side gives the other.
//!
//! A source dials a destination's game port with ALPN [`PEER_ALPN`]; framing and encoding are
//! the client protocol's (docs/protocol.md sections 2 and 3, [`crate::codec`]). The source
//! sends [`PeerMessage::Hello`] first and the destination answers [`PeerMessage::Welcome`];
//! each carries a [`PeerProof`], an HMAC-SHA256 under the fleet key of the side's role and the
//! connection's TLS exporter value ([`PEER_EXPORTER_LABEL`]). The exporter is unique to one TLS
//! connection and known only to its two ends, so a proof cannot be replayed on another
//! connection nor relayed by a man in the middle, and the role keeps one side's proof from
//! being reflected back as the other's. Whoever lacks the key cannot prove it; a side that
//! gets a wrong proof closes the link.

use hmac::Mac as _;
use serde::{Deserialize, Serialize};

use crate::ids::{NodeId, PlayerId, ServerId, TransitionId};
use crate::token::TokenKey;

/// The ALPN protocol of the peer link, beside the client protocol's on the same port.
pub const PEER_ALPN: &[u8] = b"gatehouse-fleet/1";

/// The peer link's version, in `Hello` and `Welcome`: a server refuses a peer of another.
/// Version 2 added [`PeerMessage::PlayerTaken`] (docs/spec/travel.md V17), which a version-1
/// peer cannot decode.
pub const PEER_PROTOCOL_VERSION: u32 = 2;

/// The label of the TLS exporter value the proofs sign (RFC 5705 / RFC 8446 7.5), 32 bytes of
/// it, with no context.
pub const PEER_EXPORTER_LABEL: &str = "EXPORTER-gatehouse-fleet-proof";

/// The length of the exporter value the proofs sign, bytes.
pub const PEER_EXPORTER_LEN: usize = 32;

/// The most players one `ReserveSeats` or `ReleaseSeats` names: a travel asks its seats in as
/// many messages as it needs.
pub const MAX_PLAYERS_PER_PEER_MESSAGE: usize = 1024;

/// A SHA-256 digest: a certificate's fingerprint or a proof. 32 bytes with no length prefix on
/// the wire.
pub type Sha256Digest = [u8; 32];

/// Which end of a link a proof speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRole {
    /// The server that dialled: the one players leave.
    Source,
    /// The server dialled: the one players reach.
    Destination,
}

impl PeerRole {
    /// What the role's proof signs before the exporter value.
    fn label(self) -> &'static [u8] {
        match self {
            PeerRole::Source => b"gatehouse-fleet/1 source",
            PeerRole::Destination => b"gatehouse-fleet/1 destination",
        }
    }
}

/// An HMAC-SHA256 under the fleet key of a role and a connection's TLS exporter value
/// (docs/spec/travel.md V14).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerProof(pub Sha256Digest);

impl std::fmt::Debug for PeerProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A proof is worth nothing off its connection, but it is noise in a log.
        f.write_str("PeerProof(..)")
    }
}

impl PeerProof {
    /// The proof `role` gives on the connection whose exporter value is `exporter`.
    pub fn new(key: &TokenKey, role: PeerRole, exporter: &[u8]) -> Self {
        let mut mac = key.mac();
        mac.update(role.label());
        mac.update(exporter);
        PeerProof(mac.finalize().into_bytes().into())
    }

    /// Whether this is the proof `role` gives on this connection under `key`, compared in
    /// constant time.
    pub fn holds(&self, key: &TokenKey, role: PeerRole, exporter: &[u8]) -> bool {
        let mut mac = key.mac();
        mac.update(role.label());
        mac.update(exporter);
        mac.verify_slice(&self.0).is_ok()
    }
}

/// Why a destination refuses a travel's seats (all or none, docs/spec/travel.md V12, V14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeatRefusal {
    /// Not room for every seat asked: players and seats held at its player cap.
    Full,
    /// It does not host the node.
    WrongNode,
    /// A world transition runs on it (V4).
    Busy,
    /// It is draining.
    Draining,
}

impl SeatRefusal {
    /// Its name, as in docs/spec/travel.md V14 (for logs).
    pub fn as_str(self) -> &'static str {
        match self {
            SeatRefusal::Full => "Full",
            SeatRefusal::WrongNode => "WrongNode",
            SeatRefusal::Busy => "Busy",
            SeatRefusal::Draining => "Draining",
        }
    }
}

/// Why a destination lost a seat it had granted (docs/spec/travel.md V7, V10, V16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeatLoss {
    /// Not confirmed, or not redeemed, within its hold; or its traveller disconnected and did
    /// not come back within it.
    HoldExpired,
    /// The handoff save could not be loaded at the seat's version (an older or a newer one
    /// stands, or the store failed).
    SaveUnavailable,
    /// The inbound transition placing it failed or was superseded, or the traveller was
    /// closed before it was placed.
    NotPlaced,
    /// The destination started draining.
    Draining,
}

impl SeatLoss {
    /// Its name, as in docs/spec/travel.md V14 (for logs).
    pub fn as_str(self) -> &'static str {
        match self {
            SeatLoss::HoldExpired => "HoldExpired",
            SeatLoss::SaveUnavailable => "SaveUnavailable",
            SeatLoss::NotPlaced => "NotPlaced",
            SeatLoss::Draining => "Draining",
        }
    }
}

/// One message of the peer link (docs/spec/travel.md V14). `trn` is always the source's
/// transition: the travel the seats are for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerMessage {
    /// Source → destination, first: who dials, and its proof.
    Hello {
        /// [`PEER_PROTOCOL_VERSION`].
        version: u32,
        /// The source's `fleet.server_id`.
        server: ServerId,
        /// [`PeerRole::Source`]'s proof.
        proof: PeerProof,
    },
    /// Destination → source, the answer to `Hello`: who answers, what its clients dial and
    /// pin, and its proof.
    Welcome {
        /// [`PEER_PROTOCOL_VERSION`].
        version: u32,
        /// The destination's `fleet.server_id`.
        server: ServerId,
        /// The name its certificate is checked against.
        server_name: String,
        /// Its certificate's SHA-256, for clients that pin it.
        certificate_sha256: Option<Sha256Digest>,
        /// [`PeerRole::Destination`]'s proof.
        proof: PeerProof,
    },
    /// Source → destination: a seat on `node` for each of `players`, all or none.
    ReserveSeats {
        /// The travel.
        trn: TransitionId,
        /// Where they go.
        node: NodeId,
        /// At most [`MAX_PLAYERS_PER_PEER_MESSAGE`].
        players: Vec<PlayerId>,
    },
    /// Destination → source: every seat asked is held, `hold_ms` from now unless confirmed.
    SeatsGranted {
        /// The travel.
        trn: TransitionId,
        /// How long each seat waits for its confirmation, milliseconds.
        hold_ms: u32,
    },
    /// Destination → source: no seat asked is held.
    SeatsRefused {
        /// The travel.
        trn: TransitionId,
        /// Why.
        reason: SeatRefusal,
    },
    /// Source → destination: the player's handoff save stands at `version`; its ticket names
    /// `generation`. Sent again with the next generation for a relaunch at the source.
    SeatConfirmed {
        /// The travel.
        trn: TransitionId,
        /// Whose seat.
        player: PlayerId,
        /// The handoff save's version `v`.
        version: u64,
        /// The ticket's generation.
        generation: u32,
    },
    /// Source → destination: these seats are no longer wanted (superseded, set aside,
    /// abandoned, left).
    ReleaseSeats {
        /// The travel.
        trn: TransitionId,
        /// At most [`MAX_PLAYERS_PER_PEER_MESSAGE`].
        players: Vec<PlayerId>,
    },
    /// Destination → source: the player is placed and its claim committed; release it.
    Placed {
        /// The travel.
        trn: TransitionId,
        /// Who.
        player: PlayerId,
    },
    /// Destination → source: the seat is gone; recall the player.
    SeatLost {
        /// The travel.
        trn: TransitionId,
        /// Whose seat.
        player: PlayerId,
        /// Why.
        reason: SeatLoss,
    },
    /// Either way: a session-token login at the sender took `player`, whose stored save the
    /// receiver held, and wrote it at `version` (docs/spec/travel.md V17). The receiver drops
    /// a copy it plays at an older version, unsaved.
    PlayerTaken {
        /// Who.
        player: PlayerId,
        /// The version the sender's take wrote.
        version: u64,
    },
}

impl PeerMessage {
    /// The message's name, as in docs/spec/travel.md V14 (for logs).
    pub fn name(&self) -> &'static str {
        match self {
            PeerMessage::Hello { .. } => "Hello",
            PeerMessage::Welcome { .. } => "Welcome",
            PeerMessage::ReserveSeats { .. } => "ReserveSeats",
            PeerMessage::SeatsGranted { .. } => "SeatsGranted",
            PeerMessage::SeatsRefused { .. } => "SeatsRefused",
            PeerMessage::SeatConfirmed { .. } => "SeatConfirmed",
            PeerMessage::ReleaseSeats { .. } => "ReleaseSeats",
            PeerMessage::Placed { .. } => "Placed",
            PeerMessage::SeatLost { .. } => "SeatLost",
            PeerMessage::PlayerTaken { .. } => "PlayerTaken",
        }
    }

    /// The role that sends this message once the link is up (the table of
    /// docs/spec/travel.md V14); none for the link's own `Hello` and `Welcome`, and for a
    /// message either end sends (`PlayerTaken`, V17: see [`PeerMessage::goes_from`]).
    pub fn sender(&self) -> Option<PeerRole> {
        match self {
            PeerMessage::ReserveSeats { .. }
            | PeerMessage::SeatConfirmed { .. }
            | PeerMessage::ReleaseSeats { .. } => Some(PeerRole::Source),
            PeerMessage::SeatsGranted { .. }
            | PeerMessage::SeatsRefused { .. }
            | PeerMessage::Placed { .. }
            | PeerMessage::SeatLost { .. } => Some(PeerRole::Destination),
            PeerMessage::Hello { .. }
            | PeerMessage::Welcome { .. }
            | PeerMessage::PlayerTaken { .. } => None,
        }
    }

    /// Whether the end of a link in `role` may send this message once the link is up
    /// (docs/spec/travel.md V14's "way", V17): its [`PeerMessage::sender`], or either end for
    /// `PlayerTaken`; never the link's own `Hello` and `Welcome`.
    pub fn goes_from(&self, role: PeerRole) -> bool {
        match self {
            PeerMessage::PlayerTaken { .. } => true,
            other => other.sender() == Some(role),
        }
    }

    /// Whether a list this message carries is above [`MAX_PLAYERS_PER_PEER_MESSAGE`]: such a
    /// message is refused, and the link closed.
    pub fn is_oversized(&self) -> bool {
        match self {
            PeerMessage::ReserveSeats { players, .. }
            | PeerMessage::ReleaseSeats { players, .. } => {
                players.len() > MAX_PLAYERS_PER_PEER_MESSAGE
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_body, encode_frame};

    fn key(text: &str) -> TokenKey {
        TokenKey::new(text.as_bytes().to_vec())
    }

    #[test]
    fn a_peer_without_the_fleet_key_is_refused_both_ways() {
        let fleet = key("the-fleet-key-of-thirty-two-bytes!!");
        let stranger = key("another-key-also-thirty-two-bytes!!");
        let exporter = [7u8; PEER_EXPORTER_LEN];
        for role in [PeerRole::Source, PeerRole::Destination] {
            assert!(PeerProof::new(&fleet, role, &exporter).holds(&fleet, role, &exporter));
            let forged = PeerProof::new(&stranger, role, &exporter);
            assert!(!forged.holds(&fleet, role, &exporter), "{role:?} without the key");
        }
    }

    #[test]
    fn a_proof_holds_only_on_its_own_connection_and_for_its_own_role() {
        let fleet = key("the-fleet-key-of-thirty-two-bytes!!");
        let here = [1u8; PEER_EXPORTER_LEN];
        let elsewhere = [2u8; PEER_EXPORTER_LEN];
        let source = PeerProof::new(&fleet, PeerRole::Source, &here);
        assert!(!source.holds(&fleet, PeerRole::Source, &elsewhere), "replayed on another link");
        assert!(!source.holds(&fleet, PeerRole::Destination, &here), "reflected back");
    }

    #[test]
    fn every_peer_message_round_trips_through_the_codec() {
        let trn = TransitionId(7);
        let player = PlayerId::new("p-1").unwrap();
        let proof = PeerProof([9; 32]);
        let messages = [
            PeerMessage::Hello { version: 1, server: ServerId::new("hub-1").unwrap(), proof },
            PeerMessage::Welcome {
                version: 1,
                server: ServerId::new("crypt-1").unwrap(),
                server_name: "crypt-1.example".into(),
                certificate_sha256: Some([3; 32]),
                proof,
            },
            PeerMessage::ReserveSeats {
                trn,
                node: NodeId::new("crypt").unwrap(),
                players: vec![player.clone()],
            },
            PeerMessage::SeatsGranted { trn, hold_ms: 10_000 },
            PeerMessage::SeatsRefused { trn, reason: SeatRefusal::Busy },
            PeerMessage::SeatConfirmed { trn, player: player.clone(), version: 12, generation: 2 },
            PeerMessage::ReleaseSeats { trn, players: vec![player.clone()] },
            PeerMessage::Placed { trn, player: player.clone() },
            PeerMessage::SeatLost { trn, player: player.clone(), reason: SeatLoss::HoldExpired },
            PeerMessage::PlayerTaken { player, version: 13 },
        ];
        for message in messages {
            let frame = encode_frame(&message, 64 * 1024).unwrap();
            let back: PeerMessage = decode_body(&frame[4..]).unwrap();
            assert_eq!(back, message);
        }
    }

    #[test]
    fn a_proof_shows_no_bytes_in_a_log() {
        assert_eq!(format!("{:?}", PeerProof([0xab; 32])), "PeerProof(..)");
    }

    #[test]
    fn the_names_in_logs_are_the_documents() {
        for reason in
            [SeatRefusal::Full, SeatRefusal::WrongNode, SeatRefusal::Busy, SeatRefusal::Draining]
        {
            assert_eq!(reason.as_str(), format!("{reason:?}"));
        }
        for reason in [
            SeatLoss::HoldExpired,
            SeatLoss::SaveUnavailable,
            SeatLoss::NotPlaced,
            SeatLoss::Draining,
        ] {
            assert_eq!(reason.as_str(), format!("{reason:?}"));
        }
        let trn = TransitionId(1);
        let player = PlayerId::new("p").unwrap();
        let server = ServerId::new("s").unwrap();
        let proof = PeerProof([0; 32]);
        let messages = [
            PeerMessage::Hello { version: 1, server: server.clone(), proof },
            PeerMessage::Welcome {
                version: 1,
                server,
                server_name: String::new(),
                certificate_sha256: None,
                proof,
            },
            PeerMessage::ReserveSeats { trn, node: NodeId::new("n").unwrap(), players: vec![] },
            PeerMessage::SeatsGranted { trn, hold_ms: 1 },
            PeerMessage::SeatsRefused { trn, reason: SeatRefusal::Full },
            PeerMessage::SeatConfirmed { trn, player: player.clone(), version: 1, generation: 1 },
            PeerMessage::ReleaseSeats { trn, players: vec![] },
            PeerMessage::Placed { trn, player: player.clone() },
            PeerMessage::SeatLost { trn, player: player.clone(), reason: SeatLoss::NotPlaced },
            PeerMessage::PlayerTaken { player, version: 2 },
        ];
        for message in messages {
            let debug = format!("{message:?}");
            assert!(debug.starts_with(&format!("{} {{", message.name())), "{debug}");
        }
    }

    /// `PlayerTaken` goes either way (docs/spec/travel.md V17): the server a login took a
    /// player from may be either end of the link; every other message keeps its one way.
    #[test]
    fn a_taken_player_message_goes_either_way_and_the_others_one_way() {
        let player = PlayerId::new("p").unwrap();
        let taken = PeerMessage::PlayerTaken { player: player.clone(), version: 3 };
        assert!(taken.goes_from(PeerRole::Source) && taken.goes_from(PeerRole::Destination));
        let placed = PeerMessage::Placed { trn: TransitionId(1), player };
        assert!(placed.goes_from(PeerRole::Destination) && !placed.goes_from(PeerRole::Source));
        let hello = PeerMessage::Hello {
            version: PEER_PROTOCOL_VERSION,
            server: ServerId::new("s").unwrap(),
            proof: PeerProof([0; 32]),
        };
        assert!(!hello.goes_from(PeerRole::Source) && !hello.goes_from(PeerRole::Destination));
    }

    #[test]
    fn a_seat_list_above_its_bound_is_oversized() {
        let trn = TransitionId(1);
        let players = |n: usize| (0..n).map(|i| PlayerId::new(format!("p-{i}")).unwrap()).collect();
        let at = PeerMessage::ReserveSeats {
            trn,
            node: NodeId::new("n").unwrap(),
            players: players(MAX_PLAYERS_PER_PEER_MESSAGE),
        };
        assert!(!at.is_oversized());
        let above =
            PeerMessage::ReleaseSeats { trn, players: players(MAX_PLAYERS_PER_PEER_MESSAGE + 1) };
        assert!(above.is_oversized());
    }
}

//! What a peer link checks of what it hears (docs/spec/travel.md V14): pure functions of the
//! fleet key, the connection's TLS exporter value and the message, the same at both ends. The
//! link's two halves (`dial.rs`, `mod.rs`) call them and close the link on a [`Refusal`].

use std::fmt;

use gatehouse_protocol::fleet::{
    MAX_PLAYERS_PER_PEER_MESSAGE, PEER_PROTOCOL_VERSION, PeerMessage, PeerRole, Sha256Digest,
};
use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{CloseCode, ServerId};

/// Why a link is refused or closed: its log line's reason, and its close code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The link did not begin with the message it begins with (`Hello`, then `Welcome`).
    NotOpening {
        /// The message expected.
        expected: &'static str,
        /// The one that came.
        got: &'static str,
    },
    /// Another version of the peer link.
    Version {
        /// The version the peer speaks.
        theirs: u32,
    },
    /// The proof does not hold under the fleet key, for this connection and the peer's role:
    /// a peer without the key, a proof replayed from another connection, or reflected back.
    Proof {
        /// The server the peer says it is (unproven).
        claimed: ServerId,
    },
    /// The server that answered is not the one dialled.
    OtherServer {
        /// The server the directory named.
        dialled: ServerId,
        /// The server that answered (proven).
        answered: ServerId,
    },
    /// The `Welcome` names another certificate than the one its handshake presented.
    Certificate,
    /// A list above [`MAX_PLAYERS_PER_PEER_MESSAGE`].
    Oversized {
        /// The message.
        message: &'static str,
        /// Its list's length.
        players: usize,
    },
    /// A message that does not go this way, or the link's `Hello` or `Welcome` again.
    WrongWay {
        /// The message.
        message: &'static str,
    },
}

impl Refusal {
    /// The close code the link is closed with.
    pub(super) fn code(&self) -> CloseCode {
        match self {
            Refusal::Version { .. }
            | Refusal::Proof { .. }
            | Refusal::OtherServer { .. }
            | Refusal::Certificate => CloseCode::Rejected,
            Refusal::NotOpening { .. } | Refusal::Oversized { .. } | Refusal::WrongWay { .. } => {
                CloseCode::ProtocolViolation
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotOpening { expected, got } => {
                write!(f, "the link begins with {expected}, not {got}")
            }
            Refusal::Version { theirs } => write!(
                f,
                "peer link version {theirs} is not supported; this server speaks \
                 {PEER_PROTOCOL_VERSION}"
            ),
            Refusal::Proof { claimed } => write!(
                f,
                "the proof of {claimed} (its own word) does not hold: it does not hold the fleet \
                 key (fleet.ticket_key), or the proof is another connection's or the other side's"
            ),
            Refusal::OtherServer { dialled, answered } => write!(
                f,
                "the server dialled as {dialled} answered as {answered} (fleet.server_id)"
            ),
            Refusal::Certificate => f.write_str(
                "the Welcome names another certificate than the one the handshake presented",
            ),
            Refusal::Oversized { message, players } => {
                write!(f, "{message} names {players} players, above {MAX_PLAYERS_PER_PEER_MESSAGE}")
            }
            Refusal::WrongWay { message } => {
                write!(f, "{message} does not go this way on a peer link")
            }
        }
    }
}

/// The source's first message, checked by the destination: a `Hello` of this version whose
/// source proof holds on the connection whose exporter value is `exporter`. The server it
/// names, proven.
///
/// # Errors
/// [`Refusal::NotOpening`], [`Refusal::Version`], [`Refusal::Proof`], in that order.
pub(super) fn check_hello(
    key: &TokenKey,
    exporter: &[u8],
    first: PeerMessage,
) -> Result<ServerId, Refusal> {
    let PeerMessage::Hello { version, server, proof } = first else {
        return Err(Refusal::NotOpening { expected: "Hello", got: first.name() });
    };
    if version != PEER_PROTOCOL_VERSION {
        return Err(Refusal::Version { theirs: version });
    }
    if !proof.holds(key, PeerRole::Source, exporter) {
        return Err(Refusal::Proof { claimed: server });
    }
    Ok(server)
}

/// What a checked `Welcome` tells the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Welcomed {
    /// The name its clients dial (TLS SNI).
    pub(super) server_name: String,
    /// Its certificate's SHA-256, for clients that pin it.
    pub(super) certificate_sha256: Option<Sha256Digest>,
}

/// The destination's answer, checked by the source: a `Welcome` of this version whose
/// destination proof holds on this connection, from the server `dialled`, naming (if it names
/// one) the certificate the handshake presented (`presented`, its SHA-256).
///
/// # Errors
/// [`Refusal::NotOpening`], [`Refusal::Version`], [`Refusal::Proof`],
/// [`Refusal::OtherServer`], [`Refusal::Certificate`], in that order.
pub(super) fn check_welcome(
    key: &TokenKey,
    exporter: &[u8],
    dialled: &ServerId,
    presented: Option<Sha256Digest>,
    answer: PeerMessage,
) -> Result<Welcomed, Refusal> {
    let PeerMessage::Welcome { version, server, server_name, certificate_sha256, proof } = answer
    else {
        return Err(Refusal::NotOpening { expected: "Welcome", got: answer.name() });
    };
    if version != PEER_PROTOCOL_VERSION {
        return Err(Refusal::Version { theirs: version });
    }
    if !proof.holds(key, PeerRole::Destination, exporter) {
        return Err(Refusal::Proof { claimed: server });
    }
    if server != *dialled {
        return Err(Refusal::OtherServer { dialled: dialled.clone(), answered: server });
    }
    if certificate_sha256.is_some() && certificate_sha256 != presented {
        return Err(Refusal::Certificate);
    }
    Ok(Welcomed { server_name, certificate_sha256 })
}

/// A message carried after the link's `Hello` and `Welcome`, checked by the side it reaches:
/// `from` is the sender's role. It goes that way (the table of docs/spec/travel.md V14;
/// `PlayerTaken` either way, V17) and its
/// lists are within [`MAX_PLAYERS_PER_PEER_MESSAGE`].
///
/// # Errors
/// [`Refusal::WrongWay`], then [`Refusal::Oversized`].
pub(super) fn check_carried(from: PeerRole, message: &PeerMessage) -> Result<(), Refusal> {
    if !message.goes_from(from) {
        return Err(Refusal::WrongWay { message: message.name() });
    }
    if message.is_oversized() {
        let players = match message {
            PeerMessage::ReserveSeats { players, .. }
            | PeerMessage::ReleaseSeats { players, .. } => players.len(),
            _ => 0,
        };
        return Err(Refusal::Oversized { message: message.name(), players });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::fleet::{PEER_EXPORTER_LEN, PeerProof, SeatRefusal};
    use gatehouse_protocol::{NodeId, PlayerId, TransitionId};

    use super::*;

    const EXPORTER: [u8; PEER_EXPORTER_LEN] = [5; PEER_EXPORTER_LEN];

    fn key() -> TokenKey {
        TokenKey::new("the-fleet-key-of-thirty-two-bytes!!")
    }

    fn server(name: &str) -> ServerId {
        ServerId::new(name).unwrap()
    }

    fn hello(version: u32, role: PeerRole, key: &TokenKey) -> PeerMessage {
        let proof = PeerProof::new(key, role, &EXPORTER);
        PeerMessage::Hello { version, server: server("hub-1"), proof }
    }

    fn welcome(certificate_sha256: Option<[u8; 32]>, role: PeerRole) -> PeerMessage {
        PeerMessage::Welcome {
            version: PEER_PROTOCOL_VERSION,
            server: server("crypt-1"),
            server_name: "crypt-1.example".into(),
            certificate_sha256,
            proof: PeerProof::new(&key(), role, &EXPORTER),
        }
    }

    fn players(n: usize) -> Vec<PlayerId> {
        (0..n).map(|i| PlayerId::new(format!("p-{i}")).unwrap()).collect()
    }

    /// V14: the source's Hello is good on its own connection, for its own role, under the
    /// fleet key, at this version; anything else is refused, each with its reason and code.
    #[test]
    fn a_hello_holds_only_with_the_key_the_connection_the_role_and_the_version() {
        let good = hello(PEER_PROTOCOL_VERSION, PeerRole::Source, &key());
        assert_eq!(check_hello(&key(), &EXPORTER, good.clone()), Ok(server("hub-1")));
        let other_link = check_hello(&key(), &[6; PEER_EXPORTER_LEN], good).unwrap_err();
        assert!(matches!(other_link, Refusal::Proof { .. }), "{other_link}");
        let stranger = TokenKey::new("another-key-also-thirty-two-bytes!!");
        let forged = hello(PEER_PROTOCOL_VERSION, PeerRole::Source, &stranger);
        let refused = check_hello(&key(), &EXPORTER, forged).unwrap_err();
        assert_eq!(refused.code(), CloseCode::Rejected);
        assert!(refused.to_string().contains("proof of hub-1 "), "names the peer: {refused}");
        let reflected = hello(PEER_PROTOCOL_VERSION, PeerRole::Destination, &key());
        assert!(matches!(check_hello(&key(), &EXPORTER, reflected), Err(Refusal::Proof { .. })));
        let later = hello(PEER_PROTOCOL_VERSION + 1, PeerRole::Source, &key());
        let refused = check_hello(&key(), &EXPORTER, later).unwrap_err();
        assert_eq!(refused, Refusal::Version { theirs: PEER_PROTOCOL_VERSION + 1 });
        assert!(refused.to_string().contains("version 3 is not supported"), "{refused}");
        let first = PeerMessage::Placed { trn: TransitionId(1), player: players(1).remove(0) };
        let refused = check_hello(&key(), &EXPORTER, first).unwrap_err();
        assert_eq!(refused.code(), CloseCode::ProtocolViolation);
        assert_eq!(refused.to_string(), "the link begins with Hello, not Placed");
    }

    /// V14: the destination's Welcome is good from the server dialled, for its own role, naming
    /// the certificate its handshake presented or none.
    #[test]
    fn a_welcome_holds_only_from_the_server_dialled_for_its_own_role_and_certificate() {
        let check = |dialled: &str, presented, answer| {
            check_welcome(&key(), &EXPORTER, &server(dialled), presented, answer)
        };
        let welcomed =
            check("crypt-1", Some([1; 32]), welcome(Some([1; 32]), PeerRole::Destination));
        assert_eq!(welcomed.unwrap().certificate_sha256, Some([1; 32]));
        let unnamed = check("crypt-1", Some([1; 32]), welcome(None, PeerRole::Destination));
        assert_eq!(unnamed.unwrap().server_name, "crypt-1.example");
        let reflected = check("crypt-1", None, welcome(None, PeerRole::Source));
        assert!(matches!(reflected, Err(Refusal::Proof { .. })));
        let other = check("crypt-2", None, welcome(None, PeerRole::Destination)).unwrap_err();
        assert_eq!(
            other.to_string(),
            "the server dialled as crypt-2 answered as crypt-1 (fleet.server_id)"
        );
        let mismatch =
            check("crypt-1", Some([1; 32]), welcome(Some([2; 32]), PeerRole::Destination));
        assert_eq!(mismatch, Err(Refusal::Certificate));
        let hello = hello(PEER_PROTOCOL_VERSION, PeerRole::Source, &key());
        assert!(matches!(check("crypt-1", None, hello), Err(Refusal::NotOpening { .. })));
    }

    /// V14's table: each message goes one way; the link's Hello and Welcome go once; a list
    /// above 1,024 players closes the link.
    #[test]
    fn a_message_goes_its_own_way_within_its_list_bound() {
        let trn = TransitionId(3);
        let node = NodeId::new("crypt").unwrap();
        let reserve =
            PeerMessage::ReserveSeats { trn, node, players: players(MAX_PLAYERS_PER_PEER_MESSAGE) };
        assert_eq!(check_carried(PeerRole::Source, &reserve), Ok(()));
        assert!(matches!(
            check_carried(PeerRole::Destination, &reserve),
            Err(Refusal::WrongWay { message: "ReserveSeats" })
        ));
        let refused = PeerMessage::SeatsRefused { trn, reason: SeatRefusal::Full };
        assert_eq!(check_carried(PeerRole::Destination, &refused), Ok(()));
        assert!(check_carried(PeerRole::Source, &refused).is_err());
        let again = hello(PEER_PROTOCOL_VERSION, PeerRole::Source, &key());
        assert!(check_carried(PeerRole::Source, &again).is_err(), "a second Hello");
        // V17: whichever end a login took the player from.
        let taken = PeerMessage::PlayerTaken { player: players(1).remove(0), version: 4 };
        assert_eq!(check_carried(PeerRole::Source, &taken), Ok(()));
        assert_eq!(check_carried(PeerRole::Destination, &taken), Ok(()));
        let release =
            PeerMessage::ReleaseSeats { trn, players: players(MAX_PLAYERS_PER_PEER_MESSAGE + 1) };
        let over = check_carried(PeerRole::Source, &release).unwrap_err();
        assert_eq!(over, Refusal::Oversized { message: "ReleaseSeats", players: 1025 });
        assert_eq!(over.code(), CloseCode::ProtocolViolation);
        assert_eq!(over.to_string(), "ReleaseSeats names 1025 players, above 1024");
    }
}

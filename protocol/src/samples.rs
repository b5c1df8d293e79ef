//! One sample of every message, for round-trip tests, benchmarks and fuzz seeds.

use gatehouse_tags::catalog;

use crate::CloseCode;
use crate::ids::{CharacterDef, JoinId, LevelName, NodeId, PawnId, PlayerId, TeamId, TransitionId};
use crate::messages::{
    CertificateSha256, ClientMessage, ErrorCode, PawnView, PlayerStateView, RejectReason,
    ReplicatedChange, ServerMessage, TransitionFailure,
};
use crate::runs::PawnIdRuns;
use crate::snapshot::{SnapshotBuilder, SnapshotEntry, WorldSnapshot};

fn name<T: TryFrom<String>>(s: &str) -> T
where
    T::Error: std::fmt::Debug,
{
    // The samples below are valid names; a failure here is a bug in this file.
    #[allow(clippy::expect_used)]
    T::try_from(s.to_owned()).expect("sample names are valid")
}

/// One value of every [`ClientMessage`] variant.
pub fn client_messages() -> Vec<ClientMessage> {
    vec![
        ClientMessage::Hello { protocol_version: crate::PROTOCOL_VERSION, token: "a.b.c".into() },
        ClientMessage::TransitionReady { transition_id: TransitionId(7) },
        ClientMessage::PossessionAcknowledged { pawn_id: PawnId(42) },
        ClientMessage::RestartRequest,
        ClientMessage::Leave,
        ClientMessage::JoinReady { join_id: JoinId(4) },
        ClientMessage::TransitionShown { transition_id: TransitionId(7) },
        ClientMessage::TravelAbandoned { transition_id: TransitionId(7) },
    ]
}

/// One value of every [`ServerMessage`] variant (every `RejectReason`, `ErrorCode` and
/// `TransitionFailure` too, and a `Closing` for each close code of version 11).
pub fn server_messages() -> Vec<ServerMessage> {
    let player: PlayerId = name("sim-0001");
    let node: NodeId = name("harbor");
    let mut out = vec![
        ServerMessage::Welcome {
            player_id: player.clone(),
            current_node: Some(node.clone()),
            max_frame_len: 65_536,
        },
        ServerMessage::Welcome {
            player_id: player.clone(),
            current_node: None,
            max_frame_len: 8_192,
        },
        ServerMessage::FreezeCharacters { transition_id: TransitionId(3) },
        ServerMessage::ShowTransition {
            transition_id: TransitionId(3),
            target_node: node.clone(),
            levels: vec![name::<LevelName>("harbor_docks"), name("harbor_town")],
            rooms: Vec::new(),
        },
        ServerMessage::ShowTransition {
            transition_id: TransitionId(4),
            target_node: name("crypt"),
            levels: vec![name::<LevelName>("crypt_gate")],
            rooms: vec![name::<LevelName>("crypt_hall"), name("crypt_vault")],
        },
        ServerMessage::EndTransition { transition_id: TransitionId(3) },
        ServerMessage::PlayerStateUpdated(PlayerStateView {
            player_id: player.clone(),
            team: Some(TeamId(2)),
            character_def: Some(name::<CharacterDef>("Vanguard")),
        }),
        ServerMessage::PlayerLeft { player_id: player.clone() },
        ServerMessage::PawnSpawned(PawnView {
            pawn_id: PawnId(9),
            owner: player.clone(),
            character_def: name("Vanguard"),
            node: node.clone(),
            alive: true,
        }),
        ServerMessage::PawnsTeleported {
            node,
            pawn_ids: PawnIdRuns::from_ids([PawnId(9), PawnId(12)]),
        },
        ServerMessage::PawnDied { pawn_id: PawnId(9) },
        ServerMessage::PawnDestroyed { pawn_id: PawnId(9) },
        ServerMessage::Possessed { pawn_id: PawnId(9) },
        ServerMessage::Unpossessed { pawn_id: PawnId(9) },
        ServerMessage::AbilityTagsChanged {
            player_id: player.clone(),
            tags: vec![catalog::STATE_DEAD, catalog::EFFECT_DAMAGE_OVER_TIME_POISON],
        },
        ServerMessage::HealthChanged { player_id: player, health: 55 },
        ServerMessage::KitsGranted {
            kits: vec![catalog::KIT_STARTUP_MOVEMENT, catalog::KIT_COMPOSED_VANGUARD],
        },
        ServerMessage::ShowJoin {
            join_id: JoinId(4),
            node: name("crypt"),
            levels: vec![name::<LevelName>("crypt_gate")],
            rooms: vec![name::<LevelName>("crypt_hall")],
        },
        ServerMessage::EndJoin { join_id: JoinId(4) },
        ServerMessage::TransitionFailed {
            transition_id: TransitionId(3),
            reason: TransitionFailure::TimedOut,
            detail: "stuck in Completing".into(),
        },
        ServerMessage::Closing { code: 6, reason: "client ready timeout".into() },
        ServerMessage::WorldSnapshot(Box::new(world_snapshot())),
        ServerMessage::Replicated { changes: replicated_changes() },
        travel_to(),
        ServerMessage::TravelTo(Box::new(crate::messages::TravelTo {
            transition_id: TransitionId(8),
            node: name("crypt"),
            address: "[::1]:7778".into(),
            server_name: "::1".into(),
            certificate_sha256: None,
            ticket: "a.b.c".into(),
            valid_ms: 10_000,
        })),
    ];
    for reason in [TransitionFailure::DestinationUnavailable, TransitionFailure::DestinationLost] {
        out.push(ServerMessage::TransitionFailed {
            transition_id: TransitionId(5),
            reason,
            detail: format!("{reason:?}"),
        });
    }
    for code in [CloseCode::Travelled, CloseCode::Recalled] {
        out.push(ServerMessage::Closing { code: code.code(), reason: code.reason().into() });
    }
    for reason in [
        RejectReason::UnsupportedVersion,
        RejectReason::MissingToken,
        RejectReason::MalformedToken,
        RejectReason::BadSignature,
        RejectReason::Expired,
        RejectReason::ServerFull,
        RejectReason::ShuttingDown,
        RejectReason::HelloExpected,
        RejectReason::TokenLifetime,
        RejectReason::TooManyLogins,
        RejectReason::TicketUsed,
        RejectReason::TicketStale,
    ] {
        out.push(ServerMessage::Rejected { reason, detail: format!("{reason:?}") });
    }
    for code in [
        ErrorCode::UnexpectedMessage,
        ErrorCode::UnknownTransition,
        ErrorCode::UnknownPawn,
        ErrorCode::RestartRejected,
        ErrorCode::RateLimited,
        ErrorCode::UnknownJoin,
    ] {
        out.push(ServerMessage::Error { code, detail: format!("{code:?}") });
    }
    out
}

/// A `TravelTo` of transition 7 to `crypt` on `crypt-1.example:7777`, its certificate pinned
/// (32 bytes of `ab`), its ticket `a.b.c`, held 10 s: the example of docs/protocol.md 5.
pub fn travel_to() -> ServerMessage {
    ServerMessage::TravelTo(Box::new(crate::messages::TravelTo {
        transition_id: TransitionId(7),
        node: name("crypt"),
        address: "crypt-1.example:7777".into(),
        server_name: "crypt-1.example".into(),
        certificate_sha256: Some(CertificateSha256([0xab; 32])),
        ticket: "a.b.c".into(),
        valid_ms: 10_000,
    }))
}

/// A snapshot of two players: `sim-0001` (team 2, a Vanguard, dead in its pawn 9 on `harbor`,
/// health 0) and `sim-0002` (team 1, its preset not resolved yet, no pawn).
pub fn world_snapshot() -> WorldSnapshot {
    let first = PlayerStateView {
        player_id: name("sim-0001"),
        team: Some(TeamId(2)),
        character_def: Some(name("Vanguard")),
    };
    let pawn = PawnView {
        pawn_id: PawnId(9),
        owner: first.player_id.clone(),
        character_def: name("Vanguard"),
        node: name("harbor"),
        alive: false,
    };
    let second =
        PlayerStateView { player_id: name("sim-0002"), team: Some(TeamId(1)), character_def: None };
    let mut builder = SnapshotBuilder::new(crate::codec::DEFAULT_MAX_FRAME_LEN);
    let pawns = [pawn];
    builder.add(SnapshotEntry {
        player: &first,
        tags: &[catalog::STATE_DEAD],
        health: Some(0),
        pawns: &pawns,
    });
    builder.add(SnapshotEntry { player: &second, tags: &[], health: None, pawns: &[] });
    // Two players fit one message.
    builder.finish().remove(0)
}

/// One change of every [`ReplicatedChange`] variant, in variant order.
pub fn replicated_changes() -> Vec<ReplicatedChange> {
    let player: PlayerId = name("sim-0002");
    vec![
        ReplicatedChange::PlayerStateUpdated(PlayerStateView {
            player_id: player.clone(),
            team: Some(TeamId(1)),
            character_def: Some(name("Vanguard")),
        }),
        ReplicatedChange::PlayerLeft { player_id: name("sim-0003") },
        ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(10),
            owner: player.clone(),
            character_def: name("Vanguard"),
            node: name("harbor"),
            alive: true,
        }),
        ReplicatedChange::PawnDestroyed { pawn_id: PawnId(8) },
        ReplicatedChange::AbilityTagsChanged {
            player_id: player.clone(),
            tags: vec![catalog::EFFECT_DAMAGE_OVER_TIME_POISON],
        },
        ReplicatedChange::HealthChanged { player_id: player, health: 90 },
        ReplicatedChange::PawnDied { pawn_id: PawnId(10) },
        ReplicatedChange::PawnsTeleported {
            node: name("forest"),
            pawn_ids: PawnIdRuns::from_ids([PawnId(10)]),
        },
    ]
}

/// The wire index of a client message, matching every variant: adding a variant without a
/// sample breaks the build here, and the round-trip tests check every index has a sample.
pub fn client_variant(message: &ClientMessage) -> usize {
    match message {
        ClientMessage::Hello { .. } => 0,
        ClientMessage::TransitionReady { .. } => 1,
        ClientMessage::PossessionAcknowledged { .. } => 2,
        ClientMessage::RestartRequest => 3,
        ClientMessage::Leave => 4,
        ClientMessage::JoinReady { .. } => 5,
        ClientMessage::TransitionShown { .. } => 6,
        ClientMessage::TravelAbandoned { .. } => 7,
    }
}

/// Number of [`ClientMessage`] variants.
pub const CLIENT_VARIANTS: usize = 8;

/// The wire index of a server message, matching every variant (see [`client_variant`]).
pub fn server_variant(message: &ServerMessage) -> usize {
    match message {
        ServerMessage::Welcome { .. } => 0,
        ServerMessage::Rejected { .. } => 1,
        ServerMessage::FreezeCharacters { .. } => 2,
        ServerMessage::ShowTransition { .. } => 3,
        ServerMessage::EndTransition { .. } => 4,
        ServerMessage::PlayerStateUpdated(_) => 5,
        ServerMessage::PlayerLeft { .. } => 6,
        ServerMessage::PawnSpawned(_) => 7,
        ServerMessage::PawnsTeleported { .. } => 8,
        ServerMessage::PawnDied { .. } => 9,
        ServerMessage::PawnDestroyed { .. } => 10,
        ServerMessage::Possessed { .. } => 11,
        ServerMessage::Unpossessed { .. } => 12,
        ServerMessage::AbilityTagsChanged { .. } => 13,
        ServerMessage::HealthChanged { .. } => 14,
        ServerMessage::KitsGranted { .. } => 15,
        ServerMessage::Error { .. } => 16,
        ServerMessage::ShowJoin { .. } => 17,
        ServerMessage::EndJoin { .. } => 18,
        ServerMessage::TransitionFailed { .. } => 19,
        ServerMessage::Closing { .. } => 20,
        ServerMessage::WorldSnapshot(_) => 21,
        ServerMessage::Replicated { .. } => 22,
        ServerMessage::TravelTo { .. } => 23,
    }
}

/// Number of [`ServerMessage`] variants.
pub const SERVER_VARIANTS: usize = 24;

//! The annotated byte examples of `docs/protocol.md` (each a `text` block after a
//! `<!-- example: NAME -->` line) are exactly what the codec makes: the hex at the start of each
//! line, up to the first gap of two spaces or more, read together, is the frame of the message
//! the example names.

// Test code: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use gatehouse_protocol::codec::{DEFAULT_MAX_FRAME_LEN, ReplicationBatch};
use gatehouse_protocol::samples::{travel_to, world_snapshot};
use gatehouse_protocol::{
    CharacterDef, NodeId, PawnId, PawnView, PlayerId, PlayerStateView, ReplicatedChange,
    ServerMessage, TeamId, encode_frame,
};

fn protocol_md() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.md");
    std::fs::read_to_string(path).unwrap()
}

/// The bytes of the example named `name`: its block's lines, each cut at its first run of two
/// or more spaces after the hex (the annotation), spaces removed, read as hex.
fn example(doc: &str, name: &str) -> Vec<u8> {
    let marker = format!("<!-- example: {name} -->");
    let after = doc.split_once(&marker).unwrap_or_else(|| panic!("no example {name}")).1;
    let block = after.split_once("```text\n").unwrap().1.split_once("```").unwrap().0;
    let hex: String = block
        .lines()
        .map(|line| {
            let line = line.trim_start();
            let end = line.find("   ").unwrap_or(line.len());
            line[..end].replace(' ', "")
        })
        .collect();
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit()), "{name}: not hex: {hex}");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

fn player(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap()
}

#[test]
fn the_world_snapshot_example_is_what_the_codec_makes() {
    let message = ServerMessage::WorldSnapshot(Box::new(world_snapshot()));
    let frame = encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap();
    assert_eq!(example(&protocol_md(), "world_snapshot"), frame);
}

#[test]
fn the_replicated_example_is_what_the_codec_and_the_batch_make() {
    let vanguard = CharacterDef::new("Vanguard").unwrap();
    let changes = vec![
        ReplicatedChange::PlayerStateUpdated(PlayerStateView {
            player_id: player("sim-0004"),
            team: Some(TeamId(1)),
            character_def: Some(vanguard.clone()),
        }),
        ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(12),
            owner: player("sim-0004"),
            character_def: vanguard,
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        }),
        ReplicatedChange::HealthChanged { player_id: player("sim-0002"), health: 90 },
    ];
    let documented = example(&protocol_md(), "replicated");
    let message = ServerMessage::Replicated { changes: changes.clone() };
    assert_eq!(documented, encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap());
    let mut batch = ReplicationBatch::default();
    for change in &changes {
        batch.push(change).unwrap();
    }
    assert_eq!(documented, batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap().bytes);
}

#[test]
fn the_travel_to_example_is_what_the_codec_makes() {
    let frame = encode_frame(&travel_to(), DEFAULT_MAX_FRAME_LEN).unwrap();
    assert_eq!(example(&protocol_md(), "travel_to"), frame);
}

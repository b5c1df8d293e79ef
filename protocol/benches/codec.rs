//! Frame codec throughput: encode and decode one frame of each representative message.

#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN;
use gatehouse_protocol::{
    CharacterDef, FrameDecoder, NodeId, PawnId, PawnView, PlayerId, PlayerStateView, ServerMessage,
    SnapshotBuilder, SnapshotEntry, TeamId, encode_frame_into, samples,
};
use std::hint::black_box;

/// Decodes every frame of `stream`, as a client does; how many.
fn decode_all(stream: &[u8]) -> usize {
    let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    d.extend(black_box(stream));
    let mut n = 0;
    while let Ok(Some(m)) = d.next_message::<ServerMessage>() {
        black_box(m);
        n += 1;
    }
    n
}

fn codec(c: &mut Criterion) {
    let messages = samples::server_messages();
    let mut group = c.benchmark_group("codec");
    group.bench_function("encode_all_server_messages", |b| {
        let mut out = Vec::with_capacity(4096);
        b.iter(|| {
            out.clear();
            for m in &messages {
                encode_frame_into(black_box(m), DEFAULT_MAX_FRAME_LEN, &mut out).ok();
            }
            out.len()
        })
    });
    let mut stream = Vec::new();
    for m in &messages {
        encode_frame_into(m, DEFAULT_MAX_FRAME_LEN, &mut stream).ok();
    }
    group.bench_function("decode_all_server_messages", |b| b.iter(|| decode_all(&stream)));
    group.finish();
}

/// A newcomer's world at 4,000 players, each with one pawn: building the `WorldSnapshot`s and
/// encoding their frames (docs/protocol.md 4.5), and decoding them as a client does.
fn snapshot(c: &mut Criterion) {
    let players: Vec<PlayerStateView> = (0..4_000)
        .filter_map(|i| {
            Some(PlayerStateView {
                player_id: PlayerId::new(format!("sim-{i:04}")).ok()?,
                team: Some(TeamId(1 + (i % 2) as u8)),
                character_def: CharacterDef::new("Vanguard").ok(),
            })
        })
        .collect();
    let pawns: Vec<[PawnView; 1]> = players
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            Some([PawnView {
                pawn_id: PawnId(i as u64 + 1),
                owner: p.player_id.clone(),
                character_def: p.character_def.clone()?,
                node: NodeId::new("harbor").ok()?,
                alive: true,
            }])
        })
        .collect();
    let build = || {
        let mut builder = SnapshotBuilder::new(DEFAULT_MAX_FRAME_LEN);
        for (player, pawns) in players.iter().zip(&pawns) {
            builder.add(SnapshotEntry { player, tags: &[], health: None, pawns });
        }
        builder.finish()
    };
    let mut group = c.benchmark_group("snapshot");
    group.bench_function("build_and_encode_4000_players", |b| {
        let mut out = Vec::with_capacity(1 << 18);
        b.iter(|| {
            out.clear();
            for snapshot in build() {
                let message = ServerMessage::WorldSnapshot(Box::new(snapshot));
                encode_frame_into(&message, DEFAULT_MAX_FRAME_LEN, &mut out).ok();
            }
            out.len()
        })
    });
    let mut stream = Vec::new();
    for snapshot in build() {
        let message = ServerMessage::WorldSnapshot(Box::new(snapshot));
        encode_frame_into(&message, DEFAULT_MAX_FRAME_LEN, &mut stream).ok();
    }
    group.bench_function("decode_4000_players", |b| b.iter(|| decode_all(&stream)));
    group.finish();
}

criterion_group!(benches, codec, snapshot);
criterion_main!(benches);

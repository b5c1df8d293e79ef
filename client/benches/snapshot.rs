//! What a 4,000-player `WorldSnapshot` costs a client session (docs/protocol.md 4.5): the
//! snapshot messages of a world of 4,000 placed players (one pawn each), cut at the default
//! frame limit, decoded, expanded, and handled by a welcomed session whose events are drained,
//! as the swarm's thin clients do; and a `Replicated` batch of 4,000 changes (4.4), for
//! comparison. `session` gives every world event (`WorldEvents::All`), `session_own` only the
//! own player's (`WorldEvents::Own`, what the simulator's thin clients set).
//!
//! Two worlds: `plain` (no player holds tags, every health full: the load world) and `tagged`
//! (every player holds a tag and is hurt: the largest snapshot a world of that size makes). The
//! figures are per whole world (all its messages); criterion's element rate is per player.
//! After criterion's groups it prints every step's fastest of 60 interleaved rounds, the
//! figures to compare on a shared machine (each step sees the same load).
//!
//! Bounded run: `cargo bench -p gatehouse-client --bench snapshot -- --warm-up-time 1
//! --measurement-time 3`.

#![allow(missing_docs)]
#![allow(clippy::unwrap_used)] // benchmark set-up unwraps freely, as tests do

use std::hint::black_box;
use std::time::Instant;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use gatehouse_client::{Session, SessionConfig, WorldEvents};
use gatehouse_protocol::codec::{DEFAULT_MAX_FRAME_LEN, HARD_MAX_FRAME_LEN};
use gatehouse_protocol::{
    CharacterDef, FrameDecoder, NodeId, PawnId, PawnView, PlayerId, PlayerStateView,
    ReplicatedChange, ServerMessage, SnapshotBuilder, SnapshotEntry, TeamId, encode_frame_into,
};
use gatehouse_tags::catalog::EFFECT_DAMAGE_OVER_TIME_BURN;

/// Players in the world (the swarm's largest run).
const PLAYERS: usize = 4_000;

/// The world's snapshot messages, encoded back to back as a newcomer reads them.
fn world_frames(tagged: bool) -> Vec<u8> {
    let classes = [CharacterDef::new("Vanguard").unwrap(), CharacterDef::new("Ranger").unwrap()];
    let node = NodeId::new("harbor").unwrap();
    let mut builder = SnapshotBuilder::new(DEFAULT_MAX_FRAME_LEN);
    let tags = if tagged { vec![EFFECT_DAMAGE_OVER_TIME_BURN] } else { Vec::new() };
    for index in 0..PLAYERS {
        let player = PlayerStateView {
            player_id: PlayerId::new(format!("sim-{index:04}")).unwrap(),
            team: Some(TeamId((index % 2) as u8 + 1)),
            character_def: Some(classes[index % 2].clone()),
        };
        let pawns = [PawnView {
            pawn_id: PawnId(index as u64 + 1),
            owner: player.player_id.clone(),
            character_def: classes[index % 2].clone(),
            node: node.clone(),
            alive: true,
        }];
        let health = tagged.then_some(40);
        builder.add(SnapshotEntry { player: &player, tags: &tags, health, pawns: &pawns });
    }
    let mut frames = Vec::new();
    for snapshot in builder.finish() {
        let message = ServerMessage::WorldSnapshot(Box::new(snapshot));
        encode_frame_into(&message, DEFAULT_MAX_FRAME_LEN, &mut frames).unwrap();
    }
    frames
}

fn decode(frames: &[u8]) -> Vec<ServerMessage> {
    let mut decoder = FrameDecoder::new(HARD_MAX_FRAME_LEN);
    decoder.extend(frames);
    std::iter::from_fn(|| decoder.next_message::<ServerMessage>().unwrap()).collect()
}

/// A session welcomed as a player not in the world, giving `world_events`, its `Hello` and
/// `Welcome` drained.
fn welcomed(now: Instant, world_events: WorldEvents) -> Session {
    let config = SessionConfig { world_events, ..SessionConfig::new("a.b.c") };
    let mut session = Session::new(now, config);
    let player_id = PlayerId::new("newcomer").unwrap();
    let welcome = ServerMessage::Welcome { player_id, current_node: None, max_frame_len: 65_536 };
    session.handle(now, welcome);
    while session.poll_output().is_some() {}
    while session.poll_event().is_some() {}
    session
}

/// Handles every message and drains every event; returns how many events there were.
fn handle_all(session: &mut Session, now: Instant, messages: Vec<ServerMessage>) -> usize {
    let mut events = 0;
    for message in messages {
        session.handle(now, message);
        while let Some(event) = session.poll_event() {
            black_box(event);
            events += 1;
        }
    }
    events
}

/// A session handling `messages`: `session` giving every world event, `session_own` only the
/// own player's (`WorldEvents::Own`, what a thin client sets).
fn sessions(group: &mut BenchmarkGroup<'_, WallTime>, now: Instant, messages: &[ServerMessage]) {
    for (name, world_events) in [("session", WorldEvents::All), ("session_own", WorldEvents::Own)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (welcomed(now, world_events), messages.to_vec()),
                |(mut session, messages)| handle_all(&mut session, now, messages),
                BatchSize::SmallInput,
            )
        });
    }
}

fn snapshot(c: &mut Criterion) {
    let now = Instant::now();
    for (name, tagged) in [("plain", false), ("tagged", true)] {
        let frames = world_frames(tagged);
        let messages = decode(&frames);
        println!(
            "{name}: {PLAYERS} players in {} messages, {} bytes ({:.1} per player)",
            messages.len(),
            frames.len(),
            frames.len() as f64 / PLAYERS as f64
        );
        let mut group = c.benchmark_group(format!("snapshot_{name}"));
        group.throughput(Throughput::Elements(PLAYERS as u64));
        group.bench_function("decode", |b| b.iter(|| decode(black_box(&frames)).len()));
        group.bench_function("expand", |b| b.iter(|| expand(&messages)));
        sessions(&mut group, now, &messages);
        group.finish();
    }
}

/// One interval's batch while players log in: for each of 1,000 players, its player state
/// twice (login, then its save's preset), its pawn, and its tags: 4,000 changes.
fn login_batch() -> Vec<u8> {
    let class = CharacterDef::new("Vanguard").unwrap();
    let mut changes = Vec::new();
    for index in 0..1_000 {
        let player_id = PlayerId::new(format!("sim-{index:04}")).unwrap();
        let state = |character_def| PlayerStateView {
            player_id: player_id.clone(),
            team: Some(TeamId(1)),
            character_def,
        };
        changes.push(ReplicatedChange::PlayerStateUpdated(state(None)));
        changes.push(ReplicatedChange::PlayerStateUpdated(state(Some(class.clone()))));
        changes.push(ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(index + 1),
            owner: player_id.clone(),
            character_def: class.clone(),
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        }));
        let tags = vec![EFFECT_DAMAGE_OVER_TIME_BURN];
        changes.push(ReplicatedChange::AbilityTagsChanged { player_id: player_id.clone(), tags });
    }
    let mut frames = Vec::new();
    let message = ServerMessage::Replicated { changes };
    encode_frame_into(&message, HARD_MAX_FRAME_LEN, &mut frames).unwrap();
    frames
}

fn replicated(c: &mut Criterion) {
    let now = Instant::now();
    let frames = login_batch();
    let batch = decode(&frames);
    let mut group = c.benchmark_group("replicated_4000_changes");
    group.throughput(Throughput::Elements(4_000));
    group.bench_function("decode", |b| b.iter(|| decode(black_box(&frames)).len()));
    sessions(&mut group, now, &batch);
    group.finish();
}

/// Every step against the others in interleaved rounds: prints each one's time for the whole
/// world (or batch), the fastest of its rounds (on a shared, noisy machine the fastest round is
/// the one least disturbed), and per player (or change).
fn fastest_rounds(_: &mut Criterion) {
    const ROUNDS: usize = 60;
    let now = Instant::now();
    println!("\nfastest of {ROUNDS} interleaved rounds, µs per world (ns per player or change)");
    println!(
        "{:<10} {:>14} {:>14} {:>14} {:>14}",
        "input", "decode", "expand", "session", "session_own"
    );
    let inputs = [("plain", world_frames(false), PLAYERS), ("tagged", world_frames(true), PLAYERS)];
    let batch = ("batch", login_batch(), 4_000);
    for (name, frames, count) in inputs.into_iter().chain([batch]) {
        let messages = decode(&frames);
        let mut best = [f64::INFINITY; 4];
        for _ in 0..ROUNDS {
            best[0] = best[0].min(timed(|| decode(black_box(&frames)).len()));
            best[1] = best[1].min(timed(|| expand(&messages)));
            for (slot, world_events) in [(2, WorldEvents::All), (3, WorldEvents::Own)] {
                let (mut session, input) = (welcomed(now, world_events), messages.clone());
                best[slot] = best[slot].min(timed(|| handle_all(&mut session, now, input)));
            }
        }
        let cell = |ns: f64| format!("{:.0} ({:.0})", ns / 1e3, ns / count as f64);
        let [decode, expand, all, own] = best.map(cell);
        println!("{name:<10} {decode:>14} {expand:>14} {all:>14} {own:>14}");
    }
}

/// How long `f` took, ns.
fn timed<T>(f: impl FnOnce() -> T) -> f64 {
    let start = Instant::now();
    black_box(f());
    start.elapsed().as_nanos() as f64
}

/// Every message the snapshots among `messages` stand for, built and dropped; how many.
fn expand(messages: &[ServerMessage]) -> usize {
    let snapshots = messages.iter().filter_map(|m| match m {
        ServerMessage::WorldSnapshot(snapshot) => Some(snapshot),
        _ => None,
    });
    snapshots.flat_map(|s| s.messages()).map(black_box).count()
}

criterion_group!(benches, snapshot, replicated, fastest_rounds);
criterion_main!(benches);

//! The two messages that carry other messages (protocol 9): a `WorldSnapshot` and a
//! `Replicated` batch are applied exactly as the messages they stand for, in their order
//! (docs/protocol.md 4.4 and 4.5; docs/client.md, "Events, in the order you get them"). Each
//! test compares a session fed the bundle with one fed the same messages one by one, and
//! checks what the session itself keeps (the own player's life, the controlled pawn).

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

// Shared with the session's and the world's tests; this file needs only part of it.
#[allow(dead_code)]
mod common;

use std::time::Instant;

use common::{me, node, sent};
use gatehouse_client::{Event, Life, Session, SessionConfig, WorldChange, WorldEvents};
use gatehouse_protocol::{
    CharacterDef, ClientMessage, PawnId, PawnIdRuns, PawnView, PlayerId, PlayerStateView,
    ReplicatedChange, ServerMessage, SnapshotBuilder, SnapshotEntry, TeamId, WorldSnapshot,
};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{EFFECT_DAMAGE_OVER_TIME_BURN, STATE_DEAD};

/// A session welcomed as [`me`], its `Hello` and `Welcome` drained.
fn welcomed(t0: Instant) -> Session {
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    let welcome =
        ServerMessage::Welcome { player_id: me(), current_node: None, max_frame_len: 65_536 };
    s.handle(t0, welcome);
    while s.poll_output().is_some() {}
    events(&mut s);
    s
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn player(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap()
}

fn vanguard() -> CharacterDef {
    CharacterDef::new("Vanguard").unwrap()
}

fn state_of(player: PlayerId) -> PlayerStateView {
    PlayerStateView { player_id: player, team: Some(TeamId(1)), character_def: Some(vanguard()) }
}

fn pawn(id: u64, owner: PlayerId, alive: bool) -> PawnView {
    PawnView { pawn_id: PawnId(id), owner, character_def: vanguard(), node: node("harbor"), alive }
}

fn runs(ids: &[u64]) -> PawnIdRuns {
    PawnIdRuns::from_ids(ids.iter().copied().map(PawnId))
}

fn tags_of(player: PlayerId, dead: bool) -> ReplicatedChange {
    let tags = if dead { vec![STATE_DEAD] } else { Vec::new() };
    ReplicatedChange::AbilityTagsChanged { player_id: player, tags }
}

/// One player's entry of a snapshot, owned.
struct Entry {
    state: PlayerStateView,
    tags: Vec<GameplayTag>,
    health: Option<u32>,
    pawns: Vec<PawnView>,
}

/// The snapshot messages of `entries`, cut at `max_frame_len`.
fn snapshots(entries: &[Entry], max_frame_len: usize) -> Vec<WorldSnapshot> {
    let mut builder = SnapshotBuilder::new(max_frame_len);
    for e in entries {
        let (player, tags, pawns) = (&e.state, e.tags.as_slice(), e.pawns.as_slice());
        builder.add(SnapshotEntry { player, tags, health: e.health, pawns });
    }
    builder.finish()
}

/// The events of a fresh welcomed session fed `messages` one by one.
fn one_by_one(t0: Instant, messages: impl IntoIterator<Item = ServerMessage>) -> Vec<Event> {
    let mut s = welcomed(t0);
    for message in messages {
        s.handle(t0, message);
    }
    events(&mut s)
}

/// A world of three other players: one hurt and burning with a dead pawn beside its live one,
/// one whose preset has not resolved (no pawn), one plain with a pawn.
fn world() -> Vec<Entry> {
    let (ann, bob, cal) = (player("ann"), player("bob"), player("cal"));
    vec![
        Entry {
            state: state_of(ann.clone()),
            tags: vec![EFFECT_DAMAGE_OVER_TIME_BURN],
            health: Some(40),
            pawns: vec![pawn(3, ann.clone(), false), pawn(5, ann, true)],
        },
        Entry {
            state: PlayerStateView { player_id: bob, team: None, character_def: None },
            tags: Vec::new(),
            health: None,
            pawns: Vec::new(),
        },
        Entry {
            state: state_of(cal.clone()),
            tags: Vec::new(),
            health: None,
            pawns: vec![pawn(7, cal, true)],
        },
    ]
}

/// docs/protocol.md 4.5: a snapshot gives the game the events of the messages it stands for,
/// in their order (each player's state, tags, health; then each pawn, a dead one followed by
/// its death), and several snapshots in a row give them in message order.
#[test]
fn a_world_snapshot_is_applied_as_the_messages_it_stands_for() {
    let t0 = Instant::now();
    let world = world();
    let mut s = welcomed(t0);
    let snapshot = snapshots(&world, 65_536).remove(0);
    s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot.clone())));
    let seen = events(&mut s);
    let (ann, cal) = (player("ann"), player("cal"));
    let world_change = |change| Event::World(change);
    let expected: Vec<Event> = [
        WorldChange::PlayerStateUpdated(state_of(ann.clone())),
        WorldChange::TagsChanged { player: ann.clone(), tags: vec![EFFECT_DAMAGE_OVER_TIME_BURN] },
        WorldChange::HealthChanged { player: ann.clone(), health: 40 },
        WorldChange::PlayerStateUpdated(world[1].state.clone()),
        WorldChange::PlayerStateUpdated(state_of(cal.clone())),
        WorldChange::PawnSpawned(pawn(3, ann.clone(), false)),
        WorldChange::PawnDied { pawn: PawnId(3) },
        WorldChange::PawnSpawned(pawn(5, ann, true)),
        WorldChange::PawnSpawned(pawn(7, cal, true)),
    ]
    .into_iter()
    .map(world_change)
    .collect();
    assert_eq!(seen, expected);
    assert_eq!(seen, one_by_one(t0, snapshot.messages()));

    // Cut small, the same world comes in several snapshots, each applied whole in turn: its
    // players, then its pawns.
    let cut = snapshots(&world, 48);
    assert!(cut.len() > 1, "{} snapshots", cut.len());
    let mut s = welcomed(t0);
    for snapshot in &cut {
        s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot.clone())));
    }
    let seen = events(&mut s);
    assert_eq!(seen, one_by_one(t0, cut.iter().flat_map(WorldSnapshot::messages)));
    assert_eq!(seen.len(), expected.len());
    assert!(expected.iter().all(|e| seen.contains(e)), "{seen:?}");
}

/// docs/protocol.md 4.4: a batch's changes reach the game as their own messages would, oldest
/// first, and what the session keeps follows them: the controlled pawn destroyed inside a
/// batch is no longer controlled, and a pawn spawned after it in the same batch is not it.
#[test]
fn a_replicated_batch_is_applied_in_order() {
    let t0 = Instant::now();
    let you = player("you");
    let changes = vec![
        ReplicatedChange::PlayerStateUpdated(state_of(you.clone())),
        ReplicatedChange::PawnSpawned(pawn(4, you.clone(), true)),
        ReplicatedChange::HealthChanged { player_id: you.clone(), health: 90 },
        ReplicatedChange::PawnDied { pawn_id: PawnId(4) },
        ReplicatedChange::PawnDestroyed { pawn_id: PawnId(9) },
        ReplicatedChange::PawnSpawned(pawn(10, me(), true)),
        ReplicatedChange::PawnsTeleported { node: node("forest"), pawn_ids: runs(&[4, 10]) },
        ReplicatedChange::PlayerLeft { player_id: you.clone() },
    ];
    let mut s = welcomed(t0);
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
    events(&mut s);
    s.handle(t0, ServerMessage::Replicated { changes: changes.clone() });
    let seen = events(&mut s);
    let expected = [
        WorldChange::PlayerStateUpdated(state_of(you.clone())),
        WorldChange::PawnSpawned(pawn(4, you.clone(), true)),
        WorldChange::HealthChanged { player: you.clone(), health: 90 },
        WorldChange::PawnDied { pawn: PawnId(4) },
        WorldChange::PawnDestroyed { pawn: PawnId(9) },
        WorldChange::PawnSpawned(pawn(10, me(), true)),
        WorldChange::PawnsTeleported { node: node("forest"), pawns: runs(&[4, 10]) },
        WorldChange::PlayerLeft { player: you },
    ]
    .map(Event::World);
    assert_eq!(seen, expected);
    assert_eq!(s.pawn(), None, "the controlled pawn was destroyed in the batch");

    let mut individually = welcomed(t0);
    individually.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
    events(&mut individually);
    for change in changes {
        individually.handle(t0, ServerMessage::from(change));
    }
    assert_eq!(events(&mut individually), seen);

    // An empty batch is nothing.
    s.handle(t0, ServerMessage::Replicated { changes: Vec::new() });
    assert_eq!(events(&mut s), []);
}

/// docs/client.md, "Events", 6: the own player's death counts wherever its tags come, alone, in
/// a batch or in a snapshot, and the last word wins in the order they came: dead then alive is
/// a death and a revival, alive then dead a death the player is still in.
#[test]
fn the_own_death_in_a_snapshot_or_batch_is_seen() {
    let t0 = Instant::now();
    let died = |s: &mut Session| events(s).into_iter().filter(|e| *e == Event::Died).count();

    // In a batch, after other players' changes.
    let mut s = welcomed(t0);
    let batch = vec![tags_of(player("you"), true), tags_of(me(), true)];
    s.handle(t0, ServerMessage::Replicated { changes: batch });
    assert_eq!((died(&mut s), s.life()), (1, Life::Dead));
    assert!(s.request_restart().is_ok(), "a death in a batch can be restarted from");

    // Both orders inside one batch.
    let mut s = welcomed(t0);
    let batch = vec![tags_of(me(), true), tags_of(me(), false)];
    s.handle(t0, ServerMessage::Replicated { changes: batch });
    let revived = Event::Revived { restarted: false };
    assert_eq!(events(&mut s), [dead_tags(), Event::Died, alive_tags(), revived]);
    assert_eq!(s.life(), Life::Alive);
    let mut s = welcomed(t0);
    let batch = vec![tags_of(me(), false), tags_of(me(), true)];
    s.handle(t0, ServerMessage::Replicated { changes: batch });
    assert_eq!(events(&mut s), [alive_tags(), dead_tags(), Event::Died]);
    assert_eq!(s.life(), Life::Dead);

    // Across the two forms, both orders: a death alone, its revival in a batch, and back.
    let mut s = welcomed(t0);
    s.handle(t0, ServerMessage::from(tags_of(me(), true)));
    s.handle(t0, ServerMessage::Replicated { changes: vec![tags_of(me(), false)] });
    assert_eq!(s.life(), Life::Alive);
    let mut s = welcomed(t0);
    s.handle(t0, ServerMessage::Replicated { changes: vec![tags_of(me(), false)] });
    s.handle(t0, ServerMessage::from(tags_of(me(), true)));
    assert_eq!((died(&mut s), s.life()), (1, Life::Dead));

    // In a snapshot (a server puts the newcomer's own player in none, but one that did would
    // still tell it its death).
    let mut s = welcomed(t0);
    let own = Entry {
        state: state_of(me()),
        tags: vec![STATE_DEAD],
        health: Some(0),
        pawns: vec![pawn(2, me(), false)],
    };
    let snapshot = snapshots(&[own], 65_536).remove(0);
    s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot)));
    assert_eq!((died(&mut s), s.life()), (1, Life::Dead));
    assert!(s.request_restart().is_ok());
}

fn dead_tags() -> Event {
    Event::World(WorldChange::TagsChanged { player: me(), tags: vec![STATE_DEAD] })
}

fn alive_tags() -> Event {
    Event::World(WorldChange::TagsChanged { player: me(), tags: Vec::new() })
}

/// docs/client.md, "A client that keeps no world": a session set to [`WorldEvents::Own`] gives
/// the game only the changes about its own player and pawns, from a snapshot, a batch or a
/// message alone, and keeps everything else a session keeps: the own death counts, the
/// controlled pawn destroyed in a batch is no longer controlled.
#[test]
fn a_client_that_keeps_no_world_hears_only_its_own_changes() {
    let t0 = Instant::now();
    let mut s = Session::new(t0, SessionConfig { world_events: WorldEvents::Own, ..config() });
    let welcome =
        ServerMessage::Welcome { player_id: me(), current_node: None, max_frame_len: 65_536 };
    s.handle(t0, welcome);
    while s.poll_output().is_some() {}
    events(&mut s);
    let snapshot = snapshots(&world(), 65_536).remove(0);
    s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot)));
    assert_eq!(events(&mut s), [], "nothing of the snapshot is the own player's");

    let you = player("you");
    let changes = vec![
        ReplicatedChange::PlayerStateUpdated(state_of(you.clone())),
        ReplicatedChange::PlayerStateUpdated(state_of(me())),
        ReplicatedChange::PawnSpawned(pawn(4, you.clone(), true)),
        ReplicatedChange::PawnSpawned(pawn(9, me(), true)),
        tags_of(you.clone(), true),
        tags_of(me(), true),
        ReplicatedChange::HealthChanged { player_id: you.clone(), health: 0 },
        ReplicatedChange::HealthChanged { player_id: me(), health: 0 },
    ];
    s.handle(t0, ServerMessage::Replicated { changes });
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
    s.handle(t0, ServerMessage::PawnDied { pawn_id: PawnId(4) });
    s.handle(t0, ServerMessage::PawnDied { pawn_id: PawnId(9) });
    // The restart: the new pawn is controlled, the dead one lingers until destroyed.
    let respawned = ReplicatedChange::PawnSpawned(pawn(10, me(), true));
    s.handle(t0, ServerMessage::Replicated { changes: vec![respawned, tags_of(me(), false)] });
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(10) });
    let teleported =
        |ids: &[u64]| ServerMessage::PawnsTeleported { node: node("forest"), pawn_ids: runs(ids) };
    s.handle(t0, teleported(&[4]));
    s.handle(t0, teleported(&[4, 10]));
    let destroyed = |id| ReplicatedChange::PawnDestroyed { pawn_id: PawnId(id) };
    s.handle(t0, ServerMessage::Replicated { changes: vec![destroyed(4), destroyed(9)] });
    let left = |player_id| ServerMessage::PlayerLeft { player_id };
    s.handle(t0, left(you));
    assert_eq!(
        events(&mut s),
        [
            Event::World(WorldChange::PlayerStateUpdated(state_of(me()))),
            Event::World(WorldChange::PawnSpawned(pawn(9, me(), true))),
            dead_tags(),
            Event::Died,
            Event::World(WorldChange::HealthChanged { player: me(), health: 0 }),
            Event::Possessed { pawn: PawnId(9) },
            Event::World(WorldChange::PawnDied { pawn: PawnId(9) }),
            Event::World(WorldChange::PawnSpawned(pawn(10, me(), true))),
            alive_tags(),
            Event::Revived { restarted: false },
            Event::Possessed { pawn: PawnId(10) },
            Event::World(WorldChange::PawnsTeleported {
                node: node("forest"),
                pawns: runs(&[4, 10])
            }),
            Event::World(WorldChange::PawnDestroyed { pawn: PawnId(9) }),
        ]
    );
    assert_eq!((s.life(), s.pawn()), (Life::Alive, Some(PawnId(10))));
    let acknowledged = sent(&mut s);
    let ack = |id| ClientMessage::PossessionAcknowledged { pawn_id: PawnId(id) };
    assert_eq!(acknowledged, [ack(9), ack(10)]);
    s.handle(t0, ServerMessage::Replicated { changes: vec![destroyed(10)] });
    assert_eq!(s.pawn(), None, "the controlled pawn destroyed in a batch");
    s.handle(t0, left(me()));
    let own =
        [WorldChange::PawnDestroyed { pawn: PawnId(10) }, WorldChange::PlayerLeft { player: me() }];
    assert_eq!(events(&mut s), own.map(Event::World));
}

fn config() -> SessionConfig {
    SessionConfig::new("a.b.c")
}

//! The store contract, written once and run on both backends (see `on_both_backends!` in
//! `main.rs`).

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId, ServerId, TeamId};
use gatehouse_server::store::{
    HandoffDuration, HandoffEffect, HandoffState, InventoryItem, KitLatches, PlayerSave, Preset,
    SessionSave, Store, StoreError,
};
use gatehouse_tags::GameplayTag;

use crate::backends::Backend;

fn tag(name: &str) -> GameplayTag {
    GameplayTag::parse(name).unwrap()
}

/// A saved character with every field set.
pub(crate) fn character(player: &str) -> PlayerSave {
    PlayerSave {
        player: PlayerId::new(player).unwrap(),
        node: Some(NodeId::new("harbor").unwrap()),
        preset: Preset::Character {
            character_def: CharacterDef::new("Vanguard").unwrap(),
            kits: vec![tag("Kit.Composed.Vanguard"), tag("Kit.Composed.Medic")],
        },
        inventory: vec![
            InventoryItem { item: "rope".into(), count: 2 },
            InventoryItem { item: "lantern-oil".into(), count: 40 },
        ],
        equipment: vec![tag("Effect.Equipment.Armor")],
        version: 0,
        handoff: None,
        holder: None,
    }
}

/// A player on a read-only preset.
pub(crate) fn read_only(player: &str) -> PlayerSave {
    PlayerSave {
        player: PlayerId::new(player).unwrap(),
        node: Some(NodeId::new("harbor").unwrap()),
        preset: Preset::ReadOnly { name: "Scout".into() },
        inventory: vec![InventoryItem { item: "map".into(), count: 1 }],
        equipment: vec![],
        version: 0,
        handoff: None,
        holder: None,
    }
}

/// A handoff state with every field set: a dead player on team 2 whose poison (the effect
/// that killed it) has 1,250 ms left, wearing armour, its kits granted.
pub(crate) fn dead_and_poisoned() -> HandoffState {
    HandoffState::sample()
}

/// `save` as a handoff save carrying `state`.
fn handing_off(save: PlayerSave, state: HandoffState) -> PlayerSave {
    PlayerSave { handoff: Some(Box::new(state)), ..save }
}

fn at(mut save: PlayerSave, version: u64) -> PlayerSave {
    save.version = version;
    save
}

async fn load(store: &Store, player: &str) -> Option<PlayerSave> {
    store.load_player(&PlayerId::new(player).unwrap()).await.unwrap()
}

/// Every field of a player save, and of a session save, reads back as written.
pub(crate) async fn every_field_round_trips(b: &Backend) {
    let store = b.open().await;
    assert_eq!(load(&store, "p-1").await, None, "nothing is stored for a new player");

    let first = character("p-1");
    assert_eq!(store.save_player(&first).await.unwrap(), 1);
    assert_eq!(load(&store, "p-1").await, Some(at(first.clone(), 1)));

    // Every field changes on the next save.
    let second = PlayerSave {
        player: first.player.clone(),
        node: Some(NodeId::new("sunken-keep").unwrap()),
        preset: Preset::Character {
            character_def: CharacterDef::new("Medic").unwrap(),
            kits: vec![tag("Kit.Composed.Medic")],
        },
        inventory: vec![InventoryItem { item: "bandage".into(), count: u32::MAX }],
        equipment: vec![tag("Effect.Equipment.Armor"), tag("Kit.Startup.Movement")],
        version: 1,
        handoff: None,
        holder: None,
    };
    assert_eq!(store.save_player(&second).await.unwrap(), 2);
    assert_eq!(load(&store, "p-1").await, Some(at(second, 2)));

    // Empty and absent values survive too.
    let bare = PlayerSave {
        player: PlayerId::new("p-2").unwrap(),
        node: None,
        preset: Preset::Character {
            character_def: CharacterDef::new("Vanguard").unwrap(),
            kits: vec![],
        },
        inventory: vec![],
        equipment: vec![],
        version: 0,
        handoff: None,
        holder: None,
    };
    store.save_player(&bare).await.unwrap();
    assert_eq!(load(&store, "p-2").await, Some(at(bare, 1)));

    let ids: Vec<String> =
        store.list_players().await.unwrap().iter().map(|p| p.player.to_string()).collect();
    assert_eq!(ids, ["p-1", "p-2"], "list_players is ordered by player id");

    assert_eq!(store.load_session("main").await.unwrap(), None);
    let session = SessionSave {
        session: "main".into(),
        node: NodeId::new("sunken-keep").unwrap(),
        version: 0,
    };
    assert_eq!(store.save_session(&session).await.unwrap(), 1);
    let moved = SessionSave { node: NodeId::new("harbor").unwrap(), version: 1, ..session };
    assert_eq!(store.save_session(&moved).await.unwrap(), 2);
    assert_eq!(
        store.load_session("main").await.unwrap(),
        Some(SessionSave { version: 2, ..moved.clone() })
    );
    assert_eq!(store.list_sessions().await.unwrap(), vec![SessionSave { version: 2, ..moved }]);
    store.close().await;
}

/// A read-only preset is stored as its name only: no character, no kits, no preset table;
/// switching a saved character to a read-only preset clears the character's columns.
pub(crate) async fn a_read_only_preset_is_never_written(b: &Backend) {
    let store = b.open().await;
    let save = read_only("p-ro");
    store.save_player(&save).await.unwrap();
    assert_eq!(load(&store, "p-ro").await, Some(at(save, 1)));
    assert_eq!(
        b.raw_preset_columns("p-ro").await,
        ("read_only".to_owned(), Some("Scout".to_owned()), None, None)
    );

    store.save_player(&character("p-switch")).await.unwrap();
    store.save_player(&at(read_only("p-switch"), 1)).await.unwrap();
    assert_eq!(
        b.raw_preset_columns("p-switch").await,
        ("read_only".to_owned(), Some("Scout".to_owned()), None, None)
    );
    assert_eq!(b.table_names().await, ["_sqlx_migrations", "players", "sessions"]);
    store.close().await;
}

/// Saves of many players at once all land, each in order.
pub(crate) async fn concurrent_saves_of_different_players_all_land(b: &Backend) {
    const PLAYERS: usize = 24;
    const SAVES: u64 = 5;
    let store = b.open().await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..PLAYERS {
        let store = store.clone();
        tasks.spawn(async move {
            let mut save = character(&format!("c-{i:02}"));
            for n in 0..SAVES {
                save.inventory[0].count = u32::try_from(n).unwrap();
                save.version = store.save_player(&save).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let all = store.list_players().await.unwrap();
    assert_eq!(all.len(), PLAYERS);
    for p in all {
        assert_eq!(p.version, SAVES, "{}", p.player);
        assert_eq!(u64::from(p.inventory[0].count), SAVES - 1, "{}: the last save wins", p.player);
    }
    store.close().await;
}

/// A save based on another version than the stored one is a conflict and writes nothing.
pub(crate) async fn a_stale_version_is_a_conflict_and_writes_nothing(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("p-c")).await.unwrap();
    let mut stale = character("p-c");
    stale.node = None;
    for version in [0, 2, 9] {
        let err = store.save_player(&at(stale.clone(), version)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { expected, found: Some(1), .. } if expected == version),
            "{err}"
        );
        assert!(err.to_string().contains("expected stored version"), "{err}");
    }
    let err = store.save_player(&at(character("p-missing"), 3)).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { found: None, .. }), "{err}");
    assert_eq!(load(&store, "p-c").await, Some(at(character("p-c"), 1)), "unchanged");
    assert_eq!(load(&store, "p-missing").await, None);

    let session =
        SessionSave { session: "main".into(), node: NodeId::new("harbor").unwrap(), version: 0 };
    store.save_session(&session).await.unwrap();
    let err = store.save_session(&session).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { expected: 0, found: Some(1), .. }), "{err}");
    store.close().await;
}

/// A batch of saves is written in one call, each save answered in the order
/// given with its new version, and each chained from its own stored version.
pub(crate) async fn a_batch_of_saves_lands_with_one_result_each(b: &Backend) {
    let store = b.open().await;
    assert_eq!(store.save_players(&[]).await.unwrap().len(), 0, "an empty batch writes nothing");
    store.save_player(&character("b-2")).await.unwrap();
    let batch = [character("b-1"), at(read_only("b-2"), 1), read_only("b-3")];
    let results = store.save_players(&batch).await.unwrap();
    let versions: Vec<u64> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(versions, [1, 2, 1]);
    assert_eq!(load(&store, "b-1").await, Some(at(character("b-1"), 1)));
    assert_eq!(load(&store, "b-2").await, Some(at(read_only("b-2"), 2)));
    assert_eq!(load(&store, "b-3").await, Some(at(read_only("b-3"), 1)));
    let again = [at(character("b-1"), 1), at(read_only("b-3"), 1)];
    let versions: Vec<u64> =
        store.save_players(&again).await.unwrap().into_iter().map(Result::unwrap).collect();
    assert_eq!(versions, [2, 2]);
    store.close().await;
}

/// A conflict, or a value the schema cannot hold, refuses only its own save
/// in a batch; the others commit.
pub(crate) async fn a_conflict_in_a_batch_refuses_only_that_save(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("k-a")).await.unwrap();
    let mut stale = character("k-a");
    stale.node = None;
    let batch = [character("k-b"), stale, at(character("k-big"), u64::MAX), read_only("k-c")];
    let results = store.save_players(&batch).await.unwrap();
    assert_eq!(results.len(), 4);
    assert!(matches!(results[0], Ok(1)), "{:?}", results[0]);
    assert!(
        matches!(results[1], Err(StoreError::Conflict { expected: 0, found: Some(1), .. })),
        "{:?}",
        results[1]
    );
    assert!(matches!(results[2], Err(StoreError::Unwritable { .. })), "{:?}", results[2]);
    assert!(matches!(results[3], Ok(1)), "{:?}", results[3]);
    assert_eq!(load(&store, "k-a").await, Some(at(character("k-a"), 1)), "unchanged");
    assert_eq!(load(&store, "k-b").await, Some(at(character("k-b"), 1)));
    assert_eq!(load(&store, "k-c").await, Some(at(read_only("k-c"), 1)));
    assert_eq!(load(&store, "k-big").await, None);
    store.close().await;
}

/// A batch larger than one statement's rows, mixing first saves and updates,
/// with conflicts among both and a player saved twice in a row (its second save based on its
/// first), lands exactly as the same saves one by one would.
pub(crate) async fn a_large_mixed_batch_lands_as_the_saves_one_by_one_would(b: &Backend) {
    let store = b.open().await;
    let stored: Vec<PlayerSave> = (0..300).map(|i| character(&format!("m-{i:03}"))).collect();
    assert!(store.save_players(&stored).await.unwrap().iter().all(|r| matches!(r, Ok(1))));
    // Updates of every stored player (m-007 is stale: based on nothing stored), first saves of
    // 300 new ones (m-450 is stale: based on a version never written), and m-010 twice.
    let mut batch: Vec<PlayerSave> = stored.iter().map(|s| at(s.clone(), 1)).collect();
    batch[7] = character("m-007");
    batch.extend((300..600).map(|i| read_only(&format!("m-{i:03}"))));
    batch[450] = at(read_only("m-450"), 3);
    batch.push(at(read_only("m-010"), 2));
    let results = store.save_players(&batch).await.unwrap();
    assert_eq!(results.len(), batch.len());
    for (i, result) in results.iter().enumerate() {
        match i {
            7 => assert!(
                matches!(result, Err(StoreError::Conflict { expected: 0, found: Some(1), .. })),
                "{result:?}"
            ),
            450 => assert!(
                matches!(result, Err(StoreError::Conflict { expected: 3, found: None, .. })),
                "{result:?}"
            ),
            600 => assert!(matches!(result, Ok(3)), "the second save of m-010: {result:?}"),
            i if i < 300 => assert!(matches!(result, Ok(2)), "{i}: {result:?}"),
            i => assert!(matches!(result, Ok(1)), "{i}: {result:?}"),
        }
    }
    assert_eq!(load(&store, "m-000").await, Some(at(character("m-000"), 2)));
    assert_eq!(load(&store, "m-007").await, Some(at(character("m-007"), 1)), "unchanged");
    assert_eq!(load(&store, "m-010").await, Some(at(read_only("m-010"), 3)));
    assert_eq!(load(&store, "m-299").await, Some(at(character("m-299"), 2)));
    assert_eq!(load(&store, "m-300").await, Some(at(read_only("m-300"), 1)));
    assert_eq!(load(&store, "m-450").await, None, "never written");
    assert_eq!(load(&store, "m-599").await, Some(at(read_only("m-599"), 1)));
    assert_eq!(store.list_players().await.unwrap().len(), 599);
    store.close().await;
}

/// A player's first save and the save based on it, in one batch, both apply
/// (the batch keeps a player's saves together and in order, whatever their kinds).
pub(crate) async fn a_first_save_and_the_save_based_on_it_in_one_batch_both_apply(b: &Backend) {
    let store = b.open().await;
    let batch = [read_only("f-1"), at(character("f-1"), 1), at(read_only("f-0"), 4)];
    let results = store.save_players(&batch).await.unwrap();
    assert!(matches!(results[0], Ok(1)), "the first save: {:?}", results[0]);
    assert!(matches!(results[1], Ok(2)), "the save based on it: {:?}", results[1]);
    assert!(matches!(results[2], Err(StoreError::Conflict { .. })), "{:?}", results[2]);
    assert_eq!(load(&store, "f-1").await, Some(at(character("f-1"), 2)));
    store.close().await;
}

/// PostgreSQL: the backend that `blocker`'s locks hold up, once there is one. Polled (a last
/// resort: another session's lock wait announces nothing), bounded at 10 s.
async fn blocked_by(observer: &mut sqlx::PgConnection, blocker: i32) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let blocked: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) LIMIT 1",
        )
        .bind(blocker)
        .fetch_optional(&mut *observer)
        .await
        .unwrap();
        if let Some(pid) = blocked {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "nothing blocked by {blocker} in 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// PostgreSQL: two processes save overlapping players in batches shaped as
/// the store worker makes them (distinct players; updates and first saves). P updates `o-3` and
/// first-saves `o-1` and `o-2`, and is held between the two by another session's uncommitted
/// `o-1`; A first-saves `o-2` and, stale, `o-3`. A waits for P before it writes anything, so
/// both batches finish; had A written `o-2` first, P and A would wait for each other.
pub(crate) async fn overlapping_batches_of_two_processes_finish_without_a_deadlock(b: &Backend) {
    use sqlx::{Connection as _, Executor as _};
    let url = b.url_text();
    let (p_store, a_store) = (b.open().await, b.open().await);
    p_store.save_player(&read_only("o-3")).await.unwrap();
    let mut observer = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    let holder_pid: i32 =
        sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut holder).await.unwrap();
    holder.execute("BEGIN").await.unwrap();
    holder
        .execute(
            "INSERT INTO players (player_id, preset_kind, preset_name, inventory, equipment, \
             version) VALUES ('o-1', 'read_only', 'Scout', '[]', '[]', 1)",
        )
        .await
        .unwrap();
    let p_batch = vec![at(read_only("o-3"), 1), read_only("o-1"), read_only("o-2")];
    let p = tokio::spawn(async move { p_store.save_players(&p_batch).await });
    let p_pid = blocked_by(&mut observer, holder_pid).await;
    let a_batch = vec![read_only("o-2"), read_only("o-3")];
    let a = tokio::spawn(async move { a_store.save_players(&a_batch).await });
    blocked_by(&mut observer, p_pid).await;
    holder.execute("COMMIT").await.unwrap();
    let bound = std::time::Duration::from_secs(20);
    let p = tokio::time::timeout(bound, p).await.unwrap().unwrap();
    let a = tokio::time::timeout(bound, a).await.unwrap().unwrap();
    let (p, a) = (p.unwrap(), a.unwrap());
    assert!(matches!(p[..], [Ok(2), Err(StoreError::Conflict { .. }), Ok(1)]), "P: {p:?}");
    let conflicts = a.iter().filter(|r| matches!(r, Err(StoreError::Conflict { .. }))).count();
    assert_eq!(conflicts, 2, "A's first saves meet P's rows: {a:?}");
}

/// A batch is one transaction: when one of its writes fails, none of the
/// batch is written, and the failure is the batch's (a single save's names its player).
pub(crate) async fn a_batch_that_fails_as_a_whole_writes_nothing(b: &Backend) {
    let store = b.open().await;
    b.refuse_writes_of("t_poison").await;
    let batch = [character("t-1"), read_only("t_poison"), character("t-3")];
    let err = store.save_players(&batch).await.unwrap_err();
    assert!(matches!(err, StoreError::Query { .. }), "{err}");
    assert!(err.to_string().contains("save 3 players"), "{err}");
    for player in ["t-1", "t_poison", "t-3"] {
        assert_eq!(load(&store, player).await, None, "{player} was rolled back");
    }
    let results = store.save_players(&[character("t-1"), character("t-3")]).await.unwrap();
    assert!(results.iter().all(|r| matches!(r, Ok(1))), "{results:?}");
    // A single save that fails names its player.
    let err = store.save_player(&read_only("t_poison")).await.unwrap_err();
    assert!(err.to_string().contains("save player t_poison"), "{err}");
    store.close().await;
}

/// What was saved is there after the store is closed and opened again (a server restart).
pub(crate) async fn a_save_is_visible_after_reopening_the_store(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("p-r")).await.unwrap();
    store
        .save_session(&SessionSave {
            session: "main".into(),
            node: NodeId::new("sunken-keep").unwrap(),
            version: 0,
        })
        .await
        .unwrap();
    store.close().await;
    drop(store);

    let reopened = b.open().await;
    assert_eq!(load(&reopened, "p-r").await, Some(at(character("p-r"), 1)));
    assert_eq!(
        reopened.load_session("main").await.unwrap().map(|s| s.node.to_string()).as_deref(),
        Some("sunken-keep")
    );
    reopened.close().await;
}

/// Opening an up-to-date store applies nothing and loses nothing.
pub(crate) async fn migrations_are_idempotent(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("p-m")).await.unwrap();
    store.close().await;
    for _ in 0..3 {
        let again = b.open().await;
        again.close().await;
    }
    assert_eq!(b.applied_migrations().await, [1, 2, 3]);
    let store = b.open().await;
    assert_eq!(load(&store, "p-m").await.map(|p| p.version), Some(1));
    store.close().await;
}

/// A store migrated by a newer server is refused with a clear error, not used.
pub(crate) async fn a_store_with_a_newer_schema_is_refused(b: &Backend) {
    b.open().await.close().await;
    b.record_foreign_migration(999).await;
    let err = Store::open(&b.url(), &b.data_dir()).await.unwrap_err().to_string();
    assert!(err.contains("cannot migrate the store") && err.contains("999"), "{err}");
}

/// docs/spec/travel.md V2: every field of a handoff save reads back as written, as a first save
/// and as an update, alone and in a batch, and through `list_players`; the save after it
/// (the destination saving the player as its own) writes none, and none is read back.
pub(crate) async fn a_handoff_save_round_trips_every_field(b: &Backend) {
    let store = b.open().await;
    let first = handing_off(character("h-1"), dead_and_poisoned());
    assert_eq!(store.save_player(&first).await.unwrap(), 1);
    assert_eq!(load(&store, "h-1").await, Some(at(first.clone(), 1)));
    assert!(load(&store, "h-1").await.unwrap().handoff.unwrap().is_dead());

    // Every field of the state changes on the next handoff save: alive, the other team, an
    // effect of each kind with other times, no tags, the latches open.
    let alive = HandoffState {
        team: TeamId(1),
        health: u32::MAX,
        tags: Default::default(),
        effects: vec![
            HandoffEffect {
                tag: tag("Effect.DamageOverTime.Poison"),
                duration: HandoffDuration::Finite {
                    left_ms: u64::MAX,
                    next_tick_ms: 0,
                    tick_ms: 1,
                    damage: u32::MAX,
                },
            },
            HandoffEffect {
                tag: tag("Effect.Equipment.Armor"),
                duration: HandoffDuration::Infinite,
            },
        ],
        kits: KitLatches::default(),
    };
    let second = handing_off(at(read_only("h-1"), 1), alive.clone());
    assert_eq!(store.save_player(&second).await.unwrap(), 2);
    assert_eq!(load(&store, "h-1").await, Some(at(second, 2)));

    // In a batch, first saves and updates alike.
    let batch = [
        handing_off(at(character("h-1"), 2), dead_and_poisoned()),
        handing_off(character("h-2"), alive),
        read_only("h-3"),
    ];
    let results = store.save_players(&batch).await.unwrap();
    assert!(matches!(results[..], [Ok(3), Ok(1), Ok(1)]), "{results:?}");
    let listed = store.list_players().await.unwrap();
    assert_eq!(
        listed,
        vec![at(batch[0].clone(), 3), at(batch[1].clone(), 1), at(batch[2].clone(), 1)]
    );

    // The next plain save clears it.
    let plain = at(character("h-1"), 3);
    assert_eq!(store.save_player(&plain).await.unwrap(), 4);
    assert_eq!(load(&store, "h-1").await, Some(at(plain, 4)));
    assert_eq!(b.raw_handoff("h-1").await, None, "NULL once a save without one is written");
    store.close().await;
}

/// A save without a handoff state (every save the core writes outside a travel) stores NULL
/// and loads `None`.
pub(crate) async fn a_save_without_a_handoff_state_loads_none(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("n-1")).await.unwrap();
    store.save_players(&[read_only("n-2"), at(character("n-1"), 1)]).await.unwrap();
    for player in ["n-1", "n-2"] {
        assert_eq!(load(&store, player).await.unwrap().handoff, None, "{player}");
        assert_eq!(b.raw_handoff(player).await, None, "{player}: NULL, not a JSON null");
    }
    store.close().await;
}

/// The source's handoff save of `player`, saved once before its travel: the version `v` the
/// store acknowledged (2).
async fn handoff_save(source: &Store, player: &str) -> u64 {
    source.save_player(&character(player)).await.unwrap();
    let handoff = handing_off(at(character(player), 1), dead_and_poisoned());
    let v = source.save_player(&handoff).await.unwrap();
    assert_eq!(v, 2);
    v
}

/// docs/spec/travel.md V5: the destination's claim and the source's recall are two conditional
/// saves based on the handoff save's version `v`; whichever comes first is applied and the
/// other refused as a conflict that names `v` and what it found, in either order, and when
/// both race from two processes.
pub(crate) async fn a_claim_and_a_recall_at_the_handoff_version_one_wins(b: &Backend) {
    let source = b.open().await;
    let destination = b.open().await;
    // The claim: the destination's save of the player as its own, at its node.
    let claim = |player: &str, v: u64| PlayerSave {
        node: Some(NodeId::new("sunken-keep").unwrap()),
        ..at(character(player), v)
    };
    // The recall: the source's save of the player it keeps, at the node it never left.
    let recall = |player: &str, v: u64| at(character(player), v);

    for claim_first in [true, false] {
        let player = if claim_first { "v-claim-first" } else { "v-recall-first" };
        let v = handoff_save(&source, player).await;
        let (claim, recall) = (claim(player, v), recall(player, v));
        let (first, first_store, second, second_store) = if claim_first {
            (&claim, &destination, &recall, &source)
        } else {
            (&recall, &source, &claim, &destination)
        };
        assert_eq!(first_store.save_player(first).await.unwrap(), v + 1, "{player}: applied");
        let err = second_store.save_player(second).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { expected, found: Some(found), .. }
                if expected == v && found == v + 1),
            "{player}: {err}"
        );
        assert!(err.to_string().contains(player), "{player}: {err}");
        assert_eq!(load(&source, player).await, Some(at(first.clone(), v + 1)), "{player}");
    }

    // Both at once, from two processes: exactly one is applied.
    for round in 0..8 {
        let player = format!("v-race-{round}");
        let v = handoff_save(&source, &player).await;
        let (claim, recall) = (claim(&player, v), recall(&player, v));
        let (d, s) = (destination.clone(), source.clone());
        let (c, r) = (claim.clone(), recall.clone());
        let claimed = tokio::spawn(async move { d.save_player(&c).await });
        let recalled = tokio::spawn(async move { s.save_player(&r).await });
        let (claimed, recalled) = (claimed.await.unwrap(), recalled.await.unwrap());
        let winner = match (&claimed, &recalled) {
            (Ok(n), Err(StoreError::Conflict { expected, .. }))
                if *n == v + 1 && *expected == v =>
            {
                claim
            }
            (Err(StoreError::Conflict { expected, .. }), Ok(n))
                if *n == v + 1 && *expected == v =>
            {
                recall
            }
            other => panic!("{player}: expected one applied and one conflict, found {other:?}"),
        };
        assert_eq!(load(&source, &player).await, Some(at(winner, v + 1)), "{player}");
    }
    source.close().await;
    destination.close().await;
}

/// A store a schema-1 server created, with its rows, opens at the latest schema (schema 2's
/// handoff column and schema 3's holder added, nothing else changed) and loads those rows with
/// no handoff state and no holder; they are saved on as any.
pub(crate) async fn a_store_at_schema_1_opens_at_the_latest_schema_and_loads_its_rows_unchanged(
    b: &Backend,
) {
    b.create_at_schema_1().await;
    assert_eq!(b.applied_migrations().await, [1]);
    b.execute(
        "INSERT INTO players (player_id, node, preset_kind, preset_name, character_def, kits, \
         inventory, equipment, version) VALUES \
         ('old-1', 'harbor', 'character', NULL, 'Vanguard', \
          '[\"Kit.Composed.Vanguard\",\"Kit.Composed.Medic\"]', \
          '[{\"item\":\"rope\",\"count\":2},{\"item\":\"lantern-oil\",\"count\":40}]', \
          '[\"Effect.Equipment.Armor\"]', 3), \
         ('old-2', 'harbor', 'read_only', 'Scout', NULL, NULL, \
          '[{\"item\":\"map\",\"count\":1}]', '[]', 1)",
    )
    .await;
    b.execute("INSERT INTO sessions (session, node, version) VALUES ('main', 'harbor', 5)").await;

    let store = b.open().await;
    assert_eq!(b.applied_migrations().await, [1, 2, 3]);
    assert_eq!(load(&store, "old-1").await, Some(at(character("old-1"), 3)));
    assert_eq!(load(&store, "old-2").await, Some(at(read_only("old-2"), 1)));
    assert_eq!(store.load_session("main").await.unwrap().map(|s| s.version), Some(5));
    let travelling = handing_off(at(character("old-1"), 3), dead_and_poisoned());
    assert_eq!(store.save_player(&travelling).await.unwrap(), 4);
    assert_eq!(load(&store, "old-1").await, Some(at(travelling, 4)));
    store.close().await;
}

/// `save` as written by the server `holder`.
fn held(save: PlayerSave, holder: &str) -> PlayerSave {
    PlayerSave { holder: Some(ServerId::new(holder).unwrap()), ..save }
}

/// docs/spec/travel.md V17: `players.held_by` names the server that wrote the row: a save and
/// a handoff save the writer, a claim the destination, a recall the source, a login's take the
/// taker (whose write at the version it loaded makes the older server's next save conflict); a
/// save naming none (a server in no fleet) stores NULL.
pub(crate) async fn the_holder_is_written_by_saves_claims_recalls_and_takes(b: &Backend) {
    let source = b.open().await;
    let destination = b.open().await;
    let holder = |save: Option<PlayerSave>| save.and_then(|s| s.holder).map(|h| h.to_string());

    // Saved and handed off by the source, claimed by the destination.
    let first = held(character("held-1"), "hub-1");
    assert_eq!(source.save_player(&first).await.unwrap(), 1);
    assert_eq!(load(&source, "held-1").await, Some(at(first.clone(), 1)), "read back whole");
    let handoff = handing_off(at(first.clone(), 1), dead_and_poisoned());
    assert_eq!(source.save_player(&handoff).await.unwrap(), 2);
    assert_eq!(holder(load(&destination, "held-1").await).as_deref(), Some("hub-1"));
    let claim = held(at(character("held-1"), 2), "isle-1");
    assert_eq!(destination.save_player(&claim).await.unwrap(), 3);
    assert_eq!(holder(load(&source, "held-1").await).as_deref(), Some("isle-1"), "claimed");

    // Handed off, then recalled by the source.
    let second = held(character("held-2"), "hub-1");
    assert_eq!(source.save_player(&second).await.unwrap(), 1);
    let handoff = handing_off(at(second.clone(), 1), dead_and_poisoned());
    assert_eq!(source.save_player(&handoff).await.unwrap(), 2);
    assert_eq!(source.save_player(&at(second, 2)).await.unwrap(), 3, "the recall");
    assert_eq!(holder(load(&destination, "held-2").await).as_deref(), Some("hub-1"), "recalled");

    // A login at the source takes the claimed player back at the version it loaded: the
    // destination's next save, based on its claim, conflicts.
    let take = held(at(character("held-1"), 3), "hub-1");
    assert_eq!(source.save_player(&take).await.unwrap(), 4);
    assert_eq!(holder(load(&destination, "held-1").await).as_deref(), Some("hub-1"), "taken");
    let older = held(at(character("held-1"), 3), "isle-1");
    assert!(matches!(
        destination.save_player(&older).await,
        Err(StoreError::Conflict { expected: 3, found: Some(4), .. })
    ));
    assert_eq!(holder(load(&source, "held-1").await).as_deref(), Some("hub-1"), "unchanged");

    // A server in no fleet names none: NULL, over whatever was there.
    assert_eq!(source.save_player(&at(character("held-1"), 4)).await.unwrap(), 5);
    assert_eq!(holder(load(&source, "held-1").await), None);
    source.close().await;
    destination.close().await;
}

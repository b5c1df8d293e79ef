//! Travel between servers end to end (docs/spec/travel.md): two real servers on 127.0.0.1, a
//! fleet under `fleet.directory = "static"` sharing one throwaway PostgreSQL store
//! (`gatehouse_tests::fleet`), and the swarm's clients following their moves over real QUIC (a
//! second connection from the same endpoint, client-sim's `swarm/links.rs`).
//!
//! `hub-1` stands on `hub` and marks `dungeon` remote; `dungeon-1` stands on `dungeon` and marks
//! `hub` remote. Each test makes a schema of its own in the database
//! `GATEHOUSE_TEST_POSTGRES_URL` names (docs/testing.md, "PostgreSQL tests") and drops it;
//! without the variable the tests are reported ignored, with the reason. Every wait is bounded.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gatehouse_client_sim::report::{ClientOutcome, SwarmReport};
use gatehouse_client_sim::swarm::{SwarmConfig, run_swarm_outcomes};
use gatehouse_protocol::NodeId;
use gatehouse_server::GameHandle;
use gatehouse_server::game::GameSnapshot;
use gatehouse_tests::fleet::{Schema, fleet};
use gatehouse_tests::{TestServer, metric, wait_for_snapshot, within};

/// A swarm of `clients` dialling `hub-1` and trusting both servers' certificates.
fn swarm(
    hub: &TestServer,
    dungeon: &TestServer,
    clients: usize,
    duration: Duration,
) -> SwarmConfig {
    let mut swarm = hub.swarm(clients, 0, duration);
    swarm.also_trust = vec![dungeon.cert.clone()];
    swarm
}

/// What the watcher saw of both servers while the swarm ran: for each player, the longest time
/// it stood placed on both at once.
#[derive(Debug, Default)]
struct OnBoth {
    longest: BTreeMap<String, Duration>,
    samples: usize,
}

/// Samples both servers' snapshots every 100 ms until `stop`: how long each player stood placed
/// on both at once (a move's source keeps its player, frozen, until the destination's
/// `Placed` reaches it: a moment, never a stay).
async fn watch_both(hub: GameHandle, dungeon: GameHandle, stop: Arc<AtomicBool>) -> OnBoth {
    let mut seen = OnBoth::default();
    let mut since: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
    let placed = |s: &GameSnapshot| -> BTreeSet<String> {
        s.players.iter().filter(|p| p.placed).map(|p| p.player.as_str().to_owned()).collect()
    };
    while !stop.load(Ordering::Relaxed) {
        let at = tokio::time::Instant::now();
        let (Some(a), Some(b)) = (hub.snapshot().await, dungeon.snapshot().await) else { break };
        seen.samples += 1;
        let both: BTreeSet<String> = placed(&a).intersection(&placed(&b)).cloned().collect();
        since.retain(|player, _| both.contains(player));
        for player in both {
            let first = *since.entry(player.clone()).or_insert(at);
            let longest = seen.longest.entry(player).or_default();
            *longest = (*longest).max(at - first);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// What every client must have seen: connected, placed at the end, no error, and the session
/// checks clean (one loading screen per move across both servers, none dropped).
fn assert_checks_passed(outcomes: &[ClientOutcome], report: &SwarmReport) {
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{report}");
    for o in outcomes {
        assert!(o.connected && o.placed, "client {} not placed: {:?}", o.index, o.errors);
        assert!(o.errors.is_empty() && o.stats.errors.is_empty(), "client {}: {o:?}", o.index);
    }
}

/// Players move between two servers and back, 200 clients relaunching about every 12 s, for a
/// minute, with the swarm's `--check`: every client's checks pass (one loading screen per move
/// across the two servers, none dropped, every client placed at the end), players moved both
/// ways, no player stood placed on both servers beyond a move's handover, the store never wrote
/// a player at a version older than one it had (so nothing older than a handoff save was saved
/// after it), the write after each handoff save is its claim or its recall, no save of either
/// server conflicted, and every loading screen ended within its bound (docs/spec/travel.md V1-V7,
/// V16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tests),
    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn players_move_between_two_servers_with_the_loading_screen_held() {
    let started = std::time::Instant::now();
    let schema = Schema::create().await;
    let (hub, dungeon) = fleet(&schema, true).await;
    schema.record_writes().await;
    let mut config = swarm(&hub, &dungeon, 200, Duration::from_secs(60));
    config.full_clients = 8;
    config.connect_rate = Some(50.0);
    config.relaunch_every = Some(Duration::from_secs(12));
    config.settle_grace = Duration::from_secs(20);
    let stop = Arc::new(AtomicBool::new(false));
    let watcher =
        tokio::spawn(watch_both(hub.handle.clone(), dungeon.handle.clone(), stop.clone()));
    let outcomes = within(Duration::from_secs(150), "the swarm of 200", run_swarm_outcomes(config))
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let on_both = within(Duration::from_secs(10), "the watcher", watcher).await.unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    eprintln!("{report}");
    assert_checks_passed(&outcomes, &report);
    assert!(report.travels > 0 && report.server_changes > 0, "{report}");
    // Every loading screen ended within its bound: far below the whole move's bound
    // (game.transition_max_ms, 120 s, docs/spec/travel.md V16).
    assert!(report.longest_loading_screen_ms <= 30_000, "{report}");
    assert_eq!((report.gates.stuck_at_end, report.gates.gate_violations), (0, 0), "{report}");

    // Both ways: each server moved players to the other and placed the other's.
    let [a, b] = [&hub, &dungeon].map(|server| server.handle.clone());
    let (a, b) = (a.snapshot().await.unwrap(), b.snapshot().await.unwrap());
    eprintln!("hub-1: {:?}\ndungeon-1: {:?}", a.counters, b.counters);
    for (name, counters) in [("hub-1", &a.counters), ("dungeon-1", &b.counters)] {
        assert!(counters.players_travelled > 0, "{name} moved nobody: {counters:?}");
        assert!(counters.travellers_placed > 0, "{name} placed no traveller: {counters:?}");
    }
    // Every client left: neither server keeps anyone, so nobody ends on both.
    for (name, snapshot) in [("hub-1", &a), ("dungeon-1", &b)] {
        assert!(snapshot.players.is_empty(), "{name} still holds {:?}", snapshot.players);
    }
    assert!(on_both.samples > 100, "the watcher sampled: {on_both:?}");
    let stayed: Vec<_> =
        on_both.longest.iter().filter(|(_, d)| **d > Duration::from_secs(2)).collect();
    assert!(stayed.is_empty(), "placed on both servers at once: {stayed:?}");

    // The store: what it wrote, in order.
    let writes = schema.writes().await;
    let versions = schema.versions().await;
    let handoffs = writes.iter().filter(|w| w.3).count();
    assert!(handoffs > 0, "no handoff save was written");
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    let mut after_handoff: BTreeMap<&str, i64> = BTreeMap::new();
    for (player, version, node, handoff) in &writes {
        let before = newest.insert(player, *version);
        assert!(
            before.is_none_or(|before| *version > before),
            "{player} written at {version} after {before:?} ({node:?})"
        );
        // The write after a handoff save at v is its claim or its recall, at exactly v.
        if let Some(v) = after_handoff.remove(player.as_str()) {
            assert_eq!(*version, v + 1, "{player}: the write after the handoff at {v} ({node:?})");
        }
        if *handoff {
            after_handoff.insert(player, *version);
        }
    }
    for (player, version) in &newest {
        assert_eq!(versions.get(*player), Some(version), "{player}'s stored version");
    }
    for server in [&hub, &dungeon] {
        assert_eq!(metric(server, "gatehouse_saves_total{outcome=\"conflict\"}").await, 0.0);
        assert_eq!(metric(server, "gatehouse_saves_total{outcome=\"given_up\"}").await, 0.0);
    }
    hub.stop().await;
    dungeon.stop().await;
    schema.drop().await;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let longest_on_both = on_both.longest.values().max().copied().unwrap_or_default();
    eprintln!(
        "{handoffs} handoff saves in {} writes; longest on both servers {longest_on_both:?}; \
         wall time {:.1} s, load average {load}",
        writes.len(),
        started.elapsed().as_secs_f64()
    );
}

/// A destination stopped in the middle of a move, after its tickets were issued: the source
/// takes every moving player it had not placed back, with its state, and places it on its own
/// node; no client's checks fail and none is lost (docs/spec/travel.md V7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tests),
    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_destination_stopped_mid_move_sends_its_unplaced_players_back_to_the_source() {
    const CLIENTS: usize = 20;
    let schema = Schema::create().await;
    let (hub, dungeon) = fleet(&schema, false).await;
    let mut config = swarm(&hub, &dungeon, CLIENTS, Duration::from_secs(25));
    // Streaming takes seconds: a traveller is still in its join at the destination when it stops.
    config.session.stream_time = (Duration::from_millis(2500), Duration::from_millis(3000));
    config.settle_grace = Duration::from_secs(20);
    let swarm = tokio::spawn(run_swarm_outcomes(config));
    let limit = Duration::from_secs(20);
    wait_for_snapshot(&hub.handle, limit, "every client placed on hub-1", |s| {
        s.phase == "None" && s.players.len() == CLIENTS && s.players.iter().all(|p| p.placed)
    })
    .await;
    assert!(hub.handle.travel(NodeId::new("dungeon").unwrap()).await);
    // After the tickets: every traveller logged in at the destination, still in its join.
    wait_for_snapshot(&dungeon.handle, limit, "every traveller at dungeon-1", |s| {
        s.players.len() == CLIENTS && s.players.iter().all(|p| p.joining && !p.placed)
    })
    .await;
    dungeon.stop().await;
    let back = wait_for_snapshot(&hub.handle, limit, "every player placed back on hub-1", |s| {
        s.phase == "None" && s.players.len() == CLIENTS && s.players.iter().all(|p| p.placed)
    })
    .await;
    assert!(back.counters.travellers_sent_back > 0, "{:?}", back.counters);
    assert_eq!(
        back.counters.travellers_sent_back + back.counters.players_travelled,
        CLIENTS as u64,
        "each moving player was sent back or placed there: {:?}",
        back.counters
    );
    let outcomes = within(Duration::from_secs(60), "the swarm", swarm).await.unwrap().unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    eprintln!("{report}");
    assert_checks_passed(&outcomes, &report);
    assert!(report.travels >= CLIENTS as u64, "every client was sent its TravelTo: {report}");
    assert!(report.server_changes >= CLIENTS as u64, "every client reached dungeon-1: {report}");
    // The world each came back to plays: every pawn generation's gates opened.
    assert_eq!(report.gates.stuck_at_end, 0, "{report}");
    hub.stop().await;
    schema.drop().await;
}

/// docs/spec/travel.md V17, over QUIC on two real servers and PostgreSQL: after a move, the same
/// players log in again at the source with their session tokens while their first clients
/// still play at the destination. The source takes each (its store row now names `hub-1`), the
/// destination hears `PlayerTaken` over the peer link and closes its copies `Replaced` at once,
/// long before it would save them, and each player plays on the source alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tests),
    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_player_who_moved_and_logs_in_at_the_source_plays_on_one_server() {
    const CLIENTS: usize = 4;
    let schema = Schema::create().await;
    let (hub, dungeon) = fleet(&schema, false).await;
    let limit = Duration::from_secs(20);
    let first = swarm(&hub, &dungeon, CLIENTS, Duration::from_secs(25));
    let first = tokio::spawn(run_swarm_outcomes(first));
    let all_placed = |s: &GameSnapshot| {
        s.phase == "None" && s.players.len() == CLIENTS && s.players.iter().all(|p| p.placed)
    };
    wait_for_snapshot(&hub.handle, limit, "every client placed on hub-1", all_placed).await;
    // A destination in its boot transition refuses seats (`Busy`, V12).
    wait_for_snapshot(&dungeon.handle, limit, "dungeon-1 booted", |s| s.phase == "None").await;
    assert!(hub.handle.travel(NodeId::new("dungeon").unwrap()).await);
    wait_for_snapshot(&dungeon.handle, limit, "every player placed on dungeon-1", all_placed).await;
    wait_for_snapshot(&hub.handle, limit, "hub-1 let every player go", |s| s.players.is_empty())
        .await;

    // The same players (the same swarm seed and names) log in at the source again.
    let again = swarm(&hub, &dungeon, CLIENTS, Duration::from_secs(10));
    let again = tokio::spawn(run_swarm_outcomes(again));
    let gone = "dungeon-1 dropped every copy another server took";
    let there = wait_for_snapshot(&dungeon.handle, Duration::from_secs(10), gone, |s| {
        s.players.is_empty() && s.counters.players_replaced_elsewhere == CLIENTS as u64
    })
    .await;
    assert_eq!(there.counters.players_replaced_elsewhere, CLIENTS as u64, "{:?}", there.counters);
    let back =
        wait_for_snapshot(&hub.handle, limit, "every player on hub-1 again", all_placed).await;
    assert_eq!(back.counters.players_taken, CLIENTS as u64, "{:?}", back.counters);
    let holders = schema.holders().await;
    assert_eq!(holders.len(), CLIENTS);
    assert!(holders.values().all(|h| h.as_deref() == Some("hub-1")), "{holders:?}");

    // The first clients were replaced; the second end on the source as they left it.
    let _ = within(Duration::from_secs(60), "the first swarm", first).await.unwrap();
    let outcomes =
        within(Duration::from_secs(60), "the second swarm", again).await.unwrap().unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    eprintln!("{report}");
    assert_checks_passed(&outcomes, &report);
    hub.stop().await;
    dungeon.stop().await;
    schema.drop().await;
}

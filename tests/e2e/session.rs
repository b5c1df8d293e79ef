//! The walking-skeleton session: boot transition, late join, route travel.

use std::time::Duration;

use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::{mint_token, player_id, run_swarm_outcomes};
use gatehouse_protocol::token::{DEV_TOKEN_KEY, TokenKey};
use gatehouse_protocol::{ClientMessage, CloseCode, PROTOCOL_VERSION, ServerMessage};
use gatehouse_tests::worlds::{self, SLOW_BOOT};
use gatehouse_tests::{TestServer, frames, raw_silent, wait_for_snapshot, within};

/// 8 clients pass through the boot transition; a ninth joins late and streams before it is
/// spawned (a join of its own); every client ends with exactly one pawn, every transition
/// ended, and no client saw a transition end before it had acknowledged its pawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_pass_the_boot_transition_and_a_late_joiner_streams_before_its_pawn() {
    let server = TestServer::start(SLOW_BOOT).await;
    let first = tokio::spawn(run_swarm_outcomes(server.swarm(8, 0, Duration::from_secs(10))));
    // The boot transition ends once all 8 are placed; only then does the ninth join.
    wait_for_snapshot(&server.handle, Duration::from_secs(15), "the boot transition to end", |s| {
        s.counters.transitions_completed == 1 && s.players.len() == 8
    })
    .await;
    let late = tokio::spawn(run_swarm_outcomes(server.swarm(1, 8, Duration::from_secs(4))));
    // While everyone is still connected: one pawn each, all placed, no transition in flight.
    let snapshot =
        wait_for_snapshot(&server.handle, Duration::from_secs(10), "nine placed players", |s| {
            s.players.len() == 9 && s.players.iter().all(|p| p.placed)
        })
        .await;
    assert!(snapshot.players.iter().all(|p| p.owned_pawns == 1 && p.placed), "{snapshot:?}");
    assert_eq!(snapshot.phase, "None");
    assert_eq!(snapshot.counters.transitions_started, 1);
    assert_eq!(snapshot.counters.transitions_completed, 1);

    let first = within(Duration::from_secs(20), "the first swarm", first).await.unwrap().unwrap();
    let late = within(Duration::from_secs(20), "the late joiner", late).await.unwrap().unwrap();
    for o in first.iter().chain(&late) {
        assert!(o.connected && o.placed, "client {} not placed: {o:?}", o.index);
        assert_eq!(o.own_pawns, 1, "client {}", o.index);
        assert!(o.errors.is_empty() && o.stats.errors.is_empty(), "client {}: {o:?}", o.index);
        assert_eq!(o.stats.ended_before_placed, 0, "client {}", o.index);
    }
    for o in &first {
        assert_eq!(
            o.stats.transitions_ended.len(),
            1,
            "client {} saw the boot transition end",
            o.index
        );
    }
    assert!(late[0].stats.transitions_ended.is_empty(), "the late joiner saw no transition");
    assert_eq!(late[0].stats.joins, 1, "the late joiner streamed in a join of its own");
    assert_eq!(late[0].stats.pawns_on_unloaded_node, 0, "no pawn before its level");
    let report = SwarmReport::from_outcomes(&first);
    assert_eq!((report.clients_placed, report.errors, report.transitions_completed), (8, 0, 1));
    server.stop().await;
}

/// With a route every 2 s, clients go through route transitions and stay placed. (The route
/// revisits the fast node, so the run ends in a quiet moment after the travel at 4 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_transitions_complete_with_every_client_placed() {
    let world = worlds::with_route(SLOW_BOOT, &["forest"], 2000);
    let server = TestServer::start(&world).await;
    let outcomes = within(
        Duration::from_secs(30),
        "the swarm",
        run_swarm_outcomes(server.swarm(6, 0, Duration::from_millis(5000))),
    )
    .await
    .unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    assert_eq!(report.clients_placed, 6, "{report}");
    assert_eq!(report.errors, 0, "{report}");
    assert_eq!(report.ended_before_placed, 0, "{report}");
    assert!(report.transitions_completed >= 3, "boot plus two route travels: {report}");
    assert!(outcomes.iter().all(|o| o.own_pawns == 1));
    let counters = server.handle.snapshot().await.unwrap().counters;
    assert!(
        counters.pawns_teleported >= 6,
        "existing pawns are teleported, not respawned: {counters:?}"
    );
    assert_eq!(counters.pawns_spawned, 6, "one pawn per player over the whole run: {counters:?}");
    server.stop().await;
}

/// Reads server messages into `seen`, each snapshot or batch as the messages it stands for
/// (docs/protocol.md 4.4, 4.5), until one matches `stop`; returns it.
async fn read_until(
    recv: &mut quinn::RecvStream,
    decoder: &mut gatehouse_protocol::FrameDecoder,
    seen: &mut Vec<gatehouse_protocol::ServerMessage>,
    stop: impl Fn(&gatehouse_protocol::ServerMessage) -> bool,
) -> gatehouse_protocol::ServerMessage {
    within(Duration::from_secs(10), "a server message", async {
        loop {
            while let Ok(Some(m)) = decoder.next_message::<gatehouse_protocol::ServerMessage>() {
                // Every message a batch carries is seen, also those after the one sought.
                let carried = gatehouse_tests::stood_for(&m);
                let found = carried.iter().find(|m| stop(m)).cloned();
                seen.extend(carried);
                if let Some(m) = found {
                    return m;
                }
            }
            let Ok(Some(chunk)) = recv.read_chunk(4096, true).await else {
                panic!("the stream ended before the message; saw {seen:?}");
            };
            decoder.extend(&chunk.bytes);
        }
    })
    .await
}

/// docs/spec/sessions.md S5, end to end over real QUIC: a player who logs in after the boot
/// transition is told the current node's levels (`ShowJoin`), has no pawn while it has not reported
/// them streamed, and gets its pawn, on that node, only after `JoinReady`; its join ends once it
/// acknowledged the pawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_streams_before_its_pawn_exists() {
    use gatehouse_client_sim::swarm::{client_endpoint, mint_token, player_id};
    use gatehouse_protocol::token::{DEV_TOKEN_KEY, TokenKey};
    use gatehouse_protocol::{ClientMessage, PROTOCOL_VERSION, ServerMessage};

    let server = TestServer::start(SLOW_BOOT).await;
    wait_for_snapshot(&server.handle, Duration::from_secs(15), "the boot transition to end", |s| {
        s.phase == "None" && s.streamed_node.is_some()
    })
    .await;
    let (endpoint, config) = client_endpoint(server.addr, &server.cert).unwrap();
    let connecting = endpoint.connect_with(config, server.addr, "localhost").unwrap();
    let connection = within(Duration::from_secs(10), "connect", connecting).await.unwrap();
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(0));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    send.write_all(&gatehouse_tests::frames(&[hello])).await.unwrap();
    let mut decoder =
        gatehouse_protocol::FrameDecoder::new(gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN);
    let mut seen = Vec::new();

    let join = read_until(&mut recv, &mut decoder, &mut seen, |m| {
        matches!(m, ServerMessage::ShowJoin { .. })
    })
    .await;
    let ServerMessage::ShowJoin { join_id, node, levels, .. } = join else { unreachable!() };
    assert!(matches!(seen[0], ServerMessage::Welcome { .. }), "Welcome first: {seen:?}");
    assert!(!levels.is_empty());
    let snapshot = server.handle.snapshot().await.unwrap();
    let me = &snapshot.players[0];
    assert!(me.joining && me.pawn.is_none(), "streaming, no pawn yet: {snapshot:?}");
    assert!(!seen.iter().any(|m| matches!(m, ServerMessage::Possessed { .. })));

    send.write_all(&gatehouse_tests::frames(&[ClientMessage::JoinReady { join_id }]))
        .await
        .unwrap();
    let possessed = read_until(&mut recv, &mut decoder, &mut seen, |m| {
        matches!(m, ServerMessage::Possessed { .. })
    })
    .await;
    let ServerMessage::Possessed { pawn_id } = possessed else { unreachable!() };
    let spawned_on = seen.iter().find_map(|m| match m {
        ServerMessage::PawnSpawned(v) if v.pawn_id == pawn_id => Some(v.node.clone()),
        _ => None,
    });
    assert_eq!(spawned_on, Some(node), "its pawn stands on the node it streamed");
    send.write_all(&gatehouse_tests::frames(&[ClientMessage::PossessionAcknowledged { pawn_id }]))
        .await
        .unwrap();
    let end = read_until(&mut recv, &mut decoder, &mut seen, |m| {
        matches!(m, ServerMessage::EndJoin { .. })
    })
    .await;
    assert_eq!(end, ServerMessage::EndJoin { join_id });
    let snapshot = server.handle.snapshot().await.unwrap();
    assert!(snapshot.players[0].placed && !snapshot.players[0].joining, "{snapshot:?}");
    assert_eq!(snapshot.counters.joins_completed, 1);
    server.stop().await;
}

/// A world that cannot load ends (docs/protocol.md 5, "Every transition is bounded"): its
/// node streams in 1.5 s but a transition may last 300 ms, so the boot travel and its recovery
/// travels all fail; after the third in a row the client behind the loading screen is told
/// `Closing { 10 }` and closed with `WorldUnavailable`, and the server stops on its own with
/// an error naming what failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_that_cannot_load_closes_its_clients_and_stops_the_server() {
    let config = "[game]\nspawn_settle_timeout_ms = 100\ntransition_max_ms = 300\n\
                  max_failed_transitions = 3\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(0));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    let outcome = raw_silent(&server, frames(&[hello]), Duration::from_secs(10)).await;
    assert_eq!(outcome.close, Some(CloseCode::WorldUnavailable), "{}", outcome.reason);
    let failed = outcome
        .messages
        .iter()
        .filter(|m| matches!(m, ServerMessage::TransitionFailed { .. }))
        .count();
    assert!(failed >= 1, "it saw the transitions fail: {:?}", outcome.messages);
    assert!(
        matches!(outcome.messages.last(), Some(ServerMessage::Closing { code: 10, .. })),
        "{:?}",
        outcome.messages
    );
    let stopped = server.stopped(Duration::from_secs(20)).await;
    assert!(
        matches!(&stopped, Err(gatehouse_server::ServerError::WorldUnavailable(detail))
            if detail.contains("3 transitions in a row")),
        "{stopped:?}"
    );
}

//! A bad network between real clients and a real server (docs/testing.md, "A bad network"): the
//! seeded conditioner of `gatehouse_client_sim::conditioner` in front of the swarm or of raw
//! clients. Cut-offs, a kick on a lossy path, and the short impaired soak that CI runs.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::{client_config, mint_token, player_id, run_swarm_outcomes};
use gatehouse_conditioner::cli::start_in_process;
use gatehouse_conditioner::{Conditions, Impairment};
use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{ClientMessage, CloseCode, NodeId, PROTOCOL_VERSION, ServerMessage};
use gatehouse_tests::{TestServer, frames, wait_for_snapshot, within, worlds};

/// The impairment of the impaired soak (docs/testing.md), each way: 5 % loss, 100 ± 20 ms lag, 1 %
/// reordering, 1 % duplication.
const BAD_NETWORK: &str = "loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%";

fn impairment(spec: &str) -> Impairment {
    Impairment::parse(spec).unwrap_or_else(|e| panic!("{e}"))
}

/// The short impaired soak (docs/testing.md, "A bad network"): 16 clients with the soak scenario's
/// churn (deaths, restarts 500 ms later, relaunches about every 12 s) on the soak world for 30 s,
/// every datagram through the conditioner at 5 % loss, 100 ± 20 ms lag, 1 % reordering and 1 %
/// duplication each way. Every transition completes, every death is respawned, no client is kicked
/// or errs, every invariant figure is 0; the conditioner did what it was told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_soak_thirty_seconds_through_a_lossy_laggy_network() {
    let server = TestServer::start(worlds::SOAK).await;
    let proxy =
        start_in_process(server.addr, Conditions::both(impairment(BAD_NETWORK)), 13).await.unwrap();
    let mut swarm = server.swarm(16, 0, Duration::from_secs(30));
    swarm.session.restart_after_death = Some(Duration::from_millis(500));
    swarm.relaunch_every = Some(Duration::from_secs(12));
    swarm.settle_grace = Duration::from_secs(15);
    swarm.conditioner = Some(proxy.handle());
    let outcomes = within(Duration::from_secs(90), "the impaired soak", run_swarm_outcomes(swarm))
        .await
        .unwrap();
    let mut report = SwarmReport::from_outcomes(&outcomes);
    report.network = Some(proxy.handle().stats());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{report}");
    assert!(report.transitions_completed >= 4, "{report}");
    assert!(report.deaths > 0 && report.relaunches > 0, "churn happened: {report}");
    let network = proxy.handle().stats();
    for (way, link) in [("up", network.up), ("down", network.down)] {
        assert!(link.dropped > 0 && link.duplicated > 0 && link.reordered > 0, "{way}: {network}");
        assert_eq!(link.delayed, link.offered - link.dropped - link.cut, "{way}: all lagged");
    }
    assert!(report.wire.lost_packets > 0, "quinn saw the losses: {report}");
    let snapshot = server.handle.snapshot().await.unwrap();
    let c = &snapshot.counters;
    assert_eq!((c.ready_timeouts, c.settle_timeouts, c.transitions_failed), (0, 0, 0), "{c:?}");
    server.stop().await;
}

/// docs/spec/transitions.md T9 and docs/spec/sessions.md S9: a client whose traffic is cut
/// completely while the others wait for it holds them only until the server's idle timeout closes
/// its connection (2 s here), not until the client-ready timeout (10 minutes here); when the cut
/// heals, the client comes back as a reconnect, its kept player state restored, and is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cut_off_while_others_wait_holds_them_only_until_the_idle_timeout() {
    let config = "[network]\nidle_timeout_ms = 2000\nkeep_alive_ms = 500\n\
                  [game]\nclient_ready_timeout_ms = 600000\n";
    let server = TestServer::start_with(config, worlds::QUICK).await;
    let proxy = start_in_process(server.addr, Conditions::default(), 3).await.unwrap();
    let cut = proxy.handle();
    let mut swarm = server.swarm(4, 0, Duration::from_secs(30));
    swarm.conditioner = Some(proxy.handle());
    let swarm = tokio::spawn(run_swarm_outcomes(swarm));
    let limit = Duration::from_secs(20);
    wait_for_snapshot(&server.handle, limit, "four players placed", |s| {
        s.players.len() == 4 && s.unplaced_players.is_empty() && s.phase == "None"
    })
    .await;
    // Client 3 (flow key 3) goes dark; then a travel waits for every client's ready report.
    cut.set_cut(3, true);
    assert!(server.handle.travel(NodeId::new("forest").unwrap()).await);
    wait_for_snapshot(&server.handle, limit, "the others ready, sim-0003 awaited", |s| {
        s.phase == "WaitingForClients"
    })
    .await;
    // Released once the idle timeout drops sim-0003: well before the ready timeout.
    let released = wait_for_snapshot(&server.handle, limit, "the others released", |s| {
        s.phase == "None" && s.players.len() == 3 && s.unplaced_players.is_empty()
    })
    .await;
    assert!(released.players.iter().all(|p| p.player != player_id(3)), "{released:?}");
    assert_eq!(released.counters.ready_timeouts, 0, "nobody was kicked for readiness");
    let restored = released.counters.player_states_restored;
    // The cut heals: the client finds its connection gone and comes back as a reconnect.
    cut.set_cut(3, false);
    let back = wait_for_snapshot(&server.handle, limit, "sim-0003 back and placed", |s| {
        s.players.len() == 4 && s.unplaced_players.is_empty() && s.phase == "None"
    })
    .await;
    assert_eq!(back.counters.player_states_restored, restored + 1, "a reconnect, state kept");
    let outcomes = within(Duration::from_secs(60), "the swarm", swarm).await.unwrap().unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    assert!(report.problems().is_empty(), "{:?}\n{report}", report.problems());
    // The server's keep-alives (every 500 ms) at least were cut.
    assert!(cut.stats().down.cut > 0, "{}", cut.stats());
    server.stop().await;
}

/// A client that logs in through `proxy`, sends no keep-alives and never reports ready, so the
/// server kicks it at the client-ready timeout. Returns the close code it learnt (from the
/// `Closing` message, or else from the CONNECTION_CLOSE). The handshake may take several
/// retransmissions on a lossy path (bounded at 30 s); from its loading screen on, the client
/// waits at most `learn_within` to learn why it was closed, far below its idle timeout (30 s).
async fn never_ready(
    cert: std::path::PathBuf,
    proxy: std::net::SocketAddr,
    index: usize,
    learn_within: Duration,
) -> Result<Option<CloseCode>, String> {
    let mut config = client_config(&cert).map_err(|e| e.to_string())?;
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(Duration::from_secs(30)).ok());
    config.transport_config(Arc::new(transport));
    let local = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let endpoint = quinn::Endpoint::client(local).map_err(|e| format!("endpoint: {e}"))?;
    let connecting =
        endpoint.connect_with(config, proxy, "localhost").map_err(|e| format!("connect: {e}"))?;
    let connection = within(Duration::from_secs(30), "the handshake", connecting)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| format!("stream: {e}"))?;
    let key = TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY);
    let hello = ClientMessage::Hello {
        protocol_version: PROTOCOL_VERSION,
        token: mint_token(&key, player_id(index)),
    };
    send.write_all(&frames(&[hello])).await.map_err(|e| format!("write: {e}"))?;
    let mut decoder = gatehouse_protocol::FrameDecoder::new(1 << 16);
    let mut next = async || {
        loop {
            if let Ok(Some(m)) = decoder.next_message::<ServerMessage>() {
                return Some(m);
            }
            let chunk = recv.read_chunk(4096, true).await.ok()??;
            decoder.extend(&chunk.bytes);
        }
    };
    let shown = within(Duration::from_secs(30), "a loading screen", async {
        while let Some(m) = next().await {
            if matches!(m, ServerMessage::ShowJoin { .. } | ServerMessage::ShowTransition { .. }) {
                return true;
            }
        }
        false
    });
    if !shown.await {
        return Err(format!("player {index}: the stream ended before its loading screen"));
    }
    let code = within(learn_within, "the kick's close code", async {
        while let Some(m) = next().await {
            if let ServerMessage::Closing { code, .. } = m {
                return CloseCode::from_code(code.into());
            }
        }
        // No `Closing` before the stream's end: only the CONNECTION_CLOSE can say why.
        match connection.closed().await {
            quinn::ConnectionError::ApplicationClosed(c) => {
                CloseCode::from_code(c.error_code.into_inner())
            }
            _ => None,
        }
    })
    .await;
    Ok(code)
}

/// docs/protocol.md section 6 (the `Closing` message): a client kicked (`ReadyTimeout`) while its
/// path loses a fifth of its datagrams each way learns the close code within about a second of the
/// kick, not at its idle timeout (30 s here): the code comes in a `Closing` message on the reliable
/// stream before the CONNECTION_CLOSE, which a lossy path may drop. Twelve such clients at once;
/// every one must learn it (without `Closing`, about one in five would wait for its idle timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_kicked_on_a_lossy_path_learns_its_close_code_at_once() {
    let config = "[game]\nclient_ready_timeout_ms = 1000\nclient_ready_policy = \"kick\"\n";
    let server = TestServer::start_with(config, worlds::QUICK).await;
    let lossy = Conditions::both(impairment("loss=20%,lag=30ms"));
    let proxy = start_in_process(server.addr, lossy, 5).await.unwrap();
    let addr = proxy.handle().addr();
    // The ready timeout (1 s) after the loading screen, then the kick's flush (at most 1 s):
    // 5 s is far below the 30 s idle timeout a lost close would cost.
    let learn_within = Duration::from_secs(5);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..12 {
        set.spawn(never_ready(server.cert.clone(), addr, 100 + i, learn_within));
    }
    let codes = set.join_all().await;
    assert!(codes.iter().all(|c| *c == Ok(Some(CloseCode::ReadyTimeout))), "{codes:?}");
    assert!(proxy.handle().stats().down.dropped > 0, "the path lost datagrams");
    server.stop().await;
}

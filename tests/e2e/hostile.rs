//! Hostile and malformed input: a clear refusal that affects only its sender.

use std::time::Duration;

use gatehouse_client_sim::report::ClientOutcome;
use gatehouse_client_sim::swarm::{mint_token, player_id, run_swarm_outcomes};
use gatehouse_protocol::FrameDecoder;
use gatehouse_protocol::token::{DEV_TOKEN_KEY, SessionClaims, TokenKey};
use gatehouse_protocol::{ClientMessage, CloseCode, PROTOCOL_VERSION, RejectReason, ServerMessage};
use gatehouse_tests::relay::HandshakeRelay;
use gatehouse_tests::worlds::{self, SLOW_BOOT};
use gatehouse_tests::{
    TestServer, frames, http, raw_exchange, raw_silent, wait_for_snapshot, within,
};

const LIMIT: Duration = Duration::from_secs(10);

/// Sends `hello` on a connection of its own and asserts it is refused with `reason` and closed
/// with code 2 (`Rejected`).
async fn assert_hello_refused(server: &TestServer, hello: ClientMessage, reason: RejectReason) {
    let outcome = raw_exchange(server, frames(&[hello]), LIMIT).await;
    assert_eq!(rejected(&outcome.messages), Some(reason));
    assert_eq!(outcome.close, Some(CloseCode::Rejected));
}

fn rejected(messages: &[ServerMessage]) -> Option<RejectReason> {
    messages.iter().find_map(|m| match m {
        ServerMessage::Rejected { reason, .. } => Some(*reason),
        _ => None,
    })
}

/// A client whose token is signed with another key is rejected and closed; the others play on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_forged_token_is_rejected_and_the_others_are_unaffected() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(4, 0, Duration::from_secs(3))));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let forged = mint_token(&TokenKey::new("not-the-server-key-at-all"), player_id(0));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token: forged };
    assert_hello_refused(&server, hello, RejectReason::BadSignature).await;
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

/// A token that claims to live forever (`exp = 2^64 - 1`, no `iat`) or that was issued an hour
/// in the future is refused `TokenLifetime`, though its signature holds (docs/protocol.md 4,
/// "Session tokens").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_beyond_its_lifetime_bounds_is_refused() {
    let server = TestServer::start(SLOW_BOOT).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for (exp, iat) in [(u64::MAX, None), (now + 7_200, Some(now + 3_600))] {
        let claims = SessionClaims { uid: player_id(3), exp, iat, usn: None };
        let token = gatehouse_protocol::token::mint(&TokenKey::new(DEV_TOKEN_KEY), &claims);
        let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
        assert_hello_refused(&server, hello, RejectReason::TokenLifetime).await;
    }
    server.stop().await;
}

/// One token relaunched over and over (a leaked or replayed token): past the login burst the
/// server refuses `TooManyLogins` before the login changes anything, and the other players
/// play on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaunch_storm_of_one_token_is_refused_past_the_login_burst() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(3, 0, Duration::from_secs(3))));
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(7));
    let started = std::time::Instant::now();
    let (mut welcomed, mut refused) = (0u64, 0u64);
    for _ in 0..15 {
        let hello =
            ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token: token.clone() };
        // Its stream ends after the Hello: an admitted login leaves at once (its Welcome may
        // not reach it before the close), a refused one hears why.
        let outcome = raw_exchange(&server, frames(&[hello]), LIMIT).await;
        match rejected(&outcome.messages) {
            Some(RejectReason::TooManyLogins) => {
                assert_eq!(outcome.close, Some(CloseCode::Rejected));
                refused += 1;
            }
            None => welcomed += 1,
            Some(other) => panic!("refused {other:?}"),
        }
    }
    // The default burst is 5, then one per 2 s.
    let refills = started.elapsed().as_secs() / 2 + 1;
    assert!(
        welcomed >= 5 && welcomed <= 5 + refills,
        "{welcomed} welcomed in {:?}",
        started.elapsed()
    );
    assert_eq!(welcomed + refused, 15);
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

/// A logged-in client flooding the server with messages it ignores (2,000 `TransitionShown` for
/// a transition that never was, in one write) is closed with `Abuse` once past its message
/// budget; the other players play on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_flooding_ignored_messages_is_closed_for_abuse() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(3, 0, Duration::from_secs(3))));
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(8));
    let mut messages = vec![ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token }];
    let flood =
        ClientMessage::TransitionShown { transition_id: gatehouse_protocol::TransitionId(1) };
    messages.extend(std::iter::repeat_n(flood, 2_000));
    let outcome = raw_silent(&server, frames(&messages), LIMIT).await;
    assert_eq!(outcome.close, Some(CloseCode::Abuse), "{}", outcome.reason);
    assert!(outcome.reason.contains("network.message_burst"), "{}", outcome.reason);
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

/// The well-behaved players were unaffected by an attack beside them: each was placed with no
/// error, transitions completed on the server, `/health` answers and saves succeeded.
async fn assert_unaffected(server: &TestServer, outcomes: &[ClientOutcome]) {
    for o in outcomes {
        assert!(o.placed && o.errors.is_empty() && o.stats.errors.is_empty(), "{o:?}");
    }
    assert_eq!(http(server.admin, "GET", "/health").await, (200, "ok\n".to_owned()));
    // They left at the end of their run: their saves are on their way.
    within(LIMIT, "completed transitions and the players' saves", async {
        loop {
            let (_, metrics) = http(server.admin, "GET", "/metrics").await;
            let positive = |series: &str| {
                metrics.lines().any(|l| {
                    l.strip_prefix(series)
                        .and_then(|n| n.trim().parse::<f64>().ok())
                        .is_some_and(|n| n > 0.0)
                })
            };
            if positive("gatehouse_transitions_ended_total{outcome=\"completed\"} ")
                && positive("gatehouse_saves_total{outcome=\"ok\"} ")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Pending connections spread over several addresses, each within its own cap, fill the whole
/// pending table: a newcomer is not refused, the oldest pending connection of the group holding
/// the most is evicted for it (closed with `ServerFull`), and the player logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_connections_from_several_addresses_cannot_lock_a_player_out() {
    let config = "[network]\nhello_timeout_ms = 10000\nmax_pending_connections = 8\n\
                  max_pending_per_ip = 2\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let client = gatehouse_client_sim::swarm::client_config(&server.cert).unwrap();
    let mut idle = Vec::new();
    for host in 2..=5u8 {
        let local = std::net::SocketAddr::from(([127, 0, 0, host], 0));
        let endpoint = quinn::Endpoint::client(local).unwrap();
        for _ in 0..2 {
            let connecting =
                endpoint.connect_with(client.clone(), server.addr, "localhost").unwrap();
            idle.push(within(LIMIT, "an idle connection", connecting).await.unwrap());
        }
    }
    wait_for_pending(&server, 8).await;
    let outcomes = within(
        Duration::from_secs(20),
        "a player",
        run_swarm_outcomes(server.swarm(1, 0, Duration::from_secs(3))),
    )
    .await
    .unwrap();
    assert_unaffected(&server, &outcomes).await;
    let evicted = idle.iter().filter(|c| {
        matches!(c.close_reason(), Some(quinn::ConnectionError::ApplicationClosed(close))
            if close.error_code.into_inner() == u64::from(CloseCode::ServerFull.code()))
    });
    assert!(evicted.count() >= 1, "an older pending connection was evicted for the player");
    server.stop().await;
}

/// Waits (bounded) until the server counts `n` pending connections.
async fn wait_for_pending(server: &TestServer, n: u64) {
    let line = format!("gatehouse_pending_connections {n}");
    within(LIMIT, "the pending connections", async {
        while !http(server.admin, "GET", "/metrics").await.1.lines().any(|l| l == line) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A wrong protocol version is rejected with UnsupportedVersion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_protocol_version_is_rejected() {
    let server = TestServer::start(SLOW_BOOT).await;
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(1));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION + 1, token };
    assert_hello_refused(&server, hello, RejectReason::UnsupportedVersion).await;
    server.stop().await;
}

/// A first message other than Hello is refused with HelloExpected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_other_than_hello_is_refused() {
    let server = TestServer::start(SLOW_BOOT).await;
    let outcome = raw_exchange(&server, frames(&[ClientMessage::RestartRequest]), LIMIT).await;
    assert_eq!(rejected(&outcome.messages), Some(RejectReason::HelloExpected));
    assert_eq!(outcome.close, Some(CloseCode::ProtocolViolation));
    server.stop().await;
}

/// Garbage and oversized frames close only that connection, with the decoder's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_frames_close_only_their_connection() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(2, 0, Duration::from_secs(3))));
    let garbage = raw_exchange(&server, vec![4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], LIMIT).await;
    assert_eq!(garbage.close, Some(CloseCode::ProtocolViolation));
    assert!(garbage.reason.contains("does not decode"), "{}", garbage.reason);
    let oversized = raw_exchange(&server, u32::MAX.to_le_bytes().to_vec(), LIMIT).await;
    assert_eq!(oversized.close, Some(CloseCode::ProtocolViolation));
    assert!(oversized.reason.contains("exceeds the maximum"), "{}", oversized.reason);
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert!(outcomes.iter().all(|o| o.placed && o.errors.is_empty()), "{outcomes:?}");
    server.stop().await;
}

/// A stream that ends inside a frame is a protocol violation named in the close reason, not a
/// clean leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_inside_a_frame_is_a_protocol_violation() {
    let server = TestServer::start(SLOW_BOOT).await;
    let token = mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(2));
    let mut bytes = frames(&[ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token }]);
    let ready = frames(&[ClientMessage::Leave]);
    bytes.extend_from_slice(&ready[..ready.len() - 1]);
    let outcome = raw_exchange(&server, bytes, LIMIT).await;
    assert_eq!(outcome.close, Some(CloseCode::ProtocolViolation));
    assert!(outcome.reason.contains("ended inside a frame"), "{}", outcome.reason);
    server.stop().await;
}

/// Connections that never log in hold a pending slot only until the hello timeout: beyond the
/// pending caps new connections are refused at the QUIC level, and once the idle ones are
/// closed (code 8) a player logs in normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_lock_players_out() {
    let config =
        "[network]\nhello_timeout_ms = 1000\nmax_pending_connections = 2\nmax_pending_per_ip = 2\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let (endpoint, client) =
        gatehouse_client_sim::swarm::client_endpoint(server.addr, &server.cert).unwrap();
    let mut idle = Vec::new();
    for _ in 0..2 {
        let connecting = endpoint.connect_with(client.clone(), server.addr, "localhost").unwrap();
        idle.push(within(LIMIT, "an idle connection", connecting).await.unwrap());
    }
    let refused = endpoint.connect_with(client.clone(), server.addr, "localhost").unwrap();
    let refused = within(LIMIT, "the refusal", refused).await;
    assert!(refused.is_err(), "beyond the pending caps a connection is refused");
    for connection in &idle {
        within(LIMIT, "the hello timeout", connection.closed()).await;
        assert!(matches!(
            connection.close_reason(),
            Some(quinn::ConnectionError::ApplicationClosed(c)) if c.error_code.into_inner() == u64::from(CloseCode::HelloTimeout.code())
        ));
    }
    let outcomes = within(
        Duration::from_secs(20),
        "a player",
        run_swarm_outcomes(server.swarm(1, 0, Duration::from_secs(3))),
    )
    .await
    .unwrap();
    assert!(outcomes[0].placed && outcomes[0].errors.is_empty(), "{outcomes:?}");
    server.stop().await;
}

/// Logs in `index` through `relay`: its handshake is slowed by the relay. Returns the first
/// server message, or how the connection ended.
async fn log_in_through(
    server: &TestServer,
    relay: &HandshakeRelay,
    index: usize,
) -> Result<ServerMessage, String> {
    let (endpoint, client) =
        gatehouse_client_sim::swarm::client_endpoint(server.addr, &server.cert)
            .map_err(|e| format!("client endpoint: {e}"))?;
    let connecting = endpoint
        .connect_with(client, relay.addr, "localhost")
        .map_err(|e| format!("connect: {e}"))?;
    let connection = within(LIMIT, "the slowed handshake", connecting).await;
    let connection = connection.map_err(|e| format!("handshake: {e}"))?;
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| format!("stream: {e}"))?;
    let token =
        mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(index));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    send.write_all(&frames(&[hello])).await.map_err(|e| format!("write: {e}"))?;
    let mut decoder = FrameDecoder::new(gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN);
    within(LIMIT, "the answer to Hello", async {
        loop {
            if let Ok(Some(message)) = decoder.next_message::<ServerMessage>() {
                return Ok(message);
            }
            match recv.read_chunk(4096, true).await {
                Ok(Some(chunk)) => decoder.extend(&chunk.bytes),
                Ok(None) => return Err("stream ended".to_owned()),
                Err(e) => return Err(format!("read: {e}; {:?}", connection.close_reason())),
            }
        }
    })
    .await
}

/// Issue 12 item 6: the handshake has a budget of its own, and the hello timeout counts from its
/// end. A handshake held up for longer than the hello timeout (but within the handshake
/// timeout) still logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handshake_does_not_eat_the_hellos_budget() {
    let config = "[network]\nhandshake_timeout_ms = 10000\nhello_timeout_ms = 1000\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let relay = HandshakeRelay::start(server.addr, 2, Duration::from_millis(1500)).await;
    let answer = log_in_through(&server, &relay, 3).await;
    assert!(matches!(answer, Ok(ServerMessage::Welcome { .. })), "{answer:?}");
    server.stop().await;
}

/// Issue 12 item 6, the other side: a handshake that does not finish within the handshake
/// timeout is abandoned; the client never gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_beyond_its_budget_is_abandoned() {
    let config = "[network]\nhandshake_timeout_ms = 500\nhello_timeout_ms = 5000\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let relay = HandshakeRelay::start(server.addr, 2, Duration::from_millis(1500)).await;
    let answer = log_in_through(&server, &relay, 4).await;
    assert!(answer.is_err(), "{answer:?}");
    server.stop().await;
}

/// A client that logs in and then never reports ready is kicked at the client-ready timeout
/// even though the route travels more often than that; the others' loading screens come down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_cannot_hold_everyone_under_the_loading_screen() {
    let config = "[game]\nclient_ready_timeout_ms = 3000\n";
    let world = worlds::with_route(SLOW_BOOT, &["forest", "harbor"], 2000);
    let server = TestServer::start_with(config, &world).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(3, 0, Duration::from_secs(12))));
    let token = mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(9));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    let silent = raw_silent(&server, frames(&[hello]), Duration::from_secs(20)).await;
    assert_eq!(silent.close, Some(CloseCode::ReadyTimeout), "{}", silent.reason);
    let outcomes = within(Duration::from_secs(40), "the swarm", swarm).await.unwrap().unwrap();
    let report = gatehouse_client_sim::report::SwarmReport::from_outcomes(&outcomes);
    assert_eq!(report.clients_placed, 3, "{report}");
    assert!(report.transitions_completed >= 3, "{report}");
    let counters = server.handle.snapshot().await.unwrap().counters;
    assert_eq!(counters.ready_timeouts, 1, "{counters:?}");
    server.stop().await;
}

/// A client that stops reading (grants no flow-control credit) cannot keep a closed
/// connection alive: when its player logs in again elsewhere, the old connection is closed
/// (code 5) within a bounded time even though the frames queued before the close never drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_stops_reading_is_still_closed_when_replaced() {
    let server = TestServer::start(SLOW_BOOT).await;
    let (endpoint, mut config) =
        gatehouse_client_sim::swarm::client_endpoint(server.addr, &server.cert).unwrap();
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(quinn::VarInt::from_u32(64));
    transport.receive_window(quinn::VarInt::from_u32(64));
    config.transport_config(std::sync::Arc::new(transport));
    let stuck =
        within(LIMIT, "connect", endpoint.connect_with(config, server.addr, "localhost").unwrap())
            .await
            .unwrap();
    let (mut send, _recv_never_read) = stuck.open_bi().await.unwrap();
    let token = mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(5));
    send.write_all(&frames(&[ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token }]))
        .await
        .unwrap();
    wait_for_snapshot(&server.handle, LIMIT, "the stuck client's login", |s| s.players.len() == 1)
        .await;
    // The same player logs in normally: the stuck connection is replaced.
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(1, 5, Duration::from_secs(3))));
    within(Duration::from_secs(8), "the stuck connection to be closed", stuck.closed()).await;
    assert!(
        matches!(
            stuck.close_reason(),
            Some(quinn::ConnectionError::ApplicationClosed(c)) if c.error_code.into_inner() == u64::from(CloseCode::Replaced.code())
        ),
        "{:?}",
        stuck.close_reason()
    );
    let outcomes = within(Duration::from_secs(20), "the new login", swarm).await.unwrap().unwrap();
    assert!(outcomes[0].placed, "{outcomes:?}");
    server.stop().await;
}

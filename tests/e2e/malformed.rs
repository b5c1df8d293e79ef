//! Malformed input: a clear refusal that affects only its sender. (The attacks of the hardening
//! review, each beside well-behaved players, are the hostile-client suite: `server/tests/hostile.rs`.)

use std::time::Duration;

use gatehouse_client_sim::swarm::{mint_token, player_id, run_swarm_outcomes};
use gatehouse_protocol::FrameDecoder;
use gatehouse_protocol::token::{DEV_TOKEN_KEY, TokenKey};
use gatehouse_protocol::{ClientMessage, CloseCode, PROTOCOL_VERSION, RejectReason, ServerMessage};
use gatehouse_tests::relay::HandshakeRelay;
use gatehouse_tests::worlds::{self, SLOW_BOOT};
use gatehouse_tests::{
    TestServer, assert_hello_refused, frames, raw_exchange, raw_silent, wait_for_snapshot, within,
};

const LIMIT: Duration = Duration::from_secs(10);

/// A wrong protocol version is rejected with UnsupportedVersion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_protocol_version_is_rejected() {
    let server = TestServer::start(SLOW_BOOT).await;
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(1));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION + 1, token };
    assert_hello_refused(&server, hello, RejectReason::UnsupportedVersion).await;
    server.stop().await;
}

/// A first message other than `Hello` that decodes is refused `Rejected { HelloExpected }`, then
/// `Closing { 3 }` on the intact stream, then closed with code 3 (docs/protocol.md 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_other_than_hello_is_rejected_then_closing_3() {
    let server = TestServer::start(SLOW_BOOT).await;
    for first in [ClientMessage::RestartRequest, ClientMessage::Leave] {
        let outcome = raw_exchange(&server, frames(&[first]), LIMIT).await;
        assert!(
            matches!(
                outcome.messages.as_slice(),
                [
                    ServerMessage::Rejected { reason: RejectReason::HelloExpected, .. },
                    ServerMessage::Closing { code: 3, .. },
                ]
            ),
            "{:?}",
            outcome.messages
        );
        assert_eq!(outcome.close, Some(CloseCode::ProtocolViolation));
    }
    server.stop().await;
}

/// Garbage and oversized frames close only that connection, with the decoder's reason in
/// CONNECTION_CLOSE and nothing on the stream (docs/protocol.md 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_frames_close_only_their_connection() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(2, 0, Duration::from_secs(3))));
    let garbage = raw_exchange(&server, vec![4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], LIMIT).await;
    assert_eq!(garbage.close, Some(CloseCode::ProtocolViolation));
    // The stream is broken: no Rejected, no Closing, the reason in CONNECTION_CLOSE only.
    assert!(garbage.messages.is_empty(), "{:?}", garbage.messages);
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

/// A client that finishes its stream right after its `Hello`, without `Leave`, has left: the
/// server closes with code 0 and no reason, and sends no `Closing` (docs/protocol.md 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_finished_without_leave_is_closed_with_code_0_and_no_closing() {
    let server = TestServer::start(SLOW_BOOT).await;
    let token = mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(3));
    let bytes = frames(&[ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token }]);
    let outcome = raw_exchange(&server, bytes, LIMIT).await;
    assert_eq!(outcome.close, Some(CloseCode::Leave), "{}", outcome.reason);
    assert!(outcome.reason.is_empty(), "{}", outcome.reason);
    assert!(
        !outcome.messages.iter().any(|m| matches!(m, ServerMessage::Closing { .. })),
        "{:?}",
        outcome.messages
    );
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

/// The handshake has a budget of its own, and the hello timeout counts from its end. A handshake
/// held up for longer than the hello timeout (but within the handshake timeout) still logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handshake_does_not_eat_the_hellos_budget() {
    let config = "[network]\nhandshake_timeout_ms = 10000\nhello_timeout_ms = 1000\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let relay = HandshakeRelay::start(server.addr, 2, Duration::from_millis(1500)).await;
    let answer = log_in_through(&server, &relay, 3).await;
    assert!(matches!(answer, Ok(ServerMessage::Welcome { .. })), "{answer:?}");
    server.stop().await;
}

/// The handshake's budget, the other side: a handshake that does not finish within the handshake
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

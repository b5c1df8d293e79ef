//! The hostile-client suite: every attack of the hardening review replayed against a real
//! server (docs/security.md), each beside well-behaved players who must not notice it: they are
//! placed with no error, transitions complete, `/health` answers and their saves succeed
//! ([`assert_unaffected`]). One section per attack, in the order docs/security.md gives them:
//!
//! 1. tokens minted with the public development key, and a leaked travel ticket;
//! 2. exhausting the admin endpoint, and starting travels from a foreign page;
//! 3. locking others out of the front door: pending connections, handshake floods;
//! 4. burning the game task with a message flood;
//! 5. unbounded tokens and relaunch storms of one token;
//! 6. forging log lines with a close reason;
//! 7. growing what the server keeps per player by dying over and over.
//!
//! The start-up refusals behind 1 (the development key or no admin token on a public bind) are
//! properties of the binary's configuration, tested in `admin_token.rs`.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gatehouse_client_sim::report::ClientOutcome;
use gatehouse_client_sim::session::SessionConfig;
use gatehouse_client_sim::swarm::{client_config, mint_token, player_id, run_swarm_outcomes};
use gatehouse_protocol::token::{DEV_TOKEN_KEY, SessionClaims, TokenKey};
use gatehouse_protocol::{
    ClientMessage, CloseCode, NodeId, PROTOCOL_VERSION, RejectReason, ServerMessage,
};
use gatehouse_server::admin::LOOPBACK_RESERVE;
use gatehouse_tests::fleet::{Schema, fleet};
use gatehouse_tests::process::shipped_config;
use gatehouse_tests::worlds::{HAZARDOUS, QUICK, SLOW_BOOT};
use gatehouse_tests::{
    RawPlayer, TestServer, assert_hello_refused, frames, http, http_with, metric, raw_exchange,
    raw_silent, wait_for_boot, wait_for_snapshot, within,
};

const LIMIT: Duration = Duration::from_secs(10);

// 1. The public development key.

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

/// A token minted with the public development key, which anyone can read, is refused by a
/// server that has its own key; the players holding its tokens play on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_minted_with_the_public_development_key_is_refused_by_an_operator_key() {
    let key = "an-operator-key-of-enough-bytes";
    let server =
        TestServer::start_with(&format!("[auth]\ntoken_key = \"{key}\"\n"), SLOW_BOOT).await;
    let mut swarm = server.swarm(3, 0, Duration::from_secs(3));
    swarm.token_key = TokenKey::new(key);
    let swarm = tokio::spawn(run_swarm_outcomes(swarm));
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(0));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    assert_hello_refused(&server, hello, RejectReason::BadSignature).await;
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

/// docs/spec/travel.md V9 (docs/security.md, "Trust"): a leaked travel ticket is worth one
/// arrival. A player moving from `hub-1` to `dungeon-1` redeems its ticket there; the same
/// ticket replayed at `dungeon-1` while that seat is redeemed is refused `TicketUsed`, at
/// another server (`hub-1`, which it does not name) `TicketStale`, and once the first arrival
/// is placed `TicketStale` again; each refusal counts in `gatehouse_tickets_refused_total`, and
/// the first login plays on: placed at the destination, its source closed `Travelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tests),
    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_leaked_ticket_is_worth_one_arrival() {
    let schema = Schema::create().await;
    let (hub, dungeon) = fleet(&schema, false).await;
    wait_for_boot(&hub.handle, LIMIT).await;
    wait_for_boot(&dungeon.handle, LIMIT).await;
    let hello = |token: String| ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(0));
    let mut source = RawPlayer::connect(&hub, hello(token)).await;
    let end_join = |m: &ServerMessage| matches!(m, ServerMessage::EndJoin { .. });
    source.play_until(LIMIT, "its join's end at hub-1", true, end_join).await;
    assert!(hub.handle.travel(NodeId::new("dungeon").unwrap()).await, "the travel was taken");
    let travel_to = |m: &ServerMessage| matches!(m, ServerMessage::TravelTo(_));
    let ServerMessage::TravelTo(to) =
        source.play_until(LIMIT, "its TravelTo", true, travel_to).await
    else {
        unreachable!("play_until returns the message asked for")
    };
    let ticket = to.ticket.clone();

    // The first arrival: admitted and shown its join, not placed yet (its seat is redeemed).
    let mut first = RawPlayer::connect(&dungeon, hello(ticket.clone())).await;
    let show_join = |m: &ServerMessage| matches!(m, ServerMessage::ShowJoin { .. });
    let join = first.play_until(LIMIT, "its ShowJoin at dungeon-1", false, show_join).await;
    assert_hello_refused(&dungeon, hello(ticket.clone()), RejectReason::TicketUsed).await;
    assert_hello_refused(&hub, hello(ticket.clone()), RejectReason::TicketStale).await;

    // The first login plays on: it streams, is placed, and its source lets it go.
    let ServerMessage::ShowJoin { join_id, .. } = join else { unreachable!("a ShowJoin") };
    first.send(&ClientMessage::JoinReady { join_id }).await;
    first.play_until(LIMIT, "its join's end at dungeon-1", true, end_join).await;
    assert_eq!(source.closed(LIMIT).await, Some(CloseCode::Travelled));
    let placed = wait_for_snapshot(&dungeon.handle, LIMIT, "the traveller placed", |s| {
        s.players.len() == 1 && s.players.iter().all(|p| p.placed)
    })
    .await;
    assert_eq!(placed.counters.travellers_placed, 1, "{:?}", placed.counters);
    // Its seat ended with its placement: the ticket is stale there now too.
    assert_hello_refused(&dungeon, hello(ticket), RejectReason::TicketStale).await;
    assert_eq!(first.closed_with(), None, "the first login still plays");
    assert_eq!(metric(&dungeon, "gatehouse_tickets_refused_total").await, 2.0);
    assert_eq!(metric(&hub, "gatehouse_tickets_refused_total").await, 1.0);
    hub.stop().await;
    dungeon.stop().await;
    schema.drop().await;
}

// 2. The admin endpoint.

/// The admin endpoint's connections are bounded (docs/security.md, "The admin endpoint"): past
/// its cap and the loopback reserve a connection is closed at once, unanswered; one that
/// trickles its request head and one idle after a keep-alive answer are closed at the header
/// timeout; the players beside them play on and `/health` answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connections_are_capped_and_slow_or_idle_ones_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let config =
        "[admin]\nmax_connections = 4\nheader_timeout_ms = 500\nconnection_timeout_ms = 3000\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(3, 0, Duration::from_secs(3))));
    let connect = || async {
        within(LIMIT, "an admin connection", TcpStream::connect(server.admin)).await.unwrap()
    };
    // Every slot, the loopback reserve's too: one idle after a keep-alive answer, the rest
    // trickling a request head.
    let mut kept = connect().await;
    let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", server.admin);
    kept.write_all(request.as_bytes()).await.unwrap();
    let mut answer = [0u8; 256];
    let n = within(LIMIT, "the keep-alive answer", kept.read(&mut answer)).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"));
    let mut held = Vec::new();
    for _ in 1..4 + LOOPBACK_RESERVE {
        let mut trickling = connect().await;
        trickling.write_all(b"GET /hea").await.unwrap();
        held.push(trickling);
    }
    let mut over = connect().await;
    let _ = over.write_all(request.as_bytes()).await;
    let mut rest = Vec::new();
    let _ = within(LIMIT, "the refusal", over.read_to_end(&mut rest)).await;
    assert!(
        rest.is_empty(),
        "over the cap: closed unanswered, got {}",
        String::from_utf8_lossy(&rest)
    );
    // Each is closed by the header timeout (500 ms), well before the connection timeout.
    let started = std::time::Instant::now();
    for connection in held.iter_mut().chain(std::iter::once(&mut kept)) {
        let mut rest = Vec::new();
        let _ = within(LIMIT, "the header timeout", connection.read_to_end(&mut rest)).await;
    }
    assert!(started.elapsed() < Duration::from_millis(2_500), "{:?}", started.elapsed());
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

/// Without an admin token, `POST /travel` on loopback answers only a request whose `Host` is a
/// loopback name: a web page that rebinds its own name to 127.0.0.1 cannot start travels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_travel_with_a_foreign_host_is_refused_without_a_token() {
    let server = TestServer::start(SLOW_BOOT).await;
    let (status, body) =
        http_with(server.admin, "POST", "/travel/forest", "Host: evil.example\r\n").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Host"), "{body}");
    let (_, body) = http(server.admin, "GET", "/state").await;
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_ne!(state["transition_target"], "forest", "{state}");
    let (status, _) = http(server.admin, "POST", "/travel/forest").await;
    assert_eq!(status, 202, "a loopback Host is served");
    server.stop().await;
}

// 3. The front door.

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

/// One address starting handshakes faster than its rate (a burst of 4, then one a second)
/// is refused past its burst, before any TLS work; players from another address log in as if
/// nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_from_one_address_is_refused_past_its_burst() {
    let config = "[network]\nhandshake_burst = 4\nhandshakes_per_ip_per_s = 1\n";
    let server = TestServer::start_with(config, SLOW_BOOT).await;
    let client = client_config(&server.cert).unwrap();
    let endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 2], 0))).unwrap();
    let attempts: Vec<_> = (0..24)
        .map(|_| endpoint.connect_with(client.clone(), server.addr, "localhost").unwrap())
        .collect();
    let mut refused = 0;
    for attempt in attempts {
        if within(LIMIT, "a flooding handshake", attempt).await.is_err() {
            refused += 1;
        }
    }
    // The burst, and one or two refills while the 24 ran.
    assert!((17..=20).contains(&refused), "{refused} of 24 refused");
    let outcomes = within(
        Duration::from_secs(20),
        "the players",
        run_swarm_outcomes(server.swarm(3, 0, Duration::from_secs(3))),
    )
    .await
    .unwrap();
    assert_unaffected(&server, &outcomes).await;
    server.stop().await;
}

// 4. A message flood.

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

// 5. Unbounded tokens, and relaunch storms.

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
        match outcome.rejected() {
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

// 6. Forged log lines.

/// A client's close reason carrying a line break and a log line of its own is logged escaped,
/// on the server's line: in the human log format, where a raw newline would start a forged
/// line, no line starts with the client's text. (The real binary, for its real log format.)
#[test]
fn a_close_reason_cannot_forge_a_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = HumanLogServer::start(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let config = client_config(&dir.path().join("data/dev-cert.der")).unwrap();
        let connecting = endpoint.connect_with(config, server.addr, "localhost").unwrap();
        let connection = within(LIMIT, "the handshake", connecting).await.unwrap();
        let (mut send, _recv) = connection.open_bi().await.unwrap();
        let token = mint_token(&TokenKey::new(DEV_TOKEN_KEY), player_id(0));
        let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
        send.write_all(&frames(&[hello])).await.unwrap();
        server.wait_for("the login", |line| line.contains("player logged in"));
        let reason = b"bye\nFORGED  WARN gatehouse_server: the admin token is 1234";
        connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), reason);
        endpoint.wait_idle().await;
    });
    let line = server.wait_for("the departure", |line| line.contains("player left"));
    assert!(line.contains("bye\\nFORGED"), "escaped on the server's own line: {line}");
    assert!(!server.lines.iter().any(|l| l.starts_with("FORGED")), "{:#?}", server.lines);
}

/// The `gatehouse-server` binary with human-readable logs, on ephemeral loopback ports: its
/// game address and every line it logged, read as they come.
struct HumanLogServer {
    child: Child,
    addr: SocketAddr,
    log: std::sync::mpsc::Receiver<String>,
    lines: Vec<String>,
}

impl HumanLogServer {
    fn start(dir: &std::path::Path) -> HumanLogServer {
        let world = dir.join("world.toml");
        std::fs::write(&world, QUICK).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse-server"))
            .env_clear()
            .arg("--config")
            .arg(shipped_config())
            .args(["--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"])
            .args(["--log-format", "human"])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--world")
            .arg(&world)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let unset = SocketAddr::from(([0, 0, 0, 0], 0));
        let mut server = HumanLogServer { child, addr: unset, log, lines: Vec::new() };
        let listening =
            server.wait_for("its address", |l| l.contains("listening") && !l.contains("admin"));
        let addr = listening.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
        server.addr = addr.parse().unwrap();
        server
    }

    /// The first line (logged so far or within 20 s) that `matches`.
    fn wait_for(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        if let Some(line) = self.lines.iter().find(|l| matches(l)) {
            return line.clone();
        }
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = self
                .log
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the server never logged {what}: {:#?}", self.lines));
            self.lines.push(line.clone());
            if matches(&line) {
                return line;
            }
        }
    }
}

impl Drop for HumanLogServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// 7. What the server keeps per player.

/// A player who dies and restarts over and over on a burning node possesses a new pawn each
/// time; the server remembers at most its last 8 (what an acknowledgement can still name), and
/// the other player beside it plays on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_dying_over_and_over_keeps_at_most_eight_recent_pawns() {
    let server = TestServer::start(HAZARDOUS).await;
    let mut swarm = server.swarm(2, 0, Duration::from_secs(12));
    swarm.session =
        SessionConfig { restart_after_death: Some(Duration::from_millis(50)), ..swarm.session };
    let swarm = tokio::spawn(run_swarm_outcomes(swarm));
    let mut most = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(11) {
        if let Some(snapshot) = server.handle.snapshot().await {
            most = snapshot.players.iter().map(|p| p.recent_pawns).max().unwrap_or(0).max(most);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let outcomes = within(Duration::from_secs(30), "the swarm", swarm).await.unwrap().unwrap();
    let deaths: u64 = outcomes.iter().map(|o| o.stats.deaths).sum();
    assert!(deaths >= 10, "enough deaths to pass the bound: {deaths}");
    assert_eq!(most, 8, "at most 8 remembered, and 8 reached");
    for o in &outcomes {
        assert!(o.connected && o.errors.is_empty() && o.stats.errors.is_empty(), "{o:?}");
    }
    server.stop().await;
}

// The well-behaved players.

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

//! Test harness for end-to-end tests: a real server bound to 127.0.0.1 on an ephemeral port,
//! in this process, with its own data dir, and helpers to point simulated or raw clients at it.
//!
//! Every wait in a test goes through [`within`], so a bug fails the test instead of hanging CI.
//!
//! [`sim`] is the other harness: the real game core and real simulated clients in memory, on
//! simulated time, for deterministic cross-side tests. [`worlds`] holds every test world;
//! [`process`] starts the server binary as an operator would; [`relay`] slows a handshake down;
//! [`fleet`] starts two servers that move players to each other, on one PostgreSQL store.

#![forbid(unsafe_code)]
// A test harness: a failed expectation here is a failed test, which is what it should be.
#![allow(clippy::expect_used, clippy::unwrap_used)]

pub mod fleet;
pub mod process;
pub mod relay;
pub mod sim;
pub mod worlds;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_client_sim::swarm::SwarmConfig;
use gatehouse_protocol::{ClientMessage, CloseCode, FrameDecoder, RejectReason, ServerMessage};
use gatehouse_server::config::{ServerConfig, parse_world};
use gatehouse_server::{GameHandle, Server};
use tokio_util::sync::CancellationToken;

/// A running server.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its certificate, for clients to trust.
    pub cert: PathBuf,
    /// A handle to the game task.
    pub handle: GameHandle,
    /// The admin endpoint.
    pub admin: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), gatehouse_server::ServerError>>,
    _data_dir: tempfile::TempDir,
}

/// Runs `future`, failing the test if it takes longer than `limit`.
pub async fn within<T>(
    limit: Duration,
    what: &str,
    future: impl std::future::Future<Output = T>,
) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

impl TestServer {
    /// Starts a server on `world`, with `server_toml` as its config file text.
    pub async fn start_with(server_toml: &str, world: &str) -> TestServer {
        Self::start_adjusted(server_toml, world, |_| {}).await
    }

    /// As [`TestServer::start_with`], with `adjust` applied to the checked config before the
    /// server binds: for a test that needs a setting the config's checks tie to what it does
    /// not test (a fleet directory, which needs a PostgreSQL store, for a test of the peer
    /// link), or a game port known before the start (a fleet's servers name each other). The
    /// game and admin ports are ephemeral on 127.0.0.1 unless `adjust` sets them.
    pub async fn start_adjusted(
        server_toml: &str,
        world: &str,
        adjust: impl FnOnce(&mut ServerConfig),
    ) -> TestServer {
        let data_dir = tempfile::tempdir().expect("a temp dir");
        let config_path = data_dir.path().join("server.toml");
        let mut config = ServerConfig::parse(&config_path, server_toml).expect("valid test config");
        config.network.bind = "127.0.0.1:0".parse().expect("an address");
        config.admin.bind = "127.0.0.1:0".parse().expect("an address");
        adjust(&mut config);
        config.data_dir = data_dir.path().to_owned();
        let world =
            parse_world(&data_dir.path().join("world.toml"), world).expect("valid test world");
        let server = Server::bind(&config, world).await.expect("the server binds");
        let addr = server.local_addr().expect("a bound address");
        let admin = server.admin_addr().expect("the admin endpoint is on");
        let handle = server.handle();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server.run(shutdown.clone()));
        TestServer {
            addr,
            cert: data_dir.path().join("dev-cert.der"),
            handle,
            admin,
            shutdown,
            task,
            _data_dir: data_dir,
        }
    }

    /// Starts a server with default settings on `world`.
    pub async fn start(world: &str) -> TestServer {
        Self::start_with("", world).await
    }

    /// A swarm of `clients` starting at `first_index`, staying `duration`, streaming each level
    /// in 20–120 ms.
    pub fn swarm(&self, clients: usize, first_index: usize, duration: Duration) -> SwarmConfig {
        SwarmConfig {
            first_index,
            session: SessionConfig {
                stream_time: (Duration::from_millis(20), Duration::from_millis(120)),
                seed: 7,
                restart_after_death: None,
                full: true,
                misbehaviour: None,
                ..SessionConfig::default()
            },
            ..swarm_config(self.addr, self.cert.clone(), clients, duration)
        }
    }

    /// Waits (at most `limit`) for the server to stop on its own, without asking it to: what
    /// its `run` returned.
    pub async fn stopped(self, limit: Duration) -> Result<(), gatehouse_server::ServerError> {
        within(limit, "the server to stop on its own", self.task).await.expect("the server task")
    }

    /// Starts the shutdown drain without waiting for it (see [`TestServer::stop`]).
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Stops the server (if [`TestServer::begin_shutdown`] has not) and waits for its drain.
    pub async fn stop(self) {
        self.shutdown.cancel();
        within(Duration::from_secs(10), "the server to stop", self.task)
            .await
            .expect("the server task")
            .expect("the server stops cleanly");
    }
}

/// A swarm of `clients` (first index 0) against the server at `server`, trusting the
/// certificate file `cert`, staying `duration`, with the default client session and the shipped
/// development token key.
pub fn swarm_config(
    server: SocketAddr,
    cert: PathBuf,
    clients: usize,
    duration: Duration,
) -> SwarmConfig {
    SwarmConfig {
        // A test that asks for misbehaving clients gets every kind in turn.
        misbehaviours: gatehouse_client_sim::misbehaviour::Misbehaviour::ALL.to_vec(),
        ..SwarmConfig::new(server, cert, clients, duration)
    }
}

/// What a raw connection saw: the messages, then how the server closed it.
#[derive(Debug)]
pub struct RawOutcome {
    /// Messages received, in order.
    pub messages: Vec<ServerMessage>,
    /// The server's close code, if it closed with one of ours.
    pub close: Option<CloseCode>,
    /// The close reason text.
    pub reason: String,
}

impl RawOutcome {
    /// The reason of the `Rejected` the server sent, if it sent one.
    pub fn rejected(&self) -> Option<RejectReason> {
        self.messages.iter().find_map(|m| match m {
            ServerMessage::Rejected { reason, .. } => Some(*reason),
            _ => None,
        })
    }
}

/// Sends `hello` on a connection of its own and asserts it is refused with `reason`, then
/// `Closing { 2 }`, then closed with code 2 (`Rejected`), within 10 s (docs/protocol.md 6).
pub async fn assert_hello_refused(server: &TestServer, hello: ClientMessage, reason: RejectReason) {
    let outcome = raw_exchange(server, frames(&[hello]), Duration::from_secs(10)).await;
    assert!(
        matches!(outcome.messages.as_slice(), [
            ServerMessage::Rejected { reason: r, .. },
            ServerMessage::Closing { code: 2, .. },
        ] if *r == reason),
        "{:?}",
        outcome.messages
    );
    assert_eq!(outcome.close, Some(CloseCode::Rejected));
}

/// A QUIC connection to `server` (trusting its certificate, dialling `localhost`), within
/// `limit`, and the endpoint it runs on (keep it while the connection is used).
pub async fn dial(server: &TestServer, limit: Duration) -> (quinn::Endpoint, quinn::Connection) {
    let (endpoint, config) =
        gatehouse_client_sim::swarm::client_endpoint(server.addr, &server.cert)
            .expect("a client endpoint");
    let connection = within(limit, "connect", async {
        endpoint
            .connect_with(config, server.addr, "localhost")
            .expect("connect")
            .await
            .expect("handshake")
    })
    .await;
    (endpoint, connection)
}

/// Connects without the simulator, writes `bytes` on the control stream and ends it, then reads
/// until the server closes the connection (bounded by `limit`).
pub async fn raw_exchange(server: &TestServer, bytes: Vec<u8>, limit: Duration) -> RawOutcome {
    raw_connection(server, bytes, true, limit).await
}

/// As [`raw_exchange`], but keeps the stream open after the bytes: a client that went silent.
pub async fn raw_silent(server: &TestServer, bytes: Vec<u8>, limit: Duration) -> RawOutcome {
    raw_connection(server, bytes, false, limit).await
}

async fn raw_connection(
    server: &TestServer,
    bytes: Vec<u8>,
    finish: bool,
    limit: Duration,
) -> RawOutcome {
    let (_endpoint, connection) = dial(server, limit).await;
    let (mut send, mut recv) = connection.open_bi().await.expect("a stream");
    send.write_all(&bytes).await.expect("write");
    if finish {
        // End the stream after the bytes, as a client that sent them and stopped would.
        let _ = send.finish();
    }
    let mut decoder = FrameDecoder::new(gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN);
    let mut messages = Vec::new();
    within(limit, "the server to close the connection", async {
        while let Ok(Some(chunk)) = recv.read_chunk(4096, true).await {
            decoder.extend(&chunk.bytes);
            while let Ok(Some(m)) = decoder.next_message::<ServerMessage>() {
                messages.push(m);
            }
        }
        connection.closed().await
    })
    .await;
    let (close, reason) = match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(c)) => (
            CloseCode::from_code(c.error_code.into_inner()),
            String::from_utf8_lossy(&c.reason).into_owned(),
        ),
        other => (None, format!("{other:?}")),
    };
    RawOutcome { messages, close, reason }
}

/// A player's connection without the simulator, for a test that must hold what a client sends
/// (a travel ticket, docs/spec/travel.md V9): it sends what the test says and, on cue, answers
/// what the protocol asks of a client that streams at once (docs/protocol.md 4): `JoinReady`
/// for a `ShowJoin`, `TransitionShown` and `TransitionReady` for a `ShowTransition`,
/// `TransitionShown` for a `TravelTo`, `PossessionAcknowledged` for a `Possessed`.
pub struct RawPlayer {
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
    /// Every message read so far, in order (those a snapshot or a batch carries as they came).
    pub messages: Vec<ServerMessage>,
    _endpoint: quinn::Endpoint,
}

impl RawPlayer {
    /// Connects to `server` (trusting its certificate, dialling `localhost`) and sends `hello`.
    pub async fn connect(server: &TestServer, hello: ClientMessage) -> RawPlayer {
        let (endpoint, connection) = dial(server, Duration::from_secs(10)).await;
        let (send, recv) = connection.open_bi().await.expect("a stream");
        let decoder = FrameDecoder::new(gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN);
        let mut player = RawPlayer {
            connection,
            send,
            recv,
            decoder,
            messages: Vec::new(),
            _endpoint: endpoint,
        };
        player.send(&hello).await;
        player
    }

    /// Sends `message`.
    pub async fn send(&mut self, message: &ClientMessage) {
        let bytes = frames(std::slice::from_ref(message));
        self.send.write_all(&bytes).await.expect("write");
    }

    /// Reads until a message matching `until` (or one a snapshot or a batch carries), within
    /// `limit`, answering the protocol's asks if `answer`; returns that message. Fails the test
    /// if the server ends the stream first, naming `what` and everything read.
    pub async fn play_until(
        &mut self,
        limit: Duration,
        what: &str,
        answer: bool,
        until: impl Fn(&ServerMessage) -> bool,
    ) -> ServerMessage {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            while let Ok(Some(message)) = self.decoder.next_message::<ServerMessage>() {
                for m in stood_for(&message) {
                    self.messages.push(m.clone());
                    if answer {
                        self.answer(&m).await;
                    }
                    if until(&m) {
                        return m;
                    }
                }
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let chunk = tokio::time::timeout(left, self.recv.read_chunk(4096, true)).await;
            match chunk {
                Ok(Ok(Some(chunk))) => self.decoder.extend(&chunk.bytes),
                Ok(_) => panic!("the stream ended before {what}: {:?}", self.messages),
                Err(_) => panic!("no {what} within {limit:?}: {:?}", self.messages),
            }
        }
    }

    /// What a client that streams at once answers to `message`.
    async fn answer(&mut self, message: &ServerMessage) {
        use gatehouse_protocol::ClientMessage as C;
        let answers = match message {
            ServerMessage::ShowJoin { join_id, .. } => vec![C::JoinReady { join_id: *join_id }],
            ServerMessage::ShowTransition { transition_id, .. } => vec![
                C::TransitionShown { transition_id: *transition_id },
                C::TransitionReady { transition_id: *transition_id },
            ],
            ServerMessage::TravelTo(to) => {
                vec![C::TransitionShown { transition_id: to.transition_id }]
            }
            ServerMessage::Possessed { pawn_id } => {
                vec![C::PossessionAcknowledged { pawn_id: *pawn_id }]
            }
            _ => Vec::new(),
        };
        for answer in answers {
            self.send(&answer).await;
        }
    }

    /// The server's close code, once it closed the connection with one of ours.
    pub fn closed_with(&self) -> Option<CloseCode> {
        match self.connection.close_reason() {
            Some(quinn::ConnectionError::ApplicationClosed(c)) => {
                CloseCode::from_code(c.error_code.into_inner())
            }
            _ => None,
        }
    }

    /// Waits, within `limit`, for the server to close the connection; its close code.
    pub async fn closed(&self, limit: Duration) -> Option<CloseCode> {
        within(limit, "the server to close the connection", self.connection.closed()).await;
        self.closed_with()
    }
}

/// The messages `message` stands for, in order: those a `WorldSnapshot` or a `Replicated` batch
/// carries (docs/protocol.md 4.4, 4.5), else `message` itself. A test looking for one
/// replicated message (a pawn's spawn, a player state) reads these, whichever form the server
/// sent it in.
pub fn stood_for(message: &ServerMessage) -> Vec<ServerMessage> {
    match message {
        ServerMessage::WorldSnapshot(snapshot) => snapshot.messages().collect(),
        ServerMessage::Replicated { changes } => {
            changes.iter().cloned().map(ServerMessage::from).collect()
        }
        other => vec![other.clone()],
    }
}

/// Whether `message`, or a message it stands for ([`stood_for`]), matches `matches`.
pub fn carries(message: &ServerMessage, matches: impl Fn(&ServerMessage) -> bool) -> bool {
    match message {
        ServerMessage::WorldSnapshot(_) | ServerMessage::Replicated { .. } => {
            stood_for(message).iter().any(matches)
        }
        other => matches(other),
    }
}

/// Encodes client messages as frames, back to back.
pub fn frames(messages: &[ClientMessage]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        gatehouse_protocol::encode_frame_into(
            m,
            gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
            &mut out,
        )
        .expect("test messages encode");
    }
    out
}

/// Reads `name` (a counter or gauge with its labels, as `/metrics` writes it) from the
/// server's admin endpoint (docs/operations.md, "Metrics"); fails the test if it is not there.
pub async fn metric(server: &TestServer, name: &str) -> f64 {
    let (status, body) = http(server.admin, "GET", "/metrics").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} is not in /metrics"))
}

/// One HTTP/1.1 request to the admin endpoint: the status code and the body.
pub async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    http_with(addr, method, path, &format!("Host: {addr}\r\n")).await
}

/// As [`http`], with `headers` (whole lines, each ending in CRLF, `Host` among them) instead of
/// the default `Host`.
pub async fn http_with(addr: SocketAddr, method: &str, path: &str, headers: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = within(
        Duration::from_secs(5),
        "the admin connection",
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .expect("the admin endpoint accepts");
    let request = format!(
        "{method} {path} HTTP/1.1\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("request written");
    let mut raw = Vec::new();
    within(Duration::from_secs(5), "the admin response", stream.read_to_end(&mut raw))
        .await
        .expect("response read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// Polls the game's snapshot every 50 ms until `holds` is true, failing the test after
/// `limit`: conditions are waited for, never assumed after a fixed sleep.
pub async fn wait_for_snapshot(
    handle: &GameHandle,
    limit: Duration,
    what: &str,
    holds: impl Fn(&gatehouse_server::game::GameSnapshot) -> bool,
) -> gatehouse_server::game::GameSnapshot {
    within(limit, what, async {
        loop {
            if let Some(snapshot) = handle.snapshot().await
                && holds(&snapshot)
            {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Waits until the boot travel is over: no transition in flight and a node streamed, so the
/// next login is taken through a join of its own (docs/protocol.md 4.1).
pub async fn wait_for_boot(handle: &GameHandle, limit: Duration) {
    wait_for_snapshot(handle, limit, "the boot travel's end", |s| {
        s.phase == "None" && s.streamed_node.is_some()
    })
    .await;
}

/// Travels to each of `nodes` in turn, each once `player` is placed and no transition runs
/// (the first after its join, the next after the one before ended), each wait bounded by
/// `limit`. For a client under test that must see transitions on cue.
pub async fn travel_once_placed(
    handle: &GameHandle,
    player: &str,
    nodes: &[&str],
    limit: Duration,
) {
    for node in nodes {
        wait_for_snapshot(handle, limit, "the player placed between transitions", |s| {
            s.phase == "None" && s.players.iter().any(|p| p.player.as_str() == player && p.placed)
        })
        .await;
        let node = gatehouse_protocol::NodeId::new(*node).expect("a valid node id");
        assert!(handle.travel(node).await, "the travel was taken");
    }
}

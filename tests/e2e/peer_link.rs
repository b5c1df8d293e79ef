//! The peer link between the servers of a fleet (docs/spec/travel.md V14), over real QUIC on
//! loopback: this test's `PeerLinks` dials as the source; a real server answers as the
//! destination, its core answering seat requests; fake peers on quinn stand for peers that do
//! not keep the rules. Every wait is bounded.

// The fakes and the setup are part of the tests: a failed expectation in them is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_client::{Client, ConnectConfig, Event};
use gatehouse_protocol::fleet::{
    PEER_ALPN, PEER_EXPORTER_LABEL, PEER_PROTOCOL_VERSION, PeerMessage, PeerProof, PeerRole,
};
use gatehouse_protocol::token::{self, DEV_TOKEN_KEY, SessionClaims, TokenKey};
use gatehouse_protocol::{
    CloseCode, FrameDecoder, NodeId, PlayerId, ServerId, TransitionId, encode_frame,
};
use gatehouse_server::config::TlsConfig;
use gatehouse_server::fleet::{Candidate, PeerEvent, PeerLinks, PeerSendError, PeerSettings};
use gatehouse_tests::{TestServer, wait_for_boot, within, worlds};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::rustls;
use sha2::{Digest as _, Sha256};

/// The fleet key of every server in these tests.
const KEY: &str = "a-fleet-key-of-thirty-two-bytes-0";
/// A key of another fleet.
const OTHER_KEY: &str = "another-fleets-key-of-thirty-two!";
/// The bound on every wait.
const LIMIT: Duration = Duration::from_secs(10);
/// The largest frame the fakes read or write.
const FRAME: usize = 1 << 20;

/// A server of the fleet, `crypt-1`, on the quick world, its peer link's idle timeout 3 s: the
/// fleet key and no directory, a server that only receives travellers (V12).
async fn destination() -> TestServer {
    let toml = format!("[fleet]\nserver_id = \"crypt-1\"\nticket_key = \"{KEY}\"\n");
    TestServer::start_with(&toml, worlds::QUICK).await
}

/// This test's side of the link: the source `hub-1` under `key`.
fn source(key: &str) -> PeerLinks {
    PeerLinks::new(settings(key, Duration::from_secs(3)))
}

fn settings(key: &str, idle: Duration) -> PeerSettings {
    PeerSettings {
        server: ServerId::new("hub-1").unwrap(),
        key: TokenKey::new(key),
        certificate_sha256: None,
        max_frame_len: 65_536,
        peer_timeout: Duration::from_secs(2),
        peer_idle_timeout: idle,
    }
}

/// `server` at `addr`, dialled as `localhost`, no pin.
fn candidate(addr: SocketAddr, server: &str) -> Candidate {
    Candidate {
        server: ServerId::new(server).unwrap(),
        address: addr.to_string(),
        server_name: "localhost".into(),
        certificate_sha256: None,
    }
}

/// Seats for `players` players on `node`, for travel `trn`.
fn reserve(trn: u64, node: &str, players: usize) -> PeerMessage {
    let players = (0..players).map(|i| PlayerId::new(format!("p-{i}")).unwrap()).collect();
    PeerMessage::ReserveSeats { trn: TransitionId(trn), node: NodeId::new(node).unwrap(), players }
}

async fn next(links: &mut PeerLinks, what: &str) -> PeerEvent {
    within(LIMIT, what, links.next()).await
}

/// The next event, which must be the link's loss: why.
async fn lost(links: &mut PeerLinks) -> String {
    match next(links, "the link's loss").await {
        PeerEvent::Lost { why, role: PeerRole::Source, .. } => why,
        other => panic!("expected the link lost, got {other:?}"),
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A fake source: one connection to `server` on the peer link's ALPN, its stream open.
struct FakeSource {
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
    exporter: [u8; 32],
    _endpoint: quinn::Endpoint,
}

impl FakeSource {
    async fn dial(server: &TestServer) -> FakeSource {
        let cert = rustls::pki_types::CertificateDer::from(std::fs::read(&server.cert).unwrap());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let mut crypto = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        crypto.alpn_protocols = vec![PEER_ALPN.to_vec()];
        let crypto = QuicClientConfig::try_from(crypto).unwrap();
        let config = quinn::ClientConfig::new(Arc::new(crypto));
        let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let connecting = endpoint.connect_with(config, server.addr, "localhost").unwrap();
        let connection = within(LIMIT, "the handshake", connecting).await.unwrap();
        let (send, recv) = connection.open_bi().await.unwrap();
        let mut exporter = [0; 32];
        connection
            .export_keying_material(&mut exporter, PEER_EXPORTER_LABEL.as_bytes(), &[])
            .unwrap();
        FakeSource {
            connection,
            send,
            recv,
            decoder: FrameDecoder::new(FRAME),
            exporter,
            _endpoint: endpoint,
        }
    }

    /// A `Hello` from `hub-1` at `version`, with `role`'s proof of `exporter` under `key`.
    fn hello(version: u32, key: &str, role: PeerRole, exporter: &[u8]) -> PeerMessage {
        let proof = PeerProof::new(&TokenKey::new(key), role, exporter);
        PeerMessage::Hello { version, server: ServerId::new("hub-1").unwrap(), proof }
    }

    async fn say(&mut self, message: &PeerMessage) {
        self.send.write_all(&encode_frame(message, FRAME).unwrap()).await.unwrap();
    }

    /// What it hears until the link closes, and the close code.
    async fn hear_until_closed(&mut self) -> (Vec<PeerMessage>, Option<u64>) {
        let heard =
            within(LIMIT, "the link's close", read_until_closed(&mut self.recv, &mut self.decoder))
                .await;
        let code = within(LIMIT, "the close", self.connection.closed()).await;
        (heard, application_code(&code))
    }
}

/// Reads and decodes until the stream or the connection ends.
async fn read_until_closed(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Vec<PeerMessage> {
    let mut heard = Vec::new();
    while let Ok(Some(chunk)) = recv.read_chunk(64 * 1024, true).await {
        decoder.extend(&chunk.bytes);
        while let Ok(Some(message)) = decoder.next_message::<PeerMessage>() {
            heard.push(message);
        }
    }
    heard
}

fn application_code(error: &quinn::ConnectionError) -> Option<u64> {
    match error {
        quinn::ConnectionError::ApplicationClosed(close) => Some(close.error_code.into_inner()),
        _ => None,
    }
}

/// What a fake destination heard: the `Hello`, every message after its answer, its close.
#[derive(Debug)]
struct Heard {
    hello: Option<PeerMessage>,
    after: Vec<PeerMessage>,
    closed_with: Option<u64>,
}

/// A fake destination on loopback that answers the first link's `Hello` with what `answer`
/// makes of the connection's exporter value, then listens until the link closes.
async fn fake_destination(
    answer: impl FnOnce(&[u8; 32]) -> PeerMessage + Send + 'static,
) -> (SocketAddr, tokio::task::JoinHandle<Heard>) {
    let dir = tempfile::tempdir().unwrap();
    let identity =
        gatehouse_server::net::tls::load_identity(&TlsConfig::default(), dir.path()).unwrap();
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .unwrap();
    crypto.alpn_protocols = vec![PEER_ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(crypto).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = endpoint.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _dir = dir;
        let connection = endpoint.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = connection.accept_bi().await.unwrap();
        let mut exporter = [0; 32];
        connection
            .export_keying_material(&mut exporter, PEER_EXPORTER_LABEL.as_bytes(), &[])
            .unwrap();
        let mut decoder = FrameDecoder::new(FRAME);
        let mut hello = None;
        while hello.is_none() {
            let Ok(Some(chunk)) = recv.read_chunk(64 * 1024, true).await else { break };
            decoder.extend(&chunk.bytes);
            hello = decoder.next_message::<PeerMessage>().unwrap();
        }
        let _ = send.write_all(&encode_frame(&answer(&exporter), FRAME).unwrap()).await;
        let after = read_until_closed(&mut recv, &mut decoder).await;
        let closed_with = application_code(&connection.closed().await);
        Heard { hello, after, closed_with }
    });
    (addr, task)
}

/// The Welcome a destination `crypt-1` gives on the connection whose exporter value is
/// `exporter`: its version, its role's proof under `key`.
fn welcome(version: u32, key: &str, role: PeerRole, exporter: &[u8]) -> PeerMessage {
    PeerMessage::Welcome {
        version,
        server: ServerId::new("crypt-1").unwrap(),
        server_name: "localhost".into(),
        certificate_sha256: None,
        proof: PeerProof::new(&TokenKey::new(key), role, exporter),
    }
}

/// V14: the source's `Hello` and the destination's `Welcome` each prove the fleet key; then the
/// link carries a seat request to the destination's core and its answer back. The `Welcome`
/// names the destination's certificate (what its clients pin) and never reaches the game.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_proves_the_fleet_key_both_ways_and_carries_messages_both_ways() {
    let crypt = destination().await;
    wait_for_boot(&crypt.handle, LIMIT).await;
    let mut hub = source(KEY);
    let to = candidate(crypt.addr, "crypt-1");
    hub.send(&to, reserve(1, "harbor", 2)).unwrap();
    let expected = sha256(&std::fs::read(&crypt.cert).unwrap());
    assert_eq!(
        next(&mut hub, "the link up").await,
        PeerEvent::Linked {
            server: to.server.clone(),
            server_name: "localhost".into(),
            certificate_sha256: Some(expected),
        }
    );
    match next(&mut hub, "the seats' answer").await {
        PeerEvent::Message { from, message: PeerMessage::SeatsGranted { trn, .. } } => {
            assert_eq!((from, trn), (to.server.clone(), TransitionId(1)));
        }
        other => panic!("expected the seats granted, got {other:?}"),
    }
    let release = PeerMessage::ReleaseSeats {
        trn: TransitionId(1),
        players: vec![PlayerId::new("p-0").unwrap(), PlayerId::new("p-1").unwrap()],
    };
    hub.send(&to, release).unwrap();
    hub.send(&to, reserve(2, "forest", 1)).unwrap();
    assert!(
        matches!(
            next(&mut hub, "the second answer").await,
            PeerEvent::Message {
                message: PeerMessage::SeatsRefused { trn: TransitionId(2), .. },
                ..
            }
        ),
        "a node the destination's world does not stand on is refused, over the same link"
    );
    assert_eq!(hub.link_count(), (1, 0), "one link, dialled once");
    crypt.stop().await;
}

/// V14: a dialler without the fleet key is refused by the destination (closed `Rejected`);
/// nothing it queued is carried, and its request is unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_fleet_key_is_refused_as_the_dialler() {
    let crypt = destination().await;
    let mut stranger = source(OTHER_KEY);
    let to = candidate(crypt.addr, "crypt-1");
    stranger.send(&to, reserve(7, "harbor", 1)).unwrap();
    let why = lost(&mut stranger).await;
    assert!(why.contains("closed by the peer with Rejected"), "{why}");
    assert_eq!(
        next(&mut stranger, "the request's end").await,
        PeerEvent::Unanswered { server: to.server.clone(), trn: TransitionId(7) }
    );
    // The destination's core never heard it: a source with the key is answered afresh.
    let mut hub = source(KEY);
    hub.send(&to, reserve(7, "nowhere", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link up").await, PeerEvent::Linked { .. }));
    assert!(matches!(next(&mut hub, "the answer").await, PeerEvent::Message { .. }));
    crypt.stop().await;
}

/// V14: a destination without the fleet key is refused by the dialler (its `Welcome`'s proof
/// does not hold): the link closes `Rejected` and nothing queued is carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_fleet_key_is_refused_as_the_dialled() {
    let (addr, fake) = fake_destination(|exporter| {
        welcome(PEER_PROTOCOL_VERSION, OTHER_KEY, PeerRole::Destination, exporter)
    })
    .await;
    let mut hub = source(KEY);
    hub.send(&candidate(addr, "crypt-1"), reserve(3, "harbor", 1)).unwrap();
    let why = lost(&mut hub).await;
    assert!(why.contains("does not hold"), "{why}");
    let heard = within(LIMIT, "the fake's end", fake).await.unwrap();
    assert!(matches!(heard.hello, Some(PeerMessage::Hello { .. })), "{heard:?}");
    assert!(heard.after.is_empty(), "nothing carried past the Welcome: {heard:?}");
    assert_eq!(heard.closed_with, Some(u64::from(CloseCode::Rejected.code())));
}

/// V14: a proof is good on its own connection and for its own role only. A `Hello` carrying
/// another connection's proof, or the destination's role's, is refused; the same peer's own
/// proof is welcomed, and the destination's proof in the `Welcome` holds for that connection.
/// A destination reflecting the source's own proof back is refused by the dialler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_from_another_connection_or_role_is_refused() {
    let crypt = destination().await;
    let first = FakeSource::dial(&crypt).await;
    let mut replayed = FakeSource::dial(&crypt).await;
    let hello = FakeSource::hello(PEER_PROTOCOL_VERSION, KEY, PeerRole::Source, &first.exporter);
    replayed.say(&hello).await;
    let (heard, code) = replayed.hear_until_closed().await;
    assert!(heard.is_empty(), "{heard:?}");
    assert_eq!(code, Some(u64::from(CloseCode::Rejected.code())), "another connection's proof");
    let mut reflected = FakeSource::dial(&crypt).await;
    let exporter = reflected.exporter;
    let hello = FakeSource::hello(PEER_PROTOCOL_VERSION, KEY, PeerRole::Destination, &exporter);
    reflected.say(&hello).await;
    let (_, code) = reflected.hear_until_closed().await;
    assert_eq!(code, Some(u64::from(CloseCode::Rejected.code())), "the other role's proof");
    let mut own = first;
    let exporter = own.exporter;
    own.say(&FakeSource::hello(PEER_PROTOCOL_VERSION, KEY, PeerRole::Source, &exporter)).await;
    let mut decoder = FrameDecoder::new(FRAME);
    let welcome = within(LIMIT, "the Welcome", async {
        loop {
            let chunk = own.recv.read_chunk(FRAME, true).await.unwrap().unwrap();
            decoder.extend(&chunk.bytes);
            if let Some(message) = decoder.next_message::<PeerMessage>().unwrap() {
                return message;
            }
        }
    })
    .await;
    let PeerMessage::Welcome { server, proof, .. } = welcome else { panic!("{welcome:?}") };
    assert_eq!(server.as_str(), "crypt-1");
    assert!(proof.holds(&TokenKey::new(KEY), PeerRole::Destination, &exporter));
    let (addr, fake) = fake_destination(welcome_reflecting).await;
    let mut hub = source(KEY);
    hub.send(&candidate(addr, "crypt-1"), reserve(3, "harbor", 1)).unwrap();
    let why = lost(&mut hub).await;
    assert!(why.contains("does not hold"), "{why}");
    assert!(within(LIMIT, "the fake's end", fake).await.unwrap().after.is_empty());
    crypt.stop().await;
}

/// A Welcome whose proof is the source's role's, under the fleet key: the source's own proof
/// reflected back.
fn welcome_reflecting(exporter: &[u8; 32]) -> PeerMessage {
    welcome(PEER_PROTOCOL_VERSION, KEY, PeerRole::Source, exporter)
}

/// V14: a peer of another version is refused both ways, whatever its proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_version_is_refused() {
    let crypt = destination().await;
    let mut later = FakeSource::dial(&crypt).await;
    let exporter = later.exporter;
    later
        .say(&FakeSource::hello(PEER_PROTOCOL_VERSION + 1, KEY, PeerRole::Source, &exporter))
        .await;
    let (heard, code) = later.hear_until_closed().await;
    assert!(heard.is_empty(), "{heard:?}");
    assert_eq!(code, Some(u64::from(CloseCode::Rejected.code())));
    let (addr, fake) = fake_destination(|exporter| {
        welcome(PEER_PROTOCOL_VERSION + 1, KEY, PeerRole::Destination, exporter)
    })
    .await;
    let mut hub = source(KEY);
    hub.send(&candidate(addr, "crypt-1"), reserve(3, "harbor", 1)).unwrap();
    let why = lost(&mut hub).await;
    assert!(why.contains("version 3 is not supported"), "{why}");
    let heard = within(LIMIT, "the fake's end", fake).await.unwrap();
    assert_eq!(heard.closed_with, Some(u64::from(CloseCode::Rejected.code())));
    crypt.stop().await;
}

/// V14: a list above 1,024 players closes the link (`ProtocolViolation`), unanswered; this
/// server's own links refuse to send one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_list_closes_the_link() {
    let crypt = destination().await;
    wait_for_boot(&crypt.handle, LIMIT).await;
    let mut fake = FakeSource::dial(&crypt).await;
    let exporter = fake.exporter;
    fake.say(&FakeSource::hello(PEER_PROTOCOL_VERSION, KEY, PeerRole::Source, &exporter)).await;
    fake.say(&reserve(5, "harbor", 1025)).await;
    let (heard, code) = fake.hear_until_closed().await;
    assert!(matches!(heard.as_slice(), [PeerMessage::Welcome { .. }]), "no answer: {heard:?}");
    assert_eq!(code, Some(u64::from(CloseCode::ProtocolViolation.code())));
    let mut hub = source(KEY);
    let refused = hub.send(&candidate(crypt.addr, "crypt-1"), reserve(5, "harbor", 1025));
    assert!(matches!(refused, Err(PeerSendError::Refused { .. })), "{refused:?}");
    assert_eq!(hub.link_count(), (0, 0), "nothing dialled for it");
    crypt.stop().await;
}

/// V14, V16: a link idle but answering is kept alive past its idle timeout (keep-alives every
/// second); a peer that goes silent (the path cut both ways) is reported lost within the idle
/// timeout, here 2 s, and its request unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_reported_lost_within_the_idle_timeout() {
    use gatehouse_conditioner::Conditions;
    use gatehouse_conditioner::proxy::Proxy;
    let crypt = destination().await;
    wait_for_boot(&crypt.handle, LIMIT).await;
    let proxy = Proxy::start("127.0.0.1:0".parse().unwrap(), crypt.addr, Conditions::default(), 1)
        .await
        .unwrap();
    let idle = Duration::from_secs(2);
    let mut hub = PeerLinks::new(settings(KEY, idle));
    let to = candidate(proxy.handle().addr(), "crypt-1");
    hub.send(&to, reserve(1, "harbor", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link up").await, PeerEvent::Linked { .. }));
    assert!(matches!(next(&mut hub, "the answer").await, PeerEvent::Message { .. }));
    // Idle but answering, the link's keep-alives hold it past its idle timeout.
    let quiet = tokio::time::timeout(idle + Duration::from_millis(500), hub.next()).await;
    assert!(quiet.is_err(), "an idle link is kept alive: {quiet:?}");
    // The proxy's first flow, unregistered: the link's.
    proxy.handle().set_cut((1 << 32) + 1, true);
    let cut = tokio::time::Instant::now();
    hub.send(&to, reserve(2, "harbor", 1)).unwrap();
    let mut events = Vec::new();
    while events.len() < 2 {
        events.push(next(&mut hub, "the loss").await);
    }
    let elapsed = cut.elapsed();
    assert!(elapsed <= idle + Duration::from_millis(1500), "lost after {elapsed:?}");
    assert!(
        events.iter().any(|e| matches!(e, PeerEvent::Lost { why, .. } if why.contains("silent"))),
        "{events:?}"
    );
    assert!(
        events.contains(&PeerEvent::Unanswered { server: to.server.clone(), trn: TransitionId(2) }),
        "{events:?}"
    );
    crypt.stop().await;
}

/// V12, V14: a dial to an address where nobody answers is reported lost within
/// `fleet.peer_timeout_ms` (2 s), its request unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_to_nothing_is_reported_lost() {
    // Bound, read by nobody: datagrams vanish without an ICMP answer.
    let nobody = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = candidate(nobody.local_addr().unwrap(), "crypt-1");
    let mut hub = source(KEY);
    let start = tokio::time::Instant::now();
    hub.send(&to, reserve(9, "harbor", 1)).unwrap();
    let mut events = Vec::new();
    while events.len() < 2 {
        events.push(next(&mut hub, "the dial's end").await);
    }
    assert!(start.elapsed() <= Duration::from_millis(3000), "after {:?}", start.elapsed());
    assert!(
        events.iter().any(|e| matches!(e, PeerEvent::Lost { why, .. }
            if why.contains("not linked within fleet.peer_timeout_ms"))),
        "{events:?}"
    );
    assert!(events.contains(&PeerEvent::Unanswered { server: to.server, trn: TransitionId(9) }));
}

/// A token for `player` under the development key, valid for an hour.
fn player_token(player: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let uid = PlayerId::new(player).unwrap();
    let claims = SessionClaims { uid, exp: now + 3600, iat: Some(now), usn: None };
    token::mint(&TokenKey::new(DEV_TOKEN_KEY), &claims)
}

/// V14: the peer link shares the game port: while a link is up, a player's client connects
/// and logs in as ever, and the link still carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_logs_in_on_the_same_port_while_a_link_is_up() {
    let crypt = destination().await;
    wait_for_boot(&crypt.handle, LIMIT).await;
    let mut hub = source(KEY);
    let to = candidate(crypt.addr, "crypt-1");
    hub.send(&to, reserve(1, "harbor", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link up").await, PeerEvent::Linked { .. }));
    assert!(matches!(next(&mut hub, "the answer").await, PeerEvent::Message { .. }));
    let trust = std::fs::read(&crypt.cert).unwrap();
    let config = ConnectConfig::new(crypt.addr, "localhost", trust, player_token("walker"));
    let client = within(LIMIT, "the player's connect", Client::connect(config)).await.unwrap();
    within(LIMIT, "the player's Welcome", async {
        while let Some(event) = client.next_event().await {
            if let Event::Welcomed { .. } = event {
                return;
            }
        }
        panic!("closed before its Welcome");
    })
    .await;
    hub.send(&to, reserve(2, "forest", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link's next answer").await, PeerEvent::Message { .. }));
    assert_eq!(hub.link_count(), (1, 0));
    crypt.stop().await;
}

/// V14: a server in no fleet (no `fleet.ticket_key`) offers no peer link: the dial fails its
/// handshake, told as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_fleet_key_refuses_the_fleet_alpn() {
    let toml = "[fleet]\nserver_id = \"crypt-1\"\n";
    let alone = TestServer::start_with(toml, worlds::QUICK).await;
    let mut hub = source(KEY);
    hub.send(&candidate(alone.addr, "crypt-1"), reserve(1, "harbor", 1)).unwrap();
    let why = lost(&mut hub).await;
    assert!(why.contains("offers no peer link"), "{why}");
    assert!(within(LIMIT, "the game loop", alone.handle.ping()).await, "the server serves on");
    alone.stop().await;
}

/// V12, V14: a seat request the destination leaves unanswered for `fleet.peer_timeout_ms`
/// (2 s) is reported unanswered, the link staying up; the request was carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_unanswered_within_the_peer_timeout_is_reported() {
    let (addr, fake) = fake_destination(|exporter| {
        welcome(PEER_PROTOCOL_VERSION, KEY, PeerRole::Destination, exporter)
    })
    .await;
    let mut hub = source(KEY);
    let to = candidate(addr, "crypt-1");
    let asked = tokio::time::Instant::now();
    hub.send(&to, reserve(4, "harbor", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link up").await, PeerEvent::Linked { .. }));
    assert_eq!(
        next(&mut hub, "the request's end").await,
        PeerEvent::Unanswered { server: to.server.clone(), trn: TransitionId(4) }
    );
    let waited = asked.elapsed();
    assert!((Duration::from_secs(2)..Duration::from_secs(3)).contains(&waited), "{waited:?}");
    assert_eq!(hub.link_count(), (1, 0), "the link is still up");
    drop(hub);
    let heard = within(LIMIT, "the fake's end", fake).await.unwrap();
    assert_eq!(heard.after, [reserve(4, "harbor", 1)], "the request was carried");
    assert_eq!(heard.closed_with, Some(u64::from(CloseCode::ShuttingDown.code())));
}

/// V12, V14: a destination the directory pins is trusted by that certificate alone; another
/// certificate at its address is refused, naming both fingerprints' holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_destination_is_trusted_by_its_certificate_alone() {
    let crypt = destination().await;
    let pin = sha256(&std::fs::read(&crypt.cert).unwrap());
    let mut hub = source(KEY);
    let pinned = Candidate { certificate_sha256: Some(pin), ..candidate(crypt.addr, "crypt-1") };
    hub.send(&pinned, reserve(1, "nowhere", 1)).unwrap();
    assert!(matches!(next(&mut hub, "the link up").await, PeerEvent::Linked { .. }));
    let mut other = source(KEY);
    let wrong = Candidate { certificate_sha256: Some([0; 32]), ..pinned };
    other.send(&wrong, reserve(1, "nowhere", 1)).unwrap();
    let why = lost(&mut other).await;
    assert!(why.contains("not the directory's"), "{why}");
    crypt.stop().await;
}

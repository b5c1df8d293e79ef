//! `gatehouse-client` as a game uses it: `Client::connect` against a real server, the game's
//! loop answering the events (stream with a short sleep, restart after a death), until it
//! leaves.

use std::time::Duration;

use gatehouse_client::{CertificatePin, Client, CloseReason, ConnectConfig, Event};
use gatehouse_protocol::token::{self, DEV_TOKEN_KEY, SessionClaims, TokenKey};
use gatehouse_protocol::{CloseCode, PlayerId};
use gatehouse_tests::{TestServer, travel_once_placed, wait_for_boot, within, worlds};

/// A token for `player` under the development key, valid for an hour.
fn token(player: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let Ok(uid) = PlayerId::new(player) else { panic!("{player:?} is no player id") };
    let claims = SessionClaims { uid, exp: now + 3600, iat: Some(now), usn: None };
    token::mint(&TokenKey::new(DEV_TOKEN_KEY), &claims)
}

/// What the game loop saw.
#[derive(Debug, Default)]
struct Seen {
    welcomed: bool,
    joins_ended: usize,
    transitions_ended: usize,
    possessions: usize,
    deaths: usize,
    respawns: usize,
    closed: Option<CloseReason>,
    /// Every event, for a failure's message.
    log: Vec<String>,
}

/// A game's loop: answers every event as a game must, leaves once it saw a join, two
/// transitions and a restart after a death.
async fn play(client: &Client, seen: &mut Seen) {
    let mut left = false;
    while let Some(event) = client.next_event().await {
        seen.log.push(format!("{event:?}"));
        match event {
            Event::Welcomed { .. } => seen.welcomed = true,
            Event::StreamLevels { load, .. } => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                // A newer load may have replaced it meanwhile: then it is refused, harmlessly.
                let _ = client.levels_streamed(load);
            }
            Event::HideLoadingScreen { load: gatehouse_client::Load::Join(_) } => {
                seen.joins_ended += 1
            }
            Event::HideLoadingScreen { .. } => seen.transitions_ended += 1,
            Event::Possessed { .. } => seen.possessions += 1,
            Event::Died => {
                seen.deaths += 1;
                assert_eq!(client.request_restart(), Ok(()), "a dead player restarts");
            }
            Event::Revived { restarted: true } => seen.respawns += 1,
            Event::Closed { reason } => seen.closed = Some(reason),
            _ => {}
        }
        let done = seen.joins_ended >= 1 && seen.transitions_ended >= 2 && seen.respawns >= 1;
        if done && !left {
            left = true;
            client.leave();
        }
    }
}

/// A world that kills on its start node; the client logs in after the boot travel (a join of
/// its own), then the test travels to the other node and back, each once it is placed.
#[tokio::test]
async fn a_library_client_plays_a_session_over_quic() {
    let server = TestServer::start(worlds::HAZARDOUS).await;
    wait_for_boot(&server.handle, Duration::from_secs(10)).await;
    let trust = std::fs::read(&server.cert).unwrap();
    let config = ConnectConfig::new(server.addr, "localhost", trust, token("lib-0001"));
    let client = within(Duration::from_secs(10), "connect", Client::connect(config)).await.unwrap();
    let handle = server.handle.clone();
    let travels = tokio::spawn(async move {
        let limit = Duration::from_secs(20);
        travel_once_placed(&handle, "lib-0001", &["forest", "harbor"], limit).await;
    });
    let mut seen = Seen::default();
    let played = tokio::time::timeout(Duration::from_secs(60), play(&client, &mut seen)).await;
    travels.await.unwrap();
    assert!(played.is_ok(), "the session did not end within 60 s: {seen:#?}");
    assert!(seen.welcomed, "{seen:?}");
    assert!(seen.joins_ended >= 1 && seen.transitions_ended >= 2, "{seen:?}");
    assert!(seen.deaths >= 1 && seen.respawns >= 1 && seen.possessions >= 2, "{seen:?}");
    let closed = seen.closed.unwrap();
    assert_eq!(closed.close_code(), Some(CloseCode::Leave), "{closed:?}");
    server.stop().await;
}

/// A certificate that is not one is refused before anything is sent.
#[tokio::test]
async fn a_client_with_an_unusable_certificate_is_refused_before_connecting() {
    let addr = "127.0.0.1:9".parse().unwrap();
    let config = ConnectConfig::new(addr, "localhost", b"-----BEGIN nonsense".to_vec(), "t");
    let error = Client::connect(config).await.unwrap_err();
    assert!(error.to_string().starts_with("certificate to trust"), "{error}");
}

/// A server that never answers: one error, the connect timeout's, whichever of the handshake's
/// own timeout and the connect timeout comes first.
#[tokio::test]
async fn a_server_that_never_answers_fails_with_the_connect_timeout() {
    // A bound socket that reads nothing: the handshake gets no answer.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let trust = TestServer::start(worlds::QUICK).await;
    let cert = std::fs::read(&trust.cert).unwrap();
    let mut config = ConnectConfig::new(addr, "localhost", cert, "t");
    config.connect_timeout = Duration::from_millis(300);
    let error = within(Duration::from_secs(10), "the timeout", Client::connect(config)).await;
    let error = error.unwrap_err();
    assert!(matches!(error, gatehouse_client::ConnectError::TimedOut(a) if a == addr), "{error}");
    trust.stop().await;
}

/// The pin of the certificate file `path` (DER): its SHA-256, computed here with sha2 rather than
/// by the library under test.
fn pin_of(path: &std::path::Path) -> CertificatePin {
    use sha2::Digest as _;
    let der = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    CertificatePin::from_bytes(sha2::Sha256::digest(&der).into())
}

/// A client given the server's fingerprint and no certificate connects and is welcomed
/// (docs/client.md, "Pinning the server's certificate").
#[tokio::test]
async fn a_pinned_client_connects_to_the_server_whose_certificate_matches() {
    let server = TestServer::start(worlds::QUICK).await;
    let pin = pin_of(&server.cert);
    // As a matchmaker hands it over: the canonical text, parsed.
    let pin = CertificatePin::parse(&pin.to_string()).unwrap();
    let config =
        ConnectConfig::new(server.addr, "localhost", Vec::new(), token("pin-0001")).with_pin(pin);
    let client = within(Duration::from_secs(10), "connect", Client::connect(config)).await.unwrap();
    let welcomed = within(Duration::from_secs(10), "Welcome", async {
        while let Some(event) = client.next_event().await {
            if matches!(event, Event::Welcomed { .. }) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(welcomed, "the session closed before Welcome");
    client.leave();
    within(Duration::from_secs(10), "the close", async {
        while client.next_event().await.is_some() {}
    })
    .await;
    server.stop().await;
}

/// A client pinned to one server's certificate refuses another server (its own generated
/// certificate): the handshake fails, saying the certificate does not match the pin.
#[tokio::test]
async fn a_pinned_client_refuses_a_server_with_another_certificate() {
    let pinned = TestServer::start(worlds::QUICK).await;
    let other = TestServer::start(worlds::QUICK).await;
    let pin = pin_of(&pinned.cert);
    assert_ne!(pin, pin_of(&other.cert), "each test server generates its own certificate");
    let config =
        ConnectConfig::new(other.addr, "localhost", Vec::new(), token("pin-0002")).with_pin(pin);
    let error = within(Duration::from_secs(10), "the refusal", Client::connect(config)).await;
    let error = error.unwrap_err();
    assert!(
        matches!(error, gatehouse_client::ConnectError::PinMismatch { pin: p, presented, .. }
            if p == pin && presented == pin_of(&other.cert)),
        "{error}"
    );
    assert!(error.to_string().contains("does not match the pin"), "{error}");
    assert!(error.to_string().contains(&pin.to_string()), "names the pin: {error}");
    other.stop().await;
    pinned.stop().await;
}

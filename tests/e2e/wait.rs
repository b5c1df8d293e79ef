//! `gatehouse-sim --wait` (docs/simulator.md): a swarm started before its server waits for it
//! instead of failing, and gives up with the address named when no server comes.

use std::net::SocketAddr;
use std::time::Duration;

use gatehouse_client_sim::SimError;
use gatehouse_client_sim::wait::wait_for_server;
use gatehouse_server::Server;
use gatehouse_server::config::{ServerConfig, parse_world};
use gatehouse_tests::within;
use gatehouse_tests::worlds::QUICK;
use tokio_util::sync::CancellationToken;

/// A free UDP port on loopback (bound, then released for the server to take).
fn free_udp_addr() -> std::io::Result<SocketAddr> {
    std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_started_before_its_server_waits_for_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let addr = free_udp_addr().expect("a free UDP port");
    let cert = dir.path().join("dev-cert.der");
    // The wait starts first: no certificate, nobody listening.
    let waiting = tokio::spawn({
        let cert = cert.clone();
        async move { wait_for_server(addr, "localhost", &cert, Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!waiting.is_finished(), "nothing answered yet");

    let config_path = dir.path().join("server.toml");
    let mut config = ServerConfig::parse(&config_path, "").expect("the default config");
    config.network.bind = addr;
    config.data_dir = dir.path().to_owned();
    config.admin.enabled = false;
    let world = parse_world(&dir.path().join("world.toml"), QUICK).expect("the quick world");
    let server = Server::bind(&config, world).await.expect("the server binds");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));

    let waited = within(Duration::from_secs(20), "the wait to end", waiting)
        .await
        .expect("the wait task")
        .expect("the server answered");
    assert!(waited >= Duration::from_millis(600), "it waited for the server: {waited:?}");
    shutdown.cancel();
    within(Duration::from_secs(10), "the server to stop", task)
        .await
        .expect("the server task")
        .expect("a clean stop");
}

#[tokio::test]
async fn a_wait_for_a_server_that_never_comes_names_the_address() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let addr = free_udp_addr().expect("a free UDP port");
    let limit = Duration::from_millis(700);
    let err = within(
        Duration::from_secs(10),
        "the wait to give up",
        wait_for_server(addr, "localhost", &dir.path().join("dev-cert.der"), limit),
    )
    .await
    .expect_err("nothing answers");
    assert!(matches!(err, SimError::NoServer { server, .. } if server == addr), "{err}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

/// A server that answers with a certificate the client does not trust is an error at once, not
/// a wait to the end: waiting cannot fix it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_another_certificate_fails_the_wait_at_once() {
    let server = gatehouse_tests::TestServer::start(QUICK).await;
    // Another server's development certificate: a certificate from another data dir.
    let other = gatehouse_tests::TestServer::start(QUICK).await;
    let cert = other.cert.clone();
    let started = std::time::Instant::now();
    let err = wait_for_server(server.addr, "localhost", &cert, Duration::from_secs(20))
        .await
        .expect_err("the certificate does not verify");
    assert!(matches!(err, SimError::Certificate { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "it did not wait out the limit");
    server.stop().await;
    other.stop().await;
}

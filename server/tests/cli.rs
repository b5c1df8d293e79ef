//! The `gatehouse-server` binary as an operator runs it: flags, config errors, serving real
//! clients over QUIC on loopback, and SIGTERM draining to exit code 0.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_client_sim::swarm::{SwarmConfig, run_swarm_outcomes};
use gatehouse_protocol::token::{DEV_TOKEN_KEY, TokenKey};

const SERVER: &str = env!("CARGO_BIN_EXE_gatehouse-server");

fn shipped_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml")
}

const WORLD: &str = r#"
start_node = "harbor"
default_preset = "Vanguard"
[[preset]]
name = "Vanguard"
character_def = "Vanguard"
[[node]]
id = "harbor"
levels = [{ name = "harbor_docks", stream_ms = 1000 }]
spawn_points = 16
spawn_points_register_ms = 20
"#;

/// Kills the child if a test fails before it stops it.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the JSON log on stderr until the `listening` line and returns its address.
fn listening_addr(child: &mut Child) -> std::net::SocketAddr {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if v["fields"]["message"] == "listening" {
                    let _ = tx.send(v["fields"]["addr"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(20)).expect("the server logs its address");
    addr.parse().expect("a socket address")
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(Instant::now() < end, "the server did not exit within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The binary serves 8 simulated clients through the boot transition, then SIGTERM closes
/// their connections and the process exits 0 within a few seconds.
#[test]
fn the_server_binary_serves_clients_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world.toml");
    std::fs::write(&world, WORLD).unwrap();
    let child = Command::new(SERVER)
        .args(["--config"])
        .arg(shipped_config())
        .args([
            "--bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--data-dir",
        ])
        .arg(dir.path())
        .arg("--world")
        .arg(&world)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the server starts");
    let mut guard = Guard(child);
    let addr = listening_addr(&mut guard.0);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let outcomes = runtime
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(30),
                run_swarm_outcomes(SwarmConfig {
                    server: addr,
                    server_name: "localhost".into(),
                    server_cert: dir.path().join("dev-cert.der"),
                    clients: 8,
                    first_index: 0,
                    duration: Duration::from_secs(3),
                    token_key: TokenKey::new(DEV_TOKEN_KEY),
                    session: SessionConfig::default(),
                    max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
                    connect_timeout: Duration::from_secs(10),
                    relaunch_every: None,
                    settle_grace: Duration::from_secs(5),
                }),
            )
            .await
        })
        .expect("the swarm finishes")
        .expect("the swarm runs");
    assert!(outcomes.iter().all(|o| o.placed && o.errors.is_empty()), "{outcomes:?}");

    let started = Instant::now();
    let kill = Command::new("kill").args(["-TERM", &guard.0.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = wait_exit(&mut guard.0, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    assert!(started.elapsed() < Duration::from_secs(5), "and within a few seconds");

    // The drain saved every player: `saves show` prints the node it stood on.
    let show = Command::new(SERVER)
        .arg("--config")
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["saves", "show", "sim-0003"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{text}{}", String::from_utf8_lossy(&show.stderr));
    assert!(text.contains("player     sim-0003"), "{text}");
    assert!(text.contains("node       harbor"), "{text}");
    let list = Command::new(SERVER)
        .arg("--config")
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["saves", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert_eq!(text.matches("sim-00").count(), 8, "{text}");
}

/// An invalid config stops the server at start with an error naming the key.
#[test]
fn an_invalid_config_fails_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[network]\nkeep_alive_ms = 60000\n").unwrap();
    let out = Command::new(SERVER).arg("--config").arg(&config).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("network.keep_alive_ms"), "{stderr}");
}

/// A world file naming an unknown start node stops the server with the key named.
#[test]
fn an_invalid_world_fails_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world.toml");
    std::fs::write(&world, WORLD.replace("start_node = \"harbor\"", "start_node = \"atlantis\""))
        .unwrap();
    let out = Command::new(SERVER)
        .arg("--config")
        .arg(shipped_config())
        .arg("--world")
        .arg(&world)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("start_node") && stderr.contains("atlantis"), "{stderr}");
}

/// `--help` explains every flag.
#[test]
fn help_explains_each_flag() {
    let out = Command::new(SERVER).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--config", "--bind", "--data-dir", "--log-format", "--world"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

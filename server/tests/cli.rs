//! The `gatehouse-server` binary as an operator runs it: flags, config errors, serving real
//! clients over QUIC on loopback, and SIGTERM draining to exit code 0.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gatehouse_client_sim::report::ClientOutcome;
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
spawn_points_register_ms = 20
[[node]]
id = "forest"
levels = [{ name = "forest_edge", stream_ms = 100 }]
spawn_points_register_ms = 20
"#;

/// A `gatehouse-server` process with its JSON log followed on a thread. Killed if a test fails
/// before it stops it.
struct ServerProcess {
    child: Child,
    log: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Every log line read so far.
    seen: Vec<serde_json::Value>,
    addr: std::net::SocketAddr,
    admin: std::net::SocketAddr,
}

impl ServerProcess {
    /// Starts the binary on an ephemeral port with `dir` as its data dir, and waits until it
    /// logs both of its addresses.
    fn start(dir: &Path, envs: &[(&str, &str)]) -> ServerProcess {
        let world = dir.join("world.toml");
        std::fs::write(&world, WORLD).unwrap();
        let mut child = Command::new(SERVER)
            .arg("--config")
            .arg(shipped_config())
            .args(["--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", "--log-format", "json"])
            .arg("--data-dir")
            .arg(dir)
            .arg("--world")
            .arg(&world)
            .envs(envs.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        let unset: std::net::SocketAddr = "0.0.0.0:0".parse().unwrap();
        let mut server = ServerProcess { child, log, seen: Vec::new(), addr: unset, admin: unset };
        let addr_of = |v: serde_json::Value| {
            v["fields"]["addr"].as_str().unwrap_or_default().parse().unwrap()
        };
        server.addr =
            addr_of(server.wait_for("its address", |v| v["fields"]["message"] == "listening"));
        server.admin = addr_of(server.wait_for("its admin address", |v| {
            v["fields"]["message"] == "admin endpoint listening"
        }));
        server
    }

    /// The first log line matching `matches`, waiting (at most 20 s) for it if it has not been
    /// logged yet.
    fn wait_for(
        &mut self,
        what: &str,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        if let Some(v) = self.seen.iter().find(|v| matches(v)) {
            return v.clone();
        }
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if matches(&v) {
                        return v;
                    }
                }
                Err(_) => panic!("the server never logged {what}"),
            }
        }
    }

    fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < end, "the server did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `clients` simulated clients against it for `duration`.
    fn run_clients(&self, dir: &Path, clients: usize, duration: Duration) -> Vec<ClientOutcome> {
        run_clients(self.addr, dir, clients, duration)
    }
}

/// Runs `clients` simulated clients against `server` for `duration`, trusting the certificate
/// in `dir`.
fn run_clients(
    server: std::net::SocketAddr,
    dir: &Path,
    clients: usize,
    duration: Duration,
) -> Vec<ClientOutcome> {
    let config = SwarmConfig {
        server,
        server_name: "localhost".into(),
        server_cert: dir.join("dev-cert.der"),
        clients,
        first_index: 0,
        duration,
        token_key: TokenKey::new(DEV_TOKEN_KEY),
        session: SessionConfig::default(),
        max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
        connect_timeout: Duration::from_secs(10),
        relaunch_every: None,
        settle_grace: Duration::from_secs(5),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(60), run_swarm_outcomes(config)).await
        })
        .expect("the swarm finishes")
        .expect("the swarm runs")
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `gatehouse-server saves ...` against `dir`.
fn saves(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(SERVER)
        .arg("--config")
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(dir)
        .arg("saves")
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// One HTTP/1.1 request to the admin endpoint; the body.
fn http(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: gatehouse\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}

/// The binary serves 32 simulated clients through the boot transition; SIGTERM drains (the
/// session is saved) and the process exits 0 within a few seconds; every player was saved
/// (`saves show` prints the node); a restarted server restores the world's node, which an
/// operator travel had changed.
#[test]
fn the_server_binary_serves_clients_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServerProcess::start(dir.path(), &[]);
    let outcomes = server.run_clients(dir.path(), 32, Duration::from_secs(3));
    assert!(outcomes.iter().all(|o| o.placed && o.errors.is_empty()), "{outcomes:?}");
    // An operator travel, so the world's node is no longer the start node.
    assert!(http(server.admin, "POST", "/travel/forest").contains("travelling to forest"));
    server.wait_for("the travel to end", |v| {
        v["fields"]["message"] == "every player placed; transition ended"
            && v["span"]["node"] == "forest"
    });

    let started = Instant::now();
    server.signal("-TERM");
    let status = server.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "SIGTERM exits 0");
    assert!(started.elapsed() < Duration::from_secs(5), "and within a few seconds");

    // Every player was saved as it left: `saves show` prints the node it stood on (the clients
    // left before the operator travel).
    let text = saves(dir.path(), &["show", "sim-0003"]);
    assert!(text.contains("player     sim-0003"), "{text}");
    assert!(text.contains("node       harbor"), "{text}");
    assert_eq!(saves(dir.path(), &["list"]).matches("sim-00").count(), 32);

    // A restarted server restores the session's node before its boot travel.
    let mut restarted = ServerProcess::start(dir.path(), &[]);
    let resolved = restarted.wait_for("the session save to load", |v| {
        v["fields"]["message"] == "session save restores the world's node"
    });
    assert_eq!(resolved["fields"]["node"], "forest", "{resolved}");
    let streamed = restarted
        .wait_for("the boot node to stream", |v| v["fields"]["message"] == "node streamed");
    assert_eq!(streamed["fields"]["node"], "forest", "the boot travel went to the restored node");
}

/// Issue 3: a process killed with SIGKILL right after a save was acknowledged has that save on
/// restart. The store logs each acknowledged save; the test kills the server as soon as it
/// sees one, then reads the store.
#[test]
fn a_save_acknowledged_before_sigkill_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut server =
        ServerProcess::start(dir.path(), &[("RUST_LOG", "info,gatehouse_server::store=debug")]);
    let clients = {
        let (addr, cert) = (server.addr, dir.path().to_owned());
        std::thread::spawn(move || run_clients(addr, &cert, 4, Duration::from_secs(4)))
    };
    // The boot transition's end saves every player; the first acknowledged save is enough.
    let saved = server.wait_for("an acknowledged player save", |v| {
        v["fields"]["message"] == "saved" && v["span"]["player"].is_string()
    });
    server.signal("-KILL");
    let status = server.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), None, "killed by a signal, no drain");
    let player = saved["span"]["player"].as_str().unwrap().to_owned();
    let text = saves(dir.path(), &["show", &player]);
    assert!(text.contains("node       harbor"), "{text}");
    assert!(text.contains("version    1"), "{text}");
    let _ = clients.join();
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

//! The admin endpoint on a shared network, through the `gatehouse-server` binary: an endpoint
//! bound beyond loopback refuses to start without a bearer token, `POST /travel` needs that
//! token while the read-only routes stay open, and `gatehouse-server probe` answers 0 or 1 as a
//! container health check.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use gatehouse_tests::process::shipped_config;
use gatehouse_tests::worlds::QUICK;

const SERVER: &str = env!("CARGO_BIN_EXE_gatehouse-server");

/// A token long enough to be accepted.
const TOKEN: &str = "container-soak-admin-token-0001";

/// The binary with the shipped config, `dir` as its data dir and the quick test world, a clean
/// environment plus `envs`, and `args` after the common flags.
fn command(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Command {
    let world = dir.join("world.toml");
    std::fs::write(&world, QUICK).unwrap();
    let mut command = Command::new(SERVER);
    command
        .env_clear()
        .envs(envs.iter().copied())
        .arg("--config")
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--world")
        .arg(&world)
        .args(args);
    command
}

/// A running server: its admin address (on loopback), what it logged until the endpoint
/// listened, and the process, killed on drop.
struct Running {
    child: Child,
    admin: SocketAddr,
    logged: Vec<serde_json::Value>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with its admin endpoint at `admin_bind` and waits until it logs where the
/// endpoint listens (a wildcard address is then reached on loopback).
fn start(dir: &Path, admin_bind: &str, envs: &[(&str, &str)]) -> Running {
    start_on(dir, "127.0.0.1:0", admin_bind, envs)
}

/// As [`start`], with the game endpoint at `bind`.
fn start_on(dir: &Path, bind: &str, admin_bind: &str, envs: &[(&str, &str)]) -> Running {
    let args = ["--bind", bind, "--admin-bind", admin_bind, "--log-format", "json"];
    let mut child = command(dir, &args, envs)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut logged = Vec::new();
    let admin = loop {
        let line = lines.next().expect("the server logged its admin address").unwrap();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        logged.push(v.clone());
        if v["message"] == "admin endpoint listening" {
            let addr: SocketAddr = v["addr"].as_str().unwrap().parse().unwrap();
            break SocketAddr::from(([127, 0, 0, 1], addr.port()));
        }
    };
    // Keep reading, so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Running { child, admin, logged }
}

/// Runs the binary to completion, failing the test if it takes over 20 s.
fn run_to_end(mut command: Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the command did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// One HTTP/1.1 request with optional extra header lines: the status code and the body.
fn http(addr: SocketAddr, method: &str, path: &str, headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// An admin endpoint bound beyond loopback with no token configured stops the server at start,
/// naming both places a token can come from, before it writes anything.
#[test]
fn an_admin_endpoint_beyond_loopback_without_a_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--bind", "127.0.0.1:0", "--admin-bind", "0.0.0.0:0"];
    let output = run_to_end(command(dir.path(), &args, &[]));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("admin.token") && err.contains("GATEHOUSE_ADMIN_TOKEN"), "{err}");
    assert!(!dir.path().join("data").exists(), "nothing is written before the refusal");
}

/// The shipped development key on a game endpoint other hosts can reach stops the server at
/// start, naming the key, the bind and the explicit way out, before it writes anything
/// (docs/security.md).
#[test]
fn the_development_key_on_a_public_bind_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--bind", "0.0.0.0:0"];
    let output = run_to_end(command(dir.path(), &args, &[]));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("invalid auth.token_key"), "{err}");
    assert!(err.contains("network.bind 0.0.0.0:0 is not loopback"), "{err}");
    assert!(err.contains("GATEHOUSE_TOKEN_KEY") && err.contains("insecure_development_key"));
    assert!(!dir.path().join("data").exists(), "nothing is written before the refusal");
}

/// With the operator's own key the same bind serves, and the generated development
/// certificate beyond loopback is warned of, naming what to set.
#[test]
fn an_operator_key_serves_beyond_loopback_and_the_development_certificate_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let key = [("GATEHOUSE_TOKEN_KEY", "an-operator-key-of-enough-bytes")];
    let running = start_on(dir.path(), "0.0.0.0:0", "127.0.0.1:0", &key);
    let warned = running.logged.iter().any(|v| {
        v["level"] == "WARN"
            && v["message"].as_str().is_some_and(|m| m.contains("no tls.certificate"))
    });
    assert!(warned, "{:?}", running.logged);
    assert_eq!(http(running.admin, "GET", "/health", "").0, 200);
}

/// A token given in the environment that is too short is refused by name, never quoted.
#[test]
fn a_short_admin_token_in_the_environment_is_refused_without_quoting_it() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--bind", "127.0.0.1:0", "--admin-bind", "0.0.0.0:0"];
    let output =
        run_to_end(command(dir.path(), &args, &[("GATEHOUSE_ADMIN_TOKEN", "hunter2-short")]));
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("GATEHOUSE_ADMIN_TOKEN") && err.contains("at least 16"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

/// With a token, an endpoint on every interface starts; `POST /travel` and `GET /state` (it
/// lists every player) without the token or with a wrong one are `401` (even for an unknown
/// node: nothing about the world leaks), with the right one they answer; the probes and the
/// metrics need no token.
#[test]
fn with_a_token_travel_and_state_need_it_and_the_probes_stay_open() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "0.0.0.0:0", &[("GATEHOUSE_ADMIN_TOKEN", TOKEN)]);
    let admin = server.admin;

    assert_eq!(http(admin, "GET", "/health", ""), (200, "ok\n".to_owned()));
    assert_eq!(http(admin, "GET", "/state", "").0, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    let (status, body) = http(admin, "GET", "/state", &bearer);
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["phase"].is_string());
    assert_eq!(http(admin, "GET", "/metrics", "").0, 200);

    let (status, body) = http(admin, "POST", "/travel/forest", "");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let wrong = "Authorization: Bearer container-soak-admin-token-0002\r\n";
    assert_eq!(http(admin, "POST", "/travel/forest", wrong).0, 401);
    let (status, body) = http(admin, "POST", "/travel/atlantis", "");
    assert_eq!(status, 401, "an unknown node is not named without the token: {body}");

    let right = format!("Authorization: Bearer {TOKEN}\r\n");
    assert_eq!(http(admin, "POST", "/travel/atlantis", &right).0, 404);
    let (status, body) = http(admin, "POST", "/travel/forest", &right);
    assert_eq!(status, 202, "{body}");
    let (_, state) = http(admin, "GET", "/state", &bearer);
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["transition_target"], "forest", "{state}");

    // `probe` sends the token it is configured with, as the container's health check does.
    let at = admin.to_string();
    let args = ["probe", "/state", "--admin-bind", &at];
    let probed = run_to_end(command(dir.path(), &args, &[("GATEHOUSE_ADMIN_TOKEN", TOKEN)]));
    assert_eq!(probed.status.code(), Some(0), "{}", stderr(&probed));
    let unconfigured = run_to_end(command(dir.path(), &args, &[]));
    assert_eq!(unconfigured.status.code(), Some(1), "401 without the token");
}

/// `probe` exits 0 and prints the answer while the server runs (`/health` by default, any
/// read-only route on request), and exits 1 once the server is gone or the endpoint is off.
#[test]
fn probe_exits_0_while_the_server_answers_and_1_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), "127.0.0.1:0", &[]);
    let at = server.admin.to_string();
    let probe = |extra: &[&str]| {
        let mut args = vec!["probe"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--admin-bind", &at]);
        run_to_end(command(dir.path(), &args, &[]))
    };

    let health = probe(&[]);
    assert_eq!(health.status.code(), Some(0), "{}", stderr(&health));
    assert_eq!(String::from_utf8_lossy(&health.stdout), "ok\n");
    let state = probe(&["/state"]);
    assert_eq!(state.status.code(), Some(0), "{}", stderr(&state));
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    assert!(state["players"].is_array(), "{state}");
    let missing = probe(&["/nowhere"]);
    assert_eq!(missing.status.code(), Some(1), "a 404 is a failed probe");

    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let gone = probe(&[]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(stderr(&gone).contains("no answer from the admin endpoint"), "{}", stderr(&gone));
    let off = run_to_end(command(dir.path(), &["probe", "--admin-bind", "off"], &[]));
    assert_eq!(off.status.code(), Some(1));
    assert!(stderr(&off).contains("off"), "{}", stderr(&off));
}

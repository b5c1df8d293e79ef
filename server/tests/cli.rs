//! The `gatehouse-server` binary as an operator runs it: flags, config errors, serving real
//! clients over QUIC on loopback, and SIGTERM draining to exit code 0.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gatehouse_client_sim::report::ClientOutcome;
use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_tests::process::{self, ServerProcess, shipped_config, success_stdout};
use gatehouse_tests::swarm_config;
use gatehouse_tests::worlds::QUICK;

const SERVER: &str = env!("CARGO_BIN_EXE_gatehouse-server");

/// The server binary on the quick test world, `dir` its data dir.
fn start(dir: &Path, envs: &[(&str, &str)]) -> ServerProcess {
    ServerProcess::start(SERVER, dir, QUICK, envs)
}

/// Runs `clients` simulated clients against `server` for `duration`, trusting the certificate
/// in `dir`.
fn run_clients(
    server: std::net::SocketAddr,
    dir: &Path,
    clients: usize,
    duration: Duration,
) -> Vec<ClientOutcome> {
    let config = swarm_config(server, dir.join("dev-cert.der"), clients, duration);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(60), run_swarm_outcomes(config)).await
        })
        .expect("the swarm finishes")
        .expect("the swarm runs")
}

/// `gatehouse-server saves ...` against `dir`: what it printed, once it succeeded.
fn saves(dir: &Path, args: &[&str]) -> String {
    success_stdout(&process::saves(SERVER.as_ref(), dir, None, args))
}

/// The binary serves 32 simulated clients through the boot transition; SIGTERM drains (the
/// session is saved) and the process exits 0 within a few seconds; every player was saved
/// (`saves show` prints the node); a restarted server restores the world's node, which an
/// operator travel had changed.
#[test]
fn the_server_binary_serves_clients_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[]);
    let outcomes = run_clients(server.addr, dir.path(), 32, Duration::from_secs(3));
    assert!(outcomes.iter().all(|o| o.placed && o.errors.is_empty()), "{outcomes:?}");
    // An operator travel, so the world's node is no longer the start node.
    assert!(server.admin_request("POST", "/travel/forest").contains("travelling to forest"));
    server.wait_for("the travel to end", |v| {
        v["message"] == "every player placed; transition ended" && v["node"] == "forest"
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
    let mut restarted = start(dir.path(), &[]);
    let resolved = restarted.wait_for("the session save to load", |v| {
        v["message"] == "session save restores the world's node"
    });
    assert_eq!(resolved["node"], "forest", "{resolved}");
    let streamed =
        restarted.wait_for("the boot node to stream", |v| v["message"] == "node streamed");
    assert_eq!(streamed["node"], "forest", "the boot travel went to the restored node");
}

/// A process killed with SIGKILL right after a save was acknowledged has that save on
/// restart. The store logs each acknowledged save; the test kills the server as soon as it
/// sees one, then reads the store.
#[test]
fn a_save_acknowledged_before_sigkill_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[("RUST_LOG", "info,gatehouse_server::store=debug")]);
    let clients = {
        let (addr, cert) = (server.addr, dir.path().to_owned());
        std::thread::spawn(move || run_clients(addr, &cert, 4, Duration::from_secs(4)))
    };
    // The boot transition's end saves every player; the first acknowledged save is enough.
    let saved = server.wait_for("an acknowledged player save", |v| {
        v["message"] == "saved" && v["player"].is_string()
    });
    server.signal("-KILL");
    let status = server.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), None, "killed by a signal, no drain");
    let player = saved["player"].as_str().unwrap().to_owned();
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

/// A config file that cannot be read stops the server with the flag or variable that named
/// it, and the default file is called the default.
#[test]
fn an_unreadable_config_file_names_where_its_path_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let out = Command::new(SERVER).arg("--config").arg(&missing).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--config {}: cannot read it", missing.display())),
        "{stderr}"
    );
    let out = Command::new(SERVER).env("GATEHOUSE_CONFIG", &missing).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("GATEHOUSE_CONFIG={}", missing.display())), "{stderr}");
    let out = Command::new(SERVER)
        .current_dir(dir.path())
        .env_remove("GATEHOUSE_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the default config file config/server.toml"), "{stderr}");
}

/// A world file naming an unknown start node stops the server with the key named.
#[test]
fn an_invalid_world_fails_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world.toml");
    std::fs::write(&world, QUICK.replace("start_node = \"harbor\"", "start_node = \"atlantis\""))
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

/// The logs say what an operator filters on: the first line names the version,
/// config file and world; the certificate is logged once; an operator travel is logged; a
/// transition's end carries its outcome and duration; `player left` carries the close code and
/// reason; and no field value is Debug-formatted (`Some(..)`, `None`, `[..]`, quoted strings).
#[test]
fn the_logs_say_what_an_operator_filters_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[]);
    let outcomes = run_clients(server.addr, dir.path(), 4, Duration::from_secs(2));
    assert!(outcomes.iter().all(|o| o.placed && o.errors.is_empty()), "{outcomes:?}");
    assert!(server.admin_request("POST", "/travel/forest").contains("travelling to forest"));
    let ended = server.wait_for("the travel to end", |v| {
        v["message"] == "every player placed; transition ended" && v["node"] == "forest"
    });
    server.signal("-TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)).code(), Some(0));
    let lines = server.lines().to_vec();

    let first = &lines[0];
    assert_eq!(first["message"], "gatehouse-server starting", "{first}");
    assert_eq!(first["version"], env!("CARGO_PKG_VERSION"));
    assert!(first["config"].as_str().unwrap().ends_with("server.toml"), "{first}");
    assert!(first["world"].as_str().unwrap().ends_with("world.toml"), "{first}");

    let certificates = lines.iter().filter(|v| v["certificate"].is_string()).count();
    assert_eq!(certificates, 1, "the certificate is logged once");

    assert!(
        lines.iter().any(|v| v["message"] == "operator travel requested" && v["node"] == "forest")
    );

    assert_eq!(ended["outcome"], "completed", "{ended}");
    assert!(ended["duration_ms"].is_u64(), "{ended}");

    // The swarm's clients leave with `Leave` at the end of their run: close code 0.
    let left: Vec<_> = lines.iter().filter(|v| v["message"] == "player left").collect();
    assert_eq!(left.len(), 4, "every client left once");
    for v in left {
        assert_eq!(v["close_code"], 0, "{v}");
        assert_eq!(v["reason"], "leave", "{v}");
    }

    // A login is one INFO line, with the client's address, its connection and whether it
    // relaunched; its other steps are DEBUG. Departures are one INFO line too.
    let logins: Vec<_> = lines.iter().filter(|v| v["message"] == "player logged in").collect();
    assert_eq!(logins.len(), 4, "one line per login");
    for login in logins {
        let player = &login["player"];
        let info: Vec<&str> = lines
            .iter()
            .filter(|v| v["level"] == "INFO" && v["player"] == *player)
            .map(|v| v["message"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(info, ["player logged in", "player left"], "{player}'s INFO lines");
        let remote = login["remote"].as_str().unwrap_or_default();
        assert!(remote.parse::<std::net::SocketAddr>().is_ok(), "{login}");
        assert!(login["connection"].is_u64(), "{login}");
        assert_eq!(login["relaunch"], false, "{login}");
    }

    // Every line has one flat shape, its ids numbers (docs/operations.md, "Logs").
    let ids = ["connection", "pawn", "dead_pawn", "join", "transition", "old", "new", "stale"];
    for v in &lines {
        let object = v.as_object().unwrap_or_else(|| panic!("not a JSON object: {v}"));
        for key in ["timestamp", "level", "target", "message"] {
            assert!(object.get(key).is_some_and(|k| k.is_string()), "{key} in {v}");
        }
        for (name, value) in object {
            assert!(!value.is_object() && !value.is_array(), "{name} is not flat in {v}");
            if ids.contains(&name.as_str()) || name == "load" || name == "close_code" {
                assert!(value.is_u64(), "{name} is not a number in {v}");
            }
        }
    }

    for v in &lines {
        for (name, value) in v.as_object().unwrap() {
            let Some(text) = value.as_str() else { continue };
            let debugged = text.starts_with("Some(")
                || text == "None"
                || text.starts_with('[')
                || (text.starts_with('"') && text.ends_with('"'));
            assert!(!debugged || name == "message", "{name} = {text} in {v}");
        }
    }
}

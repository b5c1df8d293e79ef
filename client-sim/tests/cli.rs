//! The `gatehouse-sim` binary against a real server on loopback: its report, text and JSON.

#![allow(clippy::unwrap_used)] // tests unwrap freely

use std::process::Command;

use gatehouse_tests::{TestServer, worlds};

const SIM: &str = env!("CARGO_BIN_EXE_gatehouse-sim");

/// A short version of a full swarm run (docs/simulator.md): 8 clients for 4 s, 4 of them full and 4
/// thin, report every client placed, at least one transition completed and no error, in text and in
/// JSON, with the phase timings in µs and the gates counted for the full clients.
#[test]
fn the_sim_binary_reports_every_client_placed() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let world = worlds::with_route(worlds::QUICK, &["forest"], 3000);
    let server = runtime.block_on(TestServer::start(&world));
    let addr = server.addr;
    let report_path = dir.path().join("report.json");
    let intervals_path = dir.path().join("intervals.jsonl");
    let out = Command::new(SIM)
        .args([
            "--server",
            &addr.to_string(),
            "--clients",
            "8",
            "--duration",
            "4s",
            "--full-clients",
            "4",
            "--progress",
            "never",
            "--interval",
            "3s",
            "--server-cert",
        ])
        .arg(&server.cert)
        .arg("--report-json")
        .arg(&report_path)
        .arg("--interval-json")
        .arg(&intervals_path)
        .arg("--check")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "--check passes a clean run: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(printed(&text, "clients placed"), Some("8/8"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(report["clients_connected"], 8, "{report}");
    // The verdict --check exited on, and how the run was made (docs/simulator.md).
    assert_eq!(report["clean"], true, "{report}");
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    assert_eq!(report["run"]["server"], addr.to_string(), "{report}");
    assert_eq!(report["run"]["seed"], 1, "{report}");
    assert_eq!(report["run"]["options"]["clients"], "8", "{report}");
    assert_eq!(report["run"]["options"]["duration"], "4s", "{report}");
    assert!(report["run"]["started_at"].as_str().unwrap().ends_with('Z'), "{report}");
    assert!(report["run"]["duration_ms"].as_u64().unwrap() >= 4000, "{report}");
    assert_eq!(report["clients_placed"], 8, "{report}");
    assert_eq!(report["errors"], 0, "{report}");
    assert!(report["transitions_completed"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(
        (report["full_clients"].as_u64(), report["thin_clients"].as_u64()),
        (Some(4), Some(4))
    );
    let timings = &report["timings"];
    for phase in
        ["connect_to_welcome", "connect_to_handshake", "shown_to_ready_sent", "shown_to_ended"]
    {
        assert!(timings[phase]["count"].as_u64().unwrap() >= 8, "{phase}: {report}");
        assert!(timings[phase]["p50_us"].as_u64().unwrap() > 0, "{phase}: {report}");
    }
    assert!(report["wire"]["bytes_received"].as_u64().unwrap() > 0, "{report}");
    // Every client answered (TransitionShown, ready, acknowledgements), each answer timed.
    assert!(timings["reply_delay"]["count"].as_u64().unwrap() >= 8 * 2, "{report}");
    // A line at the end of each 3 s of the run (without progress lines: the figures are
    // recorded all the same), then the last, shorter one, at the run's end; every screen that
    // came down and every reply is in one of them.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&intervals_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{lines:?}");
    assert_eq!(lines[0]["at_s"], 3, "the first ends the first interval: {lines:?}");
    let last = lines.last().and_then(|l| l["at_s"].as_u64()).unwrap_or_default();
    assert!(last >= 4, "the last is written at the end of the 4 s run: {lines:?}");
    assert!(lines.windows(2).all(|w| w[0]["at_s"].as_u64() <= w[1]["at_s"].as_u64()));
    let down: u64 = lines.iter().map(|l| l["screens_down"].as_u64().unwrap()).sum();
    let transitions = timings["shown_to_ended"]["count"].as_u64().unwrap();
    assert!(down >= transitions, "{down} screens down, {transitions} transitions ended");
    let replies: u64 = lines.iter().map(|l| l["reply_delay"]["count"].as_u64().unwrap()).sum();
    assert_eq!(replies, timings["reply_delay"]["count"].as_u64().unwrap(), "{lines:?}");
    // The gates (docs/spec/gates.md) in every full client: a local gate for each one's pawn, no
    // violation, every pawn generation accounted for; the router (docs/spec/router.md R13): the
    // notifications went through each one's router.
    let gates = &report["gates"];
    assert_eq!(gates["gate_violations"], 0, "{report}");
    assert_eq!(gates["every_generation_accounted"], true, "{report}");
    assert!(gates["local_ready_opened"].as_u64().unwrap() >= 4, "{report}");
    assert!(gates["remote_ready_opened"].as_u64().unwrap() >= 4 * 7, "{report}");
    assert!(report["router"]["broadcasts"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["router"]["mismatches"], 0, "{report}");
    assert_eq!(printed(&text, "gate violations"), Some("0"), "{text}");
    for phase in ["shown -> ended", "reply delay"] {
        let line = printed(&text, phase).unwrap_or_default();
        assert!(line.starts_with("p50 ") && line.contains(" ms over "), "{phase}: {text}");
    }
    runtime.block_on(server.stop());
}

/// A server that is not there fails the clients with a clear error, bounded in time.
#[test]
fn an_unreachable_server_is_reported_not_hung() {
    let dir = tempfile::tempdir().unwrap();
    // Any DER-looking bytes will do: the handshake never happens.
    let cert = dir.path().join("cert.der");
    let generated = rcgen_free_cert();
    std::fs::write(&cert, generated).unwrap();
    let report_path = dir.path().join("report.json");
    let out = Command::new(SIM)
        .args(["--server", "127.0.0.1:9", "--clients", "1", "--duration", "1s"])
        .args(["--connect-timeout", "1s", "--server-cert"])
        .arg(&cert)
        .arg("--report-json")
        .arg(&report_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(report["clients_connected"], 0, "{report}");
    assert_eq!(report["errors"], 1, "{report}");
    assert!(report["error_samples"][0].as_str().unwrap().contains("connect timed out"), "{report}");
    assert_eq!(report["clean"], false, "{report}");
    assert_eq!(report["problems"][0], "0/1 clients connected", "{report}");

    // The same run with --check fails, naming what was not clean.
    let out = Command::new(SIM)
        .args(["--server", "localhost:9", "--clients", "1", "--duration", "1s"])
        .args(["--connect-timeout", "1s", "--check", "--server-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not clean") && err.contains("0/1 clients connected"), "{err}");
}

/// `--log-format json`: every line the simulator writes on stderr, its logs (the `log` crate's
/// too, through tracing) and the error that stopped it, is one flat JSON object in the server's
/// shape (docs/operations.md, "Logs").
#[test]
fn the_sim_logs_flat_json_lines_with_log_format_json() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.der");
    std::fs::write(&cert, b"not a certificate").unwrap();
    let out = Command::new(SIM)
        .args(["--log-format", "json", "--server", "127.0.0.1:9", "--clients", "1"])
        .args(["--duration", "1s", "--progress", "never", "--server-cert"])
        .arg(&cert)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a certificate that does not parse stops the run");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["level"], "ERROR", "{err}");
    assert!(last["message"].as_str().unwrap().contains("certificate"), "{err}");
    for line in &lines {
        let object = line.as_object().unwrap();
        for key in ["timestamp", "level", "target", "message"] {
            assert!(object.get(key).is_some_and(|k| k.is_string()), "{key} in {line}");
        }
        assert!(object.values().all(|v| !v.is_object() && !v.is_array()), "{line}");
    }
}

/// The value printed on the report line labelled `label`.
fn printed<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines().find_map(|line| line.trim_start().strip_prefix(label).map(str::trim))
}

/// A self-signed certificate from the server's own generator.
fn rcgen_free_cert() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let identity =
        gatehouse_server::net::tls::load_identity(&Default::default(), dir.path()).unwrap();
    identity.chain[0].to_vec()
}

/// Flags that would make the run mean something else are refused before it starts: a connect
/// rate too slow to dial every client within the run, an output file in a missing directory.
#[test]
fn flags_that_cannot_hold_are_refused_before_the_run() {
    let run = |args: &[&str]| Command::new(SIM).args(args).output().unwrap();
    let out = run(&["--clients", "8", "--connect-rate", "2", "--duration", "2s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--connect-rate 2") && stderr.contains("3.5 s"), "{stderr}");
    let out = run(&["--clients", "1", "--timeline", "/nonexistent/dir/run.svg"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--timeline") && stderr.contains("/nonexistent/dir"), "{stderr}");
    let out = run(&["--clients", "1", "--interval-json", "/nonexistent/dir/intervals.jsonl"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--interval-json") && stderr.contains("/nonexistent/dir"), "{stderr}");
    // An interval under a second is refused; one of a second is taken.
    let out = run(&["--clients", "1", "--interval", "999ms", "--help"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--interval") && stderr.contains("at least 1s"), "{stderr}");
    assert!(run(&["--interval", "1s", "--help"]).status.success());
    // A config file named on the command line must exist: a typo never falls back to the
    // development key.
    let out = run(&["--clients", "1", "--config", "/nonexistent/server.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--config /nonexistent/server.toml"), "{stderr}");
}

/// A bad impairment spec is refused before the run, naming the flag, the knob and why.
#[test]
fn a_bad_impairment_names_the_flag_and_the_knob() {
    let run = |args: &[&str]| Command::new(SIM).args(args).output().unwrap();
    for (args, expected) in [
        (["--impair", "loss=150%"], "loss=150%: a share must be within 0% and 100%"),
        (["--impair-down", "lag=10ms,jitter=50ms"], "jitter 50ms is above lag 10ms"),
        (["--impair-up", "drop=5%"], "unknown knob \"drop\""),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(args[0]) && stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// `gatehouse-sim proxy` alone between clients and a real server. A swarm pointed at the proxy
/// instead of the server is placed through it, and the proxy reports what it did: every client a
/// flow, the datagrams it dropped at 10 % loss each way.
#[test]
fn the_proxy_alone_relays_clients_to_the_server_and_reports_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(TestServer::start(worlds::QUICK));
    let listen = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let report_path = dir.path().join("proxy.json");
    let (proxy, first, _stderr) = spawn_proxy(&[
        "proxy",
        "--listen",
        &listen.to_string(),
        "--server",
        &server.addr.to_string(),
        "--impair",
        "loss=10%,lag=5ms",
        "--impair-seed",
        "3",
        "--duration",
        "12s",
        "--report-json",
        report_path.to_str().unwrap(),
    ]);
    assert!(first.contains(&format!("proxy on {listen}")), "{first}");
    let mut swarm = gatehouse_tests::swarm_config(
        listen,
        server.cert.clone(),
        4,
        std::time::Duration::from_secs(5),
    );
    swarm.settle_grace = std::time::Duration::from_secs(5);
    let report = runtime.block_on(gatehouse_client_sim::swarm::run_swarm(swarm)).unwrap();
    assert!(report.problems().is_empty(), "{:?}\n{report}", report.problems());
    let out = proxy.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("network conditioner: 1 flows"), "{text}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    // The swarm shares one socket among its clients when it has no conditioner of its own.
    assert_eq!(stats["flows"], 1, "{stats}");
    for way in ["up", "down"] {
        assert!(stats[way]["dropped"].as_u64().unwrap() > 0, "{way}: {stats}");
        assert!(stats[way]["released"].as_u64().unwrap() > 0, "{way}: {stats}");
    }
    runtime.block_on(server.stop());
}

/// `--misbehaving` takes a count or a share and `--misbehaviours` a list of kinds; a value that is
/// neither is refused with what was expected, before any run.
#[test]
fn misbehaving_flags_are_parsed_and_bad_values_refused() {
    let run = |args: &[&str]| Command::new(SIM).args(args).output().unwrap();
    let out = run(&["--clients", "5", "--misbehaving", "many"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--misbehaving") && stderr.contains("percentage"), "{stderr}");
    let out = run(&["--clients", "5", "--misbehaviours", "silent,shouting"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("\"shouting\"") && stderr.contains("restart-spam"), "{stderr}");
    // Good values get past parsing: the run then fails only on the certificate it cannot read.
    let args = ["--clients", "5", "--misbehaving", "20%", "--misbehaviours", "silent,stale-ids"];
    let out = run(&[&args[..], &["--server-cert", "/nonexistent/cert.der"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("/nonexistent/cert.der"), "{stderr}");
}

/// Without `--duration`, `gatehouse-sim proxy` relays until it is told to stop (SIGTERM or Ctrl-C),
/// then prints what it did and exits 0.
#[cfg(unix)]
#[test]
fn the_proxy_runs_until_sigterm_then_reports() {
    let (mut proxy, first, _stderr) =
        spawn_proxy(&["proxy", "--listen", "127.0.0.1:0", "--server", "127.0.0.1:9"]);
    assert!(first.starts_with("proxy on 127.0.0.1:"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(proxy.try_wait().unwrap().is_none(), "still relaying");
    let killed = Command::new("kill").args(["-TERM", &proxy.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let out = proxy.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("network conditioner: 0 flows"), "{text}");
}

/// Starts `gatehouse-sim` with `args` (a proxy), its output piped, and returns it with the first
/// line it wrote on stderr (where it says it listens, once bound) and the rest of its stderr,
/// which the caller keeps open while the proxy runs (it writes its counts there).
fn spawn_proxy(
    args: &[&str],
) -> (std::process::Child, String, std::io::BufReader<std::process::ChildStderr>) {
    let mut proxy = Command::new(SIM)
        .args(args)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(proxy.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    (proxy, first, stderr)
}

/// `--server-fingerprint` (docs/simulator.md): the swarm trusts the server by its certificate's
/// SHA-256 instead of a file; a fingerprint of another certificate stops `--wait` at once naming
/// the pin, a malformed one is refused naming the problem, and it excludes `--server-cert`.
#[test]
fn the_sim_trusts_a_server_by_its_fingerprint() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(TestServer::start(worlds::QUICK));
    let addr = server.addr.to_string();
    let pin =
        gatehouse_client::CertificatePin::of_certificate(&std::fs::read(&server.cert).unwrap());
    let run = |args: &[&str]| Command::new(SIM).args(args).output().unwrap();
    let common = ["--server", &addr, "--clients", "2", "--progress", "never", "--wait", "10s"];
    let pin_text = pin.to_string();
    let out =
        run(&[&common[..], &["--duration", "3s", "--check", "--server-fingerprint", &pin_text]]
            .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(printed(&text, "clients placed"), Some("2/2"), "{text}");

    let other = gatehouse_client::CertificatePin::from_bytes([0xAB; 32]).to_string();
    let started = std::time::Instant::now();
    let out = run(&[&common[..], &["--duration", "1s", "--server-fingerprint", &other]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("does not match the pin") && stderr.contains(&other), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(8), "not waited out: {stderr}");

    let out = run(&["--server-fingerprint", "AB:CD:G0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--server-fingerprint") && stderr.contains("position 7"), "{stderr}");
    let out = run(&["--server-fingerprint", &pin_text, "--server-cert", "cert.der"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    runtime.block_on(server.stop());
}

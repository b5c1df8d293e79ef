//! The `gatehouse-floor` binary: the bare QUIC floor, its clients on threads or in a child
//! process (the memory floor M(N) of the load benchmark, docs/performance.md).

#![allow(clippy::unwrap_used)] // tests unwrap freely

use std::io::Write;
use std::process::{Command, Stdio};

const FLOOR: &str = env!("CARGO_BIN_EXE_gatehouse-floor");

fn floor_json(extra: &[&str]) -> serde_json::Value {
    let out = Command::new(FLOOR)
        .args(["--clients", "8", "--rounds", "3", "--pause", "1ms", "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// With `--clients-process` the clients run in a child of the same program: every client is
/// welcomed and answers every round, the child's socket buffers reach the report, and the
/// server's memory is reported per connection (its VmRSS before any client and with every
/// connection open). Without it the process holds both sides, and no memory is reported.
#[test]
fn a_floor_with_its_clients_in_another_process_reports_the_servers_memory() {
    let report = floor_json(&["--clients-process"]);
    assert_eq!(report["round"]["count"], 3, "{report}");
    assert_eq!(report["connect"]["count"], 8, "{report}");
    assert!(report["udp_buffers"]["client_recv"].as_u64().unwrap() > 0, "{report}");
    let memory = &report["server_memory"];
    let before = memory["rss_kib_before"].as_u64().unwrap();
    let idle = memory["rss_kib_idle"].as_u64().unwrap();
    assert!(before > 0, "{report}");
    let per = memory["kib_per_connection"].as_f64().unwrap();
    assert!((per - (idle as f64 - before as f64) / 8.0).abs() < 1e-9, "{report}");

    let report = floor_json(&[]);
    assert_eq!(report["connect"]["count"], 8, "{report}");
    assert!(report["server_memory"].is_null(), "{report}");
}

/// `--impair` puts the conditioner between the clients and the server: every round still
/// reaches every client, and the text report ends with what the conditioner did (a flow per
/// client endpoint); with `--clients-process` it is refused, naming why.
#[test]
fn an_impaired_floor_reports_the_conditioner_and_refuses_a_clients_process() {
    let run = |extra: &[&str]| {
        Command::new(FLOOR)
            .args(["--clients", "4", "--client-endpoints", "2", "--rounds", "2", "--pause"])
            .args(["1ms", "--impair", "lag=5ms", "--impair-seed", "3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("floor F(4)") && text.contains("round: "), "{text}");
    assert!(text.contains("through the network conditioner: 2 flows"), "{text}");
    let out = run(&["--clients-process"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not with a clients' process"), "{err}");
}

/// A clients' process whose order on stdin is not one fails, saying so, before it connects.
#[test]
fn a_clients_process_refuses_an_order_it_cannot_read() {
    let mut child = Command::new(FLOOR)
        .arg("--clients-child")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{\"server\": 7}").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("the clients' order is not valid"), "{err}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A clients' order out of the floor's bounds is refused, naming the bound, before any client
/// starts: no endpoints (a division by zero), empty messages (an echo loop that never waits),
/// a rate of zero or so slow the start would overflow, a timeout past an hour.
#[test]
fn a_clients_process_refuses_an_order_out_of_bounds() {
    let good = serde_json::json!({
        "server": "127.0.0.1:9", "cert_der": [], "clients": 2, "message_bytes": 64,
        "connect_rate": null, "client_endpoints": 1, "udp_buffer_bytes": 65536,
        "connect_timeout": {"secs": 1, "nanos": 0},
    });
    let cases = [
        ("client_endpoints", serde_json::json!(0), "client endpoints 1 ..= 1024"),
        ("clients", serde_json::json!(0), "clients must be 1 ..= 100000"),
        ("message_bytes", serde_json::json!(0), "message bytes must be 8 ..= 65536"),
        ("connect_rate", serde_json::json!(0.0), "a positive number per second"),
        ("connect_rate", serde_json::json!(1e-12), "more than a day"),
        ("connect_timeout", serde_json::json!({"secs": 7200, "nanos": 0}), "too long"),
    ];
    for (field, value, says) in cases {
        let mut order = good.clone();
        order[field] = value;
        let mut child = Command::new(FLOOR)
            .arg("--clients-child")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(order.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{field}: {order}");
        assert!(err.contains("the clients' order") && err.contains(says), "{field}: {err}");
    }
}

/// Timeouts and rates that would overflow a deadline are refused up front, as a configuration
/// error, with or without a clients' process (none is started).
#[test]
fn a_floor_refuses_timeouts_and_rates_that_would_overflow() {
    for args in [
        &["--connect-timeout", "18446744073709551615s", "--clients-process"][..],
        &["--round-timeout", "2h"][..],
        &["--connect-rate", "0.000000001", "--clients", "100"][..],
    ] {
        let out = Command::new(FLOOR).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains("invalid floor configuration"), "{args:?}: {err}");
    }
}

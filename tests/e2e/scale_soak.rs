//! The scale soak's verdict (`deploy/scale_soak.py verdict`, the end of `deploy/scale-soak.sh`)
//! on rows, reports and floors written here: a clean run passes and gives its figures as ratios
//! to the floor; each failure the command promises fails it, named: a failed transition, a
//! problem the swarm's `--check` found, a loading screen over its bound, server RSS growing
//! after the first minutes (and not before them, nor in the burst of leaves at the run's end).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// One interval's row, as `scale_soak.py watch` writes it.
fn row(at_s: u64, failed: u64, longest_ms: u64, rss_kib: u64) -> Value {
    json!({
        "at_s": at_s,
        "transitions": {"started": 15, "completed": 15 - failed, "superseded": 0,
                        "settle_timeout": 0, "failed": failed},
        // The server's start -> end of the 15 - failed that ended: one slow one a minute.
        "transition_whole_ms": (0..15 - failed)
            .map(|i| if i == 0 { 3000.0 } else { 2000.0 })
            .collect::<Vec<f64>>(),
        "longest_loading_screen_ms": longest_ms,
        "screens_down": 15000,
        "shown_to_ended_p50_ms": 2000.0,
        "shown_to_ended_p99_ms": 3000.0,
        "reply_delay_p99_ms": 20.0,
        "reply_delay_count": 30000,
        "server_rss_kib": rss_kib,
        "server_cpu_cores": 0.2,
        "swarm_cpu_cores": 0.6,
        "load_1m": 1.5,
    })
}

/// A swarm report with what the verdict reads.
fn report(longest_ms: u64) -> Value {
    let summary = |p50: u64, p99: u64| {
        json!({"count": 100, "min_us": 1, "p50_us": p50, "p90_us": p99, "p99_us": p99,
               "max_us": p99})
    };
    json!({
        "clients": 1000,
        "clients_placed": 1000,
        "longest_loading_screen_ms": longest_ms,
        "timings": {"shown_to_ended": summary(2_000_000, 3_000_000),
                    "reply_delay": summary(1_000, 20_000)},
    })
}

/// Runs the verdict on `rows` and `report` with the swarm's exit status `sim_status` (and its
/// log `sim_log`), a 10 s bound on screens and a 10 % bound on RSS growth from 300 s until the
/// clients leave at 600 s, and a floor of 1.5 s p50, 3 s p99; returns whether it passed and
/// what it printed.
fn verdict(rows: &[Value], report: &Value, sim_status: &str, sim_log: &str) -> (bool, String) {
    run_verdict(rows, report, sim_status, sim_log).unwrap_or_else(|e| (false, e.to_string()))
}

/// [`verdict`], or why the files could not be written or the script run.
fn run_verdict(
    rows: &[Value],
    report: &Value,
    sim_status: &str,
    sim_log: &str,
) -> std::io::Result<(bool, String)> {
    let dir = tempfile::tempdir()?;
    let rows_text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let write = |name: &str, text: &str| -> std::io::Result<std::path::PathBuf> {
        let path = dir.path().join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let floor = json!({"round": {"count": 30, "p50_us": 1_500_000, "p99_us": 3_000_000,
                                  "max_us": 3_100_000, "mean_us": 1_600_000}});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/scale_soak.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("verdict")
        .args(["--rows".as_ref(), write("rows.jsonl", &rows_text)?.as_os_str()])
        .args(["--report".as_ref(), write("report.json", &report.to_string())?.as_os_str()])
        .args(["--sim-status", sim_status])
        .args(["--sim-log".as_ref(), write("sim.log", sim_log)?.as_os_str()])
        .args(["--max-screen-ms", "10000", "--rss-after-s", "300", "--rss-growth", "10"])
        .args(["--until-s", "600"])
        .args(["--floor".as_ref(), write("floor.json", &floor.to_string())?.as_os_str()])
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

/// Ten minutes of clean rows, RSS flat.
fn clean_rows() -> Vec<Value> {
    (1..=10).map(|m| row(m * 60, 0, 4_000, 60_000 + m)).collect()
}

#[test]
fn a_clean_scale_soak_passes_and_gives_its_figures_against_the_floor() {
    let (passed, text) = verdict(&clean_rows(), &report(4_000), "0", "");
    assert!(passed, "{text}");
    assert!(text.contains("started 150, completed 150"), "{text}");
    assert!(text.contains("start -> end: p50 2000 ms, p99 3000 ms"), "{text}");
    assert!(text.contains("1.33 x F p50, 1.00 x F p99"), "{text}");
    assert!(text.contains("server 0.20 cores, swarm 0.60 cores"), "{text}");
}

#[test]
fn a_failed_transition_fails_the_scale_soak() {
    let mut rows = clean_rows();
    rows[4] = row(300, 1, 4_000, 60_000);
    let (passed, text) = verdict(&rows, &report(4_000), "0", "");
    assert!(!passed && text.contains("1 transitions failed"), "{text}");
}

#[test]
fn a_problem_the_swarm_found_fails_the_scale_soak_and_is_named() {
    let log = "error: the report is not clean:\n  clients placed 999/1000\n";
    let (passed, text) = verdict(&clean_rows(), &report(4_000), "1", log);
    assert!(!passed && text.contains("swarm: clients placed 999/1000"), "{text}");
}

#[test]
fn a_loading_screen_over_its_bound_fails_the_scale_soak() {
    let mut rows = clean_rows();
    rows[7] = row(480, 0, 10_001, 60_000);
    let (passed, text) = verdict(&rows, &report(4_000), "0", "");
    assert!(!passed && text.contains("longest loading screen 10001 ms"), "{text}");
    // The swarm's report alone can carry it too (a screen cut short at the end).
    let (passed, text) = verdict(&clean_rows(), &report(12_000), "0", "");
    assert!(!passed && text.contains("longest loading screen 12000 ms"), "{text}");
}

#[test]
fn server_rss_growing_after_the_first_minutes_fails_the_scale_soak() {
    // Growth before 300 s is the warm-up: not judged.
    let mut rows = clean_rows();
    rows[0] = row(60, 0, 4_000, 30_000);
    let (passed, text) = verdict(&rows, &report(4_000), "0", "");
    assert!(passed, "{text}");
    // The clients all leave at the run's end (600 s): that burst is not judged either.
    rows[9] = row(600, 0, 4_000, 90_000);
    let (passed, text) = verdict(&rows, &report(4_000), "0", "");
    assert!(passed, "{text}");
    // 60,005 KiB at 300 s, 66,100 at 540 s: 10.2 %.
    rows[8] = row(540, 0, 4_000, 66_100);
    let (passed, text) = verdict(&rows, &report(4_000), "0", "");
    assert!(!passed && text.contains("server RSS grew 10.2 %"), "{text}");
}

//! `gatehouse-example-level-files [CLIENTS] [SECONDS]`: a server whose world reads its levels
//! from `examples/level-files/levels/`, and simulated clients playing on it (8 for 10 s by
//! default). Prints the simulator's report and what the world saw; exits 0 when the session
//! is clean, as `gatehouse-sim --check` judges it, and every level file loaded.

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use gatehouse_example_level_files::run_session;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let clients = args.next().map_or(Ok(8), |c| c.parse::<usize>());
    let seconds = args.next().map_or(Ok(10), |s| s.parse::<u64>());
    let (Ok(clients @ 1..=64), Ok(seconds @ 1..=600)) = (clients, seconds) else {
        eprintln!("usage: gatehouse-example-level-files [CLIENTS 1-64] [SECONDS 1-600]");
        return ExitCode::from(2);
    };
    // Logs at `warn` unless `RUST_LOG` says otherwise.
    gatehouse_server::ops::install_tracing(gatehouse_server::config::LogFormat::Human, "warn");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let session = match runtime.block_on(run_session(dir, clients, Duration::from_secs(seconds))) {
        Ok(session) => session,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", session.report);
    let world = &session.world;
    println!(
        "world: {} level files read, {} failed; pawns spawned {}, moved {}, destroyed {}",
        world.levels_read,
        world.level_errors.len(),
        world.pawns_spawned,
        world.pawns_moved,
        world.pawns_destroyed
    );
    for (node, points) in &world.spawn_points {
        let names: Vec<&str> = points.iter().map(|p| p.name.as_str()).collect();
        println!("  {node}: spawn points {}", names.join(", "));
    }
    let mut problems = session.report.problems();
    problems.extend(world.level_errors.iter().cloned());
    if problems.is_empty() {
        println!("clean");
        ExitCode::SUCCESS
    } else {
        for problem in &problems {
            eprintln!("problem: {problem}");
        }
        ExitCode::FAILURE
    }
}

//! `gatehouse-floor`: the bare QUIC floor F(N) on this machine (docs/performance.md, "The load
//! benchmark"); see the `gatehouse_floor` crate.

#![forbid(unsafe_code)]

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use gatehouse_conditioner::cli::{ImpairArgs, parse_connect_rate};
use gatehouse_floor::{FloorConfig, run_clients_child, run_floor};

/// The bare QUIC floor F(N): a QUIC server and N clients over loopback, in one process (or two,
/// with `--clients-process`, which also measures the server's memory per connection). Per
/// round the server writes a message on every client's stream and waits for every client's
/// echo; prints the round time (p50 / p99 / max, µs), the connect times and the bytes on the
/// wire. What the load benchmark (deploy/load.sh) divides the product's transition times by.
///
/// With --impair (and its companions), the clients reach the server through the network
/// conditioner, in this process: the round trip to every client over that network, the floor
/// of an impaired run (deploy/scale-soak.sh). Each client endpoint is a flow of its own, with
/// its own draws: --client-endpoints N gives every client its own. Not with --clients-process.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Cli {
    /// Clients, N.
    #[arg(long, default_value_t = 64, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    clients: u32,
    /// Measured rounds.
    #[arg(long, default_value_t = 50, value_name = "R",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    rounds: u32,
    /// Bytes the server writes to each client per round (and each client echoes).
    #[arg(long, default_value_t = 64, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(8..=65536))]
    message_bytes: u32,
    /// Pause before each round, e.g. 50ms.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration, value_name = "D")]
    pause: Duration,
    /// Connections opened per second (default: all at once).
    #[arg(long, value_name = "R", value_parser = parse_connect_rate)]
    connect_rate: Option<f64>,
    /// Client QUIC endpoints (UDP sockets) the clients are spread over.
    #[arg(long, default_value_t = 1, value_name = "E",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    client_endpoints: u32,
    /// Send and receive buffer asked for every UDP socket, bytes (the server's default
    /// `network.udp_buffer_bytes`; the kernel caps it at net.core.rmem_max / wmem_max).
    #[arg(long, default_value_t = 4 << 20, value_name = "BYTES")]
    udp_buffer_bytes: usize,
    /// Worker threads of the server's runtime (default: one per core, as gatehouse-server).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..=1024))]
    server_threads: Option<u32>,
    /// How long one client may take from connecting to the server's welcome.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "D")]
    connect_timeout: Duration,
    /// How long one round may take.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "D")]
    round_timeout: Duration,
    /// Run the clients in a child process (this program), so this one is the server alone and
    /// the report gives its memory per idle connection: the floor of the product's.
    #[arg(long)]
    clients_process: bool,
    /// Internal: be the clients' process of a `--clients-process` run (the order on stdin, the
    /// outcome on stdout).
    #[arg(long, hide = true)]
    clients_child: bool,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A network conditioner between the clients and the server, in this process: the floor
    /// of a round trip to every client over that network. Each client endpoint is a flow of
    /// its own (--client-endpoints N draws each client's losses apart). Not with
    /// --clients-process.
    #[command(flatten)]
    impair: ImpairArgs,
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if cli.clients_child {
        return run_clients_child(std::io::stdin().lock(), std::io::stdout().lock())
            .context("the floor's clients' process failed");
    }
    let mut config = FloorConfig::new(cli.clients as usize);
    config.rounds = cli.rounds as usize;
    config.message_bytes = cli.message_bytes as usize;
    config.pause = cli.pause;
    config.connect_rate = cli.connect_rate;
    config.client_endpoints = cli.client_endpoints as usize;
    config.udp_buffer_bytes = cli.udp_buffer_bytes;
    config.server_threads = cli.server_threads.map(|t| t as usize);
    config.connect_timeout = cli.connect_timeout;
    config.round_timeout = cli.round_timeout;
    config.impair = cli.impair.conditions().map(|c| (c, cli.impair.impair_seed.unwrap_or(1)));
    if cli.clients_process {
        let exe = std::env::current_exe().context("cannot find this program to run the clients")?;
        config.clients_process = Some(exe);
    }
    let report = run_floor(&config).context("the floor run failed")?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

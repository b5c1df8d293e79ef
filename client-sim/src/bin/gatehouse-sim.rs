//! `gatehouse-sim`: run simulated clients against a gatehouse server and report what they saw.

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser};
use gatehouse_client::CertificatePin;
use gatehouse_client_sim::figures::Micros;
use gatehouse_client_sim::misbehaviour::{
    MisbehavingShare, Misbehaviour, parse_misbehaving, parse_misbehaviours,
};
use gatehouse_client_sim::report::{ClientOutcome, RunInfo, SwarmReport};
use gatehouse_client_sim::session::SessionConfig;
use gatehouse_client_sim::swarm::{Progress, SwarmConfig, run_swarm_outcomes};
use gatehouse_client_sim::timeline::{self, ClientTimeline};
use gatehouse_client_sim::wait::{wait_for_pinned_server, wait_for_server};
use gatehouse_conditioner::cli::parse_connect_rate;
use gatehouse_conditioner::cli::{ImpairArgs, ProxyArgs, resolve, run_proxy, start_in_process};
use gatehouse_conditioner::proxy::Proxy;
use gatehouse_logs::LogFormat;
use gatehouse_protocol::token::{DEV_TOKEN_KEY, TokenKey};

/// Simulated gatehouse game clients.
///
/// Each client connects over QUIC, logs in with a development token (player id sim-NNNN, stable
/// per client index), follows the server's transitions (streams the named levels, reports
/// ready, acknowledges possession) and at the end reports what it saw.
///
/// `gatehouse-sim proxy` runs the network conditioner alone (see `gatehouse-sim proxy --help`).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Cli {
    /// A tool instead of a run of clients.
    #[command(subcommand)]
    command: Option<Command>,
    /// Server UDP address, HOST:PORT (a name is resolved once at start).
    #[arg(long, default_value = "127.0.0.1:7777", value_name = "HOST:PORT")]
    server: String,
    /// Number of simulated clients.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    clients: u32,
    /// How long the run lasts from its start, e.g. 30s or 2m: every client leaves then (a client
    /// dialling late, with --connect-rate, stays for less).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, value_name = "D")]
    duration: Duration,
    /// The server's config file: tokens are minted with its `auth.token_key` (or
    /// GATEHOUSE_TOKEN_KEY), and its `data_dir` locates the default certificate. Default:
    /// config/server.toml if it exists (else the development defaults); a file named here must
    /// exist.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server certificate to trust (DER or PEM). Default: dev-cert.der in the data dir of
    /// --config.
    #[arg(long, value_name = "PATH")]
    server_cert: Option<PathBuf>,
    /// Instead of --server-cert, trust exactly the server certificate with this SHA-256
    /// fingerprint: colon-separated hex as the server's start line logs it (`certificate loaded
    /// ... fingerprint=AB:CD:...`) and Agones publishes it, or 64 plain hex digits. Neither the
    /// chain nor --server-name is checked, the handshake's signature is.
    #[arg(long, value_name = "HEX", conflicts_with = "server_cert")]
    server_fingerprint: Option<CertificatePin>,
    /// Trust this certificate (DER or PEM) too, beside --server-cert: another server of a
    /// fleet, which a move to another server may name without a fingerprint (docs/simulator.md,
    /// "Moves to another server"). Repeat it for each server.
    #[arg(long, value_name = "PATH", conflicts_with = "server_fingerprint")]
    trust_cert: Vec<PathBuf>,
    /// Name the certificate is checked against.
    #[arg(long, default_value = "localhost", value_name = "NAME")]
    server_name: String,
    /// Write the JSON report here: the report, its verdict (`clean`, `problems`) and how the run
    /// was made (`run`).
    #[arg(long, value_name = "PATH")]
    report_json: Option<PathBuf>,
    /// Log output on stderr: human-readable lines, or one flat JSON object per line in the
    /// server's shape (docs/operations.md, "Logs"). The report itself goes to stdout.
    #[arg(long, default_value = "human", value_parser = parse_log_format, value_name = "human|json", global = true)]
    log_format: LogFormat,
    /// Simulated stream time per level, uniformly in MIN..MAX milliseconds.
    #[arg(long, default_value = "50..250", value_parser = parse_range, value_name = "MIN..MAX")]
    stream_ms: (Duration, Duration),
    /// Index of the first client (player sim-NNNN).
    #[arg(long, default_value_t = 0, value_name = "I")]
    first_index: usize,
    /// Before the run, wait up to this long (e.g. 30s) for the server: for its certificate file
    /// and for one QUIC handshake. For a server started in the background just before.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    wait: Option<Duration>,
    /// Give up on a client that has not connected after this long, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "D")]
    connect_timeout: Duration,
    /// After dying, request a restart this long later (e.g. 500ms); without it the dead stay
    /// dead.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    restart_after: Option<Duration>,
    /// Each client disconnects abruptly and relaunches with the same player id about this
    /// often (e.g. 10s).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    relaunch_every: Option<Duration>,
    /// A preset behaviour: `basic` (follow the server only) or `soak` (restart 500ms after dying,
    /// relaunch about every 12s). Explicit flags override it.
    #[arg(long, value_enum, default_value = "basic", value_name = "NAME")]
    scenario: Scenario,
    /// At the end, how long a client may wait to be placed before leaving anyway.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "D")]
    settle_grace: Duration,
    /// Exit with an error unless the report is clean: every client connected and placed, no
    /// error, every death respawned, every pawn generation accounted for, and every figure that
    /// counts a broken contract (double pawns, double grants, stale-node spawns, transitions
    /// ended before placement, gate violations) at 0.
    #[arg(long)]
    check: bool,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    seed: u64,
    /// How many clients run the whole client lifecycle (gates, router, lifecycle checks),
    /// spread evenly over the indices; the others are thin: protocol duties and the session
    /// checks only. The report's `gates` and `router` sections count the full ones.
    #[arg(long, default_value_t = 16, value_name = "K")]
    full_clients: usize,
    /// Clients dialling per second at the start (e.g. 50); default: all at once. Every client
    /// must dial within --duration.
    #[arg(long, value_name = "PER_SECOND", value_parser = parse_connect_rate)]
    connect_rate: Option<f64>,
    /// Draw the run as an SVG picture here: one row per client (a sample plus the slowest for
    /// large runs), each loading screen a bar coloured by phase, and the histogram of
    /// shown -> ended.
    #[arg(long, value_name = "FILE.svg")]
    timeline: Option<PathBuf>,
    /// How many clients misbehave: a count, or a share such as 20%. They are spread over the
    /// indices from the last one, always thin, each given a kind from
    /// --misbehaviours in turn: restart-spam (RestartRequest far above the rate limit),
    /// stale-ids (stale and unknown transition, pawn and join ids beside its duties),
    /// garbage-frame and oversized-frame (once placed), never-acknowledge (no possession is
    /// acknowledged), silent (once placed, stops reading and writing but keeps the connection).
    /// The report keeps them apart: every figure is the well-behaved clients', and its
    /// `misbehaving` section counts what the misbehaving ones got (closes by code, server
    /// errors by code); --check also requires each of them to end as the protocol answers its
    /// kind.
    #[arg(long, default_value = "0", value_parser = parse_misbehaving, value_name = "K|P%")]
    misbehaving: MisbehavingShare,
    /// The kinds the misbehaving clients are given, in turn: `all`, or names separated by
    /// commas (restart-spam, stale-ids, garbage-frame, oversized-frame, never-acknowledge,
    /// silent).
    #[arg(long, default_value = "all", value_parser = parse_kinds, value_name = "KINDS")]
    misbehaviours: Kinds,
    /// Write the swarm's figures over each --interval of the run here, one JSON object per line
    /// as each interval ends (and one for the last, shorter one): the loading screens that came
    /// down in it (count, shown -> ended percentiles), the longest screen it saw (down, cut short
    /// by a relaunch, or still up), the screens up at its end, and the clients' reply delays.
    #[arg(long, value_name = "PATH")]
    interval_json: Option<PathBuf>,
    /// The length of one interval of --interval-json, e.g. 60s.
    #[arg(long, default_value = "60s", value_parser = parse_interval, value_name = "D")]
    interval: Duration,
    /// Progress on stderr while the run goes: a status line on a terminal, a line every 10 s
    /// otherwise (`auto`), or none.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    progress: ProgressMode,
    /// A network conditioner between the clients and the server, in process.
    #[command(flatten)]
    impair: ImpairArgs,
}

/// The tools beside the swarm.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// A seeded network conditioner alone: a UDP relay to put between any QUIC client and the
    /// server (loss, lag, jitter, reordering, duplication, a bandwidth cap, per direction).
    Proxy(ProxyArgs),
}

/// When to show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProgressMode {
    /// A live status line on a terminal, a plain line every 10 s otherwise.
    Auto,
    /// No progress output.
    Never,
}

/// Preset client behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// Follow the server: stream, report ready, acknowledge possession.
    Basic,
    /// Churn: restart after dying, disconnect and relaunch now and then.
    Soak,
}

/// The kinds of `--misbehaviours` (a type of its own: clap would take a `Vec` field for a
/// repeated option).
#[derive(Debug, Clone)]
struct Kinds(Vec<Misbehaviour>);

fn parse_kinds(s: &str) -> Result<Kinds, String> {
    parse_misbehaviours(s).map(Kinds)
}

/// An interval of --interval-json: at least a second, so the lines stay readable figures.
fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    LogFormat::parse(s).ok_or_else(|| format!("expected human or json, found {s}"))
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))?;
    if d < Duration::from_secs(1) {
        return Err(format!("{s:?}: expected at least 1s"));
    }
    Ok(d)
}

fn parse_range(s: &str) -> Result<(Duration, Duration), String> {
    let (lo, hi) = s.split_once("..").ok_or_else(|| format!("expected MIN..MAX, found {s:?}"))?;
    let lo: u64 = lo.trim().parse().map_err(|e| format!("MIN {lo:?}: {e}"))?;
    let hi: u64 = hi.trim().parse().map_err(|e| format!("MAX {hi:?}: {e}"))?;
    if lo > hi {
        return Err(format!("MIN {lo} is above MAX {hi}"));
    }
    Ok((Duration::from_millis(lo), Duration::from_millis(hi)))
}

/// The keys of the server config that the simulator reads; the rest is ignored.
#[derive(Debug, Default, serde::Deserialize)]
struct ServerFile {
    #[serde(default)]
    data_dir: Option<PathBuf>,
    #[serde(default)]
    auth: Option<AuthSection>,
}

#[derive(Debug, serde::Deserialize)]
struct AuthSection {
    token_key: Option<String>,
}

fn main() -> std::process::ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let format = cli.log_format;
    // The server's set-up and line shape (the shared `gatehouse-logs` crate).
    gatehouse_logs::install(format, "warn");
    match run(cli, &matches) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // With JSON logs, the error that stopped the run is a log line like the others.
            match format {
                LogFormat::Json => {
                    let message = format!("{e:#}");
                    let line = gatehouse_logs::line_now(
                        tracing::Level::ERROR,
                        "gatehouse_sim",
                        &message,
                        [],
                    );
                    eprintln!("{line}");
                }
                LogFormat::Human => eprintln!("error: {e:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    if let Some(Command::Proxy(args)) = cli.command {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(run_proxy(args))?;
        return Ok(());
    }
    check_flags(&cli)?;
    let server_file = match &cli.config {
        Some(path) => read_server_file(path, true)?,
        None => read_server_file(Path::new(DEFAULT_CONFIG), false)?,
    };
    let token_key = std::env::var("GATEHOUSE_TOKEN_KEY")
        .ok()
        .or_else(|| server_file.auth.as_ref().and_then(|a| a.token_key.clone()));
    let token_key = TokenKey::new(token_key.unwrap_or_else(|| DEV_TOKEN_KEY.to_owned()));
    let server_cert = cli.server_cert.clone().unwrap_or_else(|| {
        server_file.data_dir.clone().unwrap_or_else(|| PathBuf::from("data")).join("dev-cert.der")
    });
    let server = resolve(&cli.server)?;
    let config = SwarmConfig {
        server,
        server_name: cli.server_name.clone(),
        server_cert,
        server_pin: cli.server_fingerprint,
        also_trust: cli.trust_cert.clone(),
        clients: cli.clients as usize,
        first_index: cli.first_index,
        duration: cli.duration,
        token_key,
        session: SessionConfig {
            stream_time: cli.stream_ms,
            seed: cli.seed,
            restart_after_death: cli.restart_after.or(match cli.scenario {
                Scenario::Soak => Some(Duration::from_millis(500)),
                Scenario::Basic => None,
            }),
            full: true,
            misbehaviour: None,
            ..SessionConfig::default()
        },
        relaunch_every: cli.relaunch_every.or(match cli.scenario {
            Scenario::Soak => Some(Duration::from_secs(12)),
            Scenario::Basic => None,
        }),
        settle_grace: cli.settle_grace,
        max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
        connect_timeout: cli.connect_timeout,
        full_clients: cli.full_clients,
        connect_rate: cli.connect_rate,
        // The interval figures are recorded through the progress counts.
        progress: (cli.progress == ProgressMode::Auto || cli.interval_json.is_some())
            .then(|| Arc::new(Progress::default())),
        conditioner: None,
        misbehaving: cli.misbehaving.of(cli.clients as usize),
        misbehaviours: cli.misbehaviours.0.clone(),
    };
    let conditions = cli.impair.conditions();
    let impaired = conditions.is_some();
    let impair_seed = cli.impair.impair_seed.unwrap_or(cli.seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let started = std::time::Instant::now();
    let started_at = std::time::SystemTime::now();
    let clients = config.clients as u64;
    let progress = config.progress.clone();
    let show = cli.progress == ProgressMode::Auto;
    let intervals = match &cli.interval_json {
        Some(path) => Some(IntervalWriter::create(path, cli.interval)?),
        None => None,
    };
    let wait = cli.wait;
    let (outcomes, network) = runtime.block_on(async move {
        let mut config = config;
        if let Some(limit) = wait {
            let (server, name) = (config.server, config.server_name.clone());
            let waited = match config.server_pin {
                Some(pin) => wait_for_pinned_server(server, &name, pin, limit).await?,
                None => wait_for_server(server, &name, &config.server_cert, limit).await?,
            };
            eprintln!("server at {server} answered after {:.1} s", waited.as_secs_f64());
        }
        // The conditioner lives as long as the run; the swarm dials it.
        let proxy = match conditions {
            Some(conditions) => Some(
                start_in_process(config.server, conditions, impair_seed)
                    .await
                    .context("cannot start the network conditioner")?,
            ),
            None => None,
        };
        config.conditioner = proxy.as_ref().map(Proxy::handle);
        let display =
            progress.clone().filter(|_| show).map(|p| tokio::spawn(show_progress(p, clients)));
        let writer = progress.zip(intervals).map(|(p, w)| tokio::spawn(w.run(p, started)));
        let outcomes = run_swarm_outcomes(config).await;
        if let Some(display) = display {
            display.abort();
        }
        if let Some(writer) = writer {
            // The last, shorter interval is written as the writer stops.
            writer.abort();
            let _ = writer.await;
        }
        anyhow::Ok((outcomes?, proxy.map(|p| p.handle().stats())))
    })?;
    let run_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let mut report = SwarmReport::from_outcomes(&outcomes);
    report.network = network;
    // A reader that stopped reading (`| head`) is not an error.
    match write!(std::io::stdout(), "{report}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("cannot print the report");
        }
        _ => {}
    }
    if let Some(path) = &cli.timeline {
        draw_timeline(path, &outcomes, started, run_us)?;
    }
    if let Some(path) = &cli.report_json {
        let run = RunInfo::new(
            effective_options(matches),
            std::env::args().collect(),
            (cli.seed, impaired.then_some(impair_seed)),
            server,
            started_at,
            started.elapsed(),
        );
        let json = report.to_json(&run)?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if cli.check {
        // The verdict the JSON report's `clean` and `problems` say too.
        let verdict = report.verdict();
        if !verdict.clean {
            anyhow::bail!("the report is not clean:\n  {}", verdict.problems.join("\n  "));
        }
    }
    Ok(())
}

/// Every option of the run as it took effect (given or default), by its long name, for the
/// JSON report's `run.options`; several values are joined by commas.
fn effective_options(matches: &ArgMatches) -> std::collections::BTreeMap<String, String> {
    let command = Cli::command();
    let mut options = std::collections::BTreeMap::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Ok(Some(values)) = matches.try_get_raw(id) else { continue };
        let values: Vec<String> = values.map(|v| v.to_string_lossy().into_owned()).collect();
        options.insert(arg.get_long().unwrap_or(id).to_owned(), values.join(","));
    }
    options
}

/// Refuses, before anything runs, flags that would make the run mean something else than asked:
/// a connect rate too slow to dial every client within the run, and an output file in a
/// directory that does not exist (found only after the whole run otherwise).
fn check_flags(cli: &Cli) -> anyhow::Result<()> {
    if let Some(rate) = cli.connect_rate {
        let dialling = Duration::from_secs_f64(f64::from(cli.clients.saturating_sub(1)) / rate);
        if dialling >= cli.duration {
            anyhow::bail!(
                "--connect-rate {rate}: dialling {} clients takes {:.1} s, not within --duration {}",
                cli.clients,
                dialling.as_secs_f64(),
                humantime::format_duration(cli.duration)
            );
        }
    }
    let outputs = [
        ("--timeline", &cli.timeline),
        ("--report-json", &cli.report_json),
        ("--interval-json", &cli.interval_json),
    ];
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.is_dir() {
            anyhow::bail!("{flag} {}: no directory {}", path.display(), dir.display());
        }
    }
    Ok(())
}

/// Shows the swarm's progress until aborted: a status line on a terminal (indicatif), else a
/// plain line on stderr every 10 s.
async fn show_progress(progress: Arc<Progress>, clients: u64) {
    let line = |p: gatehouse_client_sim::swarm::ProgressSnapshot| {
        format!(
            "connected {}/{clients}, placed {}, transitions {}, errors {}",
            p.connected, p.placed, p.transitions, p.errors
        )
    };
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let bar = indicatif::ProgressBar::new(clients);
        let style = indicatif::ProgressStyle::with_template("{elapsed_precise} {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            let now = progress.snapshot();
            bar.set_position(now.connected);
            bar.set_message(line(now));
        }
    } else {
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        tick.tick().await;
        loop {
            tick.tick().await;
            eprintln!("[{:>4} s] {}", started.elapsed().as_secs(), line(progress.snapshot()));
        }
    }
}

/// Writes the swarm's figures over each interval as a JSON line (`--interval-json`).
struct IntervalWriter {
    path: PathBuf,
    file: std::fs::File,
    every: Duration,
}

impl IntervalWriter {
    /// Creates (or truncates) `path`, before the run starts, so a bad path fails at once.
    fn create(path: &Path, every: Duration) -> anyhow::Result<Self> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("--interval-json {}: cannot create it", path.display()))?;
        Ok(IntervalWriter { path: path.to_owned(), file, every })
    }

    /// Writes a line at the end of each interval from `started` until aborted, then one for
    /// the interval cut short (its guard runs when the task is dropped).
    async fn run(self, progress: Arc<Progress>, started: std::time::Instant) {
        /// Writes the last line when the task is dropped.
        struct Last(IntervalWriter, Arc<Progress>, std::time::Instant);
        impl Drop for Last {
            fn drop(&mut self) {
                self.0.write(&self.1, self.2);
            }
        }
        let mut last = Last(self, progress, started);
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::from_std(started) + last.0.every,
            last.0.every,
        );
        loop {
            tick.tick().await;
            last.0.write(&last.1, last.2);
        }
    }

    /// Takes the interval ending now and appends it; a failed write is reported, not fatal.
    fn write(&mut self, progress: &Progress, started: std::time::Instant) {
        let now = std::time::Instant::now();
        let report = progress.take_interval(now, now.duration_since(started).as_secs());
        let written = serde_json::to_string(&report)
            .map_err(std::io::Error::other)
            .and_then(|line| writeln!(self.file, "{line}"));
        if let Err(e) = written {
            eprintln!("--interval-json {}: cannot write: {e}", self.path.display());
        }
    }
}

/// Draws the run's picture to `path`: the picked clients' rows and the histogram of
/// shown -> ended over every client.
fn draw_timeline(
    path: &Path,
    outcomes: &[ClientOutcome],
    started: std::time::Instant,
    run_us: u64,
) -> anyhow::Result<()> {
    let rows: Vec<ClientTimeline> =
        outcomes.iter().map(|o| ClientTimeline::of(o.index, o.full, &o.stats, started)).collect();
    let mut shown_to_ended = Micros::default();
    for o in outcomes {
        shown_to_ended.absorb(&o.stats.timings.shown_to_ended);
    }
    let picked = timeline::svg::pick_rows(&rows, timeline::svg::MAX_ROWS);
    // The error names its path and cause once: no second copy of the cause from its chain.
    timeline::svg::render(path, &picked, run_us, &shown_to_ended.histogram())
        .map_err(|e| anyhow::anyhow!("--timeline: {e}"))?;
    Ok(())
}

/// The server config read when `--config` is not given.
const DEFAULT_CONFIG: &str = "config/server.toml";

/// The server's config file at `path`; a missing file is the development defaults unless it was
/// `named` on the command line, where a typo must not silently fall back to them.
fn read_server_file(path: &Path, named: bool) -> anyhow::Result<ServerFile> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).with_context(|| format!("invalid {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => Ok(ServerFile::default()),
        Err(e) => Err(e).with_context(|| format!("--config {}: cannot read it", path.display())),
    }
}

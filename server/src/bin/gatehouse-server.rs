//! `gatehouse-server`: parse the CLI, load the config, install tracing, run the server until
//! SIGTERM or Ctrl-C, exit 0. `gatehouse-server saves list|show PLAYER` prints what the player
//! store holds instead; `gatehouse-server probe [PATH]` asks the admin endpoint of a running
//! server and exits 0 or 1 (a container health check that needs no shell or curl).

#![forbid(unsafe_code)]

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{
    ArgMatches, CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum as _,
};
use gatehouse_server::Server;
use gatehouse_server::admin::AdminToken;
use gatehouse_server::config::{
    ConfigError, LogFormat, OrchestratorKind, ServerConfig, ValueSource, WorldMap,
};
use gatehouse_server::store::{PlayerSave, Preset, SessionSave, Store, StoreUrl};
use tokio_util::sync::CancellationToken;

/// The environment variables, listed under `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GATEHOUSE_TOKEN_KEY   session-token (HS256) key; overrides auth.token_key (required beyond
                        loopback: the shipped development key is refused there)
  GATEHOUSE_STORE_URL   player store, sqlite:PATH or postgres://...; overrides [store] url
  GATEHOUSE_TLS_CERTIFICATE, GATEHOUSE_TLS_PRIVATE_KEY
                        certificate chain and private key files; override tls.certificate
                        and tls.private_key (a server bound beyond loopback without them warns)
  GATEHOUSE_ADMIN_TOKEN bearer token POST /travel requires; overrides admin.token (required
                        when the admin endpoint binds beyond loopback)
  GATEHOUSE_CONFIG, GATEHOUSE_BIND, GATEHOUSE_DATA_DIR, GATEHOUSE_LOG_FORMAT, GATEHOUSE_WORLD,
  GATEHOUSE_ADMIN_BIND, GATEHOUSE_ORCHESTRATOR  the flags above
  AGONES_SDK_GRPC_PORT  the Agones SDK sidecar's port (set by Agones; fleet.agones_sdk_port wins)
  RUST_LOG              log filter, e.g. info or gatehouse_server=debug (default info)
Keep keys and passwords out of the command line, where other users can read them.
SIGTERM or Ctrl-C drains (saves, closes connections; under Agones, then Shutdown) and exits 0;
a second one exits at once.";

/// The gatehouse authoritative dedicated game server: players connect over QUIC, travel between
/// world-map nodes through loading transitions, and are spawned only where levels have streamed.
///
/// Flags and GATEHOUSE_* environment variables override the config file.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, after_help = ENVIRONMENT)]
struct Cli {
    /// Server config file (TOML). Paths inside it are relative to its directory.
    #[arg(
        long,
        env = "GATEHOUSE_CONFIG",
        default_value = "config/server.toml",
        value_name = "FILE",
        global = true
    )]
    config: PathBuf,
    /// UDP address to listen on, e.g. 0.0.0.0:7777 or 127.0.0.1:0 for an ephemeral port.
    /// Overrides `network.bind`.
    #[arg(long, env = "GATEHOUSE_BIND", value_name = "ADDR")]
    bind: Option<String>,
    /// Directory for the development certificate and the embedded store. Overrides `data_dir`.
    #[arg(long, env = "GATEHOUSE_DATA_DIR", value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Log output: human-readable lines or one JSON object per line. Overrides `log_format`.
    #[arg(long, env = "GATEHOUSE_LOG_FORMAT", value_name = "human|json")]
    log_format: Option<String>,
    /// World-map file (TOML). Overrides `game.world`.
    #[arg(long, env = "GATEHOUSE_WORLD", value_name = "FILE")]
    world: Option<PathBuf>,
    /// TCP address of the admin HTTP endpoint (health, state, metrics, travel), e.g.
    /// 127.0.0.1:7778; `off` disables it. Overrides `admin.bind` / `admin.enabled`. Beyond
    /// loopback it needs an admin token (GATEHOUSE_ADMIN_TOKEN or `admin.token`).
    #[arg(long, env = "GATEHOUSE_ADMIN_BIND", value_name = "ADDR|off", global = true)]
    admin_bind: Option<String>,
    /// The fleet orchestrator to tell Ready, Health, the players and Shutdown: none, or agones
    /// (a server built with the `agones` feature, beside the Agones SDK sidecar). Overrides
    /// `fleet.orchestrator`.
    #[arg(long, env = "GATEHOUSE_ORCHESTRATOR", value_name = "none|agones")]
    orchestrator: Option<String>,
    /// Without a command: run the server.
    #[command(subcommand)]
    command: Option<Command>,
}

/// Operator commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect the player-save store that `[store] url` (or GATEHOUSE_STORE_URL) names.
    Saves {
        /// What to print.
        #[command(subcommand)]
        action: SavesCommand,
    },
    /// Ask the admin endpoint of a running server (at `admin.bind`, or `--admin-bind`; a
    /// wildcard address is asked on loopback) for PATH and print the answer's body. Exits 0 on
    /// `200`, 1 otherwise: a Docker HEALTHCHECK that needs no shell.
    Probe {
        /// The read-only route to ask: /health, /ready, /state (JSON) or /metrics.
        #[arg(default_value = "/health", value_name = "PATH")]
        path: String,
        /// Give up after this many milliseconds (connecting and reading together), 1 to 600000.
        #[arg(long, default_value_t = 2000, value_name = "MS",
              value_parser = clap::value_parser!(u64).range(1..=600_000))]
        timeout_ms: u64,
    },
}

/// `saves` commands.
#[derive(Debug, Subcommand)]
enum SavesCommand {
    /// List every saved player, then the session saves.
    List,
    /// Show one player's save: node, preset, inventory, equipment, version.
    Show {
        /// The player id (the session token's `uid`).
        player: String,
    },
}

fn main() -> std::process::ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(&cli, &matches) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            report(&cli, &e);
            std::process::ExitCode::FAILURE
        }
    }
}

/// Prints the error that stopped the start on stderr: one line, or one JSON object when the
/// logs are JSON (`--log-format json`, or `log_format = "json"` in the config file), so a log
/// collector reads it like every other line.
fn report(cli: &Cli, e: &anyhow::Error) {
    let json = match cli.log_format.as_deref() {
        Some(format) => format.eq_ignore_ascii_case("json"),
        None => file_log_format(&cli.config) == Some(LogFormat::Json),
    };
    if !json {
        eprintln!("error: {}", describe(e));
        return;
    }
    let object = match e.downcast_ref::<ConfigError>() {
        Some(config) => config.to_json(),
        None => serde_json::json!({ "level": "ERROR", "message": describe(e) }),
    };
    eprintln!("{object}");
}

/// The `log_format` a config file asks for, if it can be read at all.
fn file_log_format(path: &std::path::Path) -> Option<LogFormat> {
    let text = std::fs::read_to_string(path).ok()?;
    let table: toml::Table = text.parse().ok()?;
    match table.get("log_format")?.as_str()? {
        "json" => Some(LogFormat::Json),
        _ => Some(LogFormat::Human),
    }
}

/// An error and its causes on one line, each cause once (our errors already quote their
/// source), and no backtrace: operators read these.
fn describe(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !out.contains(&cause) {
            out.push_str(": ");
            out.push_str(&cause);
        }
    }
    out
}

fn run(cli: &Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    let config = load_config(cli, matches)?;
    match &cli.command {
        Some(Command::Saves { action }) => {
            install_tracing(config.log_format, "warn");
            return saves(&config, action);
        }
        Some(Command::Probe { path, timeout_ms }) => {
            return probe(&config, path, Duration::from_millis(*timeout_ms));
        }
        None => {}
    }
    // Before anything binds: an endpoint other hosts can reach must not move players for
    // whoever asks.
    config.check_admin_exposure()?;
    config.check_key_exposure()?;
    let world = WorldMap::load(&config.game.world).map_err(|e| match e {
        // A world file that cannot be read is the value of `game.world` (a flag, a variable
        // or a file line): blame that.
        ConfigError::Read { path, source } => config.invalid(
            "game.world",
            "a readable world file",
            format!("{}: {source}", path.display()),
        ),
        other => other,
    })?;
    install_tracing(config.log_format, "info");
    // The first line: what runs, on which config and world (issue 15 item 5).
    tracing::info!(version = %env!("CARGO_PKG_VERSION"), config = %cli.config.display(),
        world = %config.game.world.display(), "gatehouse-server starting");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Signals are handled from the start: a SIGTERM while the server still starts (under
        // Agones, while it waits for the SDK sidecar) stops it cleanly, with exit code 0.
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        let server = tokio::select! {
            bound = Server::bind(&config, world) => bound?,
            () = shutdown.cancelled() => {
                tracing::info!("shutdown requested while starting; stopped before serving");
                return anyhow::Ok(());
            }
        };
        server.run(shutdown).await?;
        anyhow::Ok(())
    })
}

/// The config file, then the flags and `GATEHOUSE_*` variables over it, each recorded as the
/// source of the key it sets so that an error blames it (issue 15 item 4); then the checks.
fn load_config(cli: &Cli, matches: &ArgMatches) -> Result<ServerConfig, ConfigError> {
    let mut config = ServerConfig::load(&cli.config)?;
    if let Some(bind) = &cli.bind {
        let source = cli_source(matches, "bind", "--bind", "GATEHOUSE_BIND");
        config.set_source("network.bind", source);
        config.network.bind = bind.parse().map_err(|_| {
            config.invalid(
                "network.bind",
                "an address such as 0.0.0.0:7777 or 127.0.0.1:0",
                format!("{bind:?}"),
            )
        })?;
    }
    if let Some(dir) = &cli.data_dir {
        let source = cli_source(matches, "data_dir", "--data-dir", "GATEHOUSE_DATA_DIR");
        config.set_source("data_dir", source);
        config.data_dir = dir.clone();
    }
    if let Some(format) = &cli.log_format {
        let source = cli_source(matches, "log_format", "--log-format", "GATEHOUSE_LOG_FORMAT");
        config.set_source("log_format", source);
        config.log_format = LogFormat::from_str(format, true)
            .map_err(|_| config.invalid("log_format", "human or json", format!("{format:?}")))?;
    }
    if let Some(world) = &cli.world {
        let source = cli_source(matches, "world", "--world", "GATEHOUSE_WORLD");
        config.set_source("game.world", source);
        config.game.world = world.clone();
    }
    if let Some(addr) = cli.admin_bind.as_deref() {
        let source = cli_source(matches, "admin_bind", "--admin-bind", "GATEHOUSE_ADMIN_BIND");
        config.set_source("admin.bind", source.clone());
        config.set_source("admin.enabled", source);
        if addr == "off" {
            config.admin.enabled = false;
        } else {
            config.admin.bind = addr.parse().map_err(|_| {
                config.invalid(
                    "admin.bind",
                    "ADDR:PORT, e.g. 127.0.0.1:7778, or off",
                    format!("{addr:?}"),
                )
            })?;
            config.admin.enabled = true;
        }
    }
    if let Some(name) = &cli.orchestrator {
        let source =
            cli_source(matches, "orchestrator", "--orchestrator", "GATEHOUSE_ORCHESTRATOR");
        config.set_source("fleet.orchestrator", source);
        config.fleet.orchestrator = OrchestratorKind::from_str(name, true).map_err(|_| {
            config.invalid("fleet.orchestrator", "none or agones", format!("{name:?}"))
        })?;
    }
    let env = |var: &str| ValueSource::Env { var: var.to_owned() };
    if let Ok(key) = std::env::var("GATEHOUSE_TOKEN_KEY") {
        config.set_source("auth.token_key", env("GATEHOUSE_TOKEN_KEY"));
        config.auth.token_key = key;
    }
    if let Ok(token) = std::env::var("GATEHOUSE_ADMIN_TOKEN") {
        config.set_source("admin.token", env("GATEHOUSE_ADMIN_TOKEN"));
        // Never quoted back: the error says what is wrong with it, not what it is.
        config.admin.token =
            Some(AdminToken::parse(&token).map_err(|why| config.invalid("admin.token", why, ""))?);
    }
    // A certificate mounted from a secret (deploy/agones/fleet.yaml); paths as given.
    if let Ok(path) = std::env::var("GATEHOUSE_TLS_CERTIFICATE") {
        config.set_source("tls.certificate", env("GATEHOUSE_TLS_CERTIFICATE"));
        config.tls.certificate = Some(path.into());
    }
    if let Ok(path) = std::env::var("GATEHOUSE_TLS_PRIVATE_KEY") {
        config.set_source("tls.private_key", env("GATEHOUSE_TLS_PRIVATE_KEY"));
        config.tls.private_key = Some(path.into());
    }
    if let Ok(url) = std::env::var("GATEHOUSE_STORE_URL") {
        config.set_source("store.url", env("GATEHOUSE_STORE_URL"));
        config.store.url =
            StoreUrl::parse(&url).map_err(|e| config.invalid("store.url", e.to_string(), ""))?;
    }
    config.check()?;
    Ok(config)
}

/// Whether a CLI value came from its flag or from its environment variable.
fn cli_source(matches: &ArgMatches, id: &str, flag: &str, var: &str) -> ValueSource {
    match matches.value_source(id) {
        Some(clap::parser::ValueSource::EnvVariable) => ValueSource::Env { var: var.to_owned() },
        _ => ValueSource::Flag { flag: flag.to_owned() },
    }
}

/// `saves list` / `saves show PLAYER`: opens the store (running its migrations, as the server
/// would) and prints what it holds.
fn saves(config: &ServerConfig, action: &SavesCommand) -> anyhow::Result<()> {
    // Reading must not create: a mistyped data dir would otherwise show an empty new store.
    if let Some(path) = config.store.url.embedded_path(&config.data_dir)
        && !path.exists()
    {
        anyhow::bail!(
            "no store at {} (check --data-dir, or `data_dir` and `[store] url` in the config)",
            path.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let text = runtime.block_on(async {
        let store = Store::open(&config.store.url, &config.data_dir).await?;
        let text = match action {
            SavesCommand::List => {
                let players = store.list_players().await?;
                let sessions = store.list_sessions().await?;
                render_list(store.location(), &players, &sessions)
            }
            SavesCommand::Show { player } => {
                let id = gatehouse_protocol::PlayerId::new(player.clone())
                    .with_context(|| format!("invalid player id {player:?}"))?;
                match store.load_player(&id).await? {
                    Some(save) => render_save(store.location(), &save),
                    None => anyhow::bail!("no save for player {id} in {}", store.location()),
                }
            }
        };
        store.close().await;
        anyhow::Ok(text)
    })?;
    print_stdout(&text)
}

/// `probe [PATH]`: one HTTP/1.1 GET to the admin endpoint; prints the body, fails unless `200`.
fn probe(config: &ServerConfig, path: &str, timeout: Duration) -> anyhow::Result<()> {
    if !config.admin.enabled {
        anyhow::bail!(
            "probe: the admin endpoint is off (admin.enabled = false or --admin-bind off)"
        );
    }
    // The request line is ours to write: a path must not smuggle in another header.
    if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
        anyhow::bail!("probe: expected a path such as /health or /state, found {path:?}");
    }
    let addr = probe_addr(config.admin.bind);
    // `/state` needs the token when one is configured (it is in this process's environment
    // or config, as it is in the server's).
    let token = config.admin.token.as_ref().map(AdminToken::bearer);
    let (status, body) = http_get(addr, path, token, timeout)
        .with_context(|| format!("probe: no answer from the admin endpoint at {addr}"))?;
    print_stdout(&body)?;
    if status != 200 {
        anyhow::bail!("probe: {addr}{path} answered {status}");
    }
    Ok(())
}

/// Where to reach an endpoint bound at `bind`: a wildcard address is reached on loopback.
fn probe_addr(bind: SocketAddr) -> SocketAddr {
    let ip = match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bind.port())
}

/// The largest answer `probe` reads, bytes: far above any `/state`, and a bound on a peer that
/// never stops talking.
const PROBE_MAX_BYTES: u64 = 16 << 20;

/// `GET path` over a plain TCP connection, with `token` as a bearer token if given, all within
/// `timeout`: the status code and the body.
fn http_get(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<(u16, String)> {
    let deadline = Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_write_timeout(Some(left()))?;
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut limited = stream.take(PROBE_MAX_BYTES);
    loop {
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?}");
        }
        limited.get_ref().set_read_timeout(Some(left()))?;
        match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    parse_response(&raw)
}

/// Splits an HTTP/1.1 response into its status code and body (de-chunked if need be).
fn parse_response(raw: &[u8]) -> anyhow::Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").context("an incomplete HTTP response")?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("an HTTP response without a status code")?;
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let body = if chunked { dechunk(body)? } else { body.to_owned() };
    Ok((status, body))
}

/// The body of a `Transfer-Encoding: chunked` response.
fn dechunk(mut rest: &str) -> anyhow::Result<String> {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").context("a truncated chunked body")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .context("a bad chunk size")?;
        if size == 0 {
            return Ok(body);
        }
        let chunk = after.get(..size).context("a truncated chunk")?;
        body.push_str(chunk);
        rest = after.get(size..).unwrap_or("").trim_start_matches("\r\n");
    }
}

/// Writes to stdout; a closed pipe (`saves list | head`) is not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// `saves list`: one line per player, then the sessions.
fn render_list(location: &str, players: &[PlayerSave], sessions: &[SessionSave]) -> String {
    let rows: Vec<[String; 5]> = players
        .iter()
        .map(|p| {
            [
                p.player.to_string(),
                node_text(p),
                preset_text(&p.preset),
                p.inventory.len().to_string(),
                p.version.to_string(),
            ]
        })
        .collect();
    let header = ["PLAYER", "NODE", "PRESET", "ITEMS", "VERSION"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = format!("store {location}\n");
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> =
            row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let noun = if players.len() == 1 { "player" } else { "players" };
    out.push_str(&format!("{} {noun}\n", players.len()));
    for s in sessions {
        out.push_str(&format!("session {}: node {}, version {}\n", s.session, s.node, s.version));
    }
    out
}

/// `saves show PLAYER`: every field of one save.
fn render_save(location: &str, save: &PlayerSave) -> String {
    let inventory = if save.inventory.is_empty() {
        "(empty)".to_owned()
    } else {
        save.inventory
            .iter()
            .map(|i| format!("{} x{}", i.item, i.count))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let kits = match &save.preset {
        Preset::Character { kits, .. } => tags_text(kits),
        Preset::ReadOnly { .. } => "(from the preset catalog)".to_owned(),
    };
    format!(
        "player     {}\nnode       {}\npreset     {}\nkits       {kits}\ninventory  {inventory}\nequipment  {}\nversion    {}\nstore      {location}\n",
        save.player,
        node_text(save),
        preset_text(&save.preset),
        tags_text(&save.equipment),
        save.version,
    )
}

fn node_text(save: &PlayerSave) -> String {
    save.node.as_ref().map_or_else(|| "(none)".to_owned(), ToString::to_string)
}

fn preset_text(preset: &Preset) -> String {
    match preset {
        Preset::Character { character_def, .. } => format!("character {character_def}"),
        Preset::ReadOnly { name } => format!("read-only preset {name}"),
    }
}

fn tags_text(tags: &[gatehouse_tags::GameplayTag]) -> String {
    if tags.is_empty() {
        return "(none)".to_owned();
    }
    tags.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

fn install_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}

/// Cancels `shutdown` on the first SIGTERM or Ctrl-C (the drain); a second one exits at once,
/// with code 1, for an operator who will not wait.
async fn stop_on_signal(shutdown: CancellationToken) {
    next_signal().await;
    tracing::info!("shutdown requested; a second signal stops at once");
    shutdown.cancel();
    next_signal().await;
    tracing::warn!("second signal: exiting without finishing the drain");
    std::process::exit(1);
}

/// Waits for the next SIGTERM or Ctrl-C.
async fn next_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::{CharacterDef, NodeId, PlayerId};
    use gatehouse_server::store::InventoryItem;
    use gatehouse_tags::GameplayTag;

    use super::*;

    fn character() -> PlayerSave {
        PlayerSave {
            player: PlayerId::new("sim-0001").unwrap(),
            node: Some(NodeId::new("harbor").unwrap()),
            preset: Preset::Character {
                character_def: CharacterDef::new("Vanguard").unwrap(),
                kits: vec![GameplayTag::parse("Kit.Composed.Vanguard").unwrap()],
            },
            inventory: vec![InventoryItem { item: "rope".into(), count: 2 }],
            equipment: vec![GameplayTag::parse("Effect.Equipment.Armor").unwrap()],
            version: 3,
        }
    }

    #[test]
    fn show_prints_every_field() {
        let text = render_save("sqlite:data/saves.db", &character());
        for line in [
            "player     sim-0001",
            "node       harbor",
            "preset     character Vanguard",
            "kits       Kit.Composed.Vanguard",
            "inventory  rope x2",
            "equipment  Effect.Equipment.Armor",
            "version    3",
            "store      sqlite:data/saves.db",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn list_prints_one_aligned_line_per_player_then_the_sessions() {
        let mut scout = character();
        scout.player = PlayerId::new("p2").unwrap();
        scout.node = None;
        scout.preset = Preset::ReadOnly { name: "Scout".into() };
        let session = SessionSave {
            session: "main".into(),
            node: NodeId::new("harbor").unwrap(),
            version: 4,
        };
        let text = render_list("s", &[character(), scout], &[session]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "store s");
        assert!(lines[1].starts_with("PLAYER    NODE    PRESET"), "{text}");
        assert!(lines[2].starts_with("sim-0001  harbor  character Vanguard"), "{text}");
        assert!(lines[3].starts_with("p2        (none)  read-only preset Scout"), "{text}");
        assert_eq!(lines[4], "2 players");
        assert_eq!(lines[5], "session main: node harbor, version 4");
    }

    #[test]
    fn a_probe_of_a_wildcard_bind_asks_loopback() {
        let probe = |s: &str| probe_addr(s.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:7778"), "127.0.0.1:7778");
        assert_eq!(probe("[::]:7778"), "[::1]:7778");
        assert_eq!(probe("10.1.2.3:7778"), "10.1.2.3:7778");
    }

    #[test]
    fn a_probe_reads_plain_and_chunked_answers() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
        assert_eq!(parse_response(plain).unwrap(), (200, "ok\n".to_owned()));
        let chunked =
            b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n4\r\ngame\r\n9\r\n stopped\n\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (503, "game stopped\n".to_owned()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err(), "an incomplete head");
    }

    #[test]
    fn probe_takes_the_admin_address_after_it() {
        let cli = Cli::try_parse_from([
            "gatehouse-server",
            "probe",
            "/state",
            "--admin-bind",
            "127.0.0.1:9",
        ])
        .unwrap();
        assert_eq!(cli.admin_bind.as_deref(), Some("127.0.0.1:9"));
        assert!(matches!(cli.command, Some(Command::Probe { ref path, .. }) if path == "/state"));
    }

    #[test]
    fn saves_commands_take_the_global_flags_after_them() {
        let cli = Cli::try_parse_from([
            "gatehouse-server",
            "saves",
            "show",
            "sim-0001",
            "--data-dir",
            "/tmp/d",
            "--config",
            "c.toml",
        ])
        .unwrap();
        assert_eq!(cli.data_dir, Some(PathBuf::from("/tmp/d")));
        assert_eq!(cli.config, PathBuf::from("c.toml"));
        assert!(matches!(
            cli.command,
            Some(Command::Saves { action: SavesCommand::Show { ref player } }) if player == "sim-0001"
        ));
        let plain = Cli::try_parse_from(["gatehouse-server", "--bind", "127.0.0.1:0"]).unwrap();
        assert!(plain.command.is_none(), "no subcommand runs the server");
    }
}

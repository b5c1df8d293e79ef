//! `gatehouse-server`: parse the CLI, load the config, install tracing, run the server until
//! SIGTERM or Ctrl-C, exit 0. `gatehouse-server saves list|show PLAYER` prints what the player
//! store holds instead.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use gatehouse_server::Server;
use gatehouse_server::config::{LogFormat, ServerConfig, WorldMap};
use gatehouse_server::store::{PlayerSave, Preset, SessionSave, Store, StoreUrl};
use tokio_util::sync::CancellationToken;

/// The environment variables, listed under `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GATEHOUSE_TOKEN_KEY   session-token (HS256) key; overrides auth.token_key
  GATEHOUSE_STORE_URL   player store, sqlite:PATH or postgres://...; overrides [store] url
  GATEHOUSE_CONFIG, GATEHOUSE_BIND, GATEHOUSE_DATA_DIR, GATEHOUSE_LOG_FORMAT, GATEHOUSE_WORLD,
  GATEHOUSE_ADMIN_BIND  the flags above
  RUST_LOG              log filter, e.g. info or gatehouse_server=debug (default info)
Keep keys and passwords out of the command line, where other users can read them.
SIGTERM or Ctrl-C drains (saves, closes connections) and exits 0; a second one exits at once.";

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
    bind: Option<SocketAddr>,
    /// Directory for the development certificate and the embedded store. Overrides `data_dir`.
    #[arg(long, env = "GATEHOUSE_DATA_DIR", value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Log output: human-readable lines or one JSON object per line. Overrides `log_format`.
    #[arg(long, env = "GATEHOUSE_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
    /// World-map file (TOML). Overrides `game.world`.
    #[arg(long, env = "GATEHOUSE_WORLD", value_name = "FILE")]
    world: Option<PathBuf>,
    /// TCP address of the admin HTTP endpoint (health, state, metrics, travel), e.g.
    /// 127.0.0.1:7778; `off` disables it. Overrides `admin.bind` / `admin.enabled`.
    #[arg(long, env = "GATEHOUSE_ADMIN_BIND", value_name = "ADDR|off")]
    admin_bind: Option<String>,
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
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            std::process::ExitCode::FAILURE
        }
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

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = load_config(&cli)?;
    if let Some(Command::Saves { action }) = &cli.command {
        install_tracing(config.log_format, "warn");
        return saves(&config, action);
    }
    install_tracing(config.log_format, "info");
    let world = WorldMap::load(&config.game.world)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = Server::bind(&config, world).await?;
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        server.run(shutdown).await;
        anyhow::Ok(())
    })
}

fn load_config(cli: &Cli) -> anyhow::Result<ServerConfig> {
    let mut config = ServerConfig::load(&cli.config)?;
    if let Some(bind) = cli.bind {
        config.network.bind = bind;
    }
    if let Some(dir) = &cli.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(format) = cli.log_format {
        config.log_format = format;
    }
    if let Some(world) = &cli.world {
        config.game.world = world.clone();
    }
    match cli.admin_bind.as_deref() {
        None => {}
        Some("off") => config.admin.enabled = false,
        Some(addr) => {
            config.admin.bind = addr
                .parse()
                .with_context(|| format!("--admin-bind {addr:?}: expected ADDR:PORT or off"))?;
            config.admin.enabled = true;
        }
    }
    if let Ok(key) = std::env::var("GATEHOUSE_TOKEN_KEY") {
        config.auth.token_key = key;
    }
    if let Ok(url) = std::env::var("GATEHOUSE_STORE_URL") {
        config.store.url = StoreUrl::parse(&url).context("GATEHOUSE_STORE_URL")?;
    }
    config.check(&cli.config)?;
    Ok(config)
}

/// `saves list` / `saves show PLAYER`: opens the store (running its migrations, as the server
/// would) and prints what it holds.
fn saves(config: &ServerConfig, action: &SavesCommand) -> anyhow::Result<()> {
    // Reading must not create: a mistyped data dir would otherwise show an empty new store.
    if let Some(path) = config.store.url.embedded_path(&config.data_dir) {
        if !path.exists() {
            anyhow::bail!(
                "no store at {} (check --data-dir, or `data_dir` and `[store] url` in the config)",
                path.display()
            );
        }
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

/// Writes to stdout; a closed pipe (`saves list | head`) is not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
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

//! `gatehouse-server`: parse the command line, load the config, install tracing and call the
//! library: [`Server`] until SIGTERM or Ctrl-C (exit 0), or one of the operator commands in
//! [`gatehouse_server::ops`] (`saves`, `probe`).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use gatehouse_server::Server;
use gatehouse_server::config::{
    ConfigError, LogFormat, Override, Overrides, ServerConfig, ValueSource, WorldMap, load_world,
};
use gatehouse_server::ops::{self, SavesQuery};
use tokio_util::sync::CancellationToken;

/// The environment variables, listed under `--help`.
const ENVIRONMENT: &str = "\
Environment:
  GATEHOUSE_<SECTION>__<KEY>  any key of the config file, e.g. GATEHOUSE_NETWORK__MAX_PLAYERS=512,
                        GATEHOUSE_STORE__URL; a top-level key is GATEHOUSE_<KEY>, e.g.
                        GATEHOUSE_LOG_FORMAT. Precedence: flag > variable > file > default.
                        An unknown GATEHOUSE_* variable is an error. Durations take 250ms, 10s,
                        2m as well as the key's unit. `config show` prints where each came from.
  GATEHOUSE_TOKEN_KEY   session-token (HS256) key; overrides auth.token_key (required beyond
                        loopback: the shipped development key is refused there)
  GATEHOUSE_STORE_URL   player store, sqlite:PATH or postgres://...; overrides [store] url
  GATEHOUSE_TLS_CERTIFICATE, GATEHOUSE_TLS_PRIVATE_KEY
                        certificate chain and private key files; override tls.certificate
                        and tls.private_key (a server bound beyond loopback without them warns)
  GATEHOUSE_ADMIN_TOKEN bearer token POST /travel requires; overrides admin.token (required
                        when the admin endpoint binds beyond loopback)
  GATEHOUSE_TICKET_KEY  the fleet's travel-ticket (HS256) key; overrides fleet.ticket_key
                        (required when fleet.directory is not none; never
                        auth.token_key)
  GATEHOUSE_CONFIG, GATEHOUSE_BIND, GATEHOUSE_DATA_DIR, GATEHOUSE_LOG_FORMAT, GATEHOUSE_WORLD,
  GATEHOUSE_ADMIN_BIND, GATEHOUSE_ORCHESTRATOR  the flags above
                        (the names above also work; one set together with its
                        GATEHOUSE_<SECTION>__<KEY> name, e.g. GATEHOUSE_NETWORK__BIND, is an error)
  AGONES_SDK_GRPC_PORT  the Agones SDK sidecar's port (set by Agones; fleet.agones_sdk_port wins)
  RUST_LOG              log filter, e.g. info or gatehouse_server=debug (default info)
Keep keys and passwords out of the command line, where other users can read them.
SIGTERM or Ctrl-C drains (saves, closes connections; under Agones, then Shutdown) and exits 0;
a second one exits at once.";

/// The gatehouse authoritative dedicated game server: players connect over QUIC, travel between
/// world-map nodes through loading transitions, and are spawned only where levels have streamed.
///
/// Flags and GATEHOUSE_* environment variables override the config file: every key can be set
/// as GATEHOUSE_<SECTION>__<KEY> (see below); `config check` checks it all without serving,
/// `config show` prints each value and where it came from.
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
    #[arg(long, env = "GATEHOUSE_BIND", value_name = "ADDR", global = true)]
    bind: Option<String>,
    /// Directory for the development certificate and the embedded store. Overrides `data_dir`.
    #[arg(long, env = "GATEHOUSE_DATA_DIR", value_name = "DIR", global = true)]
    data_dir: Option<String>,
    /// Log output: human-readable lines or one JSON object per line. Overrides `log_format`.
    #[arg(long, env = "GATEHOUSE_LOG_FORMAT", value_name = "human|json", global = true)]
    log_format: Option<String>,
    /// World-map file (TOML). Overrides `game.world`.
    #[arg(long, env = "GATEHOUSE_WORLD", value_name = "FILE", global = true)]
    world: Option<String>,
    /// TCP address of the admin HTTP endpoint (health, state, metrics, travel), e.g.
    /// 127.0.0.1:7778; `off` disables it. Overrides `admin.bind` / `admin.enabled`. Beyond
    /// loopback it needs an admin token (GATEHOUSE_ADMIN_TOKEN or `admin.token`).
    #[arg(long, env = "GATEHOUSE_ADMIN_BIND", value_name = "ADDR|off", global = true)]
    admin_bind: Option<String>,
    /// The fleet orchestrator to tell Ready, Health, the players and Shutdown: none, or agones
    /// (a server built with the `agones` feature, beside the Agones SDK sidecar). Overrides
    /// `fleet.orchestrator`.
    #[arg(long, env = "GATEHOUSE_ORCHESTRATOR", value_name = "none|agones", global = true)]
    orchestrator: Option<String>,
    /// Without a command: run the server.
    #[command(subcommand)]
    command: Option<Command>,
}

/// Operator commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Check the configuration, or print it, without serving (docs/operations.md,
    /// "Configuration").
    Config {
        /// What to do with it.
        #[command(subcommand)]
        action: ConfigCommand,
    },
    /// Inspect the player-save store that `[store] url` (or GATEHOUSE_STORE_URL) names.
    Saves {
        /// What to print.
        #[command(subcommand)]
        action: SavesCommand,
    },
    /// Ask the admin endpoint of a running server (at `admin.bind`, or `--admin-bind`; a
    /// wildcard address is asked on loopback) for PATH and print the answer's body. Exits 0 on
    /// a 2xx answer, 1 otherwise: a Docker HEALTHCHECK that needs no shell, and with `--post`
    /// an operator travel in a container that has no curl.
    Probe {
        /// The route to ask: /health, /ready, /state (JSON) or /metrics; with --post,
        /// /travel/NODE.
        #[arg(default_value = "/health", value_name = "PATH")]
        path: String,
        /// Send a POST (with an empty body) instead of a GET: `probe --post /travel/NODE`
        /// starts a travel to NODE (202).
        #[arg(long)]
        post: bool,
        /// Give up after this many milliseconds (connecting and reading together), 1 to 600000.
        #[arg(long, default_value_t = 2000, value_name = "MS",
              value_parser = clap::value_parser!(u64).range(1..=600_000))]
        timeout_ms: u64,
    },
}

/// `config` commands.
#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Load and check everything the server checks at start (the config with its flags and
    /// variables, the world file, the TLS certificate and key and that they match, the store
    /// URL's CA file, the data dir, the token key and admin token beyond loopback) without
    /// binding a port, connecting or writing anything: one line and exit 0, or the error and
    /// exit 1.
    Check,
    /// Print every key's effective value and where it came from (file:line, variable, flag,
    /// default), secrets redacted.
    Show,
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
            report(&cli, &*e);
            std::process::ExitCode::FAILURE
        }
    }
}

/// Whatever stopped the process, for [`report`].
type Failure = Box<dyn std::error::Error + Send + Sync>;

fn run(cli: &Cli, matches: &ArgMatches) -> Result<(), Failure> {
    let config = ServerConfig::load_with(&cli.config, &overrides(cli, matches))
        .map_err(|e| blame_config_source(e, matches))?;
    match &cli.command {
        Some(Command::Config { action: ConfigCommand::Show }) => {
            return Ok(print_stdout(&config.show())?);
        }
        Some(Command::Config { action: ConfigCommand::Check }) => {
            let world = preflight(&config)?;
            // What the start reads besides: the TLS identity (built as the endpoint builds
            // it), the store's files, the data dir; nothing is written.
            gatehouse_server::check_start(&config)?;
            let line = format!(
                "config OK: {} (world {}, {} nodes)\n",
                cli.config.display(),
                config.game.world.display(),
                world.nodes.len()
            );
            return Ok(print_stdout(&line)?);
        }
        Some(Command::Saves { action }) => {
            ops::install_tracing(config.log_format, "warn");
            let query = match action {
                SavesCommand::List => SavesQuery::List,
                SavesCommand::Show { player } => SavesQuery::Show(player.clone()),
            };
            return Ok(print_stdout(&ops::saves(&config, &query)?)?);
        }
        Some(Command::Probe { path, post, timeout_ms }) => {
            let method = if *post { ops::ProbeMethod::Post } else { ops::ProbeMethod::Get };
            let answer = ops::probe(&config, method, path, Duration::from_millis(*timeout_ms))?;
            print_stdout(&answer.body)?;
            if !(200..300).contains(&answer.status) {
                let addr = ops::probe_addr(config.admin.bind);
                return Err(format!("probe: {addr}{path} answered {}", answer.status).into());
            }
            return Ok(());
        }
        None => {}
    }
    let world = preflight(&config)?;
    ops::install_tracing(config.log_format, "info");
    // The first line says what runs, on which config and world.
    tracing::info!(version = %env!("CARGO_PKG_VERSION"), config = %cli.config.display(),
        world = %config.game.world.display(), "gatehouse-server starting");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        // Signals are handled from the start: a SIGTERM while the server still starts (under
        // Agones, while it waits for the SDK sidecar) stops it cleanly, with exit code 0.
        let shutdown = CancellationToken::new();
        tokio::spawn(ops::stop_on_signal(shutdown.clone()));
        let server = tokio::select! {
            bound = Server::bind(&config, world) => bound?,
            () = shutdown.cancelled() => {
                tracing::info!("shutdown requested while starting; stopped before serving");
                return Ok(());
            }
        };
        server.run(shutdown).await?;
        Ok(())
    })
}

/// What the server checks before anything binds, and `config check` with it: an endpoint
/// other hosts can reach must not move players for whoever asks, nor a public key admit anyone
/// as anyone; the world file must load.
fn preflight(config: &ServerConfig) -> Result<WorldMap, Failure> {
    config.check_admin_exposure()?;
    config.check_key_exposure()?;
    let world = load_world(&config.game.world).map_err(|e| match e {
        // A world file that cannot be read is the value of `game.world` (a flag, a variable
        // or a file line): blame that.
        ConfigError::Read { path, source } => config.invalid(
            "game.world",
            "a readable world file",
            format!("{}: {source}", path.display()),
        ),
        other => other,
    })?;
    config.check_world(&world)?;
    Ok(world)
}

/// A config file that cannot be read is the value of `--config`, of `GATEHOUSE_CONFIG` or the
/// default: the error names which, as every other bad value's does.
fn blame_config_source(e: ConfigError, matches: &ArgMatches) -> Failure {
    let ConfigError::Read { path, source } = e else { return e.into() };
    let path = path.display();
    let from = match matches.value_source("config") {
        Some(clap::parser::ValueSource::CommandLine) => format!("--config {path}"),
        Some(clap::parser::ValueSource::EnvVariable) => format!("GATEHOUSE_CONFIG={path}"),
        _ => format!("the default config file {path} (set --config or GATEHOUSE_CONFIG)"),
    };
    format!("{from}: cannot read it: {source}").into()
}

/// The flags (or their variables) that override the config file, each with its source.
fn overrides(cli: &Cli, matches: &ArgMatches) -> Overrides {
    let given = |value: &Option<String>, id: &str, flag: &str, var: &str| {
        let source = match matches.value_source(id) {
            Some(clap::parser::ValueSource::EnvVariable) => ValueSource::Env { var: var.into() },
            _ => ValueSource::Flag { flag: flag.into() },
        };
        value.clone().map(|value| Override { value, source })
    };
    Overrides {
        bind: given(&cli.bind, "bind", "--bind", "GATEHOUSE_BIND"),
        data_dir: given(&cli.data_dir, "data_dir", "--data-dir", "GATEHOUSE_DATA_DIR"),
        log_format: given(&cli.log_format, "log_format", "--log-format", "GATEHOUSE_LOG_FORMAT"),
        world: given(&cli.world, "world", "--world", "GATEHOUSE_WORLD"),
        admin_bind: given(&cli.admin_bind, "admin_bind", "--admin-bind", "GATEHOUSE_ADMIN_BIND"),
        orchestrator: given(
            &cli.orchestrator,
            "orchestrator",
            "--orchestrator",
            "GATEHOUSE_ORCHESTRATOR",
        ),
    }
}

/// Prints the error that stopped the process on stderr: one line, or one JSON log line in the
/// shape of every other when the logs are JSON, so a log collector reads it like every other
/// line. An error may come before the config is loaded (or be the config's), so the format is
/// `--log-format` / `GATEHOUSE_LOG_FORMAT` when given, else the config file's `log_format` if the
/// file reads at all, else human (docs/operations.md, "Logs").
fn report(cli: &Cli, e: &(dyn std::error::Error + 'static)) {
    let json = match cli.log_format.as_deref() {
        Some(format) => format.eq_ignore_ascii_case("json"),
        None => ops::file_log_format(&cli.config) == Some(LogFormat::Json),
    };
    if json {
        eprintln!("{}", ops::start_error_json(e));
    } else {
        eprintln!("error: {}", ops::describe(e));
    }
}

/// Writes to stdout; a closed pipe (`saves list | head`) is not an error.
fn print_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn probe_post_takes_the_travel_path() {
        let cli =
            Cli::try_parse_from(["gatehouse-server", "probe", "--post", "/travel/isle"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Probe { ref path, post: true, .. }) if path == "/travel/isle"
        ));
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
        assert_eq!(cli.data_dir.as_deref(), Some("/tmp/d"));
        assert_eq!(cli.config, PathBuf::from("c.toml"));
        assert!(matches!(
            cli.command,
            Some(Command::Saves { action: SavesCommand::Show { ref player } }) if player == "sim-0001"
        ));
        let plain = Cli::try_parse_from(["gatehouse-server", "--bind", "127.0.0.1:0"]).unwrap();
        assert!(plain.command.is_none(), "no subcommand runs the server");
    }

    #[test]
    fn a_flag_is_blamed_as_the_flag() {
        let matches =
            Cli::command().try_get_matches_from(["gatehouse-server", "--bind", "nowhere"]).unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        let bind = overrides(&cli, &matches).bind.unwrap();
        assert_eq!(bind.value, "nowhere");
        assert_eq!(bind.source, ValueSource::Flag { flag: "--bind".into() });
    }
}

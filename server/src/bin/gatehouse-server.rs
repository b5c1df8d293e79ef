//! `gatehouse-server`: parse the CLI, load the config, install tracing, run the server until
//! SIGTERM or Ctrl-C, exit 0.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use gatehouse_server::Server;
use gatehouse_server::config::{LogFormat, ServerConfig, WorldMap};
use tokio_util::sync::CancellationToken;

/// The gatehouse authoritative dedicated game server.
///
/// Flags and GATEHOUSE_* environment variables override the config file. The session-token
/// key can be set with GATEHOUSE_TOKEN_KEY (never on the command line, where other users can
/// read it).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Server config file (TOML). Paths inside it are relative to its directory.
    #[arg(
        long,
        env = "GATEHOUSE_CONFIG",
        default_value = "config/server.toml",
        value_name = "FILE"
    )]
    config: PathBuf,
    /// UDP address to listen on, e.g. 0.0.0.0:7777 or 127.0.0.1:0 for an ephemeral port.
    /// Overrides `network.bind`.
    #[arg(long, env = "GATEHOUSE_BIND", value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// Directory for the development certificate and the embedded store. Overrides `data_dir`.
    #[arg(long, env = "GATEHOUSE_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log output: human-readable lines or one JSON object per line. Overrides `log_format`.
    #[arg(long, env = "GATEHOUSE_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
    /// World-map file (TOML). Overrides `game.world`.
    #[arg(long, env = "GATEHOUSE_WORLD", value_name = "FILE")]
    world: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = load_config(&cli)?;
    install_tracing(config.log_format);
    let world = WorldMap::load(&config.game.world)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = Server::bind(&config, world)?;
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
    if let Ok(key) = std::env::var("GATEHOUSE_TOKEN_KEY") {
        config.auth.token_key = key;
    }
    config.check(&cli.config)?;
    Ok(config)
}

fn install_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}

/// Cancels `shutdown` on SIGTERM or Ctrl-C.
async fn stop_on_signal(shutdown: CancellationToken) {
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
    tracing::info!("shutdown requested");
    shutdown.cancel();
}

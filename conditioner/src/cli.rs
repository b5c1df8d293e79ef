//! The conditioner's command-line side: the `--impair` options of
//! `gatehouse-sim`, and `gatehouse-sim proxy`, the conditioner alone between any client and the
//! server.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use std::io::Write as _;

use anyhow::Context as _;

use crate::proxy::{Proxy, ProxyStats};
use crate::{Conditions, Impairment};

/// The impairment options: any of them puts a conditioner between the clients and the server.
#[derive(Debug, Clone, clap::Args)]
pub struct ImpairArgs {
    /// Impair both directions, e.g. `loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%` (knobs:
    /// loss, lag, jitter, reorder, reorder_time, dup, dup_time, rate in bytes/s, queue; `none`
    /// relays untouched, for a clean run over the same path).
    #[arg(long, value_parser = parse_impairment, value_name = "SPEC")]
    pub impair: Option<Impairment>,
    /// Impair client → server only (overrides --impair for that direction).
    #[arg(long, value_parser = parse_impairment, value_name = "SPEC")]
    pub impair_up: Option<Impairment>,
    /// Impair server → client only (overrides --impair for that direction).
    #[arg(long, value_parser = parse_impairment, value_name = "SPEC")]
    pub impair_down: Option<Impairment>,
    /// Seed of the conditioner's draws: the same seed drops, delays and duplicates the same
    /// datagrams of each client (default: the run's --seed where it has one, else 1).
    #[arg(long, value_name = "SEED")]
    pub impair_seed: Option<u64>,
}

impl ImpairArgs {
    /// The conditions asked for, or `None` when no impairment option was given.
    pub fn conditions(&self) -> Option<Conditions> {
        if self.impair.is_none() && self.impair_up.is_none() && self.impair_down.is_none() {
            return None;
        }
        let both = self.impair.unwrap_or_default();
        Some(Conditions {
            up: self.impair_up.unwrap_or(both),
            down: self.impair_down.unwrap_or(both),
        })
    }
}

/// clap's parser for an impairment spec.
///
/// # Errors
/// The spec's error, naming the knob.
pub fn parse_impairment(spec: &str) -> Result<Impairment, String> {
    Impairment::parse(spec).map_err(|e| e.why)
}

/// `gatehouse-sim proxy`: the conditioner alone, a UDP relay that any QUIC client (in any
/// language) can be pointed at instead of the server.
#[derive(Debug, Clone, clap::Args)]
pub struct ProxyArgs {
    /// Where clients send, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:7800", value_name = "HOST:PORT")]
    pub listen: SocketAddr,
    /// The server, HOST:PORT (a name is resolved once at start).
    #[arg(long, default_value = "127.0.0.1:7777", value_name = "HOST:PORT")]
    pub server: String,
    /// The impairment.
    #[command(flatten)]
    pub impair: ImpairArgs,
    /// Stop after this long (default: at Ctrl-C or SIGTERM).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    pub duration: Option<Duration>,
    /// Print what it did on stderr this often.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "D")]
    pub stats_every: Duration,
    /// At the end, write what it did as JSON here.
    #[arg(long, value_name = "PATH")]
    pub report_json: Option<PathBuf>,
}

/// Runs `gatehouse-sim proxy` until its duration or a stop signal, then prints what it did.
///
/// # Errors
/// The server address does not resolve, the listen address cannot be bound, or the report
/// cannot be written.
pub async fn run_proxy(args: ProxyArgs) -> anyhow::Result<ProxyStats> {
    let server = resolve(&args.server)?;
    let conditions = args.impair.conditions().unwrap_or_default();
    let seed = args.impair.impair_seed.unwrap_or(1);
    let proxy = Proxy::start(args.listen, server, conditions, seed)
        .await
        .with_context(|| format!("--listen {}: cannot bind", args.listen))?;
    let handle = proxy.handle();
    eprintln!(
        "proxy on {} -> {server}: up {}, down {}, seed {seed}",
        handle.addr(),
        conditions.up,
        conditions.down
    );
    let stop = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => stop_signal().await,
        }
    };
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(args.stats_every.max(Duration::from_millis(100)));
    tick.tick().await;
    loop {
        tokio::select! {
            () = &mut stop => break,
            // A closed stderr (a reader gone) is no reason to stop relaying.
            _ = tick.tick() => {
                let _ = write!(std::io::stderr(), "{}", handle.stats());
            }
        }
    }
    let stats = handle.stats();
    // A reader that stopped reading (`| head`) is not an error.
    let _ = write!(std::io::stdout(), "{stats}");
    if let Some(path) = &args.report_json {
        let json = serde_json::to_string_pretty(&stats)?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(stats)
}

/// Starts the conditioner in front of `server` for an in-process swarm, on loopback of the
/// server's address family.
///
/// # Errors
/// The OS error if the relay cannot bind.
pub async fn start_in_process(
    server: SocketAddr,
    conditions: Conditions,
    seed: u64,
) -> std::io::Result<Proxy> {
    let listen = if server.is_ipv6() {
        SocketAddr::from((Ipv6Addr::LOCALHOST, 0))
    } else {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
    };
    Proxy::start(listen, server, conditions, seed).await
}

/// Ctrl-C, or SIGTERM on Unix.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    // Without a SIGTERM handler, Ctrl-C alone; if even that cannot be installed, run on.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves `HOST:PORT` (the value of `--server`) to its first address.
///
/// # Errors
/// The name does not resolve, or to no address; the message names `--server` and the value.
pub fn resolve(server: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    server
        .to_socket_addrs()
        .with_context(|| format!("--server {server:?}: expected HOST:PORT"))?
        .next()
        .with_context(|| format!("--server {server:?} resolves to no address"))
}

/// Parses a connect rate for a command line (`--connect-rate` of the swarm and the floor
/// benchmark): a positive, finite number of clients per second.
///
/// # Errors
/// A message naming the value when it is not a number, or not positive and finite.
pub fn parse_connect_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!("{s:?}: expected a positive number of clients per second"));
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--connect-rate` takes a positive, finite number per second and names any other value.
    #[test]
    fn a_connect_rate_is_a_positive_finite_number() {
        assert_eq!(parse_connect_rate(" 50 "), Ok(50.0));
        assert_eq!(parse_connect_rate("0.5"), Ok(0.5));
        for bad in ["0", "-5", "inf", "NaN", "abc"] {
            let error = parse_connect_rate(bad).unwrap_err();
            assert!(error.contains(bad), "{bad}: {error}");
        }
    }
}

//! What the `gatehouse-server` binary does besides serving, so that its `main` only parses the
//! command line, loads the config, installs tracing and calls:
//!
//! - [`probe`]: one GET to the admin endpoint of a running server (the container health check);
//! - [`saves`]: the player store as an operator reads it;
//! - [`install_tracing`], [`describe`] and [`start_error_json`]: logs, and the start-up error in
//!   the logs' own shape;
//! - [`stop_on_signal`]: the first SIGTERM or Ctrl-C drains, a second exits at once.
//!
//! The command line itself (clap) stays in the binary; what it overrides in the config is
//! [`crate::config::Overrides`].

mod probe;
mod saves;
mod signals;

pub use probe::{PROBE_MAX_BYTES, ProbeAnswer, ProbeError, probe, probe_addr};
pub use saves::{SavesError, SavesQuery, saves};
pub use signals::stop_on_signal;

use crate::config::{ConfigError, LogFormat};

/// Installs the process's tracing subscriber: logs on stderr, as `format` says, filtered by
/// `RUST_LOG` or else at `default_level` (`info`, `warn`, …). Call once, first thing.
pub fn install_tracing(format: LogFormat, default_level: &str) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}

/// An error and its causes on one line, each cause once (our errors already quote their
/// source), and no backtrace: operators read these.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = next.source();
    }
    out
}

/// The error that stopped the start as one JSON log object, for a server whose logs are JSON:
/// a config error keeps its fields (key, source, line), anything else is a message.
pub fn start_error_json(e: &(dyn std::error::Error + 'static)) -> serde_json::Value {
    match e.downcast_ref::<ConfigError>() {
        Some(config) => config.to_json(),
        None => serde_json::json!({ "level": "ERROR", "message": describe(e) }),
    }
}

/// The `log_format` a config file asks for, if the file can be read at all: how to report an
/// error that came before the config was loaded.
pub fn file_log_format(path: &std::path::Path) -> Option<LogFormat> {
    let text = std::fs::read_to_string(path).ok()?;
    let table: toml::Table = text.parse().ok()?;
    match table.get("log_format")?.as_str()? {
        "json" => Some(LogFormat::Json),
        _ => Some(LogFormat::Human),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open the store sqlite:x: {0}")]
    struct Outer(#[source] Inner);
    #[derive(Debug, thiserror::Error)]
    #[error("disk full")]
    struct Inner;

    #[test]
    fn an_error_is_described_on_one_line_with_each_cause_once() {
        assert_eq!(describe(&Outer(Inner)), "cannot open the store sqlite:x: disk full");
        #[derive(Debug, thiserror::Error)]
        #[error("cannot start")]
        struct Start(#[source] Inner);
        assert_eq!(describe(&Start(Inner)), "cannot start: disk full");
    }

    #[test]
    fn a_start_error_that_is_not_a_config_error_is_a_json_message() {
        let json = start_error_json(&Outer(Inner));
        assert_eq!(json["level"], "ERROR");
        assert_eq!(json["message"], "cannot open the store sqlite:x: disk full");
    }

    #[test]
    fn the_log_format_of_a_config_file_is_read_before_the_config_loads() {
        let dir = std::env::temp_dir().join(format!("gatehouse-ops-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("server.toml");
        std::fs::write(&file, "log_format = \"json\"\nnot valid = = toml\n").unwrap();
        assert_eq!(file_log_format(&file), None, "a file that does not parse says nothing");
        std::fs::write(&file, "log_format = \"json\"\n").unwrap();
        assert_eq!(file_log_format(&file), Some(LogFormat::Json));
        std::fs::write(&file, "log_format = \"human\"\n").unwrap();
        assert_eq!(file_log_format(&file), Some(LogFormat::Human));
        assert_eq!(file_log_format(&dir.join("missing.toml")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

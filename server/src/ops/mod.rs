//! What the `gatehouse-server` binary does besides serving, so that its `main` only parses the
//! command line, loads the config, installs tracing and calls:
//!
//! - [`probe`]: one request to the admin endpoint of a running server (the container health check,
//!   and an operator travel where there is no curl);
//! - [`saves`]: the player store as an operator reads it;
//! - [`install_tracing`], [`describe`] and [`start_error_json`]: logs (the `gatehouse-logs`
//!   crate's), and the start-up error in the logs' own shape;
//! - [`stop_on_signal`]: the first SIGTERM or Ctrl-C drains, a second exits at once.
//!
//! The command line itself (clap) stays in the binary; what it overrides in the config is
//! [`crate::config::Overrides`].

mod probe;
mod saves;
mod signals;

pub use probe::{PROBE_MAX_BYTES, ProbeAnswer, ProbeError, ProbeMethod, probe, probe_addr};
pub use saves::{SavesError, SavesQuery, saves};
pub use signals::stop_on_signal;

use crate::config::{ConfigError, LogFormat};

/// Installs the process's tracing subscriber: logs on stderr, as `format` says (JSON: one flat
/// object per line, docs/operations.md "Logs"), filtered by `RUST_LOG` or else at
/// `default_level` (`info`, `warn`, …). Call once, first thing.
pub fn install_tracing(format: LogFormat, default_level: &str) {
    gatehouse_logs::install(logs_format(format), default_level);
}

/// The shared log crate's name for `format`.
fn logs_format(format: LogFormat) -> gatehouse_logs::LogFormat {
    match format {
        LogFormat::Human => gatehouse_logs::LogFormat::Human,
        LogFormat::Json => gatehouse_logs::LogFormat::Json,
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

/// The error that stopped the start as one JSON log line in the shape of every other
/// (docs/operations.md, "Logs"): `timestamp`, `level` `ERROR`, `target` `gatehouse_server`,
/// `message` (the error on one line), and a config error's fields flat beside them (`key`,
/// `origin_kind`, `origin_var`, `origin_line`, …, `expected`, `found`).
pub fn start_error_json(e: &(dyn std::error::Error + 'static)) -> String {
    let mut fields = Vec::new();
    let message = match e.downcast_ref::<ConfigError>() {
        Some(config) => {
            let serde_json::Value::Object(object) = config.to_json() else {
                return start_error_line(describe(e), fields);
            };
            for (key, value) in object {
                match value {
                    // Flat: `origin: {kind, var}` is `origin_kind`, `origin_var`.
                    serde_json::Value::Object(inner) => fields.extend(
                        inner.into_iter().map(|(name, value)| (format!("{key}_{name}"), value)),
                    ),
                    _ if key == "level" || key == "message" => {}
                    value => fields.push((key, value)),
                }
            }
            config.to_string()
        }
        None => describe(e),
    };
    start_error_line(message, fields)
}

fn start_error_line(message: String, fields: Vec<(String, serde_json::Value)>) -> String {
    gatehouse_logs::line_now(tracing::Level::ERROR, "gatehouse_server", &message, fields)
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
        let line = start_error_json(&Outer(Inner));
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(json["level"], "ERROR");
        assert_eq!(json["target"], "gatehouse_server");
        assert_eq!(json["message"], "cannot open the store sqlite:x: disk full");
        assert!(json["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
    }

    #[test]
    fn a_config_error_at_start_is_one_flat_json_line_with_its_fields() {
        let e = ConfigError::Invalid {
            key: "network.bind".into(),
            origin: crate::config::ValueSource::Env { var: "GATEHOUSE_BIND".into() },
            expected: "an address".into(),
            found: "nowhere".into(),
        };
        let line = start_error_json(&e);
        assert_eq!(line.lines().count(), 1);
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(json["level"], "ERROR");
        assert_eq!(json["message"], e.to_string());
        assert_eq!(json["key"], "network.bind");
        assert_eq!(json["origin_kind"], "env");
        assert_eq!(json["origin_var"], "GATEHOUSE_BIND");
        assert_eq!(json["found"], "nowhere");
        let values = json.as_object().unwrap().values();
        assert!(values.into_iter().all(|v| !v.is_object() && !v.is_array()), "flat: {line}");
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

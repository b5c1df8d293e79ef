//! Every key of `config/server.toml` from the environment: `GATEHOUSE_<SECTION>__<KEY>` (a
//! double underscore between the section and the key; a top-level key is `GATEHOUSE_<KEY>`),
//! e.g. `GATEHOUSE_NETWORK__MAX_PLAYERS=512` (docs/operations.md, "Configuration").
//!
//! The variables are laid over the file's parsed document before it is deserialised once, so
//! every check and every error applies to them as to the file, blaming the variable. The keys
//! are the config types' own (their serialised form), not a list kept by hand. The variables
//! older than this rule (`GATEHOUSE_BIND`, `GATEHOUSE_TOKEN_KEY`, ...) keep their meaning
//! ([`LEGACY_VARIABLES`]); one set together with its new name is refused, naming both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{ConfigError, ServerConfig, ValueSource};

/// The environment as the loader reads it: each variable's name and value. The process's
/// own is [`process_environment`]; a test passes a table.
pub type Environment = BTreeMap<String, String>;

/// The prefix of every variable the server reads.
pub const PREFIX: &str = "GATEHOUSE_";

/// The variables older than the `GATEHOUSE_<SECTION>__<KEY>` rule, and the key each sets. The
/// first six are also the flags' variables (`--bind`, ...); the rest have no flag, because they
/// hold secrets or paths to them. `GATEHOUSE_ADMIN_BIND` also takes `off` (`admin.enabled =
/// false`).
pub const LEGACY_VARIABLES: &[(&str, &str)] = &[
    ("GATEHOUSE_BIND", "network.bind"),
    ("GATEHOUSE_DATA_DIR", "data_dir"),
    ("GATEHOUSE_LOG_FORMAT", "log_format"),
    ("GATEHOUSE_WORLD", "game.world"),
    ("GATEHOUSE_ADMIN_BIND", "admin.bind"),
    ("GATEHOUSE_ORCHESTRATOR", "fleet.orchestrator"),
    ("GATEHOUSE_TOKEN_KEY", "auth.token_key"),
    ("GATEHOUSE_ADMIN_TOKEN", "admin.token"),
    ("GATEHOUSE_TLS_CERTIFICATE", "tls.certificate"),
    ("GATEHOUSE_TLS_PRIVATE_KEY", "tls.private_key"),
    ("GATEHOUSE_STORE_URL", "store.url"),
    ("GATEHOUSE_TICKET_KEY", "fleet.ticket_key"),
];

/// How many of [`LEGACY_VARIABLES`], from the first, are also the flags' variables.
const FLAG_VARIABLES: usize = 6;

/// `GATEHOUSE_*` variables that are not config keys: the config file's own path, and those of
/// the tests and tools (never refused as unknown keys).
pub const NON_CONFIG_VARIABLES: &[&str] = &[
    "GATEHOUSE_CONFIG",
    // The build's revision (server/build.rs): a container build may leave it set.
    "GATEHOUSE_REVISION",
    "GATEHOUSE_VALGRIND",
    "GATEHOUSE_WRITE_HEADER",
    "GATEHOUSE_WRITE_VECTORS",
];

/// Prefixes of non-config variables: the tests' (`GATEHOUSE_TEST_POSTGRES_URL`, the crash
/// test's child process).
pub const NON_CONFIG_PREFIXES: &[&str] = &["GATEHOUSE_TEST_", "GATEHOUSE_CRASH_CHILD_"];

/// One key set by a `GATEHOUSE_<SECTION>__<KEY>` variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EnvValue {
    /// The variable.
    pub(super) var: String,
    /// The section (`network`), or `None` for a top-level key.
    pub(super) section: Option<String>,
    /// The key inside its section (`max_players`).
    pub(super) name: String,
    /// The value as set.
    pub(super) value: String,
}

impl EnvValue {
    /// The dotted key, e.g. `network.max_players`.
    pub(super) fn key(&self) -> String {
        match &self.section {
            Some(section) => format!("{section}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// Where the value came from.
    pub(super) fn source(&self) -> ValueSource {
        ValueSource::Env { var: self.var.clone() }
    }
}

/// This process's `GATEHOUSE_*` variables.
///
/// # Errors
/// [`ConfigError::Invalid`] naming a variable whose value is not UTF-8.
pub fn process_environment() -> Result<Environment, ConfigError> {
    let mut env = Environment::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str().filter(|name| name.starts_with(PREFIX)) else { continue };
        let Ok(value) = value.into_string() else {
            return Err(ConfigError::Invalid {
                key: name.to_owned(),
                origin: ValueSource::Env { var: name.to_owned() },
                expected: "UTF-8 text".into(),
                found: "bytes that are not UTF-8".into(),
            });
        };
        env.insert(name.to_owned(), value);
    }
    Ok(env)
}

/// Every dotted key of `config/server.toml`, as the config types serialise: `data_dir`,
/// `network.bind`, ... (each settable as `GATEHOUSE_<SECTION>__<KEY>`).
pub fn config_keys() -> Vec<String> {
    let value = serde_json::to_value(ServerConfig::default()).unwrap_or_default();
    flatten(&value).into_iter().map(|(key, _)| key).collect()
}

/// The scalar leaves of a serialised config, each with its dotted key, sorted by key.
pub(super) fn flatten(value: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut leaves = Vec::new();
    let serde_json::Value::Object(top) = value else { return leaves };
    for (key, value) in top {
        match value {
            serde_json::Value::Object(section) => {
                for (name, value) in section {
                    leaves.push((format!("{key}.{name}"), value.clone()));
                }
            }
            _ => leaves.push((key.clone(), value.clone())),
        }
    }
    // Whatever order serde_json's map keeps (its `preserve_order` feature changes it).
    leaves.sort_by(|a, b| a.0.cmp(&b.0));
    leaves
}

/// One effective value of a loaded config, for `config show` (docs/operations.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The dotted key, e.g. `network.bind`.
    pub key: String,
    /// The value as TOML writes it (durations in the key's unit), `<redacted>` for a secret,
    /// and `(unset)` for an optional key nobody set.
    pub value: String,
    /// Where it came from: the file's line, a variable, a flag, the default.
    pub source: ValueSource,
}

impl ServerConfig {
    /// Every key's effective value and where it came from, sorted by key; the secrets of
    /// [`super::SECRET_KEYS`] redacted (the token key, the admin token, a store URL's password).
    pub fn effective(&self) -> Vec<Setting> {
        let value = serde_json::to_value(self).unwrap_or_default();
        flatten(&value)
            .into_iter()
            .map(|(key, value)| {
                let hidden = super::secrecy(&key) == Some(super::Secrecy::Hidden);
                let value = match value {
                    serde_json::Value::Null => "(unset)".to_owned(),
                    _ if key == "auth.token_key" && self.auth.is_development_key() => {
                        format!("{} (the shipped development key)", super::REDACTED)
                    }
                    // Whatever the type serialises, a secret key shows no value
                    // (`super::SECRET_KEYS`); a store URL serialises with its password redacted.
                    _ if hidden => format!("\"{}\"", super::REDACTED),
                    other => toml_inline(&other),
                };
                Setting { source: self.source_of(&key), key, value }
            })
            .collect()
    }

    /// [`Self::effective`] as `config show` prints it: one `key = value  # origin` line each.
    pub fn show(&self) -> String {
        let settings = self.effective();
        let width = settings.iter().map(|s| s.key.len() + s.value.len()).max().unwrap_or(0);
        let mut out = String::new();
        for Setting { key, value, source } in settings {
            let origin = match source {
                ValueSource::Default { .. } => "default".to_owned(),
                ValueSource::Env { var } => format!("env {var}"),
                other => other.to_string(),
            };
            let pad = width.saturating_sub(key.len() + value.len());
            // Writing to a `String` cannot fail.
            let _ = writeln!(out, "{key} = {value}{:pad$}  # {origin}", "");
        }
        out
    }
}

/// A serialised value as TOML writes it inline: a list `[a, b]`, a table `{ key = value }`
/// (`fleet.servers`, `fleet.allocator_labels`), a scalar as JSON writes it (its strings' escapes
/// are TOML's too). An unset value inside a list or table is left out, as TOML has none.
fn toml_inline(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_inline).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(table) if table.is_empty() => "{}".to_owned(),
        serde_json::Value::Object(table) => {
            let bare = |k: &str| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
            };
            let pairs: Vec<String> = table
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match bare(k) {
                    true => format!("{k} = {}", toml_inline(v)),
                    false => {
                        format!("{} = {}", serde_json::Value::from(k.as_str()), toml_inline(v))
                    }
                })
                .collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// The variable that sets `key` under the `GATEHOUSE_<SECTION>__<KEY>` rule.
pub fn variable_for(key: &str) -> String {
    format!("{PREFIX}{}", key.replace('.', "__").to_ascii_uppercase())
}

/// The `GATEHOUSE_<SECTION>__<KEY>` variables of `env`, each checked against the config's keys;
/// the legacy variables, the non-config ones and other programs' are left out.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the variable: one that names no key (a typo), or a legacy
/// variable and its new name both set.
pub(super) fn config_variables(env: &Environment) -> Result<Vec<EnvValue>, ConfigError> {
    let keys: BTreeSet<String> = config_keys().into_iter().collect();
    let mut found = Vec::new();
    for (var, value) in env {
        let Some(rest) = var.strip_prefix(PREFIX) else { continue };
        // The older variables without a flag are laid over the file like the new names; those
        // with one are the flags' (`Overrides`).
        if let Some((_, key)) =
            LEGACY_VARIABLES[FLAG_VARIABLES..].iter().find(|(name, _)| name == var)
        {
            let (section, name) = match key.split_once('.') {
                Some((section, name)) => (Some(section.to_owned()), name.to_owned()),
                None => (None, (*key).to_owned()),
            };
            found.push(EnvValue { var: var.clone(), section, name, value: value.clone() });
            continue;
        }
        let legacy = LEGACY_VARIABLES.iter().any(|(name, _)| name == var);
        let other = NON_CONFIG_VARIABLES.contains(&var.as_str())
            || NON_CONFIG_PREFIXES.iter().any(|prefix| var.starts_with(prefix));
        if legacy || other {
            continue;
        }
        let lower = rest.to_ascii_lowercase();
        let (section, name) = match lower.split_once("__") {
            Some((section, name)) => (Some(section.to_owned()), name.to_owned()),
            None => (None, lower.clone()),
        };
        let entry = EnvValue { var: var.clone(), section, name, value: value.clone() };
        if !keys.contains(&entry.key()) {
            return Err(unknown(&entry, &keys));
        }
        found.push(entry);
    }
    refuse_both_names(env, &found)?;
    Ok(found)
}

/// The refusal of a variable that names no key: the keys of its section, or the sections.
fn unknown(entry: &EnvValue, keys: &BTreeSet<String>) -> ConfigError {
    let in_section: Vec<&str> = keys
        .iter()
        .filter_map(|key| match &entry.section {
            Some(section) => key.strip_prefix(section.as_str())?.strip_prefix('.'),
            None => (!key.contains('.')).then_some(key.as_str()),
        })
        .collect();
    let expected = if in_section.is_empty() {
        let sections: BTreeSet<&str> =
            keys.iter().filter_map(|k| k.split_once('.')).map(|(s, _)| s).collect();
        format!(
            "GATEHOUSE_<SECTION>__<KEY> naming a key of config/server.toml, the sections being {}",
            sections.into_iter().collect::<Vec<_>>().join(", ")
        )
    } else {
        let within = entry.section.as_deref().map_or("top-level".to_owned(), |s| format!("[{s}]"));
        format!("one of the {within} keys {}", in_section.join(", "))
    };
    ConfigError::Invalid {
        key: entry.key(),
        origin: entry.source(),
        expected,
        found: "a key config/server.toml does not have (a typo?)".to_owned(),
    }
}

/// Refuses a legacy variable set together with the new name of its key (or, for
/// `GATEHOUSE_ADMIN_BIND`, of `admin.enabled`): which one wins would be a guess.
fn refuse_both_names(env: &Environment, found: &[EnvValue]) -> Result<(), ConfigError> {
    for (legacy, key) in LEGACY_VARIABLES {
        if !env.contains_key(*legacy) {
            continue;
        }
        let clash = found.iter().find(|entry| {
            let set = entry.key();
            if entry.var == *legacy {
                return false;
            }
            set == *key || (*legacy == "GATEHOUSE_ADMIN_BIND" && set == "admin.enabled")
        });
        if let Some(entry) = clash {
            return Err(ConfigError::Invalid {
                key: entry.key(),
                origin: entry.source(),
                expected: format!(
                    "one variable for it, but {legacy} and {} are both set (unset one; to \
                     override an image's ENV, set the one it sets)",
                    entry.var
                ),
                found: String::new(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Overrides;
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// `text` as `conf/server.toml`, with `pairs` as the environment and no flags.
    fn load(text: &str, pairs: &[(&str, &str)]) -> Result<ServerConfig, ConfigError> {
        let path = Path::new("conf/server.toml");
        ServerConfig::load_text(path, text, &Overrides::default(), &env(pairs))
    }

    /// Every key `config/server.toml` documents (set or commented out), with the value it
    /// shows, in TOML: `network.max_players` → `256`.
    fn documented_keys() -> Vec<(String, String)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let mut section = String::new();
        let mut keys = Vec::new();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = format!("{name}.");
                continue;
            }
            let line = line.strip_prefix("# ").unwrap_or(line);
            let Some((key, value)) = line.split_once(" = ") else { continue };
            if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !key.is_empty() {
                keys.push((format!("{section}{key}"), value.trim().to_owned()));
            }
        }
        keys
    }

    /// Walks every key `config/server.toml` documents (set or commented out), sets each from
    /// its `GATEHOUSE_<SECTION>__<KEY>` variable over an empty file, and finds each blamed on
    /// its variable with the value the shipped file gives it: full coverage, and the documented
    /// keys are exactly the types' keys.
    #[test]
    fn every_key_can_be_set_from_the_environment() {
        let documented = documented_keys();
        let mut names: Vec<String> = documented.iter().map(|(k, _)| k.clone()).collect();
        let mut keys = config_keys();
        names.sort();
        keys.sort();
        assert_eq!(names, keys, "config/server.toml documents every key, and no other");
        let mut vars = Vec::new();
        for (key, value) in &documented {
            let var = variable_for(key);
            let legacy = LEGACY_VARIABLES.iter().any(|(name, _)| *name == var);
            let value = match key.as_str() {
                "admin.token" => "an-admin-token-of-enough-bytes".to_owned(),
                "auth.token_key" => "an-operator-key-of-enough-bytes".to_owned(),
                "fleet.ticket_key" => "a-fleet-key-of-thirty-two-bytes-0".to_owned(),
                // `GATEHOUSE_DATA_DIR` and `GATEHOUSE_LOG_FORMAT` are also the flags'
                // variables, whose values are text, never TOML.
                _ if legacy => value.trim_matches('"').to_owned(),
                _ => value.clone(),
            };
            vars.push((key.clone(), var, value));
        }
        let pairs: Vec<(&str, &str)> =
            vars.iter().map(|(_, var, value)| (var.as_str(), value.as_str())).collect();
        let config = load("", &pairs).unwrap();
        for (key, var, _) in &vars {
            assert_eq!(config.source_of(key), ValueSource::Env { var: var.clone() }, "{key}");
        }
        assert_eq!(config.network.max_players, 256);
        assert_eq!(config.game.client_response_crowd_floor, Some(Duration::from_millis(30)));
        assert_eq!(config.fleet.agones_sdk_port, Some(9357));
        assert_eq!(config.tls.certificate, Some("/etc/gatehouse/cert.pem".into()));
        assert!(config.admin.token.is_some());
        assert!(config.fleet.ticket_key.is_some());
        assert_eq!(config.fleet.server_id.as_deref(), Some("hub-1"));
        // The shipped file's values, from the environment alone, are the shipped file's config.
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml");
        let file = ServerConfig::load(&shipped).unwrap();
        let differs = [
            "tls.",
            "admin.token",
            "auth.token_key",
            "game.client_response_crowd_floor_ms",
            "fleet.agones_sdk_port",
            "fleet.server_id",
            "fleet.ticket_key",
            "fleet.allocator_url",
            "fleet.allocator_labels",
            "fleet.allocator_certificate",
            "fleet.allocator_private_key",
            "fleet.allocator_ca",
            "game.world",
        ];
        for (from_env, from_file) in config.effective().iter().zip(file.effective()) {
            if differs.iter().any(|d| from_env.key.starts_with(d)) {
                continue;
            }
            assert_eq!((&from_env.key, &from_env.value), (&from_file.key, &from_file.value));
        }
    }

    #[test]
    fn the_environment_wins_over_the_file_and_a_flag_over_the_environment() {
        let text = "[network]\nbind = \"127.0.0.1:7001\"\nmax_players = 12\n";
        let vars = [
            ("GATEHOUSE_NETWORK__BIND", "127.0.0.1:7002"),
            ("GATEHOUSE_NETWORK__MAX_PLAYERS", "512"),
        ];
        let config = load(text, &vars).unwrap();
        assert_eq!(config.network.bind.to_string(), "127.0.0.1:7002");
        assert_eq!(config.network.max_players, 512);
        let flag = super::super::Override {
            value: "127.0.0.1:7003".into(),
            source: ValueSource::Flag { flag: "--bind".into() },
        };
        let overrides = Overrides { bind: Some(flag), ..Overrides::default() };
        let config =
            ServerConfig::load_text(Path::new("s.toml"), text, &overrides, &env(&vars)).unwrap();
        assert_eq!(config.network.bind.to_string(), "127.0.0.1:7003");
        assert_eq!(config.source_of("network.bind").to_string(), "flag --bind");
        assert_eq!(config.network.max_players, 512);
    }

    #[test]
    fn a_bad_value_from_the_environment_names_the_variable() {
        let err =
            load("[network]\nmax_players = 12\n", &[("GATEHOUSE_NETWORK__MAX_PLAYERS", "many")])
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid network.max_players from environment variable \
             GATEHOUSE_NETWORK__MAX_PLAYERS: expected a whole number (0 or more), found the \
             string \"many\""
        );
        // A cross-key check blames the variable too, with the value it set.
        let err = load("", &[("GATEHOUSE_NETWORK__MAX_PLAYERS", "0")]).unwrap_err().to_string();
        assert!(err.contains("invalid network.max_players from environment variable GATEHOUSE_NETWORK__MAX_PLAYERS"), "{err}");
        let err =
            load("", &[("GATEHOUSE_GAME__CLIENT_READY_POLICY", "wait")]).unwrap_err().to_string();
        assert!(
            err.contains("GATEHOUSE_GAME__CLIENT_READY_POLICY") && err.contains("kick"),
            "{err}"
        );
        let err = load("", &[("GATEHOUSE_AUTH__INSECURE_DEVELOPMENT_KEY", "yes")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("true or false")
                && err.contains("GATEHOUSE_AUTH__INSECURE_DEVELOPMENT_KEY"),
            "{err}"
        );
    }

    /// Only the keys of `SECRET_KEYS` are secrets: any other bad value is quoted back, whatever
    /// its name holds ("token", "key", "url").
    #[test]
    fn a_bad_non_secret_value_is_quoted_back() {
        let err =
            load("", &[("GATEHOUSE_AUTH__MAX_TOKEN_LIFETIME_S", "-5s")]).unwrap_err().to_string();
        assert!(
            err.contains("GATEHOUSE_AUTH__MAX_TOKEN_LIFETIME_S") && err.contains("-5s"),
            "{err}"
        );
        assert!(!err.contains("not shown"), "{err}");
        let err = load("", &[("GATEHOUSE_AUTH__INSECURE_DEVELOPMENT_KEY", "yes")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("true or false") && err.contains("yes"), "{err}");
        assert!(!err.contains("not shown"), "{err}");
        let err = load("[auth]\nmax_token_lifetime_s = \"soon\"\n", &[]).unwrap_err().to_string();
        assert!(err.contains("\"soon\""), "{err}");
        // The secrets themselves stay hidden, and `config show` hides the same list.
        let vars = [
            ("GATEHOUSE_ADMIN__TOKEN", "admin-secret-token-1234"),
            ("GATEHOUSE_TICKET_KEY", "ticket-secret-of-thirty-two-bytes-0"),
        ];
        let shown = load("", &vars).unwrap().show();
        for (key, secrecy) in super::super::SECRET_KEYS {
            let line = shown.lines().find(|l| l.starts_with(&format!("{key} ="))).unwrap();
            if *secrecy == super::super::Secrecy::Hidden {
                assert!(line.contains("<redacted>"), "{line}");
            }
        }
        assert!(!shown.contains("admin-secret") && !shown.contains("ticket-secret"), "{shown}");
    }

    #[test]
    fn a_refused_secret_from_the_environment_is_never_quoted() {
        let err = load("", &[("GATEHOUSE_ADMIN__TOKEN", "short-secret")]).unwrap_err().to_string();
        assert!(err.contains("admin.token") && err.contains("GATEHOUSE_ADMIN__TOKEN"), "{err}");
        assert!(!err.contains("short-secret"), "{err}");
        let err =
            load("", &[("GATEHOUSE_STORE__URL", "mysql://u:pw-9@h/db")]).unwrap_err().to_string();
        assert!(err.contains("GATEHOUSE_STORE__URL") && !err.contains("pw-9"), "{err}");
    }

    /// A value that reads as a number or a boolean where the key wants text is text; a path
    /// from a variable is used as given, one from the file beside the file.
    #[test]
    fn values_are_read_as_the_key_wants_them() {
        let config = load(
            "",
            &[
                ("GATEHOUSE_STORE__SESSION", "2026"),
                ("GATEHOUSE_ADMIN__TOKEN", "1234567890123456789"),
                ("GATEHOUSE_GAME__WORLD", "maps/w.toml"),
                ("GATEHOUSE_STORE__URL", "\"sqlite:other.db\""),
            ],
        )
        .unwrap();
        assert_eq!(config.store.session, "2026");
        assert_eq!(config.admin.token.as_ref().map(|t| t.bearer()), Some("1234567890123456789"));
        assert_eq!(config.game.world, std::path::PathBuf::from("maps/w.toml"));
        assert_eq!(config.store.url.to_string(), "sqlite:other.db");
        assert_eq!(load("", &[]).unwrap().game.world, std::path::PathBuf::from("conf/world.toml"));
    }

    #[test]
    fn durations_accept_human_units_and_integer_ms() {
        let config = load(
            "[network]\nidle_timeout_ms = \"20s\"\nkeep_alive_ms = 2500\n[auth]\nmax_token_lifetime_s = \"2h\"\n",
            &[("GATEHOUSE_GAME__SPAWN_RETRY_MS", "250ms"), ("GATEHOUSE_AUTH__CLOCK_SKEW_S", "2m"), ("GATEHOUSE_STORE__SAVE_RETRY_MS", "750")],
        )
        .unwrap();
        assert_eq!(config.network.idle_timeout, Duration::from_secs(20));
        assert_eq!(config.network.keep_alive, Duration::from_millis(2500));
        assert_eq!(config.game.spawn_retry, Duration::from_millis(250));
        assert_eq!(config.store.save_retry, Duration::from_millis(750));
        assert_eq!(config.auth.max_token_lifetime_s, 7200);
        assert_eq!(config.auth.clock_skew_s, 120);
        // A bad duration names the key, where it came from and the forms accepted.
        let err = load("[network]\nidle_timeout_ms = \"soon\"\n", &[]).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "invalid network.idle_timeout_ms from conf/server.toml:2: expected a duration"
            ),
            "{err}"
        );
        assert!(err.contains("\"250ms\"") && err.contains("found the string \"soon\""), "{err}");
        let err = load("", &[("GATEHOUSE_NETWORK__IDLE_TIMEOUT_MS", "10 parsecs")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "environment variable GATEHOUSE_NETWORK__IDLE_TIMEOUT_MS: expected a duration"
            ),
            "{err}"
        );
        let err = load("[auth]\nclock_skew_s = \"1500ms\"\n", &[]).unwrap_err().to_string();
        assert!(err.contains("auth.clock_skew_s") && err.contains("whole seconds"), "{err}");
        // The cross-key checks see the durations however they were written.
        let err = load("[network]\nidle_timeout_ms = \"1s\"\nkeep_alive_ms = \"1s\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("network.keep_alive_ms"), "{err}");
    }

    /// `100us` would read as 0 ms, which the key refuses: a `*_ms` key takes whole
    /// milliseconds only, and says so.
    #[test]
    fn a_duration_below_a_millisecond_is_refused() {
        let err = load("", &[("GATEHOUSE_GAME__SPAWN_RETRY_MS", "100us")]).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid game.spawn_retry_ms from environment variable GATEHOUSE_GAME__SPAWN_RETRY_MS: \
             expected whole milliseconds, as a number (250) or a string such as \"250ms\" or \
             \"10s\" (no fraction of a millisecond), found 100us"
        );
        let err = load("[network]\nidle_timeout_ms = \"1s 500us\"\n", &[]).unwrap_err().to_string();
        assert!(err.contains("conf/server.toml:2") && err.contains("whole milliseconds"), "{err}");
        let ok = load("", &[("GATEHOUSE_GAME__SPAWN_RETRY_MS", "1ms")]).unwrap();
        assert_eq!(ok.game.spawn_retry, Duration::from_millis(1));
    }

    #[test]
    fn config_show_redacts_secrets() {
        let config = load(
            "[auth]\ntoken_key = \"file-secret-key-0123456789\"\n",
            &[
                ("GATEHOUSE_ADMIN_TOKEN", "admin-secret-token-1234"),
                ("GATEHOUSE_STORE__URL", "postgres://gate:hunter2@127.0.0.1/saves"),
                ("GATEHOUSE_NETWORK__MAX_PLAYERS", "512"),
            ],
        )
        .unwrap();
        let shown = config.show();
        for secret in ["file-secret", "admin-secret", "hunter2"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("auth.token_key = \"<redacted>\""), "{shown}");
        assert!(shown.contains("# conf/server.toml:2"), "{shown}");
        assert!(shown.contains("admin.token = \"<redacted>\""), "{shown}");
        assert!(shown.contains("# env GATEHOUSE_ADMIN_TOKEN"), "{shown}");
        assert!(shown.contains("postgres://gate:***@127.0.0.1/saves"), "{shown}");
        let line = shown.lines().find(|l| l.starts_with("network.max_players")).unwrap();
        assert!(
            line.contains("= 512") && line.ends_with("# env GATEHOUSE_NETWORK__MAX_PLAYERS"),
            "{line}"
        );
        let line = shown.lines().find(|l| l.starts_with("network.idle_timeout_ms")).unwrap();
        assert!(line.contains("= 10000") && line.ends_with("# default"), "{line}");
        assert!(shown.contains("tls.certificate = (unset)"), "{shown}");
    }

    /// `config show` writes every duration in the unit its key names (`_ms`, `_s`), as an
    /// integer that reads back, whether it was set with units or not.
    #[test]
    fn config_show_writes_every_duration_in_its_keys_unit() {
        let config = load("[fleet]\nempty_linger_ms = \"90s\"\n", &[]).unwrap();
        let shown = config.show();
        let durations: Vec<&str> = shown
            .lines()
            .filter(|l| {
                l.split(' ').next().is_some_and(|k| k.ends_with("_ms") || k.ends_with("_s"))
            })
            .collect();
        assert!(durations.len() > 20, "{shown}");
        for line in durations {
            let value = line.split(" = ").nth(1).and_then(|v| v.split_whitespace().next());
            assert!(
                value.is_some_and(|v| v == "(unset)" || v.parse::<u64>().is_ok()),
                "not an integer: {line}"
            );
        }
        assert!(shown.contains("fleet.empty_linger_ms = 90000 "), "{shown}");
    }

    #[test]
    fn the_keys_come_from_the_config_types() {
        let keys = config_keys();
        for key in
            ["data_dir", "log_format", "network.max_players", "auth.token_key", "tls.certificate"]
        {
            assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
        }
        assert_eq!(variable_for("network.max_players"), "GATEHOUSE_NETWORK__MAX_PLAYERS");
        assert_eq!(variable_for("log_format"), "GATEHOUSE_LOG_FORMAT");
    }

    #[test]
    fn an_unknown_gatehouse_variable_is_an_error_naming_it() {
        for var in ["GATEHOUSE_NETWORK__MAX_PLAYERZ", "GATEHOUSE_NETWORKS__BIND", "GATEHOUSE_NOPE"]
        {
            let err = config_variables(&env(&[(var, "5")])).unwrap_err().to_string();
            assert!(err.contains(&format!("environment variable {var}")), "{err}");
            assert!(err.contains("does not have"), "{err}");
        }
        let err = config_variables(&env(&[("GATEHOUSE_NETWORK__MAX_PLAYERZ", "5")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_players"), "the section's keys are listed: {err}");
        let err = config_variables(&env(&[("GATEHOUSE_DATADIR", "d")])).unwrap_err().to_string();
        assert!(err.contains("top-level keys") && err.contains("data_dir"), "{err}");
        assert!(!err.contains("network."), "only the top-level keys are listed: {err}");
    }

    /// The older variables without a flag set their keys through the same overlay, each
    /// named as its key's source.
    #[test]
    fn every_secret_variable_sets_its_key() {
        let config = load(
            "",
            &[
                ("GATEHOUSE_TOKEN_KEY", &"k".repeat(40)),
                ("GATEHOUSE_ADMIN_TOKEN", &"a".repeat(20)),
                ("GATEHOUSE_TLS_CERTIFICATE", "cert.pem"),
                ("GATEHOUSE_TLS_PRIVATE_KEY", "key.pem"),
                ("GATEHOUSE_STORE_URL", "sqlite:other.db"),
            ],
        )
        .unwrap();
        assert_eq!(config.auth.token_key, "k".repeat(40));
        assert!(config.admin.token.is_some());
        assert_eq!(config.tls.certificate, Some("cert.pem".into()));
        assert_eq!(config.tls.private_key, Some("key.pem".into()));
        assert_eq!(
            config.source_of("tls.private_key").to_string(),
            "environment variable GATEHOUSE_TLS_PRIVATE_KEY"
        );
        let refused = load("", &[("GATEHOUSE_STORE_URL", "mysql://x")]).unwrap_err().to_string();
        assert!(
            refused.contains("store.url") && refused.contains("GATEHOUSE_STORE_URL"),
            "{refused}"
        );
    }

    /// `GATEHOUSE_TICKET_KEY` sets `fleet.ticket_key` as `GATEHOUSE_TOKEN_KEY` sets the token
    /// key: never quoted back, never shown; with its new name too, it is refused naming both.
    #[test]
    fn the_ticket_key_comes_from_its_variable_and_is_never_shown() {
        let key = "ticket-secret-of-thirty-two-bytes-0";
        let config = load("", &[("GATEHOUSE_TICKET_KEY", key)]).unwrap();
        assert_eq!(config.fleet.ticket_key.as_ref().map(|k| k.as_bytes()), Some(key.as_bytes()));
        let shown = config.show();
        assert!(!shown.contains("ticket-secret"), "{shown}");
        let line = shown.lines().find(|l| l.starts_with("fleet.ticket_key =")).unwrap();
        assert!(line.contains("= \"<redacted>\""), "{line}");
        assert!(line.ends_with("# env GATEHOUSE_TICKET_KEY"), "{line}");
        let unset = load("", &[]).unwrap().show();
        assert!(unset.contains("fleet.ticket_key = (unset)"), "{unset}");
        let err = load("", &[("GATEHOUSE_TICKET_KEY", "short-ticket-secret")]).unwrap_err();
        let err = err.to_string();
        assert!(
            err.starts_with(
                "invalid fleet.ticket_key from environment variable GATEHOUSE_TICKET_KEY"
            ),
            "{err}"
        );
        assert!(!err.contains("short-ticket"), "{err}");
        let both = [("GATEHOUSE_TICKET_KEY", key), ("GATEHOUSE_FLEET__TICKET_KEY", key)];
        let err = load("", &both).unwrap_err().to_string();
        assert!(
            err.contains("GATEHOUSE_TICKET_KEY") && err.contains("GATEHOUSE_FLEET__TICKET_KEY")
        );
        // A refusal of a type never quotes it either.
        let err = load("[fleet]\nticket_key = 123456789\n", &[]).unwrap_err().to_string();
        assert!(err.contains("fleet.ticket_key") && !err.contains("123456789"), "{err}");
    }

    /// The directory's list and table keys from variables: a TOML list of inline tables, an
    /// inline table; an entry's refusal blames the variable.
    #[test]
    fn the_servers_and_the_allocator_labels_come_from_variables() {
        let server = "{ id = \"d-1\", address = \"10.0.0.2:7777\", server_name = \"d\", nodes = [\"crypt\"] }";
        let servers = format!("[{server}, {}]", server.replace("d-1", "d-2"));
        let labels = "{ \"agones.dev/fleet\" = \"crypt\" }";
        let vars = [
            ("GATEHOUSE_FLEET__SERVERS", servers.as_str()),
            ("GATEHOUSE_FLEET__ALLOCATOR_LABELS", labels),
        ];
        let config = load("", &vars).unwrap();
        assert_eq!(config.fleet.servers.len(), 2);
        assert_eq!(config.fleet.servers[1].id, "d-2");
        assert_eq!(config.fleet.allocator_labels.get("agones.dev/fleet").unwrap(), "crypt");
        let shown = config.show();
        assert!(shown.contains("# env GATEHOUSE_FLEET__SERVERS"), "{shown}");
        // Shown as TOML, which reads back as the same value.
        let line = shown.lines().find(|l| l.starts_with("fleet.allocator_labels =")).unwrap();
        assert!(line.contains("= { \"agones.dev/fleet\" = \"crypt\" }"), "{line}");
        let line = shown.lines().find(|l| l.starts_with("fleet.servers =")).unwrap();
        let value = line.split_once(" = ").unwrap().1.rsplit_once("  # ").unwrap().0.trim();
        let again = load("", &[("GATEHOUSE_FLEET__SERVERS", value)]).unwrap();
        assert_eq!(again.fleet.servers, config.fleet.servers, "{line}");
        let twice = format!("[{server}, {server}]");
        let err = load("", &[("GATEHOUSE_FLEET__SERVERS", &twice)]).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid fleet.servers[1] from environment variable GATEHOUSE_FLEET__SERVERS: id \
             \"d-1\": listed twice"
        );
        let typo = "[{ id = \"d\", adress = \"h:1\" }]";
        let err = load("", &[("GATEHOUSE_FLEET__SERVERS", typo)]).unwrap_err().to_string();
        assert!(err.contains("environment variable GATEHOUSE_FLEET__SERVERS"), "{err}");
        assert!(err.contains("adress"), "{err}");
        let err = load("", &[("GATEHOUSE_FLEET__ALLOCATOR_LABELS", "{ a = 1 }")]).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("environment variable GATEHOUSE_FLEET__ALLOCATOR_LABELS"), "{err}");
    }

    #[test]
    fn a_refused_admin_token_from_the_environment_names_the_variable_and_hides_the_value() {
        let error = load("", &[("GATEHOUSE_ADMIN_TOKEN", "short-secret")]).unwrap_err().to_string();
        assert!(
            error.contains("admin.token") && error.contains("GATEHOUSE_ADMIN_TOKEN"),
            "{error}"
        );
        assert!(!error.contains("short-secret"), "a refused secret is never quoted: {error}");
    }

    /// `config show` says when the token key is the shipped development one, and lines up its
    /// origins in one column.
    #[test]
    fn config_show_marks_the_development_key_and_aligns_the_origins() {
        let shown = load("", &[]).unwrap().show();
        assert!(
            shown.contains("auth.token_key = <redacted> (the shipped development key)"),
            "{shown}"
        );
        let own = load("[auth]\ntoken_key = \"an-operators-own-key-0123\"\n", &[]).unwrap().show();
        assert!(!own.contains("development key"), "{own}");
        let columns: BTreeSet<usize> = shown.lines().filter_map(|line| line.find("  # ")).collect();
        assert_eq!(columns.len(), 1, "one column of origins: {shown}");
        let widest = shown.lines().any(|l| l.find("  # ").is_some_and(|i| !l[..i].ends_with(' ')));
        assert!(widest, "the column is as narrow as the widest line allows: {shown}");
    }

    #[test]
    fn non_config_and_legacy_variables_are_not_refused() {
        let vars = env(&[
            ("GATEHOUSE_CONFIG", "c.toml"),
            ("GATEHOUSE_TEST_POSTGRES_URL", "postgres://x"),
            ("GATEHOUSE_CRASH_CHILD_URL", "x"),
            ("GATEHOUSE_BIND", "127.0.0.1:1"),
            ("GATEHOUSE_TOKEN_KEY", "k"),
            ("PATH", "/bin"),
        ]);
        // Refused none; the flagless older one is laid over the file as its key.
        let found = config_variables(&vars).unwrap();
        let keys: Vec<(String, &str)> = found.iter().map(|e| (e.key(), e.var.as_str())).collect();
        assert_eq!(keys, [("auth.token_key".to_owned(), "GATEHOUSE_TOKEN_KEY")]);
    }

    #[test]
    fn a_legacy_variable_and_its_new_name_both_set_are_refused_naming_both() {
        let vars =
            env(&[("GATEHOUSE_BIND", "127.0.0.1:1"), ("GATEHOUSE_NETWORK__BIND", "127.0.0.1:2")]);
        let err = config_variables(&vars).unwrap_err().to_string();
        assert!(err.contains("GATEHOUSE_BIND") && err.contains("GATEHOUSE_NETWORK__BIND"), "{err}");
        let vars = env(&[("GATEHOUSE_ADMIN_BIND", "off"), ("GATEHOUSE_ADMIN__ENABLED", "true")]);
        assert!(config_variables(&vars).is_err());
    }
}

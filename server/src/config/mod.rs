//! Configuration: `config/server.toml` and the world map `config/world.toml`, each parsed once
//! into checked types.
//!
//! Every error is one line naming the dotted key, where its value came from (file and line,
//! environment variable, flag) and what was expected and found. Paths inside a config file are
//! relative to that file's directory. Nothing here touches the network or the game.

mod admin;
mod env;
mod overrides;
mod server;
mod servers;
mod source;
mod store_url;
mod world;

use crate::fields::PeerText;
use std::path::{Path, PathBuf};

pub use admin::{AdminToken, ConnectionLimits};
pub use env::{
    Environment, LEGACY_VARIABLES, NON_CONFIG_PREFIXES, NON_CONFIG_VARIABLES, PREFIX, Setting,
    config_keys, process_environment, variable_for,
};
pub use overrides::{Override, Overrides};
pub(crate) use server::MAX_REPLICATION_INTERVAL;
pub use server::{
    AdminConfig, Allocation, AuthConfig, ClientReadyPolicy, DEV_TOKEN_KEY, DirectoryKind,
    FleetConfig, FleetKey, GameConfig, LogFormat, MIN_FRAME_LEN, NetworkConfig, OrchestratorKind,
    ServerConfig, StoreConfig, TlsConfig, WhenEmpty,
};
pub use servers::{
    CheckedServer, MAX_ADDRESS_LEN, ServerEntryError, StaticServer, check_address, check_servers,
};
pub use source::{SECRET_KEYS, Secrecy, Sources, ValueSource, secrecy};
pub(crate) use store_url::Resolved;
pub use store_url::{DEFAULT_STORE_URL, StoreUrl, StoreUrlError, redact};
pub use world::{
    Hazard, LevelSpec, NodeSpec, PresetSpec, TravelRoute, WorldMap, load_world, parse_world,
};

/// Why a configuration was refused. Every message is one line, as the server prints it at start
/// (docs/operations.md).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not TOML at all.
    #[error("invalid {path}:{line}: not TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped, 1-based.
        line: usize,
        /// The parser's message, on one line.
        message: String,
    },
    /// A value was refused: the dotted key, where its value came from, what was expected and
    /// what was found, in plain words.
    #[error("invalid {key} from {origin}: {}", expected_found(expected, found))]
    Invalid {
        /// The dotted key, e.g. `network.max_players` or `node[2].levels[0].stream_ms`.
        key: String,
        /// Where the value came from: a file line, an environment variable, a flag, the default.
        origin: ValueSource,
        /// What was expected (or what is wrong, when nothing in particular was found).
        expected: String,
        /// What was found; empty when the value is missing or the message says it all.
        found: String,
    },
}

impl ConfigError {
    /// The error as one JSON object, for `--log-format json`: `key`, `origin`, `expected` and
    /// `found` when a value was refused, and always `message`, the one-line text.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::json!({ "level": "ERROR", "message": self.to_string() });
        if let ConfigError::Invalid { key, origin, expected, found } = self {
            object["key"] = key.as_str().into();
            object["origin"] = serde_json::to_value(origin).unwrap_or_default();
            object["origin_text"] = origin.to_string().into();
            object["expected"] = expected.as_str().into();
            object["found"] = found.as_str().into();
        }
        object
    }
}

fn expected_found(expected: &str, found: &str) -> String {
    if found.is_empty() {
        expected.to_owned()
    } else {
        format!("expected {expected}, found {found}")
    }
}

/// Reads a config file's text.
///
/// # Errors
/// [`ConfigError::Read`] naming the file.
fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_owned(), source })
}

/// Deserialises TOML text that came from `path` (used for errors only). A value of the wrong
/// type names its dotted key and line (`serde_path_to_error` tracks the key).
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    parse_layered(path, text, &[], &Sources::of_file(path, text))
}

/// [`parse_toml`] with `overlay`'s values (environment variables) laid over the file's keys
/// before the one deserialisation, so the types' checks apply to them too; `sources` knows
/// which keys the overlay set, and an error about one blames its variable.
///
/// A variable's value is read as a TOML value when it is one (`512`, `true`, `"text"`), else as
/// text (`0.0.0.0:7777`, `10s`); a value read as a number or a boolean where the key wants text
/// is read again as text (`GATEHOUSE_STORE__SESSION=2026`).
fn parse_layered<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    overlay: &[env::EnvValue],
    sources: &Sources,
) -> Result<T, ConfigError> {
    let mut as_text = std::collections::BTreeSet::new();
    loop {
        let deserializer = if overlay.is_empty() {
            toml::de::Deserializer::parse(text).map_err(|e| syntax(path, text, &e))?
        } else {
            let mut document =
                toml::de::DeTable::parse(text).map_err(|e| syntax(path, text, &e))?;
            for entry in overlay {
                lay_over(document.get_mut(), entry, as_text.contains(&entry.key()));
            }
            toml::de::Deserializer::from(document)
        };
        let error = match serde_path_to_error::deserialize(deserializer) {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let key = error.path().to_string();
        let typed = overlay.iter().any(|o| o.key() == key && typed_value(&o.value).is_some());
        if typed && error.inner().message().starts_with("invalid type") && as_text.insert(key) {
            continue;
        }
        return Err(refusal(path, text, sources, &error));
    }
}

/// The syntax error of a file that is not TOML, naming its line.
fn syntax(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    ConfigError::Syntax {
        path: path.to_owned(),
        line: e.span().map_or(1, |span| source::line_of(text, span.start)),
        message: PeerText(&e.message().trim().replace('\n', " ")).to_string(),
    }
}

/// A variable's value as a TOML number, boolean, list, inline table or quoted string, when it
/// is one (`fleet.servers`, `fleet.allocator_labels`).
fn typed_value(value: &str) -> Option<toml::de::DeValue<'_>> {
    let parsed = toml::de::DeValue::parse(value).ok()?.into_inner();
    match parsed {
        toml::de::DeValue::Datetime(_) => None,
        other => Some(other),
    }
}

/// Sets `entry`'s key in `document`, as text when `as_text`, making its section if the file
/// has none. A section the file made something else than a table is left for the
/// deserialisation to refuse.
fn lay_over<'i>(document: &mut toml::de::DeTable<'i>, entry: &'i env::EnvValue, as_text: bool) {
    use std::borrow::Cow;
    // The value comes from no line of the file: an empty span (the refusal blames the
    // variable, whatever the span).
    fn spanned<T>(value: T) -> toml::Spanned<T> {
        toml::Spanned::new(0..0, value)
    }
    let value = match typed_value(&entry.value) {
        Some(value) if !as_text => value,
        _ => toml::de::DeValue::String(Cow::Borrowed(entry.value.as_str())),
    };
    let table = match &entry.section {
        None => document,
        Some(section) => {
            let empty = toml::de::DeValue::Table(toml::de::DeTable::new());
            let slot = document
                .entry(spanned(Cow::Borrowed(section.as_str())))
                .or_insert_with(|| spanned(empty));
            match slot.get_mut() {
                toml::de::DeValue::Table(table) => table,
                _ => return,
            }
        }
    };
    table.insert(spanned(Cow::Borrowed(entry.name.as_str())), spanned(value));
}

/// The refusal of a value the types refused: its dotted key, where it came from (a variable
/// that set it, else its line in the file), what was expected and found.
fn refusal(
    path: &Path,
    text: &str,
    sources: &Sources,
    e: &serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    let key = e.path().to_string();
    let (expected, mut found) = source::describe_serde(e.inner().message());
    if found.is_empty() {
        // A parser's own message says what is wrong, not what it read: the file (or the
        // variable) does, unless the message quotes it already (a store URL's, redacted).
        found = sources
            .written(&key)
            .filter(|written| !expected.contains(written.as_str()))
            .unwrap_or_default();
    }
    let line = e.inner().span().map(|span| source::line_of(text, span.start));
    // A value inside one a variable set (a list's entry, a table's key) is the variable's.
    let set_over = sources.of_nested(&key);
    let origin = match line.or_else(|| sources.line(&key)) {
        _ if matches!(set_over, ValueSource::Env { .. } | ValueSource::Flag { .. }) => set_over,
        Some(line) => ValueSource::File { path: path.to_owned(), line: Some(line) },
        None => sources.of(&key),
    };
    if source::secrecy(&key) == Some(Secrecy::Hidden) && !found.is_empty() {
        // A refused secret is never quoted back, wherever it came from ([`SECRET_KEYS`]).
        found = "a value not shown (a secret)".to_owned();
    }
    // The file's text may hold control characters (a quoted key with `\r`): the refusal
    // stays one line.
    let line_safe = |text: String| PeerText(&text).to_string();
    ConfigError::Invalid {
        key: line_safe(key),
        origin,
        expected: line_safe(expected),
        found: line_safe(found),
    }
}

/// Resolves `relative` against the directory holding `file`.
fn beside(file: &Path, relative: &Path) -> PathBuf {
    if relative.is_absolute() {
        return relative.to_owned();
    }
    file.parent().unwrap_or(Path::new(".")).join(relative)
}

use gatehouse_game::world::{millis, seconds};

/// [`millis`] for a key that may be left out (the field is `None` then).
fn optional_millis<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    millis(d).map(Some)
}

/// Serialises a `*_ms` key's duration as whole milliseconds (`config show`).
fn ser_millis<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// [`ser_millis`] for a key that may be unset.
fn ser_optional_millis<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_millis(d, s),
        None => s.serialize_none(),
    }
}

/// Serialises a secret as `<redacted>`: a serialised config never carries one.
fn ser_secret<T, S: serde::Serializer>(_: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(REDACTED)
}

/// What `config show` prints in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// The core's rules from the `[game]` section, the login rate of `[auth]`, the player cap
/// and frame limit of `[network]`, and the travel bounds of `[fleet]` (seat hold, peer and
/// resolve timeouts). The server's own id is not among them (`server: None`): it needs the
/// whole configuration, [`ServerConfig::fleet_server`] (docs/spec/travel.md V17).
pub fn game_rules(
    game: &GameConfig,
    auth: &AuthConfig,
    network: &NetworkConfig,
    fleet: &FleetConfig,
) -> gatehouse_game::GameRules {
    gatehouse_game::GameRules {
        spawn_settle_timeout: game.spawn_settle_timeout,
        spawn_retry: game.spawn_retry,
        client_ready_timeout: game.client_ready_timeout,
        client_ready_policy: game.client_ready_policy,
        client_response_timeout: game.client_response_timeout,
        client_response_crowd_floor: game.client_response_crowd_floor,
        max_players: network.max_players,
        transition_max: game.transition_max,
        player_state_retention: game.player_state_retention,
        login_burst: auth.login_burst,
        login_interval: auth.login_interval,
        // The configuration keeps it at most 1 MiB.
        max_frame_len: u32::try_from(network.max_frame_len).unwrap_or(u32::MAX),
        max_failed_transitions: game.max_failed_transitions,
        seat_hold: fleet.seat_hold,
        peer_timeout: fleet.peer_timeout,
        resolve_timeout: fleet.resolve_timeout,
        server: None,
    }
}

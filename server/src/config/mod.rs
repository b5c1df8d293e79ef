//! Configuration: `config/server.toml` and the world map `config/world.toml`, each parsed once
//! into checked types.
//!
//! Every error is one line naming the dotted key, where its value came from (file and line,
//! environment variable, flag) and what was expected and found. Paths inside a config file are
//! relative to that file's directory. Nothing here touches the network or the game.

mod admin;
mod overrides;
mod server;
mod source;
mod store_url;
mod world;

use crate::fields::PeerText;
use std::path::{Path, PathBuf};

pub use admin::{AdminToken, ConnectionLimits};
pub use overrides::{Override, Overrides};
pub use server::{
    AdminConfig, Allocation, AuthConfig, ClientReadyPolicy, DEV_TOKEN_KEY, FleetConfig, GameConfig,
    LogFormat, MIN_FRAME_LEN, NetworkConfig, OrchestratorKind, ServerConfig, StoreConfig,
    TlsConfig, WhenEmpty,
};
pub use source::{Sources, ValueSource};
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
    let syntax = |e: toml::de::Error| ConfigError::Syntax {
        path: path.to_owned(),
        line: e.span().map_or(1, |span| source::line_of(text, span.start)),
        message: PeerText(&e.message().trim().replace('\n', " ")).to_string(),
    };
    let deserializer = toml::de::Deserializer::parse(text).map_err(syntax)?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let line = e.inner().span().map(|span| source::line_of(text, span.start));
        let (expected, mut found) = source::describe_serde(e.inner().message());
        let sources = Sources::of_file(path, text);
        if found.is_empty() {
            // A parser's own message says what is wrong, not what it read: the file does.
            found = sources.written(&key).unwrap_or_default().to_owned();
        }
        let origin = match line.or_else(|| sources.line(&key)) {
            Some(line) => ValueSource::File { path: path.to_owned(), line: Some(line) },
            None => sources.of(&key),
        };
        // The file's text may hold control characters (a quoted key with `\r`): the refusal
        // stays one line.
        let line_safe = |text: String| PeerText(&text).to_string();
        ConfigError::Invalid {
            key: line_safe(key),
            origin,
            expected: line_safe(expected),
            found: line_safe(found),
        }
    })
}

/// Resolves `relative` against the directory holding `file`.
fn beside(file: &Path, relative: &Path) -> PathBuf {
    if relative.is_absolute() {
        return relative.to_owned();
    }
    file.parent().unwrap_or(Path::new(".")).join(relative)
}

use gatehouse_game::world::millis;

/// [`millis`] for a key that may be left out (the field is `None` then).
fn optional_millis<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    millis(d).map(Some)
}

/// The core's rules from the `[game]` section, the login rate of `[auth]`, and the player cap
/// and frame limit of `[network]`.
pub fn game_rules(
    game: &GameConfig,
    auth: &AuthConfig,
    network: &NetworkConfig,
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
    }
}

//! Configuration: `config/server.toml` and the world map `config/world.toml`, each parsed once
//! into checked types.
//!
//! Every error names the file and the key that was wrong. Paths inside a config file are
//! relative to that file's directory. Nothing here touches the network or the game.

mod server;
mod world;

use std::path::{Path, PathBuf};

pub use server::{
    AdminConfig, AuthConfig, ClientReadyPolicy, DEV_TOKEN_KEY, GameConfig, LogFormat,
    MIN_FRAME_LEN, NetworkConfig, ServerConfig, StoreConfig, TlsConfig,
};
pub use world::{Hazard, LevelSpec, NodeSpec, PresetSpec, TravelRoute, WorldMap};

/// Why a configuration file was refused.
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
    /// The file is not valid TOML for its schema (an unknown key, a wrong type, a missing key);
    /// the message names the key and its line.
    #[error("invalid {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// A key parsed but its value is not acceptable.
    #[error("invalid {path}: key `{key}`: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `network.keep_alive_ms` or `node[2].levels[0].stream_ms`.
        key: String,
        /// What was expected and what was found.
        why: String,
    },
}

/// Reads and deserialises one TOML file.
fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    parse_toml(path, &text)
}

/// Deserialises TOML text that came from `path` (used for errors only).
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text)
        .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })
}

/// Resolves `relative` against the directory holding `file`.
fn beside(file: &Path, relative: &Path) -> PathBuf {
    if relative.is_absolute() {
        return relative.to_owned();
    }
    file.parent().unwrap_or(Path::new(".")).join(relative)
}

/// The longest duration any `*_ms` key accepts: one day, in ms. Far beyond any sensible timeout,
/// and small enough that adding it to a clock reading can never overflow.
const MAX_MILLIS: u64 = 86_400_000;

/// Deserialises a whole number of milliseconds, at most [`MAX_MILLIS`], into a `Duration`.
fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<std::time::Duration, D::Error> {
    let ms = <u64 as serde::Deserialize>::deserialize(d)?;
    if ms > MAX_MILLIS {
        return Err(serde::de::Error::custom(format!(
            "{ms} ms is more than the maximum of {MAX_MILLIS} ms (one day)"
        )));
    }
    Ok(std::time::Duration::from_millis(ms))
}

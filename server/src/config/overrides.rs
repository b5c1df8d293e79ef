//! What the command line and the `GATEHOUSE_*` environment variables set over the config file.
//! Each value is recorded as the source of the key it sets, so an error blames the flag or the
//! variable rather than the file.

use clap::ValueEnum as _;

use super::{ConfigError, LogFormat, OrchestratorKind, ServerConfig, ValueSource};

/// One value from the command line, as typed, and whether its flag or its variable gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The value as typed.
    pub value: String,
    /// The flag or the environment variable it came from.
    pub source: ValueSource,
}

/// The values the command line sets (flags, or their `GATEHOUSE_*` variables), each `None`
/// when not given. [`ServerConfig::apply`] checks and applies them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--bind` / `GATEHOUSE_BIND`: `network.bind`.
    pub bind: Option<Override>,
    /// `--data-dir` / `GATEHOUSE_DATA_DIR`: `data_dir`.
    pub data_dir: Option<Override>,
    /// `--log-format` / `GATEHOUSE_LOG_FORMAT`: `log_format`.
    pub log_format: Option<Override>,
    /// `--world` / `GATEHOUSE_WORLD`: `game.world`.
    pub world: Option<Override>,
    /// `--admin-bind` / `GATEHOUSE_ADMIN_BIND`: `admin.bind`, or `off` for `admin.enabled`.
    pub admin_bind: Option<Override>,
    /// `--orchestrator` / `GATEHOUSE_ORCHESTRATOR`: `fleet.orchestrator`.
    pub orchestrator: Option<Override>,
}

impl Overrides {
    /// These flags, and for each flag not given, its legacy variable in `env` (`--bind`, else
    /// `GATEHOUSE_BIND`): a flag wins over the environment (docs/operations.md).
    pub fn or_environment(&self, env: &super::Environment) -> Overrides {
        let pick = |given: &Option<Override>, var: &str| {
            given.clone().or_else(|| {
                env.get(var).map(|value| Override {
                    value: value.clone(),
                    source: ValueSource::Env { var: var.to_owned() },
                })
            })
        };
        Overrides {
            bind: pick(&self.bind, "GATEHOUSE_BIND"),
            data_dir: pick(&self.data_dir, "GATEHOUSE_DATA_DIR"),
            log_format: pick(&self.log_format, "GATEHOUSE_LOG_FORMAT"),
            world: pick(&self.world, "GATEHOUSE_WORLD"),
            admin_bind: pick(&self.admin_bind, "GATEHOUSE_ADMIN_BIND"),
            orchestrator: pick(&self.orchestrator, "GATEHOUSE_ORCHESTRATOR"),
        }
    }
}

impl ServerConfig {
    /// Loads the config file at `path` with this process's environment: see
    /// [`Self::load_from`].
    ///
    /// # Errors
    /// [`ConfigError`], as [`Self::load_from`]'s, or a `GATEHOUSE_*` variable that is not
    /// UTF-8.
    pub fn load_with(
        path: &std::path::Path,
        overrides: &Overrides,
    ) -> Result<ServerConfig, ConfigError> {
        Self::load_from(path, overrides, &super::process_environment()?)
    }

    /// Loads the config file at `path`, lays the `GATEHOUSE_<SECTION>__<KEY>` variables of
    /// `env` over it (with the older variables that have no flag, `GATEHOUSE_TOKEN_KEY` and the
    /// like), then the flags of `overrides` (each flag not given taken from its legacy
    /// variable in `env`), and checks the whole: a flag wins over the environment, the environment over the file, the
    /// file over the default (docs/operations.md, "Configuration").
    ///
    /// # Errors
    /// [`ConfigError`]: the file cannot be read or parsed, a variable names no key, or a value
    /// (from the file, a flag or a variable) is refused; the message names the key and where
    /// the value came from.
    pub fn load_from(
        path: &std::path::Path,
        overrides: &Overrides,
        env: &super::Environment,
    ) -> Result<ServerConfig, ConfigError> {
        Self::load_text(path, &super::read_text(path)?, overrides, env)
    }

    /// [`Self::load_from`] on config text as if read from `path`.
    ///
    /// # Errors
    /// As [`Self::load_from`]'s, but for reading the file.
    pub fn load_text(
        path: &std::path::Path,
        text: &str,
        overrides: &Overrides,
        env: &super::Environment,
    ) -> Result<ServerConfig, ConfigError> {
        let mut config = ServerConfig::parse_with_environment(path, text, env)?;
        config.apply(&overrides.or_environment(env))?;
        config.check()?;
        Ok(config)
    }

    /// Applies the command line's values over this config, each recorded as its key's source.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key and the flag or variable, for a value that does
    /// not parse (an address, a log format, an orchestrator).
    pub fn apply(&mut self, overrides: &Overrides) -> Result<(), ConfigError> {
        if let Some(o) = &overrides.bind {
            self.set_source("network.bind", o.source.clone());
            self.network.bind = o.value.parse().map_err(|_| {
                self.invalid(
                    "network.bind",
                    "an address such as 0.0.0.0:7777 or 127.0.0.1:0",
                    format!("{:?}", o.value),
                )
            })?;
        }
        if let Some(o) = &overrides.data_dir {
            self.set_source("data_dir", o.source.clone());
            self.data_dir = o.value.clone().into();
        }
        if let Some(o) = &overrides.log_format {
            self.set_source("log_format", o.source.clone());
            self.log_format = LogFormat::from_str(&o.value, true).map_err(|_| {
                self.invalid("log_format", "human or json", format!("{:?}", o.value))
            })?;
        }
        if let Some(o) = &overrides.world {
            self.set_source("game.world", o.source.clone());
            self.game.world = o.value.clone().into();
        }
        if let Some(o) = &overrides.admin_bind {
            self.set_source("admin.bind", o.source.clone());
            self.set_source("admin.enabled", o.source.clone());
            if o.value == "off" {
                self.admin.enabled = false;
            } else {
                self.admin.bind = o.value.parse().map_err(|_| {
                    self.invalid(
                        "admin.bind",
                        "ADDR:PORT, e.g. 127.0.0.1:7778, or off",
                        format!("{:?}", o.value),
                    )
                })?;
                self.admin.enabled = true;
            }
        }
        if let Some(o) = &overrides.orchestrator {
            self.set_source("fleet.orchestrator", o.source.clone());
            self.fleet.orchestrator = OrchestratorKind::from_str(&o.value, true).map_err(|_| {
                self.invalid("fleet.orchestrator", "none or agones", format!("{:?}", o.value))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(value: &str, flag: &str) -> Option<Override> {
        Some(Override { value: value.into(), source: ValueSource::Flag { flag: flag.into() } })
    }

    #[test]
    fn a_bad_flag_value_names_its_key_and_its_flag() {
        let mut config = ServerConfig::default();
        let overrides = Overrides { bind: flag("nowhere", "--bind"), ..Overrides::default() };
        let error = config.apply(&overrides).unwrap_err().to_string();
        assert!(error.contains("network.bind") && error.contains("--bind"), "{error}");
        assert!(error.contains("\"nowhere\""), "{error}");
    }

    #[test]
    fn flags_set_their_keys_and_admin_bind_off_disables_the_endpoint() {
        let mut config = ServerConfig::default();
        let overrides = Overrides {
            bind: flag("127.0.0.1:0", "--bind"),
            data_dir: flag("/tmp/d", "--data-dir"),
            log_format: flag("JSON", "--log-format"),
            world: flag("w.toml", "--world"),
            admin_bind: flag("off", "--admin-bind"),
            orchestrator: flag("none", "--orchestrator"),
        };
        config.apply(&overrides).unwrap();
        assert_eq!(config.network.bind.to_string(), "127.0.0.1:0");
        assert_eq!(config.data_dir, std::path::PathBuf::from("/tmp/d"));
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.game.world, std::path::PathBuf::from("w.toml"));
        assert!(!config.admin.enabled);
        let on =
            Overrides { admin_bind: flag("127.0.0.1:9", "--admin-bind"), ..Overrides::default() };
        config.apply(&on).unwrap();
        assert!(config.admin.enabled);
        assert_eq!(config.admin.bind.to_string(), "127.0.0.1:9");
    }

    /// The file is read first, the flags go over it, and the whole is checked: a value the file
    /// sets survives, a flag wins over the file, and a refused file value names its key.
    #[test]
    fn load_with_reads_the_file_then_applies_the_flags_then_checks() {
        let dir = std::env::temp_dir().join(format!("gatehouse-load-with-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("server.toml");
        std::fs::write(&file, "[network]\nbind = \"127.0.0.1:7001\"\nmax_players = 12\n").unwrap();
        let config = ServerConfig::load_with(&file, &Overrides::default()).unwrap();
        assert_eq!(
            (config.network.bind.to_string(), config.network.max_players),
            ("127.0.0.1:7001".into(), 12)
        );
        let overrides =
            Overrides { bind: flag("127.0.0.1:7002", "--bind"), ..Overrides::default() };
        let config = ServerConfig::load_with(&file, &overrides).unwrap();
        assert_eq!(
            (config.network.bind.to_string(), config.network.max_players),
            ("127.0.0.1:7002".into(), 12)
        );
        std::fs::write(&file, "[network]\nmax_players = 0\n").unwrap();
        let error = ServerConfig::load_with(&file, &Overrides::default()).unwrap_err().to_string();
        assert!(error.contains("network.max_players"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

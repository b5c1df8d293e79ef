//! What the start reads besides the config and the world, checked without binding,
//! connecting or writing anything: `config check` runs it (docs/operations.md,
//! "Configuration"), so a config it accepts does not fail the start on a file.
//!
//! - the TLS identity: the configured certificate and key read and built into the QUIC
//!   endpoint's configuration, as the start does (a key that does not match its certificate
//!   is refused there), or the development one if the data dir holds it already;
//! - the store's files: a PostgreSQL URL's `sslrootcert` (and `sslcert`, `sslkey`), read and
//!   parsed as opening the store does;
//! - the data dir (and the embedded store's directory, when outside it): an existing writable
//!   directory, or a path whose nearest existing ancestor is a writable directory (the start
//!   creates it);
//! - the fleet directory (`fleet.directory`): the static one built from `[[fleet.servers]]`,
//!   the Agones allocator's certificate, key and CA read and built into its TLS configuration
//!   ([`fleet_directory`], which the start calls too).

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::ServerError;
use crate::config::{ConfigError, DirectoryKind, ServerConfig};
use crate::fleet::{
    AgonesAllocator, AllocatorSettings, DirectoryError, FleetDirectory, StaticDirectory,
};
use crate::net::{self, NetError};

/// Checks everything the start reads from disk, as it reads it, without changing anything
/// (see the module's documentation).
///
/// # Errors
/// [`ServerError::Config`] naming the key at fault (`tls.certificate`, `tls.private_key`,
/// `store.url`, `data_dir`, a `fleet.allocator_*` file), where its value came from, and what was
/// wrong.
pub fn check_start(config: &ServerConfig) -> Result<(), ServerError> {
    check_data_dir(config)?;
    // The embedded store's file may be outside the data dir (`sqlite:///var/lib/g/saves.db`):
    // the start creates its directory too.
    let store_dir = config.store.url.embedded_path(&config.data_dir);
    if let Some(dir) = store_dir.as_deref().and_then(Path::parent)
        && !dir.as_os_str().is_empty()
        && !dir.starts_with(&config.data_dir)
    {
        check_creatable(config, "store.url", dir, "the embedded store's directory")?;
    }
    check_identity(config)?;
    config
        .store
        .url
        .check_files(&config.data_dir)
        .map_err(|e| config.invalid("store.url", e.why, String::new()))?;
    fleet_directory(config)?;
    Ok(())
}

/// The fleet directory `fleet.directory` names, built as a travel will ask it
/// (docs/spec/travel.md V12, V13): none, the static one of `[[fleet.servers]]`, or the Agones
/// allocator, whose certificate, private key and CA files are read here.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the entry (`fleet.servers[1]`) or the allocator key at
/// fault and where its value came from.
pub(crate) fn fleet_directory(
    config: &ServerConfig,
) -> Result<Option<Arc<dyn FleetDirectory>>, ConfigError> {
    let fleet = &config.fleet;
    let refused = |e| refused_directory(config, e);
    match fleet.directory {
        DirectoryKind::Static => {
            let directory =
                StaticDirectory::new(&config.server_id()?, &fleet.servers).map_err(refused)?;
            Ok(Some(Arc::new(directory)))
        }
        DirectoryKind::Agones => {
            // The config's checks refuse an `agones` directory without its keys.
            let Some(settings) = AllocatorSettings::from_config(fleet) else {
                return Err(config.invalid(
                    "fleet.directory",
                    "the allocator's keys (fleet.allocator_url, fleet.allocator_certificate, \
                     fleet.allocator_private_key, fleet.allocator_ca)",
                    "\"agones\" without them",
                ));
            };
            Ok(Some(Arc::new(AgonesAllocator::new(settings).map_err(refused)?)))
        }
        _ => Ok(None),
    }
}

/// A [`DirectoryError`] building the directory from config, as a config error: a
/// `[[fleet.servers]]` entry's names its place (`fleet.servers[1]`), an allocator setting's its
/// key; each blamed on where its value came from.
fn refused_directory(config: &ServerConfig, e: DirectoryError) -> ConfigError {
    match e {
        DirectoryError::StaticServer(entry) => config.refused_server(entry),
        DirectoryError::AllocatorSettings(why) => {
            // The settings' errors begin with the key at fault (`fleet.allocator_ca: ...`).
            let end = why.find([' ', ':']).unwrap_or(why.len());
            let (key, rest) = why.split_at(end);
            match key.starts_with("fleet.") {
                true => config.invalid_nested(key, rest.trim_start_matches(':').trim_start()),
                false => config.invalid_nested("fleet.directory", why.as_str()),
            }
        }
        other => config.invalid("fleet.directory", other.to_string(), ""),
    }
}

/// Reads the TLS identity the start would use and builds the QUIC configuration from it. A
/// development certificate that is not there yet would be generated: nothing to read.
fn check_identity(config: &ServerConfig) -> Result<(), ServerError> {
    if config.tls.certificate.is_none() {
        let dir = &config.data_dir;
        let present = [net::tls::DEV_CERT_FILE, net::tls::DEV_KEY_FILE]
            .iter()
            .all(|file| dir.join(file).exists());
        if !present {
            return Ok(());
        }
    }
    let identity = net::tls::load_identity(&config.tls, &config.data_dir)
        .map_err(|e| blame_tls_file(config, e))?;
    let peers = crate::fleet::offers_peer_link(config);
    net::server_config(identity, &config.network, peers).map_err(|e| blame_tls_pair(config, e))?;
    Ok(())
}

/// A TLS file error ([`NetError::Certificate`]) about a configured file, as a config error
/// naming its key (`tls.certificate`, `tls.private_key`) and where its value came from; any
/// other error as it is.
pub(crate) fn blame_tls_file(config: &ServerConfig, e: NetError) -> ServerError {
    let NetError::Certificate { path, why } = &e else { return e.into() };
    let (key, what) = if config.tls.certificate.as_ref() == Some(path) {
        ("tls.certificate", "a readable certificate chain file (DER or PEM)")
    } else if config.tls.private_key.as_ref() == Some(path) {
        ("tls.private_key", "a readable private key file (DER or PEM)")
    } else {
        return e.into();
    };
    config.invalid(key, what, format!("{}: {why}", path.display())).into()
}

/// An error building the QUIC configuration from a configured certificate and key (a key
/// that does not match its certificate), as a config error naming `tls.private_key`, the
/// certificate and where each came from; any other error as it is.
pub(crate) fn blame_tls_pair(config: &ServerConfig, e: NetError) -> ServerError {
    let (Some(certificate), Some(key)) = (&config.tls.certificate, &config.tls.private_key) else {
        return e.into();
    };
    let NetError::Certificate { why, .. } = &e else { return e.into() };
    let expected = format!(
        "the private key of tls.certificate {} (from {})",
        certificate.display(),
        config.source_of("tls.certificate")
    );
    config.invalid("tls.private_key", expected, format!("{}: {why}", key.display())).into()
}

/// Checks that the start can use or create the data dir: an existing writable directory, or
/// a path whose nearest existing ancestor is a writable directory. Creates nothing.
fn check_data_dir(config: &ServerConfig) -> Result<(), ConfigError> {
    check_creatable(config, "data_dir", &config.data_dir, "the data dir")
}

/// Checks that `dir` (the value of `key`, or derived from it) is a writable directory, or
/// that its nearest existing ancestor is one, where the start would create `what`.
fn check_creatable(
    config: &ServerConfig,
    key: &str,
    dir: &Path,
    what: &str,
) -> Result<(), ConfigError> {
    let refuse = |found: String| {
        config.invalid(
            key,
            format!(
                "a writable directory, or a path whose nearest existing directory is writable \
                 ({what} would be created there)"
            ),
            found,
        )
    };
    let (existing, would_create) = match nearest_existing(dir) {
        Some(existing) => (existing.clone(), existing != dir),
        None => return Err(refuse(format!("{}: no part of it exists", dir.display()))),
    };
    let shown = if would_create {
        format!("{} (it would be created in {})", dir.display(), existing.display())
    } else {
        dir.display().to_string()
    };
    let metadata = std::fs::metadata(&existing)
        .map_err(|e| refuse(format!("{shown}: cannot read {}: {e}", existing.display())))?;
    if !metadata.is_dir() {
        return Err(refuse(format!("{shown}: {} is not a directory", existing.display())));
    }
    if !is_writable(&metadata) {
        return Err(refuse(format!("{shown}: {} is not writable", existing.display())));
    }
    Ok(())
}

/// `path` if it exists, else its nearest ancestor that does (the current directory for a
/// relative path with none).
fn nearest_existing(path: &Path) -> Option<PathBuf> {
    let mut candidate = Some(path);
    while let Some(current) = candidate {
        let probe = if current.as_os_str().is_empty() { Path::new(".") } else { current };
        // A dangling link counts as existing: reading it then fails, as the start would.
        if std::fs::metadata(probe).is_ok() || probe.symlink_metadata().is_ok() {
            return Some(probe.to_owned());
        }
        candidate = current.parent();
    }
    None
}

/// Whether this process may create files in a directory with `metadata`, by its permission
/// bits: the owner's, group's or others' write bit, whichever applies to this process's user
/// (any write bit when it cannot be told, or for root). A read-only mount is not seen.
#[cfg(unix)]
fn is_writable(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let mode = metadata.mode();
    // The process's effective user owns its `/proc/self` (Linux).
    match std::fs::metadata("/proc/self").map(|m| (m.uid(), m.gid())) {
        Ok((0, _)) | Err(_) => mode & 0o222 != 0,
        Ok((uid, _)) if uid == metadata.uid() => mode & 0o200 != 0,
        Ok((_, gid)) if gid == metadata.gid() => mode & 0o020 != 0,
        // Supplementary groups are not known here: the group's bit may apply.
        Ok(_) => mode & 0o022 != 0,
    }
}

/// Whether this process may create files in a directory with `metadata`: not read-only.
#[cfg(not(unix))]
fn is_writable(metadata: &std::fs::Metadata) -> bool {
    !metadata.permissions().readonly()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, ValueSource};

    fn config_with_data_dir(dir: &Path) -> ServerConfig {
        let mut config = ServerConfig::load_text(
            Path::new("conf/server.toml"),
            "",
            &Overrides::default(),
            &Default::default(),
        )
        .unwrap();
        config.data_dir = dir.to_owned();
        config.set_source("data_dir", ValueSource::Env { var: "GATEHOUSE_DATA_DIR".into() });
        config
    }

    #[test]
    fn a_data_dir_under_an_existing_writable_directory_passes_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b/data");
        check_data_dir(&config_with_data_dir(&data)).unwrap();
        assert!(!dir.path().join("a").exists(), "nothing is created");
        check_data_dir(&config_with_data_dir(dir.path())).unwrap();
    }

    #[test]
    fn a_data_dir_under_a_file_or_a_read_only_directory_is_refused_naming_where() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let err = check_data_dir(&config_with_data_dir(&file.join("data"))).unwrap_err();
        let err = err.to_string();
        assert!(err.starts_with("invalid data_dir from environment variable GATEHOUSE_DATA_DIR"));
        assert!(err.contains("would be created") && err.contains("is not a directory"), "{err}");
        let err = check_data_dir(&config_with_data_dir(Path::new("/proc/nope"))).unwrap_err();
        assert!(err.to_string().contains("/proc is not writable"), "{err}");
    }

    /// `config check` (and the start) builds the fleet directory: the static one from its
    /// entries, the Agones allocator from its files, each refusal naming its key and line.
    #[test]
    fn the_fleet_directory_is_built_and_its_files_read_naming_the_key() {
        let head = "[store]\nurl = \"postgres://gate:pw@127.0.0.1/saves\"\n[fleet]\n\
                    ticket_key = \"a-fleet-key-of-thirty-two-bytes-0\"\n";
        let load = |text: &str| {
            ServerConfig::load_text(
                Path::new("conf/server.toml"),
                text,
                &Overrides::default(),
                &Default::default(),
            )
            .unwrap()
        };
        assert!(fleet_directory(&load("")).unwrap().is_none(), "no directory by default");
        let listed = format!(
            "{head}directory = \"static\"\n[[fleet.servers]]\nid = \"d-1\"\n\
             address = \"10.0.0.2:7777\"\nserver_name = \"d\"\nnodes = [\"crypt\"]\n"
        );
        assert!(fleet_directory(&load(&listed)).unwrap().is_some());
        let dir = tempfile::tempdir().unwrap();
        let agones = format!(
            "{head}directory = \"agones\"\nallocator_url = \"https://allocator:443\"\n\
             allocator_certificate = \"{0}/client.pem\"\nallocator_private_key = \"{0}/client.key\"\n\
             allocator_ca = \"{0}/ca.pem\"\n",
            dir.path().display()
        );
        let err = fleet_directory(&load(&agones)).unwrap_err().to_string();
        assert!(
            err.starts_with("invalid fleet.allocator_certificate from conf/server.toml:7: "),
            "{err}"
        );
        assert!(err.contains("client.pem"), "{err}");
        let mut config = config_with_data_dir(dir.path());
        let parsed = load(&agones);
        config.fleet = parsed.fleet.clone();
        config.store = parsed.store.clone();
        let err = check_start(&config).unwrap_err().to_string();
        assert!(err.starts_with("invalid fleet.allocator_certificate from"), "{err}");
        let http = agones.replace("https://", "http://");
        let err = fleet_directory(&load(&http)).unwrap_err().to_string();
        assert!(err.starts_with("invalid fleet.allocator_url from conf/server.toml:6: "), "{err}");
        assert!(err.contains("is not https"), "{err}");
    }

    #[test]
    fn an_embedded_store_outside_the_data_dir_is_checked_as_the_store_url() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_with_data_dir(dir.path());
        config.store.url = crate::config::StoreUrl::parse("sqlite:///proc/nope/saves.db").unwrap();
        let err = check_start(&config).unwrap_err().to_string();
        assert!(err.starts_with("invalid store.url from"), "{err}");
        assert!(err.contains("embedded store's directory") && err.contains("/proc"), "{err}");
        config.store.url = crate::config::StoreUrl::parse("sqlite:sub/saves.db").unwrap();
        check_start(&config).unwrap();
        assert!(!dir.path().join("sub").exists(), "nothing is created");
    }
}

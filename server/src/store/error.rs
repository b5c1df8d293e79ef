//! [`StoreError`]: every way the store can fail, each naming the store by its URL (password
//! redacted) or the save by its key.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL was refused before anything was opened.
    #[error("invalid store url {url}: {why}")]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// What was expected and what was found.
        why: String,
    },
    /// The embedded store's directory could not be created.
    #[error("cannot open the store {url}: cannot create its directory {}: {source}", .path.display())]
    CreateDir {
        /// The store, password redacted.
        url: String,
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The store could not be opened: an unreachable server, refused credentials, a file that
    /// is not a database.
    #[error("cannot open the store {url}: {source}")]
    Open {
        /// The store, password redacted.
        url: String,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The TLS connection to the store could not be set up: the server offers no TLS, or its
    /// certificate is not trusted or does not name the host (docs/operations.md,
    /// "PostgreSQL over TLS").
    #[error("cannot open the store {url}: TLS failed: {why}: {source}")]
    OpenTls {
        /// The store, password redacted.
        url: String,
        /// What the failure most likely means, in the operator's words.
        why: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The store did not answer while opening.
    #[error("cannot open the store {url}: expected an answer within {after_ms} ms, found none")]
    OpenTimeout {
        /// The store, password redacted.
        url: String,
        /// How long it waited.
        after_ms: u64,
    },
    /// The schema migrations could not be applied (or the stored schema is newer than this
    /// server, or was changed after it was applied).
    #[error("cannot migrate the store {url} to schema version {expected}: {source}")]
    Migrate {
        /// The store, password redacted.
        url: String,
        /// The schema version this server expects.
        expected: i64,
        /// The migrator's error.
        source: sqlx::migrate::MigrateError,
    },
    /// A read or write failed; worth retrying unless [`StoreError::is_transient`] says not.
    #[error("store {url}: {operation} failed: {source}")]
    Query {
        /// The store, password redacted.
        url: String,
        /// What was attempted, e.g. `save player sim-0001`.
        operation: String,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// Optimistic versioning refused a save: another writer saved since this save's version
    /// was read.
    #[error("save conflict for {key}: expected stored version {expected}, found {}", describe_found(*.found))]
    Conflict {
        /// What was saved, e.g. `player sim-0001` or `session main`.
        key: String,
        /// The version the save was based on (`save.version`).
        expected: u64,
        /// The version in the store; `None` when nothing is stored.
        found: Option<u64>,
    },
    /// A stored row cannot be read back into the save model.
    #[error("store {url}: {key} has an unreadable `{column}`: {why}")]
    Corrupt {
        /// The store, password redacted.
        url: String,
        /// Whose row, e.g. `player sim-0001`.
        key: String,
        /// The column.
        column: &'static str,
        /// What was expected and what was found.
        why: String,
    },
    /// A save carries a value the schema cannot hold.
    #[error("cannot save {key}: {why}")]
    Unwritable {
        /// What was saved.
        key: String,
        /// What was expected and what was found.
        why: String,
    },
    /// The store worker has stopped, so the request was not taken.
    #[error("the store worker has stopped: expected it to take requests, found its queue closed")]
    WorkerStopped,
}

fn describe_found(found: Option<u64>) -> String {
    match found {
        Some(version) => version.to_string(),
        None => "nothing stored".to_owned(),
    }
}

impl StoreError {
    /// Whether trying the same operation again may succeed: an I/O error, a timeout, a
    /// server-side failure. A conflict, corrupt data or a refused value is not.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Query { source, .. } => match source {
                // A constraint violation fails again; a lock, a serialization failure or an
                // administrator's cancel may not.
                sqlx::Error::Database(e) => e.kind() == sqlx::error::ErrorKind::Other,
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::WorkerCrashed => true,
                _ => false,
            },
            StoreError::OpenTimeout { .. } | StoreError::Open { .. } => true,
            // A certificate that is not trusted stays so; a handshake cut short may not.
            StoreError::OpenTls { source, .. } => tls_failure(source) == Some(TLS_OTHER),
            StoreError::InvalidUrl { .. }
            | StoreError::CreateDir { .. }
            | StoreError::Migrate { .. }
            | StoreError::Conflict { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Unwritable { .. }
            | StoreError::WorkerStopped => false,
        }
    }
}

/// Said of a TLS failure that is not one of the certificate's.
const TLS_OTHER: &str = "the TLS handshake with the server failed";

/// What a failure to connect means when TLS is its cause, in the operator's words (the driver
/// names rustls' reason, `UnknownIssuer`, not what to do about it); `None` when TLS is not the
/// cause. rustls' errors come wrapped in an I/O error when the handshake fails, in a TLS error
/// when it cannot start.
pub(crate) fn tls_failure(source: &sqlx::Error) -> Option<&'static str> {
    use rustls::{CertificateError, Error as Rustls};
    let rustls_error = match source {
        sqlx::Error::Tls(inner) => inner.downcast_ref::<Rustls>(),
        sqlx::Error::Io(io) => io.get_ref().and_then(|inner| inner.downcast_ref::<Rustls>()),
        _ => None,
    };
    Some(match rustls_error {
        Some(Rustls::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            "the server's certificate is not signed by a trusted CA (one in the `sslrootcert` \
             file or the system's roots)"
        }
        Some(Rustls::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => "the server's certificate does not name the host in the store url (verify-full)",
        Some(Rustls::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        )) => "the server's certificate has expired",
        Some(Rustls::InvalidCertificate(_)) => "the server's certificate was refused",
        Some(_) => TLS_OTHER,
        None => match source {
            sqlx::Error::Tls(inner) if inner.to_string().contains("does not support TLS") => {
                "the server does not offer TLS, and the store url's sslmode requires it"
            }
            sqlx::Error::Tls(_) => TLS_OTHER,
            _ => return None,
        },
    })
}

impl From<crate::config::StoreUrlError> for StoreError {
    fn from(e: crate::config::StoreUrlError) -> Self {
        StoreError::InvalidUrl { url: e.url, why: e.why }
    }
}

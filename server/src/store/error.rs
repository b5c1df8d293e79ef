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

impl From<crate::config::StoreUrlError> for StoreError {
    fn from(e: crate::config::StoreUrlError) -> Self {
        StoreError::InvalidUrl { url: e.url, why: e.why }
    }
}

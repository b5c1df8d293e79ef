//! Player and session saves: the model, the store that reads and writes it on either backend,
//! and the worker that runs loads and saves outside the game task.
//!
//! - [`model`]: what is saved (pure data, shared with the game core).
//! - [`Store`]: the embedded SQLite file (default, `sqlite:saves.db` in the data dir) or
//!   PostgreSQL (`postgres://…`, for several server processes sharing players), chosen by a
//!   [`StoreUrl`]; versioned schema migrations run at open; optimistic versioning on save.
//! - [`StoreWorker`]: per-key ordering, load timeouts, save retries and the shutdown drain,
//!   answering the shell with [`StoreReply`]s.
//!
//! Nothing here touches the game core: the shell turns the core's load and save outputs into
//! [`StoreRequest`]s and the worker's replies back into inputs.

mod backend;
mod codec;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod metrics;
mod schema;
mod worker;

pub use crate::config::{DEFAULT_STORE_URL, StoreUrl, StoreUrlError, redact};
pub use crate::model::{
    HandoffDefect, HandoffDuration, HandoffEffect, HandoffState, InventoryItem, KitLatches,
    LoadOutcome, PlayerSave, Preset, SessionSave,
};
pub use backend::Store;
pub use error::StoreError;
pub use metrics::{STORE_BUCKETS, StoreMetrics};
pub use worker::{
    HandoverOutcome, SAVE_BATCH_MAX, SaveBackend, SaveOutcome, StoreHandle, StoreReply,
    StoreRequest, StoreSettings, StoreWorker,
};

//! Player and session saves: the model, and (to come) the store that reads and writes it.

pub mod model;

pub use model::{InventoryItem, PlayerSave, Preset, SessionSave};

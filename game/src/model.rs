//! The save model: what is persisted per player and per session. The relaunched player's saved
//! node, preset and kits arrive asynchronously, after possession (docs/spec/transitions.md T4,
//! T15).
//!
//! Pure data shared by the game core (which decides what to load and save) and the store
//! (which reads and writes it), so neither imports the other. Nothing here does I/O.

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId};
use gatehouse_tags::GameplayTag;
use serde::{Deserialize, Serialize};

/// Everything saved for one player (keyed by the token's player id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerSave {
    /// Whose save.
    pub player: PlayerId,
    /// The world-map node the player was last placed on. A server runs one world whose node is
    /// the session's, so this records where the player stood (for operators, and for another
    /// process sharing the store); it does not steer travel.
    pub node: Option<NodeId>,
    /// The character the player plays.
    pub preset: Preset,
    /// Inventory: belongs to the player (its controller, not the pawn); survives pawn swaps.
    pub inventory: Vec<InventoryItem>,
    /// Equipment: belongs to the player state; each entry is an infinite-duration effect
    /// (e.g. `Effect.Equipment.Armor`) that survives respawn.
    pub equipment: Vec<GameplayTag>,
    /// Bumped by every save; 0 for a player never saved. A save carrying a version other than
    /// the stored one is a conflict (another process saved meanwhile).
    pub version: u64,
}

/// The character a player plays: a saved character, or a read-only preset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// A saved character: its definition and composed kits are written back with the save.
    Character {
        /// The pawn class.
        character_def: CharacterDef,
        /// The composed ability kits (`Kit.Composed.*`).
        kits: Vec<GameplayTag>,
    },
    /// A read-only preset from the world's preset catalog, referenced by name. Saving a player
    /// who uses one never writes the preset itself.
    ReadOnly {
        /// The preset's name in the catalog.
        name: String,
    },
}

/// One inventory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryItem {
    /// Item name.
    pub item: String,
    /// How many.
    pub count: u32,
}

/// What is saved for the session (the world one server process runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSave {
    /// The session's name (config `store.session`); one row per server world.
    pub session: String,
    /// The world's current node, restored before the boot travel.
    pub node: NodeId,
    /// Bumped by every save.
    pub version: u64,
}

/// How a load ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome<T> {
    /// The save exists.
    Found(T),
    /// Nothing was ever saved under this key.
    NotFound,
    /// The store failed, or did not answer within `load_timeout`; the reason, for logs.
    Failed(String),
}

//! The row codec for the fuzz targets (`fuzz/fuzz_targets/store_codec.rs`), behind the
//! `fuzzing` feature: a `players` row as a damaged database could hold it, read as the store
//! reads it, and a save written to columns and read back.

use super::codec::{PlayerRow, player_columns, player_from_row};
use crate::model::PlayerSave;

/// A `players` row's columns, whatever they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPlayerRow {
    /// `player_id`.
    pub player_id: String,
    /// `node`.
    pub node: Option<String>,
    /// `preset_kind`.
    pub preset_kind: String,
    /// `preset_name`.
    pub preset_name: Option<String>,
    /// `character_def`.
    pub character_def: Option<String>,
    /// `kits` (a JSON array of tag names).
    pub kits: Option<String>,
    /// `inventory` (a JSON array of items).
    pub inventory: String,
    /// `equipment` (a JSON array of tag names).
    pub equipment: String,
    /// `handoff` (a JSON handoff state, or NULL).
    pub handoff: Option<String>,
    /// `held_by` (a server id, or NULL; docs/spec/travel.md V17).
    pub held_by: Option<String>,
    /// `version`.
    pub version: i64,
}

/// Reads `row` as the store does.
///
/// # Errors
/// The store's refusal (`StoreError::Corrupt`, naming the column), as text.
pub fn read_player_row(row: RawPlayerRow) -> Result<PlayerSave, String> {
    let row = PlayerRow {
        player_id: row.player_id,
        node: row.node,
        preset_kind: row.preset_kind,
        preset_name: row.preset_name,
        character_def: row.character_def,
        kits: row.kits,
        inventory: row.inventory,
        equipment: row.equipment,
        handoff: row.handoff,
        held_by: row.held_by,
        version: row.version,
    };
    player_from_row("fuzz:", row).map_err(|e| e.to_string())
}

/// Writes `save` to its columns as the store does, then reads them back.
///
/// # Errors
/// The store's refusal to write or to read, as text.
pub fn player_round_trip(save: &PlayerSave) -> Result<PlayerSave, String> {
    let columns = player_columns(save).map_err(|e| e.to_string())?;
    let version = i64::try_from(save.version).map_err(|e| e.to_string())?;
    read_player_row(RawPlayerRow {
        player_id: columns.player_id,
        node: columns.node,
        preset_kind: columns.preset_kind.to_owned(),
        preset_name: columns.preset_name,
        character_def: columns.character_def,
        kits: columns.kits,
        inventory: columns.inventory,
        equipment: columns.equipment,
        handoff: columns.handoff,
        held_by: columns.held_by,
        version,
    })
}

//! The save model as table columns, both ways: plain values in, plain values out, so the same
//! code serves both backends. Lists are JSON arrays in text columns; a read-only preset is
//! written as its name alone.
//!
//! Owns the column encoding. Runs no query.

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId};
use gatehouse_tags::GameplayTag;

use sqlx::{ColumnIndex, Decode, FromRow, Row, Type};

use super::StoreError;
use crate::model::{InventoryItem, PlayerSave, Preset, SessionSave};

/// `players.preset_kind` of a saved character.
const KIND_CHARACTER: &str = "character";
/// `players.preset_kind` of a read-only preset.
const KIND_READ_ONLY: &str = "read_only";

/// The columns of one `players` row, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlayerColumns {
    pub(crate) player_id: String,
    pub(crate) node: Option<String>,
    pub(crate) preset_kind: &'static str,
    pub(crate) preset_name: Option<String>,
    pub(crate) character_def: Option<String>,
    pub(crate) kits: Option<String>,
    pub(crate) inventory: String,
    pub(crate) equipment: String,
}

/// One `players` row as read (columns named as in the schema).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlayerRow {
    pub(crate) player_id: String,
    pub(crate) node: Option<String>,
    pub(crate) preset_kind: String,
    pub(crate) preset_name: Option<String>,
    pub(crate) character_def: Option<String>,
    pub(crate) kits: Option<String>,
    pub(crate) inventory: String,
    pub(crate) equipment: String,
    pub(crate) version: i64,
}

impl<'r, R> FromRow<'r, R> for PlayerRow
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(PlayerRow {
            player_id: row.try_get("player_id")?,
            node: row.try_get("node")?,
            preset_kind: row.try_get("preset_kind")?,
            preset_name: row.try_get("preset_name")?,
            character_def: row.try_get("character_def")?,
            kits: row.try_get("kits")?,
            inventory: row.try_get("inventory")?,
            equipment: row.try_get("equipment")?,
            version: row.try_get("version")?,
        })
    }
}

/// One `sessions` row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRow {
    pub(crate) session: String,
    pub(crate) node: String,
    pub(crate) version: i64,
}

impl<'r, R> FromRow<'r, R> for SessionRow
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(SessionRow {
            session: row.try_get("session")?,
            node: row.try_get("node")?,
            version: row.try_get("version")?,
        })
    }
}

/// Encodes a version for a BIGINT column.
pub(crate) fn version_column(key: &str, version: u64) -> Result<i64, StoreError> {
    i64::try_from(version).map_err(|_| StoreError::Unwritable {
        key: key.to_owned(),
        why: format!("expected a version up to {}, found {version}", i64::MAX),
    })
}

/// The columns written for `save`. A read-only preset writes only its name.
pub(crate) fn player_columns(save: &PlayerSave) -> Result<PlayerColumns, StoreError> {
    let key = player_key(&save.player);
    let json = |what: &str, result: Result<String, serde_json::Error>| {
        result.map_err(|e| StoreError::Unwritable {
            key: key.clone(),
            why: format!("cannot encode its {what}: {e}"),
        })
    };
    let (preset_kind, preset_name, character_def, kits) = match &save.preset {
        Preset::Character { character_def, kits } => (
            KIND_CHARACTER,
            None,
            Some(character_def.as_str().to_owned()),
            Some(json("kits", serde_json::to_string(kits))?),
        ),
        Preset::ReadOnly { name } => (KIND_READ_ONLY, Some(name.clone()), None, None),
    };
    Ok(PlayerColumns {
        player_id: save.player.as_str().to_owned(),
        node: save.node.as_ref().map(|n| n.as_str().to_owned()),
        preset_kind,
        preset_name,
        character_def,
        kits,
        inventory: json("inventory", serde_json::to_string(&save.inventory))?,
        equipment: json("equipment", serde_json::to_string(&save.equipment))?,
    })
}

/// Reads a `players` row back; `url` names the store in errors.
pub(crate) fn player_from_row(url: &str, row: PlayerRow) -> Result<PlayerSave, StoreError> {
    let PlayerRow {
        player_id,
        node,
        preset_kind: kind,
        preset_name,
        character_def,
        kits,
        inventory,
        equipment,
        version,
    } = row;
    let key = format!("player {player_id}");
    let corrupt = |column: &'static str, why: String| StoreError::Corrupt {
        url: url.to_owned(),
        key: key.clone(),
        column,
        why,
    };
    let player =
        PlayerId::new(player_id.clone()).map_err(|e| corrupt("player_id", e.to_string()))?;
    let node = node.map(NodeId::new).transpose().map_err(|e| corrupt("node", e.to_string()))?;
    let preset = match (kind.as_str(), preset_name, character_def, kits) {
        (KIND_CHARACTER, None, Some(def), Some(kits)) => Preset::Character {
            character_def: CharacterDef::new(def)
                .map_err(|e| corrupt("character_def", e.to_string()))?,
            kits: serde_json::from_str::<Vec<GameplayTag>>(&kits)
                .map_err(|e| corrupt("kits", format!("expected a JSON array of tag names: {e}")))?,
        },
        (KIND_READ_ONLY, Some(name), None, None) => Preset::ReadOnly { name },
        (kind, name, def, kits) => {
            return Err(corrupt(
                "preset_kind",
                format!(
                    "expected `character` with a character_def and kits, or `read_only` with a preset_name only; found `{kind}` with preset_name {}, character_def {}, kits {}",
                    presence(&name),
                    presence(&def),
                    presence(&kits)
                ),
            ));
        }
    };
    let inventory = serde_json::from_str::<Vec<InventoryItem>>(&inventory).map_err(|e| {
        corrupt("inventory", format!("expected a JSON array of {{item, count}}: {e}"))
    })?;
    let equipment = serde_json::from_str::<Vec<GameplayTag>>(&equipment)
        .map_err(|e| corrupt("equipment", format!("expected a JSON array of tag names: {e}")))?;
    let version = u64::try_from(version)
        .map_err(|_| corrupt("version", format!("expected a positive number, found {version}")))?;
    Ok(PlayerSave { player, node, preset, inventory, equipment, version })
}

/// Reads a `sessions` row back; `url` names the store in errors.
pub(crate) fn session_from_row(url: &str, row: SessionRow) -> Result<SessionSave, StoreError> {
    let SessionRow { session, node, version } = row;
    let corrupt = |column: &'static str, why: String| StoreError::Corrupt {
        url: url.to_owned(),
        key: format!("session {session}"),
        column,
        why,
    };
    let node = NodeId::new(node).map_err(|e| corrupt("node", e.to_string()))?;
    let version = u64::try_from(version)
        .map_err(|_| corrupt("version", format!("expected a positive number, found {version}")))?;
    Ok(SessionSave { session, node, version })
}

/// How errors and logs name a player's row.
pub(crate) fn player_key(player: &PlayerId) -> String {
    format!("player {player}")
}

/// How errors and logs name a session's row.
pub(crate) fn session_key(session: &str) -> String {
    format!("session {session}")
}

fn presence<T>(value: &Option<T>) -> &'static str {
    if value.is_some() { "set" } else { "empty" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str) -> GameplayTag {
        GameplayTag::parse(name).unwrap()
    }

    fn row(c: &PlayerColumns, version: i64) -> PlayerRow {
        PlayerRow {
            player_id: c.player_id.clone(),
            node: c.node.clone(),
            preset_kind: c.preset_kind.to_owned(),
            preset_name: c.preset_name.clone(),
            character_def: c.character_def.clone(),
            kits: c.kits.clone(),
            inventory: c.inventory.clone(),
            equipment: c.equipment.clone(),
            version,
        }
    }

    #[test]
    fn a_character_round_trips_through_columns() {
        let save = PlayerSave {
            player: PlayerId::new("p-1").unwrap(),
            node: Some(NodeId::new("harbor").unwrap()),
            preset: Preset::Character {
                character_def: CharacterDef::new("Vanguard").unwrap(),
                kits: vec![tag("Kit.Composed.Vanguard")],
            },
            inventory: vec![InventoryItem { item: "rope".into(), count: 2 }],
            equipment: vec![tag("Effect.Equipment.Armor")],
            version: 7,
        };
        let c = player_columns(&save).unwrap();
        assert_eq!(c.preset_kind, "character");
        assert_eq!(c.preset_name, None);
        assert_eq!(player_from_row("u", row(&c, 7)).unwrap(), save);
    }

    #[test]
    fn a_read_only_preset_writes_its_name_only() {
        let save = PlayerSave {
            player: PlayerId::new("p-2").unwrap(),
            node: None,
            preset: Preset::ReadOnly { name: "scout".into() },
            inventory: vec![],
            equipment: vec![],
            version: 1,
        };
        let c = player_columns(&save).unwrap();
        assert_eq!((c.preset_kind, c.preset_name.as_deref()), ("read_only", Some("scout")));
        assert_eq!((c.character_def.as_deref(), c.kits.as_deref()), (None, None));
        assert_eq!(player_from_row("u", row(&c, 1)).unwrap(), save);
    }

    #[test]
    fn an_unreadable_row_names_its_column() {
        let mut r = PlayerRow {
            player_id: "p-3".into(),
            node: None,
            preset_kind: "read_only".into(),
            preset_name: Some("scout".into()),
            character_def: None,
            kits: None,
            inventory: "[]".into(),
            equipment: "[\"No.Such.Tag.Anywhere\"]".into(),
            version: 1,
        };
        let err = player_from_row("sqlite:x", r.clone()).unwrap_err().to_string();
        assert!(err.contains("`equipment`") && err.contains("player p-3"), "{err}");
        r.equipment = "[]".into();
        r.preset_kind = "character".into();
        let err = player_from_row("sqlite:x", r).unwrap_err().to_string();
        assert!(err.contains("`preset_kind`"), "{err}");
    }

    #[test]
    fn a_version_beyond_bigint_is_unwritable() {
        assert!(version_column("player x", u64::MAX).is_err());
        assert_eq!(version_column("player x", 5).unwrap(), 5);
    }
}

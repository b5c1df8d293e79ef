//! The save model as table columns, both ways: plain values in, plain values out, so the same
//! code serves both backends. Lists are JSON arrays in text columns; a read-only preset is
//! written as its name alone; a handoff state is a JSON object in a nullable text column (NULL
//! for a save without one), at most [`MAX_HANDOFF_BYTES`]; the holder is a server id in a
//! nullable text column (NULL for a save that names none).
//!
//! Owns the column encoding. Runs no query.

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId, ServerId};
use gatehouse_tags::GameplayTag;

use sqlx::{ColumnIndex, Decode, FromRow, Row, Type};

use super::StoreError;
use crate::model::{HandoffState, InventoryItem, PlayerSave, Preset, SessionSave};

/// `players.preset_kind` of a saved character.
const KIND_CHARACTER: &str = "character";
/// `players.preset_kind` of a read-only preset.
const KIND_READ_ONLY: &str = "read_only";

/// Most bytes `players.handoff` holds (its JSON text). A handoff state is a team, a health, and
/// sets of catalog tags and effects (a few KiB with every tag of `config/tags.toml` held, kits
/// granted and an effect of each): the bound refuses a value no core made before it is parsed.
pub(crate) const MAX_HANDOFF_BYTES: usize = 64 * 1024;

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
    /// `players.handoff`: JSON, or `None` (NULL) for a save without a handoff state.
    pub(crate) handoff: Option<String>,
    /// `players.held_by`: the server that wrote it, or `None` (NULL) for a save naming none
    /// (docs/spec/travel.md V17).
    pub(crate) held_by: Option<String>,
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
    pub(crate) handoff: Option<String>,
    pub(crate) held_by: Option<String>,
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
            handoff: row.try_get("handoff")?,
            held_by: row.try_get("held_by")?,
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

/// The columns written for `save`. A read-only preset writes only its name; a save without a
/// handoff state writes `handoff` NULL.
///
/// # Errors
/// [`StoreError::Unwritable`] naming the player and the column: a value that cannot be encoded,
/// a handoff state that fails [`HandoffState::check`] or encodes to more than
/// [`MAX_HANDOFF_BYTES`].
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
        handoff: save.handoff.as_ref().map(|state| handoff_column(&key, state)).transpose()?,
        held_by: save.holder.as_ref().map(|server| server.as_str().to_owned()),
    })
}

/// Encodes a handoff state for `players.handoff`; `key` names the player in errors.
fn handoff_column(key: &str, state: &HandoffState) -> Result<String, StoreError> {
    let unwritable = |why: String| StoreError::Unwritable { key: key.to_owned(), why };
    state.check().map_err(|defect| unwritable(format!("its `handoff` is refused: {defect}")))?;
    let text = serde_json::to_string(state)
        .map_err(|e| unwritable(format!("cannot encode its `handoff`: {e}")))?;
    if text.len() > MAX_HANDOFF_BYTES {
        return Err(unwritable(format!(
            "expected its `handoff` to encode to at most {MAX_HANDOFF_BYTES} bytes, found {}",
            text.len()
        )));
    }
    Ok(text)
}

/// Reads `players.handoff` back: the bound first (nothing larger is parsed), then the JSON,
/// then [`HandoffState::check`]. The error is what was expected and found, for
/// [`StoreError::Corrupt`].
fn handoff_from_column(text: &str) -> Result<HandoffState, String> {
    if text.len() > MAX_HANDOFF_BYTES {
        return Err(format!("expected at most {MAX_HANDOFF_BYTES} bytes, found {}", text.len()));
    }
    let state = serde_json::from_str::<HandoffState>(text).map_err(|e| {
        format!("expected a JSON handoff state {{team, health, tags, effects, kits}}: {e}")
    })?;
    state.check().map_err(|defect| defect.to_string())?;
    Ok(state)
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
        handoff,
        held_by,
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
    let handoff = handoff
        .map(|text| handoff_from_column(&text).map(Box::new))
        .transpose()
        .map_err(|why| corrupt("handoff", why))?;
    let version = u64::try_from(version)
        .map_err(|_| corrupt("version", format!("expected a positive number, found {version}")))?;
    let holder = held_by
        .map(ServerId::new)
        .transpose()
        .map_err(|e| corrupt("held_by", format!("expected a server id: {e}")))?;
    Ok(PlayerSave { player, node, preset, inventory, equipment, version, handoff, holder })
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
    use gatehouse_protocol::TeamId;

    use super::*;
    use crate::model::{HandoffDuration, HandoffEffect, KitLatches};

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
            handoff: c.handoff.clone(),
            held_by: c.held_by.clone(),
            version,
        }
    }

    /// A handoff state with every field set: a dead player, its poison still running.
    fn handoff() -> HandoffState {
        HandoffState::sample()
    }

    fn read_only(player: &str, handoff: Option<HandoffState>) -> PlayerSave {
        PlayerSave {
            player: PlayerId::new(player).unwrap(),
            node: None,
            preset: Preset::ReadOnly { name: "scout".into() },
            inventory: vec![],
            equipment: vec![tag("Effect.Equipment.Armor")],
            version: 1,
            handoff: handoff.map(Box::new),
            holder: None,
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
            handoff: None,
            holder: Some(ServerId::new("hub-1").unwrap()),
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
            handoff: None,
            holder: None,
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
            handoff: None,
            held_by: None,
            version: 1,
        };
        let err = player_from_row("sqlite:x", r.clone()).unwrap_err().to_string();
        assert!(err.contains("`equipment`") && err.contains("player p-3"), "{err}");
        r.equipment = "[]".into();
        r.preset_kind = "character".into();
        let err = player_from_row("sqlite:x", r.clone()).unwrap_err().to_string();
        assert!(err.contains("`preset_kind`"), "{err}");
        r.preset_kind = "read_only".into();
        r.held_by = Some("not a server id!".into());
        let err = player_from_row("sqlite:x", r).unwrap_err().to_string();
        assert!(err.contains("`held_by`"), "{err}");
    }

    /// A handoff state is one JSON column, every field read back as written; a save without
    /// one writes NULL and reads back `None`.
    #[test]
    fn a_handoff_state_round_trips_through_its_column_and_none_is_null() {
        let save = read_only("p-h", Some(handoff()));
        let c = player_columns(&save).unwrap();
        let text = c.handoff.as_deref().unwrap();
        assert!(text.contains("\"State.Dead\"") && text.contains("\"left_ms\":1250"), "{text}");
        assert_eq!(player_from_row("u", row(&c, 1)).unwrap(), save);
        assert!(save.handoff.as_ref().unwrap().is_dead());

        let none = read_only("p-n", None);
        let c = player_columns(&none).unwrap();
        assert_eq!(c.handoff, None, "NULL, not a JSON null");
        assert_eq!(player_from_row("u", row(&c, 1)).unwrap(), none);
    }

    /// An oversized or corrupt `handoff` is refused on read with an error naming the player
    /// and the column; one a core could not have made is refused on write too.
    #[test]
    fn the_largest_handoff_a_core_makes_fits_its_column() {
        // Every tag of the catalog held, granted as a kit and running as an effect.
        let every: std::collections::BTreeSet<GameplayTag> = GameplayTag::all().collect();
        let effect = |tag| HandoffEffect {
            tag,
            duration: HandoffDuration::Finite {
                left_ms: u64::MAX,
                next_tick_ms: u64::MAX,
                tick_ms: u64::MAX,
                damage: u32::MAX,
            },
        };
        let state = HandoffState {
            team: TeamId(u8::MAX),
            health: u32::MAX,
            tags: every.clone(),
            effects: every.iter().copied().map(effect).collect(),
            kits: KitLatches { startup_granted: true, composed_granted: true, granted: every },
        };
        let columns = player_columns(&read_only("p-all", Some(state.clone()))).unwrap();
        let written = columns.handoff.clone().unwrap_or_default().len();
        assert!(written <= MAX_HANDOFF_BYTES / 2, "{written} bytes: the bound leaves room");
        let read = player_from_row("sqlite:x", row(&columns, 1)).unwrap();
        assert_eq!(read.handoff.as_deref(), Some(&state));
    }

    #[test]
    fn an_oversized_or_corrupt_handoff_column_is_refused_naming_the_player_and_column() {
        let good = player_columns(&read_only("p-bad", Some(handoff()))).unwrap();
        let refused = |handoff: String| {
            let mut r = row(&good, 1);
            r.handoff = Some(handoff);
            let err = player_from_row("sqlite:x", r).unwrap_err();
            assert!(matches!(err, StoreError::Corrupt { column: "handoff", .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("player p-bad") && text.contains("`handoff`"), "{text}");
            text
        };
        // JSON's whitespace pads a good value to the bound exactly: read; one byte more: not.
        let mut at_bound = good.handoff.clone().unwrap();
        at_bound.push_str(&" ".repeat(MAX_HANDOFF_BYTES - at_bound.len()));
        let mut r = row(&good, 1);
        r.handoff = Some(at_bound.clone());
        let read = player_from_row("sqlite:x", r).unwrap();
        assert_eq!(read.handoff.as_deref(), Some(&handoff()), "a value at the bound is read");
        let mut padded = at_bound;
        padded.push(' ');
        let err = refused(padded);
        assert!(err.contains(&format!("at most {MAX_HANDOFF_BYTES} bytes")), "{err}");
        refused("{\"team\": 2".into());
        refused("null".into());
        refused("[]".into());
        let unknown_tag = good.handoff.clone().unwrap().replace("State.Dead", "State.Undead");
        assert!(refused(unknown_tag).contains("State.Undead"));
        let no_team = good.handoff.clone().unwrap().replace("\"team\":2", "\"team\":0");
        assert!(refused(no_team).contains("team 0"));
        let zero_tick = good.handoff.clone().unwrap().replace("\"tick_ms\":250", "\"tick_ms\":0");
        assert!(refused(zero_tick).contains("effects[1]"));

        let unwritable = |state: HandoffState| {
            let err = player_columns(&read_only("p-big", Some(state))).unwrap_err();
            assert!(matches!(err, StoreError::Unwritable { .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("player p-big") && text.contains("`handoff`"), "{text}");
            text
        };
        let mut big = handoff();
        big.effects = vec![big.effects[1].clone(); MAX_HANDOFF_BYTES / 64];
        assert!(unwritable(big).contains(&format!("at most {MAX_HANDOFF_BYTES} bytes")));
        assert!(unwritable(HandoffState { team: TeamId(0), ..handoff() }).contains("team 0"));
    }

    #[test]
    fn a_version_beyond_bigint_is_unwritable() {
        assert!(version_column("player x", u64::MAX).is_err());
        assert_eq!(version_column("player x", 5).unwrap(), 5);
    }
}

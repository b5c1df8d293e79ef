//! Fuzz target: the store's row codec, on rows a damaged (or hand-edited) database could hold.
//!
//! The input is a `players` row's columns (the handoff state's as often shaped as the store
//! writes it as not). Checked:
//! - reading it never panics: a row is a save or a refusal naming its column;
//! - a row that reads as a save writes back to columns that read as the same save (the codec
//!   round-trips everything it accepts).

#![no_main]
#![forbid(unsafe_code)]

use arbitrary::Arbitrary;
use gatehouse_server::store::fuzzing::{RawPlayerRow, player_round_trip, read_player_row};
use libfuzzer_sys::fuzz_target;

/// The columns, with the JSON ones as often well-formed as not.
#[derive(Debug, Arbitrary)]
struct Row {
    player_id: String,
    node: Option<String>,
    read_only: bool,
    preset_name: Option<String>,
    character_def: Option<String>,
    kits: Option<Vec<String>>,
    inventory: Json,
    equipment: Vec<String>,
    raw_equipment: Option<String>,
    handoff: Option<Handoff>,
    held_by: Option<String>,
    version: i64,
}

/// A handoff column: a state shaped as the store writes it, or raw text.
#[derive(Debug, Arbitrary)]
enum Handoff {
    State {
        team: u8,
        health: u32,
        tags: Vec<String>,
        /// Each effect: its tag, and `None` for an infinite one or its
        /// `(left_ms, next_tick_ms, tick_ms, damage)`.
        effects: Vec<(String, Option<(u64, u64, u64, u32)>)>,
        startup_granted: bool,
        composed_granted: bool,
        granted: Vec<String>,
    },
    Raw(String),
}

fn handoff_json(handoff: &Handoff) -> String {
    match handoff {
        Handoff::State {
            team,
            health,
            tags,
            effects,
            startup_granted,
            composed_granted,
            granted,
        } => {
            let effects: Vec<serde_json::Value> = effects
                .iter()
                .map(|(tag, finite)| {
                    let duration = match finite {
                        None => serde_json::json!("Infinite"),
                        Some((left_ms, next_tick_ms, tick_ms, damage)) => serde_json::json!({
                            "Finite": {
                                "left_ms": left_ms,
                                "next_tick_ms": next_tick_ms,
                                "tick_ms": tick_ms,
                                "damage": damage,
                            }
                        }),
                    };
                    serde_json::json!({ "tag": tag, "duration": duration })
                })
                .collect();
            serde_json::json!({
                "team": team,
                "health": health,
                "tags": tags,
                "effects": effects,
                "kits": {
                    "startup_granted": startup_granted,
                    "composed_granted": composed_granted,
                    "granted": granted,
                },
            })
            .to_string()
        }
        Handoff::Raw(text) => text.clone(),
    }
}

/// An inventory column: items as the store writes them, or raw text.
#[derive(Debug, Arbitrary)]
enum Json {
    Items(Vec<(String, u32)>),
    Raw(String),
}

fn json_tags(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_default()
}

fuzz_target!(|row: Row| {
    let inventory = match &row.inventory {
        Json::Items(items) => serde_json::to_string(
            &items
                .iter()
                .map(|(item, count)| serde_json::json!({ "item": item, "count": count }))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default(),
        Json::Raw(text) => text.clone(),
    };
    let raw = RawPlayerRow {
        player_id: row.player_id,
        node: row.node,
        preset_kind: if row.read_only { "read_only" } else { "character" }.to_owned(),
        preset_name: row.preset_name,
        character_def: row.character_def,
        kits: row.kits.as_deref().map(json_tags),
        inventory,
        equipment: row.raw_equipment.unwrap_or_else(|| json_tags(&row.equipment)),
        handoff: row.handoff.as_ref().map(handoff_json),
        held_by: row.held_by,
        version: row.version,
    };
    match read_player_row(raw) {
        Ok(save) => assert_eq!(player_round_trip(&save), Ok(save.clone()), "{save:?}"),
        Err(why) => assert!(why.contains("fuzz:"), "a refusal that does not name its store: {why}"),
    }
});

//! Fuzz target: the store's row codec, on rows a damaged (or hand-edited) database could hold.
//!
//! The input is a `players` row's columns. Checked:
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
    version: i64,
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
        version: row.version,
    };
    match read_player_row(raw) {
        Ok(save) => assert_eq!(player_round_trip(&save), Ok(save.clone()), "{save:?}"),
        Err(why) => assert!(why.contains("fuzz:"), "a refusal that does not name its store: {why}"),
    }
});

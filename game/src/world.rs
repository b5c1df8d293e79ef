//! The world map (`config/world.toml`): which nodes exist, the levels that stream for each (and
//! a dungeon's rooms), when their spawn points register, the hazards, the presets and an optional
//! travel route. The core reads it to decide what streams and where pawns may stand
//! (docs/spec/transitions.md T1); the world behind the server streams what it names
//! (docs/embedding.md).
//!
//! Plain data and its own checks. Reading a file, and naming the line of a refused key, is the
//! server's config (`gatehouse_server::config::load_world`).

use std::collections::HashSet;
use std::time::Duration;

use gatehouse_protocol::{CharacterDef, LevelName, NodeId};
use gatehouse_tags::GameplayTag;
use serde::Deserialize;

/// The longest duration any `*_ms` key accepts: one day, in ms. Far beyond any sensible
/// timeout, and small enough that adding it to a clock reading can never overflow.
pub const MAX_MILLIS: u64 = 86_400_000;

/// The forms every duration key accepts, as errors name them (docs/operations.md,
/// "Configuration").
pub const DURATION_FORMS: &str = "a duration: a whole number in the key's unit, or a string with a unit such as \"250ms\", \"10s\", \"2m\" or \"1h 30m\"";

/// Deserialises a `*_ms` key into a `Duration`, at most [`MAX_MILLIS`]: a whole number of
/// milliseconds (`250`), or a string with a unit that `humantime` reads (`"250ms"`, `"10s"`,
/// `"2m"`); the unit of every `*_ms` key of the config files (docs/operations.md).
///
/// A string that does not come to whole milliseconds (`"100us"`, `"1ms 500us"`) is refused:
/// the keys keep whole milliseconds, and `"100us"` would otherwise read as 0.
///
/// # Errors
/// The deserializer's (naming [`DURATION_FORMS`]), "whole milliseconds" for a string with a
/// fraction of a millisecond, or "at most 86400000 ms (one day)".
pub fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let duration = d.deserialize_any(DurationVisitor { unit: Duration::from_millis(1) })?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        // No "found": the server's refusal quotes the value as written.
        return Err(serde::de::Error::custom(
            "whole milliseconds, as a number (250) or a string such as \"250ms\" or \"10s\" \
             (no fraction of a millisecond)",
        ));
    }
    if duration > Duration::from_millis(MAX_MILLIS) {
        return Err(serde::de::Error::custom(format!("at most {MAX_MILLIS} ms (one day)")));
    }
    Ok(duration)
}

/// Deserialises a `*_s` key into whole seconds: a whole number of seconds (`60`), or a string
/// with a unit (`"1m"`, `"24h"`, `"7days"`) that comes to whole seconds (docs/operations.md).
/// A number beyond `u32::MAX` seconds reads as `u32::MAX` (the key's own check bounds it).
///
/// # Errors
/// The deserializer's (naming [`DURATION_FORMS`]), or "whole seconds" for a string with a
/// fraction of a second.
pub fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let duration = d.deserialize_any(DurationVisitor { unit: Duration::from_secs(1) })?;
    if duration.subsec_nanos() != 0 {
        // No "found": the server's refusal quotes the value as written.
        return Err(serde::de::Error::custom(
            "whole seconds, as a number (60) or a string such as \"1m\" (no fraction of a second)",
        ));
    }
    Ok(duration.as_secs())
}

/// Reads a duration written as a whole number of `unit`s or as a string with a unit.
struct DurationVisitor {
    /// What a bare number counts.
    unit: Duration,
}

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(DURATION_FORMS)
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Duration, E> {
        // Beyond `u32` units is beyond any key's most (a day): saturate and let the caller
        // refuse it by its own bound.
        Ok(self.unit.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX)))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Duration, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
        }
    }

    fn visit_u128<E: serde::de::Error>(self, n: u128) -> Result<Duration, E> {
        self.visit_u64(u64::try_from(n).unwrap_or(u64::MAX))
    }

    fn visit_i128<E: serde::de::Error>(self, n: i128) -> Result<Duration, E> {
        match u128::try_from(n) {
            Ok(n) => self.visit_u128(n),
            Err(_) => {
                Err(E::invalid_value(serde::de::Unexpected::Other("a negative number"), &self))
            }
        }
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Duration, E> {
        humantime::parse_duration(text.trim())
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Str(text), &self))
    }
}

/// What is wrong with a world map: the dotted key at fault (`node[2].levels`, `start_node`) and
/// what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldProblem {
    /// The dotted key.
    pub key: String,
    /// What is wrong, in plain words.
    pub why: String,
}

impl std::fmt::Display for WorldProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid {}: {}", self.key, self.why)
    }
}

impl std::error::Error for WorldProblem {}

/// The checked world map.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldMap {
    /// `start_node`: where the boot travel goes when no session save names a node.
    pub start_node: NodeId,
    /// `world_map`: whether a world map governs the session (default true). With `false` the
    /// map is standalone (a test map, docs/spec/transitions.md T1): the gate always allows spawns.
    #[serde(default = "yes", rename = "world_map")]
    pub governs_session: bool,
    /// `[travel]`: an optional route travelled at a fixed interval.
    #[serde(default)]
    pub travel: Option<TravelRoute>,
    /// `[[node]]`: every node of the map.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// `[[hazard]]`: damage-over-time hazards.
    #[serde(default, rename = "hazard")]
    pub hazards: Vec<Hazard>,
    /// `[[preset]]`: the read-only preset catalog (a player plays its saved character, or a
    /// read-only preset).
    #[serde(rename = "preset")]
    pub presets: Vec<PresetSpec>,
    /// `default_preset`: the preset a player without a save starts from.
    pub default_preset: String,
    /// `startup_kits`: kits granted once per session at the first possession, never again
    /// (docs/spec/transitions.md T15, T16).
    #[serde(default)]
    pub startup_kits: Vec<GameplayTag>,
    /// `max_health`: a player's health after login and after each respawn.
    #[serde(default = "hundred")]
    pub max_health: u32,
    /// `rebalance_teams`: whether every travel evens out teams 1 and 2 and then swaps one pair
    /// of players, so clients keep exercising the presentation-only team change
    /// (docs/spec/gates.md G16). Default false: teams change only at login, which joins the
    /// smaller team. The soak world turns it on.
    #[serde(default)]
    pub rebalance_teams: bool,
}

/// `[[preset]]`: a read-only character preset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetSpec {
    /// `name`: how saves refer to it.
    pub name: String,
    /// `character_def`: the pawn class it plays.
    pub character_def: CharacterDef,
    /// `kits`: its composed ability kits (may be empty: a preset with zero kits still latches).
    #[serde(default)]
    pub kits: Vec<GameplayTag>,
}

/// `[travel]`: the server travels to the next node of `route` every `interval_ms`, cycling.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TravelRoute {
    /// `route`: node ids, visited in order, then again from the first.
    pub route: Vec<NodeId>,
    /// `interval_ms`: time between the start of one route travel and the next.
    #[serde(rename = "interval_ms", deserialize_with = "millis")]
    pub interval: Duration,
}

/// `[[node]]`: one world-map node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// `id`: unique node id.
    pub id: NodeId,
    /// `levels`: what streams for this node; they stream together, so the node is streamed
    /// when the slowest finishes. A remote node lists none: its server streams it.
    #[serde(default)]
    pub levels: Vec<LevelSpec>,
    /// `remote`: the node is hosted by another server of the fleet; a travel to it moves the
    /// players there (docs/spec/travel.md V1). Default false.
    #[serde(default)]
    pub remote: bool,
    /// `jitter_ms`: each streaming request takes up to this much longer, uniformly at random.
    #[serde(default, rename = "jitter_ms", deserialize_with = "millis")]
    pub jitter: Duration,
    /// `spawn_points_register_ms`: the node's spawn points register this long after its levels
    /// stream; until then a spawn there stays queued (docs/spec/transitions.md T2).
    #[serde(default, rename = "spawn_points_register_ms", deserialize_with = "millis")]
    pub spawn_points_register: Duration,
    /// `rooms`: if present the node is a dungeon whose rooms stream after its levels, and it is
    /// ready for spawns only when every room has streamed.
    #[serde(default)]
    pub rooms: Vec<LevelSpec>,
}

/// A streamable level and its simulated stream time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelSpec {
    /// `name`: level name, sent to clients.
    pub name: LevelName,
    /// `stream_ms`: how long streaming it takes on the server.
    #[serde(rename = "stream_ms", deserialize_with = "millis")]
    pub stream: Duration,
}

/// `[[hazard]]`: a damage-over-time source on one node (a finite-duration effect, so a respawn
/// strips the one that killed the player: docs/spec/transitions.md T13).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hazard {
    /// `node`: where the hazard is.
    pub node: NodeId,
    /// `effect`: the effect tag applied (declared in `config/tags.toml`).
    pub effect: GameplayTag,
    /// `damage_per_tick`: health removed at each tick.
    pub damage_per_tick: u32,
    /// `tick_ms`: time between ticks.
    #[serde(rename = "tick_ms", deserialize_with = "millis")]
    pub tick: Duration,
    /// `duration_ms`: the effect's finite duration.
    #[serde(rename = "duration_ms", deserialize_with = "millis")]
    pub duration: Duration,
    /// `exposure_ms`: every this often the hazard afflicts the next living pawn on its node
    /// that it is not already afflicting (round robin).
    #[serde(rename = "exposure_ms", deserialize_with = "millis")]
    pub exposure: Duration,
}

fn yes() -> bool {
    true
}

fn hundred() -> u32 {
    100
}

/// A [`WorldProblem`]: the dotted key at fault and what is wrong with it.
fn invalid(key: impl Into<String>, why: impl Into<String>) -> WorldProblem {
    WorldProblem { key: key.into(), why: why.into() }
}

impl WorldMap {
    /// Parses and checks world-map text (TOML), for tests and tools; the server reads its file
    /// with `gatehouse_server::config::load_world`, whose errors name the line.
    ///
    /// # Errors
    /// [`WorldProblem`]: the text is not a world map (`key` is empty then), or [`Self::check`]
    /// refuses it.
    pub fn from_toml(text: &str) -> Result<WorldMap, WorldProblem> {
        let world: WorldMap = toml::from_str(text)
            .map_err(|e| WorldProblem { key: String::new(), why: e.message().to_owned() })?;
        world.check()?;
        Ok(world)
    }

    /// Checks what the types alone cannot: unique ids, every reference declared, non-zero
    /// bounds.
    ///
    /// # Errors
    /// The first [`WorldProblem`] found: the dotted key at fault and what is wrong.
    pub fn check(&self) -> Result<(), WorldProblem> {
        let ids = self.check_nodes()?;
        self.check_start_node(&ids)?;
        self.check_travel(&ids)?;
        let preset_names = self.check_presets()?;
        self.check_new_player(&preset_names)?;
        self.check_hazards(&ids)
    }

    /// At least one node, each with a unique id and at least one level; gives the declared ids,
    /// against which the other checks resolve every node reference.
    fn check_nodes(&self) -> Result<HashSet<&NodeId>, WorldProblem> {
        if self.nodes.is_empty() {
            return Err(invalid("node", "declare at least one [[node]]"));
        }
        let mut ids = HashSet::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if !ids.insert(&node.id) {
                return Err(invalid(
                    format!("node[{i}].id"),
                    format!("{} is declared twice", node.id),
                ));
            }
            if node.remote && !(node.levels.is_empty() && node.rooms.is_empty()) {
                return Err(invalid(
                    format!("node[{i}].levels"),
                    "a remote node is streamed by the server hosting it: list no levels or rooms",
                ));
            }
            if !node.remote && node.levels.is_empty() {
                return Err(invalid(format!("node[{i}].levels"), "list at least one level"));
            }
        }
        Ok(ids)
    }

    /// `start_node` is a declared node.
    fn check_start_node(&self, ids: &HashSet<&NodeId>) -> Result<(), WorldProblem> {
        if !ids.contains(&self.start_node) {
            return Err(invalid(
                "start_node",
                format!("{} is not a declared node", self.start_node),
            ));
        }
        if self.is_remote(&self.start_node) {
            return Err(invalid(
                "start_node",
                format!("{} is remote: a server starts on a node it hosts", self.start_node),
            ));
        }
        Ok(())
    }

    /// `[travel]`, if present: a route of at least one node, every one declared, and an
    /// interval of at least 100 ms.
    fn check_travel(&self, ids: &HashSet<&NodeId>) -> Result<(), WorldProblem> {
        let Some(travel) = &self.travel else {
            return Ok(());
        };
        if travel.route.is_empty() {
            return Err(invalid("travel.route", "list at least one node"));
        }
        if let Some((i, id)) = travel.route.iter().enumerate().find(|(_, id)| !ids.contains(id)) {
            return Err(invalid(
                format!("travel.route[{i}]"),
                format!("{id} is not a declared node"),
            ));
        }
        if travel.interval < Duration::from_millis(100) {
            return Err(invalid("travel.interval_ms", "must be at least 100"));
        }
        Ok(())
    }

    /// Each `[[preset]]`: a unique name and declared kits; gives the names, which
    /// `default_preset` must be one of.
    fn check_presets(&self) -> Result<HashSet<&str>, WorldProblem> {
        let mut preset_names = HashSet::new();
        for (i, preset) in self.presets.iter().enumerate() {
            if !preset_names.insert(preset.name.as_str()) {
                return Err(invalid(
                    format!("preset[{i}].name"),
                    format!("{} is declared twice", preset.name),
                ));
            }
            if let Some(kit) = preset.kits.iter().find(|k| !k.is_declared()) {
                return Err(invalid(
                    format!("preset[{i}].kits"),
                    format!("{kit} is not a declared tag"),
                ));
            }
        }
        Ok(preset_names)
    }

    /// What a player starts a session with: declared `startup_kits`, a `default_preset` among
    /// `preset_names`, and a `max_health` of at least 1.
    fn check_new_player(&self, preset_names: &HashSet<&str>) -> Result<(), WorldProblem> {
        if let Some(kit) = self.startup_kits.iter().find(|k| !k.is_declared()) {
            return Err(invalid("startup_kits", format!("{kit} is not a declared tag")));
        }
        if !preset_names.contains(self.default_preset.as_str()) {
            return Err(invalid(
                "default_preset",
                format!("{} is not a declared [[preset]]", self.default_preset),
            ));
        }
        if self.max_health == 0 {
            return Err(invalid("max_health", "must be at least 1"));
        }
        Ok(())
    }

    /// Each `[[hazard]]`: on a declared node, applying a declared effect tag, with its tick,
    /// duration and exposure each above 0 (a hazard effect has a finite duration).
    fn check_hazards(&self, ids: &HashSet<&NodeId>) -> Result<(), WorldProblem> {
        for (i, hazard) in self.hazards.iter().enumerate() {
            let key = |k: &str| format!("hazard[{i}].{k}");
            if !ids.contains(&hazard.node) {
                return Err(invalid(
                    key("node"),
                    format!("{} is not a declared node", hazard.node),
                ));
            }
            if !hazard.effect.is_declared() {
                return Err(invalid(
                    key("effect"),
                    format!("{} is not a declared tag", hazard.effect),
                ));
            }
            if hazard.tick.is_zero() || hazard.duration.is_zero() || hazard.exposure.is_zero() {
                return Err(invalid(
                    key("tick_ms"),
                    "tick_ms, duration_ms and exposure_ms must be above 0 (a hazard effect has a finite duration)",
                ));
            }
        }
        Ok(())
    }

    /// Whether `id` is a node another server of the fleet hosts (`remote = true`,
    /// docs/spec/travel.md V1); false for an undeclared node.
    pub fn is_remote(&self, id: &NodeId) -> bool {
        self.node(id).is_some_and(|n| n.remote)
    }

    /// The node `id`, if declared.
    pub fn node(&self, id: &NodeId) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| &n.id == id)
    }

    /// The preset with this name.
    pub fn preset(&self, name: &str) -> Option<&PresetSpec> {
        self.presets.iter().find(|p| p.name == name)
    }

    /// The default preset (checked to exist at load).
    pub fn default_preset(&self) -> Option<&PresetSpec> {
        self.preset(&self.default_preset)
    }
}

impl NodeSpec {
    /// Whether this node is a dungeon (it has rooms).
    pub fn is_dungeon(&self) -> bool {
        !self.rooms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "start_node = \"a\"\ndefault_preset = \"V\"\n[[preset]]\nname = \"V\"\ncharacter_def = \"Vanguard\"\n[[node]]\nid = \"a\"\nlevels = [{ name = \"a_main\", stream_ms = 10 }]\n";

    fn problem(extra: &str) -> Option<WorldProblem> {
        WorldMap::from_toml(&format!("{MAP}{extra}")).err()
    }

    /// A remote node lists no levels nor rooms (its server streams it), a local one at least
    /// one level, and the start node is never remote (docs/spec/travel.md V1).
    #[test]
    fn a_remote_node_lists_no_levels_and_is_never_the_start() {
        let remote = "[[node]]\nid = \"isle\"\nremote = true\n";
        let world = WorldMap::from_toml(&format!("{MAP}{remote}")).unwrap();
        assert!(world.is_remote(&NodeId::new("isle").unwrap()));
        assert!(!world.is_remote(&NodeId::new("a").unwrap()));
        assert!(!world.is_remote(&NodeId::new("nowhere").unwrap()));
        let with_levels =
            "[[node]]\nid = \"isle\"\nremote = true\nlevels = [{ name = \"x\", stream_ms = 1 }]\n";
        assert_eq!(problem(with_levels).map(|p| p.key), Some("node[1].levels".to_owned()));
        let with_rooms =
            "[[node]]\nid = \"isle\"\nremote = true\nrooms = [{ name = \"x\", stream_ms = 1 }]\n";
        assert_eq!(problem(with_rooms).map(|p| p.key), Some("node[1].levels".to_owned()));
        assert_eq!(
            problem("[[node]]\nid = \"bare\"\n").map(|p| p.key),
            Some("node[1].levels".to_owned())
        );
        let start = MAP.replace("start_node = \"a\"", "start_node = \"isle\"");
        let err = WorldMap::from_toml(&format!("{start}{remote}")).unwrap_err();
        assert_eq!(err.key, "start_node");
    }

    /// A route travels at least every 100 ms; a hazard needs every one of its times above 0;
    /// the key at fault is named, and shown as `invalid KEY: WHY`.
    #[test]
    fn the_checks_bound_the_route_interval_and_every_hazard_time() {
        let route = |ms: u32| problem(&format!("[travel]\nroute = [\"a\"]\ninterval_ms = {ms}\n"));
        assert_eq!(route(100), None);
        let slow = route(99).map(|p| p.to_string());
        assert_eq!(slow.as_deref(), Some("invalid travel.interval_ms: must be at least 100"));
        let hazard = |tick: u32, duration: u32, exposure: u32| {
            problem(&format!(
                "[[hazard]]\nnode = \"a\"\neffect = \"Effect.DamageOverTime.Poison\"\ndamage_per_tick = 1\ntick_ms = {tick}\nduration_ms = {duration}\nexposure_ms = {exposure}\n"
            ))
        };
        assert_eq!(hazard(1, 1, 1), None);
        for (tick, duration, exposure) in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
            let refused = hazard(tick, duration, exposure).map(|p| p.key);
            assert_eq!(
                refused.as_deref(),
                Some("hazard[0].tick_ms"),
                "{tick} {duration} {exposure}"
            );
        }
    }

    /// Every `*_ms` key takes whole milliseconds or a string with a unit, and refuses anything
    /// else naming the accepted forms.
    #[test]
    fn durations_accept_human_units_and_integer_ms() {
        let interval = |value: &str| {
            let text = format!("{}[travel]\nroute = [\"a\"]\ninterval_ms = {value}\n", MAP);
            WorldMap::from_toml(&text).map(|w| w.travel.map(|t| t.interval))
        };
        let secs = |s: u64| Ok(Some(Duration::from_secs(s)));
        assert_eq!(interval("2000").map_err(|e| e.to_string()), secs(2));
        assert_eq!(interval("\"2s\"").map_err(|e| e.to_string()), secs(2));
        assert_eq!(interval("\"2000ms\"").map_err(|e| e.to_string()), secs(2));
        assert_eq!(interval("\"1m 30s\"").map_err(|e| e.to_string()), secs(90));
        for bad in ["\"soon\"", "\"10\"", "-5", "true"] {
            let err = interval(bad).map(|_| ()).unwrap_err().to_string();
            assert!(err.contains("\"250ms\"") && err.contains("whole number"), "{bad}: {err}");
        }
        let err = interval("\"2d\"").map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("one day"), "{err}");
    }

    /// A `*_ms` key refuses what is not a whole number of milliseconds, naming the forms it
    /// takes, as a `*_s` key refuses a fraction of a second: `"100us"` would read as 0.
    #[test]
    fn a_duration_below_a_millisecond_is_refused() {
        let interval = |value: &str| {
            let text = format!("{MAP}[travel]\nroute = [\"a\"]\ninterval_ms = {value}\n");
            WorldMap::from_toml(&text).map(|w| w.travel.map(|t| t.interval))
        };
        for bad in ["\"100us\"", "\"1s 500us\"", "\"1ns\""] {
            let err = interval(bad).map(|_| ()).unwrap_err().to_string();
            assert!(
                err.contains("whole milliseconds") && err.contains("\"250ms\""),
                "{bad}: {err}"
            );
            assert!(!err.contains("  "), "{bad}: {err}");
        }
        assert_eq!(
            interval("\"1s 500ms\"").map_err(|e| e.to_string()),
            Ok(Some(Duration::from_millis(1500)))
        );
    }

    /// `*_ms` keys take at most a day; `max_health` defaults to 100; presets and dungeons are
    /// found by what the map declares.
    #[test]
    fn durations_defaults_and_lookups_follow_the_map() {
        let day = |ms: u64| problem(&format!("[travel]\nroute = [\"a\"]\ninterval_ms = {ms}\n"));
        assert_eq!(day(MAX_MILLIS), None);
        assert!(day(MAX_MILLIS + 1).is_some_and(|p| p.why.contains("one day")));
        let world = WorldMap::from_toml(MAP).unwrap();
        assert_eq!(world.max_health, 100);
        assert_eq!(world.default_preset().map(|p| p.name.as_str()), Some("V"));
        assert!(world.preset("W").is_none());
        let node = world.node(&NodeId::new("a").unwrap()).unwrap();
        assert!(!node.is_dungeon());
        let dungeon = format!("{MAP}rooms = [{{ name = \"a_room\", stream_ms = 10 }}]\n");
        let world = WorldMap::from_toml(&dungeon).unwrap();
        assert!(world.node(&NodeId::new("a").unwrap()).unwrap().is_dungeon());
    }
}

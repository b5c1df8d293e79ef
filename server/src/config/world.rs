//! `config/world.toml`: the world map the world-map gate reads (docs/spec/transitions.md T1).
//! Level streaming on the server is simulated: a level takes the time given here.
//!
//! Nodes with the levels that stream for them and how long each takes, the spawn points that
//! register some time after a node's levels stream, dungeon rooms that stream after client
//! readiness, hazards that apply damage over time, and an optional travel route.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use gatehouse_protocol::{CharacterDef, LevelName, NodeId};
use gatehouse_tags::GameplayTag;
use serde::Deserialize;

use super::{ConfigError, Sources, ValueSource, millis};

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
    /// when the slowest finishes.
    pub levels: Vec<LevelSpec>,
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

impl WorldMap {
    /// Reads and checks a world file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file and key.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(path, &super::read_text(path)?)
    }

    /// Parses and checks world text as if read from `path`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file and key.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let world: WorldMap = super::parse_toml(path, text)?;
        world.check(&Sources::of_file(path, text))?;
        Ok(world)
    }

    fn check(&self, sources: &Sources) -> Result<(), ConfigError> {
        // The world file has no overrides: a refused value is the file's, at its key's line
        // (or its table's, for a key that is missing).
        let invalid = |key: String, why: String| {
            let table = key.rsplit_once('.').map_or("", |(table, _)| table);
            let line = sources.line(&key).or_else(|| sources.line(table));
            ConfigError::Invalid {
                origin: ValueSource::File { path: sources.file().to_owned(), line },
                key,
                expected: why,
                found: String::new(),
            }
        };
        if self.nodes.is_empty() {
            return Err(invalid("node".into(), "declare at least one [[node]]".into()));
        }
        let mut ids = HashSet::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if !ids.insert(&node.id) {
                return Err(invalid(
                    format!("node[{i}].id"),
                    format!("{} is declared twice", node.id),
                ));
            }
            if node.levels.is_empty() {
                return Err(invalid(format!("node[{i}].levels"), "list at least one level".into()));
            }
        }
        let known = |id: &NodeId| ids.contains(id);
        if !known(&self.start_node) {
            return Err(invalid(
                "start_node".into(),
                format!("{} is not a declared node", self.start_node),
            ));
        }
        if let Some(travel) = &self.travel {
            if travel.route.is_empty() {
                return Err(invalid("travel.route".into(), "list at least one node".into()));
            }
            if let Some((i, id)) = travel.route.iter().enumerate().find(|(_, id)| !known(id)) {
                return Err(invalid(
                    format!("travel.route[{i}]"),
                    format!("{id} is not a declared node"),
                ));
            }
            if travel.interval < Duration::from_millis(100) {
                return Err(invalid("travel.interval_ms".into(), "must be at least 100".into()));
            }
        }
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
        if let Some(kit) = self.startup_kits.iter().find(|k| !k.is_declared()) {
            return Err(invalid("startup_kits".into(), format!("{kit} is not a declared tag")));
        }
        if !preset_names.contains(self.default_preset.as_str()) {
            return Err(invalid(
                "default_preset".into(),
                format!("{} is not a declared [[preset]]", self.default_preset),
            ));
        }
        if self.max_health == 0 {
            return Err(invalid("max_health".into(), "must be at least 1".into()));
        }
        for (i, hazard) in self.hazards.iter().enumerate() {
            let key = |k: &str| format!("hazard[{i}].{k}");
            if !known(&hazard.node) {
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
                    "tick_ms, duration_ms and exposure_ms must be above 0 (a hazard effect has a finite duration)".into(),
                ));
            }
        }
        Ok(())
    }

    /// The node with this id.
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

    const MINIMAL: &str = r#"
start_node = "a"
default_preset = "P"
[[preset]]
name = "P"
character_def = "Vanguard"
[[node]]
id = "a"
levels = [{ name = "a_main", stream_ms = 10 }]
"#;

    #[test]
    fn a_minimal_world_parses_with_defaults() {
        let w = WorldMap::parse(Path::new("w.toml"), MINIMAL).unwrap();
        assert!(w.governs_session);
        assert!(w.travel.is_none());
        assert!(!w.rebalance_teams, "teams are rebalanced only when a world asks for it");
    }

    #[test]
    fn an_unknown_start_node_is_named() {
        let text = MINIMAL.replace("start_node = \"a\"", "start_node = \"b\"");
        let err = WorldMap::parse(Path::new("w.toml"), &text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "start_node"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_route_node_is_named_by_index() {
        let text = format!("{MINIMAL}\n[travel]\nroute = [\"a\", \"zz\"]\ninterval_ms = 1000\n");
        let err = WorldMap::parse(Path::new("w.toml"), &text).unwrap_err();
        assert!(err.to_string().contains("travel.route[1]"), "{err}");
    }

    #[test]
    fn an_unknown_hazard_effect_tag_is_refused_with_its_name() {
        let text = format!(
            "{MINIMAL}\n[[hazard]]\nnode = \"a\"\neffect = \"Effect.Nope\"\ndamage_per_tick = 1\ntick_ms = 1\nduration_ms = 1\nexposure_ms = 1\n"
        );
        let err = WorldMap::parse(Path::new("w.toml"), &text).unwrap_err().to_string();
        assert!(err.contains("Effect.Nope"), "{err}");
    }

    #[test]
    fn an_undeclared_startup_kit_is_refused_with_its_name() {
        let text = MINIMAL
            .replace("default_preset = \"P\"", "default_preset = \"P\"\nstartup_kits = [\"Kit\"]");
        let err = WorldMap::parse(Path::new("w.toml"), &text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "startup_kits"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_default_preset_is_named() {
        let text = MINIMAL.replace("default_preset = \"P\"", "default_preset = \"Q\"");
        let err = WorldMap::parse(Path::new("w.toml"), &text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "default_preset"),
            "{err}"
        );
    }

    #[test]
    fn the_shipped_worlds_parse() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
        for file in ["world.toml", "soak-world.toml"] {
            let path = root.join(file);
            WorldMap::load(&path).unwrap();
        }
    }

    /// The soak world rebalances teams at every travel (to exercise clients); the default world
    /// does not.
    #[test]
    fn only_the_soak_world_rebalances_teams() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
        assert!(!WorldMap::load(&root.join("world.toml")).unwrap().rebalance_teams);
        assert!(WorldMap::load(&root.join("soak-world.toml")).unwrap().rebalance_teams);
    }
}

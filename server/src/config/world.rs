//! `config/world.toml` read as the server reads it: the world map (`gatehouse_game::world`),
//! with a refused key named by its file and line.

use std::path::Path;

pub use gatehouse_game::world::{Hazard, LevelSpec, NodeSpec, PresetSpec, TravelRoute, WorldMap};

use super::{ConfigError, Sources, ValueSource};

/// Reads and checks a world file.
///
/// # Errors
/// [`ConfigError`] naming the file and key (and its line).
pub fn load_world(path: &Path) -> Result<WorldMap, ConfigError> {
    parse_world(path, &super::read_text(path)?)
}

/// Parses and checks world text as if read from `path`.
///
/// # Errors
/// [`ConfigError`] naming the file and key (and its line).
pub fn parse_world(path: &Path, text: &str) -> Result<WorldMap, ConfigError> {
    let world: WorldMap = super::parse_toml(path, text)?;
    world.check().map_err(|problem| {
        // The world file has no overrides: a refused value is the file's, at its key's line
        // (or its table's, for a key that is missing).
        let sources = Sources::of_file(path, text);
        let table = problem.key.rsplit_once('.').map_or("", |(table, _)| table);
        let line = sources.line(&problem.key).or_else(|| sources.line(table));
        ConfigError::Invalid {
            origin: ValueSource::File { path: sources.file().to_owned(), line },
            key: problem.key,
            expected: problem.why,
            found: String::new(),
        }
    })?;
    Ok(world)
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
        let w = parse_world(Path::new("w.toml"), MINIMAL).unwrap();
        assert!(w.governs_session);
        assert!(w.travel.is_none());
        assert!(!w.rebalance_teams, "teams are rebalanced only when a world asks for it");
    }

    #[test]
    fn an_unknown_start_node_is_named() {
        let text = MINIMAL.replace("start_node = \"a\"", "start_node = \"b\"");
        let err = parse_world(Path::new("w.toml"), &text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "start_node"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_route_node_is_named_by_index() {
        let text = format!("{MINIMAL}\n[travel]\nroute = [\"a\", \"zz\"]\ninterval_ms = 1000\n");
        let err = parse_world(Path::new("w.toml"), &text).unwrap_err();
        assert!(err.to_string().contains("travel.route[1]"), "{err}");
    }

    #[test]
    fn an_unknown_hazard_effect_tag_is_refused_with_its_name() {
        let text = format!(
            "{MINIMAL}\n[[hazard]]\nnode = \"a\"\neffect = \"Effect.Nope\"\ndamage_per_tick = 1\ntick_ms = 1\nduration_ms = 1\nexposure_ms = 1\n"
        );
        let err = parse_world(Path::new("w.toml"), &text).unwrap_err().to_string();
        assert!(err.contains("Effect.Nope"), "{err}");
    }

    #[test]
    fn an_undeclared_startup_kit_is_refused_with_its_name() {
        let text = MINIMAL
            .replace("default_preset = \"P\"", "default_preset = \"P\"\nstartup_kits = [\"Kit\"]");
        let err = parse_world(Path::new("w.toml"), &text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "startup_kits"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_default_preset_is_named() {
        let text = MINIMAL.replace("default_preset = \"P\"", "default_preset = \"Q\"");
        let err = parse_world(Path::new("w.toml"), &text).unwrap_err();
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
            load_world(&path).unwrap();
        }
    }

    /// The container soak's fleet (deploy/compose.yaml): server A's world is the soak world, word
    /// for word, with `isle` remote; server-b's stands on `isle` and marks A's nodes remote.
    #[test]
    fn the_container_soaks_worlds_are_the_soak_world_split_between_two_servers() {
        use gatehouse_protocol::NodeId;
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let soak = std::fs::read_to_string(root.join("config/soak-world.toml")).unwrap();
        let a_text = std::fs::read_to_string(root.join("deploy/server-a-world.toml")).unwrap();
        let body = &soak[soak.find("start_node").unwrap()..];
        assert!(
            a_text.contains(body),
            "deploy/server-a-world.toml no longer copies the soak world"
        );
        let a = load_world(&root.join("deploy/server-a-world.toml")).unwrap();
        let b = load_world(&root.join("deploy/server-b-world.toml")).unwrap();
        let node = |id: &str| NodeId::new(id).unwrap();
        assert!(a.is_remote(&node("isle")));
        assert!(!b.is_remote(&node("isle")));
        assert_eq!(b.start_node, node("isle"));
        for id in ["harbor", "marsh", "crypt"] {
            assert!(!a.is_remote(&node(id)) && b.is_remote(&node(id)), "{id}");
        }
    }

    /// The soak world rebalances teams at every travel (to exercise clients); the default world
    /// does not.
    #[test]
    fn only_the_soak_world_rebalances_teams() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
        assert!(!load_world(&root.join("world.toml")).unwrap().rebalance_teams);
        assert!(load_world(&root.join("soak-world.toml")).unwrap().rebalance_teams);
    }
}

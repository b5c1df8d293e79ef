//! The test worlds, in one home: each is a file in `tests/worlds/`, named here once, and every
//! test crate reads it from here (the game core's own unit tests, which cannot depend on this
//! crate, include the same file by path).

/// The game core's scenario world: two plain nodes and a dungeon (`tests/worlds/core.toml`).
pub const CORE: &str = include_str!("../worlds/core.toml");

/// Two plain nodes with a 400 ms boot, for the deterministic harness (`tests/worlds/plain.toml`).
pub const PLAIN: &str = include_str!("../worlds/plain.toml");

/// [`PLAIN`] with a burn on the start node that kills in two ticks
/// (`tests/worlds/hazardous.toml`).
pub const HAZARDOUS: &str = include_str!("../worlds/hazardous.toml");

/// A fleet's source for travel between servers: [`PLAIN`]'s nodes and `isle`, which
/// [`ISLE`]'s server hosts (`tests/worlds/hub.toml`).
pub const HUB: &str = include_str!("../worlds/hub.toml");

/// A fleet's destination: one node, `isle`, with `harbor` hosted by [`HUB`]'s server
/// (`tests/worlds/isle.toml`).
pub const ISLE: &str = include_str!("../worlds/isle.toml");

/// Two plain nodes with a 1.5 s boot, so clients started with the server log in during the boot
/// transition; for end-to-end tests (`tests/worlds/slow-boot.toml`).
pub const SLOW_BOOT: &str = include_str!("../worlds/slow-boot.toml");

/// Two plain nodes with a 1 s boot and 20 ms spawn points, for the binaries' tests
/// (`tests/worlds/quick.toml`).
pub const QUICK: &str = include_str!("../worlds/quick.toml");

/// The shipped load world (`config/load-world.toml`): two plain nodes with zero stream and
/// spawn-point times and a travel every 3 s, for scale runs.
pub const LOAD: &str = include_str!("../../config/load-world.toml");

/// The shipped soak world (`config/soak-world.toml`): every part of the spawn contract in
/// seconds.
pub const SOAK: &str = include_str!("../../config/soak-world.toml");

/// `world` with a travel route: a travel to each of `route` in turn, every `interval_ms`
/// milliseconds.
pub fn with_route(world: &str, route: &[&str], interval_ms: u64) -> String {
    let nodes: Vec<String> = route.iter().map(|n| format!("{n:?}")).collect();
    format!("{world}\n[travel]\nroute = [{}]\ninterval_ms = {interval_ms}\n", nodes.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_server::config::{WorldMap, parse_world};

    fn parses(name: &str, text: &str) -> WorldMap {
        parse_world(std::path::Path::new(name), text)
            .unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
    }

    #[test]
    fn every_test_world_parses() {
        for (name, text) in [
            ("core.toml", CORE),
            ("plain.toml", PLAIN),
            ("hazardous.toml", HAZARDOUS),
            ("hub.toml", HUB),
            ("isle.toml", ISLE),
            ("slow-boot.toml", SLOW_BOOT),
            ("quick.toml", QUICK),
            ("load-world.toml", LOAD),
            ("soak-world.toml", SOAK),
        ] {
            parses(name, text);
        }
    }

    #[test]
    fn a_route_added_to_a_world_travels_it() {
        let world = parses("quick+route", &with_route(QUICK, &["forest", "harbor"], 3000));
        let travel = world.travel.expect("a travel route");
        assert_eq!(travel.interval, std::time::Duration::from_millis(3000));
        let route: Vec<&str> = travel.route.iter().map(|n| n.as_str()).collect();
        assert_eq!(route, ["forest", "harbor"]);
    }
}

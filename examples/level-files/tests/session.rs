//! The example world with real clients: a session runs clean on levels read from disk; level
//! files are read, and refused by name.

use std::path::Path;
use std::time::Duration;

use gatehouse_example_level_files::{LevelFiles, read_level, run_session};
use gatehouse_protocol::{LevelName, NodeId};

fn example_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Four full clients for 7 s: the boot travel and two route travels stream from the level
/// files, every client is placed with no problem the simulator checks for, and the world was
/// told of every pawn, on nodes whose spawn points it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_on_levels_read_from_disk_is_clean() {
    let session = tokio::time::timeout(
        Duration::from_secs(60),
        run_session(example_dir(), 4, Duration::from_secs(7)),
    )
    .await
    .expect("the session ends within a minute")
    .expect("the session runs");
    let problems = session.report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{}", session.report);
    assert_eq!(session.report.clients_placed, 4, "{}", session.report);
    assert!(session.report.transitions_completed >= 2, "{}", session.report);
    let world = session.world;
    assert!(world.level_errors.is_empty(), "{:?}", world.level_errors);
    assert!(world.levels_read >= 4, "both nodes' two levels each: {world:?}");
    let harbor = &world.spawn_points[&NodeId::new("harbor").unwrap()];
    let harbor: Vec<&str> = harbor.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(harbor, ["pier", "crane"], "taken from harbor_docks; harbor_town has none");
    assert!(world.pawns_spawned >= 4, "{world:?}");
    assert!(world.pawns_moved >= 4, "a route travel moves every pawn: {world:?}");
    assert_eq!(world.pawns_destroyed, world.pawns_spawned - world.pawns.len(), "{world:?}");
}

/// A level file names its spawn points; one without any parses to none; a missing or broken
/// file is an error naming the file.
#[test]
fn level_files_are_read_and_refused_by_name() {
    let levels = example_dir().join("levels");
    let docks = read_level(&levels, &LevelName::new("harbor_docks").unwrap()).unwrap();
    assert_eq!(docks.spawn_point.len(), 2);
    assert_eq!(docks.spawn_point[0].position, [12.0, 0.0, 3.5]);
    let town = read_level(&levels, &LevelName::new("harbor_town").unwrap()).unwrap();
    assert!(town.spawn_point.is_empty());
    let missing = read_level(&levels, &LevelName::new("atlantis").unwrap()).unwrap_err();
    assert!(missing.to_string().contains("atlantis.toml"), "{missing}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.toml"), "[[spawn_point]]\nname = 3\n").unwrap();
    let broken = read_level(dir.path(), &LevelName::new("broken").unwrap()).unwrap_err();
    assert!(broken.to_string().contains("broken.toml"), "{broken}");
    let _ = LevelFiles::new(levels);
}

//! `gatehouse-server saves list` and `saves show PLAYER` as an operator runs them
//! (docs/operations.md, "Player saves").

use std::process::{Command, Output};

use gatehouse_protocol::NodeId;
use gatehouse_tests::process::{self, shipped_config, success_stdout as stdout};

use crate::backends::Backend;
use crate::suite::{character, read_only};

const SERVER: &str = env!("CARGO_BIN_EXE_gatehouse-server");

/// Runs `gatehouse-server saves ARGS` against `b`'s store: the embedded one through
/// `--data-dir`, PostgreSQL through `GATEHOUSE_STORE_URL`.
fn saves(b: &Backend, args: &[&str]) -> Output {
    let url = match b {
        Backend::Postgres { .. } => Some(b.url_text()),
        _ => None,
    };
    process::saves(SERVER.as_ref(), &b.data_dir(), url.as_deref(), args)
}

/// `saves show` prints a player's node, preset, inventory, equipment, handoff state and version.
pub(crate) async fn saves_show_prints_a_players_save(b: &Backend) {
    let store = b.open().await;
    let mut save = character("sim-0001");
    save.node = Some(NodeId::new("sunken-keep").unwrap());
    store.save_player(&save).await.unwrap();
    store.close().await;

    let text = stdout(&saves(b, &["show", "sim-0001"]));
    for line in [
        "player     sim-0001",
        "node       sunken-keep",
        "preset     character Vanguard",
        "kits       Kit.Composed.Vanguard, Kit.Composed.Medic",
        "inventory  rope x2, lantern-oil x40",
        "equipment  Effect.Equipment.Armor",
        "handoff    (none)",
        "version    1",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    if let Some(password) = b.password() {
        assert!(!text.contains(&password), "never the password: {text}");
    }

    let missing = saves(b, &["show", "nobody"]);
    assert_eq!(missing.status.code(), Some(1), "an unknown player is an error");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no save for player nobody"));
}

/// `saves list` prints one line per player and the session saves.
pub(crate) async fn saves_list_prints_every_player(b: &Backend) {
    let store = b.open().await;
    store.save_player(&character("sim-0000")).await.unwrap();
    store.save_player(&read_only("sim-0001")).await.unwrap();
    store
        .save_session(&gatehouse_server::store::SessionSave {
            session: "main".into(),
            node: NodeId::new("harbor").unwrap(),
            version: 0,
        })
        .await
        .unwrap();
    store.close().await;

    let text = stdout(&saves(b, &["list"]));
    let lines: Vec<&str> = text.lines().collect();
    match b {
        Backend::Embedded { .. } => assert!(lines[0].starts_with("store sqlite:"), "{text}"),
        Backend::Postgres { .. } => assert!(lines[0].starts_with("store postgres"), "{text}"),
    }
    if let Some(password) = b.password() {
        assert!(lines[0].contains(":***@"), "the password is masked: {text}");
        assert!(!text.contains(&password), "never the password: {text}");
    }
    assert!(lines[2].starts_with("sim-0000  harbor  character Vanguard"), "{text}");
    assert!(lines[3].starts_with("sim-0001  harbor  read-only preset Scout"), "{text}");
    assert!(text.contains("2 players\nsession main: node harbor, version 1\n"), "{text}");
}

/// A corrupt store stops `saves list` with exit code 1 and an error naming the store.
#[test]
fn a_corrupt_store_stops_saves_list_with_an_error_naming_it() {
    let b = Backend::embedded();
    let file = b.data_dir().join("saves.db");
    std::fs::write(&file, "garbage ".repeat(1000)).unwrap();
    let output = saves(&b, &["list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("sqlite:{}", file.display())), "{stderr}");
    assert!(stderr.contains("not a database"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `GATEHOUSE_STORE_URL` is checked at start like the config key.
#[test]
fn a_bad_gatehouse_store_url_is_named() {
    let output = Command::new(SERVER)
        .args(["saves", "list", "--config"])
        .arg(shipped_config())
        .env("GATEHOUSE_STORE_URL", "mysql://u:hunter2@h/db")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GATEHOUSE_STORE_URL") && stderr.contains("mysql://u:***@h/db"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// Reading never creates: `saves list` on a data dir with no store says so and exits 1,
/// instead of creating an empty store there and listing nothing.
#[test]
fn saves_list_on_a_data_dir_without_a_store_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("dta");
    let output = Command::new(SERVER)
        .args(["saves", "list", "--config"])
        .arg(shipped_config())
        .arg("--data-dir")
        .arg(&typo)
        .env_remove("GATEHOUSE_STORE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no store at"), "{stderr}");
    assert!(!typo.exists(), "nothing was created");
}

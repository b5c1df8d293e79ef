//! `gatehouse-server saves list|show PLAYER`: what the player store holds, as an operator reads
//! it. Opening the store runs its migrations, as the server would; reading never creates one.

use std::path::PathBuf;

use gatehouse_protocol::PlayerId;

use crate::config::ServerConfig;
use crate::store::{
    HandoffDuration, HandoffState, PlayerSave, Preset, SessionSave, Store, StoreError,
};

/// What to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavesQuery {
    /// Every saved player, one aligned line each, then the session saves.
    List,
    /// Every field of one player's save; the id is the session token's `uid`, as typed.
    Show(String),
}

/// Why the saves could not be printed. Each message names the store or the player at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SavesError {
    /// The embedded store's file does not exist (a mistyped data dir would otherwise show an
    /// empty new store).
    #[error("no store at {} (check --data-dir, or `data_dir` and `[store] url` in the config)", .0.display())]
    NoStore(PathBuf),
    /// The store could not be opened or read (the message names its URL, password redacted).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The id is not a valid player id.
    #[error("invalid player id {id:?}: {why}")]
    BadPlayer {
        /// The id as typed.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// The store holds no save for that player.
    #[error("no save for player {player} in {location}")]
    NoSave {
        /// The player.
        player: PlayerId,
        /// The store, as it describes itself.
        location: String,
    },
    /// The async runtime the store needs could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Opens the store `config` names and renders what `query` asks for, as text for stdout.
///
/// # Errors
/// [`SavesError`]: no embedded store there, the store fails, a bad player id, or no save.
pub fn saves(config: &ServerConfig, query: &SavesQuery) -> Result<String, SavesError> {
    if let Some(path) = config.store.url.embedded_path(&config.data_dir)
        && !path.exists()
    {
        return Err(SavesError::NoStore(path));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(SavesError::Runtime)?;
    runtime.block_on(async {
        let store = Store::open(&config.store.url, &config.data_dir).await?;
        let text = read(&store, query).await;
        store.close().await;
        text
    })
}

/// The text `query` asks for, from an open store.
async fn read(store: &Store, query: &SavesQuery) -> Result<String, SavesError> {
    match query {
        SavesQuery::List => {
            let players = store.list_players().await?;
            let sessions = store.list_sessions().await?;
            Ok(render_list(store.location(), &players, &sessions))
        }
        SavesQuery::Show(player) => {
            let id = PlayerId::new(player.clone())
                .map_err(|e| SavesError::BadPlayer { id: player.clone(), why: e.to_string() })?;
            match store.load_player(&id).await? {
                Some(save) => Ok(render_save(store.location(), &save)),
                None => Err(SavesError::NoSave { player: id, location: store.location().into() }),
            }
        }
    }
}

/// `saves list`: one line per player, then the sessions.
fn render_list(location: &str, players: &[PlayerSave], sessions: &[SessionSave]) -> String {
    let rows: Vec<[String; 5]> = players
        .iter()
        .map(|p| {
            [
                p.player.to_string(),
                node_text(p),
                preset_text(&p.preset),
                p.inventory.len().to_string(),
                p.version.to_string(),
            ]
        })
        .collect();
    let header = ["PLAYER", "NODE", "PRESET", "ITEMS", "VERSION"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = format!("store {location}\n");
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> =
            row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let noun = if players.len() == 1 { "player" } else { "players" };
    out.push_str(&format!("{} {noun}\n", players.len()));
    for s in sessions {
        out.push_str(&format!("session {}: node {}, version {}\n", s.session, s.node, s.version));
    }
    out
}

/// `saves show PLAYER`: every field of one save.
fn render_save(location: &str, save: &PlayerSave) -> String {
    let inventory = if save.inventory.is_empty() {
        "(empty)".to_owned()
    } else {
        save.inventory
            .iter()
            .map(|i| format!("{} x{}", i.item, i.count))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let kits = match &save.preset {
        Preset::Character { kits, .. } => tags_text(kits),
        Preset::ReadOnly { .. } => "(from the preset catalog)".to_owned(),
    };
    format!(
        "player     {}\nnode       {}\npreset     {}\nkits       {kits}\ninventory  {inventory}\nequipment  {}\nhandoff    {}\nheld by    {}\nversion    {}\nstore      {location}\n",
        save.player,
        node_text(save),
        preset_text(&save.preset),
        tags_text(&save.equipment),
        save.handoff.as_ref().map_or_else(|| "(none)".to_owned(), |state| handoff_text(state)),
        // docs/spec/travel.md V17: the server whose saves of it the store takes.
        save.holder.as_ref().map_or_else(|| "(none)".to_owned(), ToString::to_string),
        save.version,
    )
}

/// A handoff state on one line: team, health, state tags, effects with the time they have
/// left, and the kits granted.
fn handoff_text(state: &HandoffState) -> String {
    let tags: Vec<_> = state.tags.iter().copied().collect();
    let effects = if state.effects.is_empty() {
        "(none)".to_owned()
    } else {
        state
            .effects
            .iter()
            .map(|e| match e.duration {
                HandoffDuration::Infinite => e.tag.name().to_owned(),
                HandoffDuration::Finite { left_ms, .. } => {
                    format!("{} ({left_ms} ms left)", e.tag.name())
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let granted: Vec<_> = state.kits.granted.iter().copied().collect();
    format!(
        "team {}, health {}; tags {}; effects {effects}; kits granted {}",
        state.team.0,
        state.health,
        tags_text(&tags),
        tags_text(&granted),
    )
}

fn node_text(save: &PlayerSave) -> String {
    save.node.as_ref().map_or_else(|| "(none)".to_owned(), ToString::to_string)
}

fn preset_text(preset: &Preset) -> String {
    match preset {
        Preset::Character { character_def, .. } => format!("character {character_def}"),
        Preset::ReadOnly { name } => format!("read-only preset {name}"),
    }
}

fn tags_text(tags: &[gatehouse_tags::GameplayTag]) -> String {
    if tags.is_empty() {
        return "(none)".to_owned();
    }
    tags.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::{CharacterDef, NodeId};
    use gatehouse_tags::GameplayTag;

    use super::*;
    use crate::store::InventoryItem;

    fn character() -> PlayerSave {
        PlayerSave {
            player: PlayerId::new("sim-0001").unwrap(),
            node: Some(NodeId::new("harbor").unwrap()),
            preset: Preset::Character {
                character_def: CharacterDef::new("Vanguard").unwrap(),
                kits: vec![GameplayTag::parse("Kit.Composed.Vanguard").unwrap()],
            },
            inventory: vec![InventoryItem { item: "rope".into(), count: 2 }],
            equipment: vec![GameplayTag::parse("Effect.Equipment.Armor").unwrap()],
            version: 3,
            handoff: None,
            holder: None,
        }
    }

    #[test]
    fn show_prints_every_field() {
        let text = render_save("sqlite:data/saves.db", &character());
        for line in [
            "player     sim-0001",
            "node       harbor",
            "preset     character Vanguard",
            "kits       Kit.Composed.Vanguard",
            "inventory  rope x2",
            "equipment  Effect.Equipment.Armor",
            "handoff    (none)",
            "held by    (none)",
            "version    3",
            "store      sqlite:data/saves.db",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    /// docs/spec/travel.md V17: the server that wrote the row.
    #[test]
    fn show_prints_the_server_holding_the_save() {
        let holder = gatehouse_protocol::ServerId::new("hub-1").unwrap();
        let save = PlayerSave { holder: Some(holder), ..character() };
        let text = render_save("s", &save);
        assert!(text.contains("held by    hub-1\n"), "{text}");
    }

    #[test]
    fn show_prints_a_handoff_state_on_one_line() {
        let save = PlayerSave { handoff: Some(Box::new(HandoffState::sample())), ..character() };
        let text = render_save("s", &save);
        let line = "handoff    team 2, health 0; tags State.Dead; effects Effect.Equipment.Armor, \
                    Effect.DamageOverTime.Poison (1250 ms left); \
                    kits granted Kit.Composed.Vanguard, Kit.Startup.Movement";
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    #[test]
    fn list_prints_one_aligned_line_per_player_then_the_sessions() {
        let mut scout = character();
        scout.player = PlayerId::new("p2").unwrap();
        scout.node = None;
        scout.preset = Preset::ReadOnly { name: "Scout".into() };
        let session = SessionSave {
            session: "main".into(),
            node: NodeId::new("harbor").unwrap(),
            version: 4,
        };
        let text = render_list("s", &[character(), scout], &[session]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "store s");
        assert!(lines[1].starts_with("PLAYER    NODE    PRESET"), "{text}");
        assert!(lines[2].starts_with("sim-0001  harbor  character Vanguard"), "{text}");
        assert!(lines[3].starts_with("p2        (none)  read-only preset Scout"), "{text}");
        assert_eq!(lines[4], "2 players");
        assert_eq!(lines[5], "session main: node harbor, version 4");
    }

    #[test]
    fn reading_a_missing_embedded_store_creates_nothing_and_names_the_path() {
        let dir = std::env::temp_dir().join(format!("gatehouse-saves-{}", std::process::id()));
        let mut config = ServerConfig::default();
        config.data_dir = dir.join("nowhere");
        let error = saves(&config, &SavesQuery::List).unwrap_err();
        assert!(matches!(error, SavesError::NoStore(_)), "{error}");
        assert!(error.to_string().contains("nowhere"), "{error}");
        assert!(!config.data_dir.exists(), "reading must not create the store");
    }

    /// Against a real embedded store: `list` shows the saved player and the session, `show`
    /// every field of one save, and a player never saved or a bad id is an error naming it.
    #[test]
    fn saves_are_read_from_the_store_the_config_names() {
        let dir = std::env::temp_dir().join(format!("gatehouse-saves-read-{}", std::process::id()));
        let mut config = ServerConfig::default();
        config.data_dir = dir.clone();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let store = Store::open(&config.store.url, &config.data_dir).await.unwrap();
            let save = PlayerSave { version: 0, ..character() };
            store.save_player(&save).await.unwrap();
            let session = SessionSave {
                session: "main".into(),
                node: NodeId::new("harbor").unwrap(),
                version: 0,
            };
            store.save_session(&session).await.unwrap();
            store.close().await;
        });
        let list = saves(&config, &SavesQuery::List).unwrap();
        assert!(list.contains("sim-0001  harbor  character Vanguard"), "{list}");
        assert!(
            list.contains("1 player\n") && list.contains("session main: node harbor"),
            "{list}"
        );
        let show = saves(&config, &SavesQuery::Show("sim-0001".into())).unwrap();
        assert!(show.contains("inventory  rope x2"), "{show}");
        let missing = saves(&config, &SavesQuery::Show("nobody".into())).unwrap_err();
        assert!(
            matches!(missing, SavesError::NoSave { .. }) && missing.to_string().contains("nobody")
        );
        let bad = saves(&config, &SavesQuery::Show("bad id!".into())).unwrap_err();
        assert!(matches!(bad, SavesError::BadPlayer { .. }), "{bad}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

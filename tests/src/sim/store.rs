//! The store, in memory: player saves and the session save, answered after a seeded latency.
//!
//! A model of the store worker's contract only (`Output::LoadPlayer` and `Output::LoadSession`
//! are always answered; saves of one player apply in order and a later load sees them; every
//! save bumps the version). Conflicts between server processes and write failures are not
//! modelled: one simulated server owns the store.

use std::collections::BTreeMap;

use gatehouse_protocol::{NodeId, PlayerId};
use gatehouse_server::store::{LoadOutcome, PlayerSave, SessionSave};

/// The session save's name in the simulated store.
const SESSION: &str = "sim";

/// Saves the simulated server wrote, or a test put there first.
#[derive(Debug, Default)]
pub(crate) struct MemoryStore {
    players: BTreeMap<PlayerId, PlayerSave>,
    session: Option<SessionSave>,
    /// Player saves written by the server, in order.
    pub(crate) player_saves: u64,
}

impl MemoryStore {
    /// What a load of `player` finds now.
    pub(crate) fn load_player(&self, player: &PlayerId) -> LoadOutcome<PlayerSave> {
        match self.players.get(player) {
            Some(save) => LoadOutcome::Found(save.clone()),
            None => LoadOutcome::NotFound,
        }
    }

    /// What the session load finds now.
    pub(crate) fn load_session(&self) -> LoadOutcome<SessionSave> {
        match &self.session {
            Some(save) => LoadOutcome::Found(save.clone()),
            None => LoadOutcome::NotFound,
        }
    }

    /// Writes a player save made by the server: stored with its version bumped.
    pub(crate) fn save_player(&mut self, save: PlayerSave) {
        self.player_saves += 1;
        let version = save.version + 1;
        self.players.insert(save.player.clone(), PlayerSave { version, ..save });
    }

    /// Writes the session save made by the server.
    pub(crate) fn save_session(&mut self, node: NodeId, version: u64) {
        self.session =
            Some(SessionSave { session: SESSION.to_owned(), node, version: version + 1 });
    }

    /// Puts a save in place as if an earlier session had written it.
    pub(crate) fn put_player(&mut self, save: PlayerSave) {
        self.players.insert(save.player.clone(), save);
    }

    /// The stored save of `player`.
    pub(crate) fn player(&self, player: &PlayerId) -> Option<&PlayerSave> {
        self.players.get(player)
    }

    /// The stored session save.
    pub(crate) fn session(&self) -> Option<&SessionSave> {
        self.session.as_ref()
    }
}

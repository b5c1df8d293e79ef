//! The store, in memory: player saves and each server's session save, one store every simulated
//! server shares, as a fleet's servers share one PostgreSQL store (docs/spec/travel.md V12).
//!
//! A model of the store worker's contract (`server/src/store/worker/`), per server as each
//! server has a worker of its own:
//! - a load is always answered, and sees every save written before it;
//! - a player save (an ordinary one, or a travel's handoff save) is written only if the stored
//!   version is the one it is based on, after rebasing: a save based on a version this server's
//!   worker replaced itself is based on the newest it wrote instead (the game saves again before
//!   hearing back). A save based on a version another server wrote conflicts and is not written;
//! - a claim or a recall (docs/spec/travel.md V5) is written only if the stored version is
//!   exactly its own, never rebased: `Won` at the next version, else `Lost`. One won chains
//!   this server's later saves; one lost teaches nothing.
//!
//! Write failures are not modelled: every write is decided when the server puts it out; the
//! simulation answers after the store's latency. Owns the saves and each server's memory of
//! what it wrote; knows nothing of time.

use std::collections::BTreeMap;

use gatehouse_protocol::{NodeId, PlayerId};
use gatehouse_server::game::HandoverOutcome;
use gatehouse_server::store::{LoadOutcome, PlayerSave, SessionSave};

/// The session save's name of the first simulated server; the others' are numbered after it.
const SESSION: &str = "sim";

/// Versions one server's worker wrote for one player, consecutively: `low` was the base of the
/// first save of the chain (or the version a load saw), `latest` is stored now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lineage {
    low: u64,
    latest: u64,
}

/// Saves the simulated servers wrote, or a test put there first.
#[derive(Debug, Default)]
pub(crate) struct MemoryStore {
    players: BTreeMap<PlayerId, PlayerSave>,
    /// Each server's session save, by the server's index.
    sessions: BTreeMap<usize, SessionSave>,
    /// What each server's worker wrote of each player, by (server, player).
    lineages: BTreeMap<(usize, PlayerId), Lineage>,
    /// Player saves written (handoff saves, claims and recalls included), in order.
    pub(crate) player_saves: u64,
    /// Player saves refused because another server wrote the player since their base.
    pub(crate) conflicts: u64,
}

impl MemoryStore {
    /// What a load of `player` by `server` finds now; that server's worker learns its version.
    pub(crate) fn load_player(
        &mut self,
        server: usize,
        player: &PlayerId,
    ) -> LoadOutcome<PlayerSave> {
        let found = self.players.get(player).cloned();
        let seen = found.as_ref().map_or(0, |s| s.version);
        let key = (server, player.clone());
        match self.lineages.get(&key) {
            Some(l) if l.latest == seen => {}
            _ => {
                self.lineages.insert(key, Lineage { low: seen, latest: seen });
            }
        }
        found.map_or(LoadOutcome::NotFound, LoadOutcome::Found)
    }

    /// What `server`'s session load finds now.
    pub(crate) fn load_session(&self, server: usize) -> LoadOutcome<SessionSave> {
        match self.sessions.get(&server) {
            Some(save) => LoadOutcome::Found(save.clone()),
            None => LoadOutcome::NotFound,
        }
    }

    /// Writes a player save `server` made, rebased onto what its worker wrote: the version
    /// stored, or none when another server wrote the player since (a conflict).
    pub(crate) fn save_player(&mut self, server: usize, save: PlayerSave) -> Option<u64> {
        let key = (server, save.player.clone());
        let mut base = save.version;
        if let Some(l) = self.lineages.get(&key)
            && l.low <= base
            && base < l.latest
        {
            base = l.latest;
        }
        if self.stored_version(&save.player) != base {
            self.conflicts += 1;
            return None;
        }
        Some(self.write(key, base, save))
    }

    /// A claim or a recall `server` made: written only at exactly `save.version`.
    pub(crate) fn handover(&mut self, server: usize, save: PlayerSave) -> HandoverOutcome {
        let base = save.version;
        if self.stored_version(&save.player) != base {
            return HandoverOutcome::Lost;
        }
        let key = (server, save.player.clone());
        HandoverOutcome::Won { version: self.write(key, base, save) }
    }

    /// Writes `save` at `base + 1` and chains `key`'s lineage onto it.
    fn write(&mut self, key: (usize, PlayerId), base: u64, save: PlayerSave) -> u64 {
        self.player_saves += 1;
        let version = base + 1;
        let lineage = match self.lineages.get(&key) {
            Some(l) if l.latest == base => Lineage { low: l.low, latest: version },
            _ => Lineage { low: base, latest: version },
        };
        self.lineages.insert(key, lineage);
        self.players.insert(save.player.clone(), PlayerSave { version, ..save });
        version
    }

    fn stored_version(&self, player: &PlayerId) -> u64 {
        self.players.get(player).map_or(0, |s| s.version)
    }

    /// Writes the session save `server` made: it stands on `node`.
    pub(crate) fn save_session(&mut self, server: usize, node: NodeId, version: u64) {
        let session = match server {
            0 => SESSION.to_owned(),
            n => format!("{SESSION}-{n}"),
        };
        self.sessions.insert(server, SessionSave { session, node, version: version + 1 });
    }

    /// Puts a save in place as if an earlier session had written it.
    pub(crate) fn put_player(&mut self, save: PlayerSave) {
        self.players.insert(save.player.clone(), save);
    }

    /// The stored save of `player`.
    pub(crate) fn player(&self, player: &PlayerId) -> Option<&PlayerSave> {
        self.players.get(player)
    }

    /// The stored session save of `server`.
    pub(crate) fn session(&self, server: usize) -> Option<&SessionSave> {
        self.sessions.get(&server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_server::model::Preset;

    fn save(version: u64) -> PlayerSave {
        PlayerSave {
            player: PlayerId::new("ann").unwrap(),
            node: None,
            preset: Preset::ReadOnly { name: "Vanguard".into() },
            inventory: Vec::new(),
            equipment: Vec::new(),
            version,
            handoff: None,
            holder: None,
        }
    }

    /// A server's saves chain onto each other (it saves again before hearing back); another
    /// server's write makes them conflict, as the worker's rebasing does.
    #[test]
    fn saves_chain_per_server_and_conflict_past_another_servers_write() {
        let mut store = MemoryStore::default();
        let ann = PlayerId::new("ann").unwrap();
        assert_eq!(store.load_player(0, &ann), LoadOutcome::NotFound);
        assert_eq!(store.save_player(0, save(0)), Some(1));
        assert_eq!(store.save_player(0, save(0)), Some(2), "rebased onto its own save");
        assert!(matches!(store.load_player(1, &ann), LoadOutcome::Found(s) if s.version == 2));
        assert_eq!(store.handover(1, save(2)), HandoverOutcome::Won { version: 3 });
        assert_eq!(store.save_player(0, save(0)), None, "another server wrote it since");
        assert_eq!(store.conflicts, 1);
        assert_eq!(store.save_player(1, save(2)), Some(4), "the claim chains its server's saves");
    }

    /// Of a claim and a recall at one version, the first is written and the second lost.
    #[test]
    fn a_handover_is_written_only_at_exactly_its_version() {
        let mut store = MemoryStore::default();
        store.put_player(save(5));
        assert_eq!(store.handover(1, save(5)), HandoverOutcome::Won { version: 6 });
        assert_eq!(store.handover(0, save(5)), HandoverOutcome::Lost);
        assert_eq!(store.player(&PlayerId::new("ann").unwrap()).map(|s| s.version), Some(6));
    }
}

//! The replicated world as clients know it: every replicated change the core broadcast,
//! applied as a client applies it (docs/protocol.md 4.4, 4.5).
//!
//! The core decides; clients learn of it only through those changes. So what a client that was
//! always there knows is the changes applied in order, and a newcomer can be greeted with
//! exactly that, as `WorldSnapshot`s, without asking the core. A shell keeps one [`KnownWorld`],
//! applies every replicated change it carries, and sends [`KnownWorld::messages`] after each
//! `Welcome`; the server's carrier applies a replication interval's changes when it sends them
//! and builds the messages once per interval, for every newcomer of it.

use std::collections::BTreeMap;

use gatehouse_protocol::{
    PawnId, PawnView, PlayerId, PlayerStateView, ReplicatedChange, ServerMessage, SnapshotBuilder,
    SnapshotEntry,
};
use gatehouse_tags::GameplayTag;

/// One player state as clients know it.
#[derive(Debug)]
struct Known {
    view: PlayerStateView,
    /// Every tag its ability state holds (empty: none announced).
    tags: Vec<GameplayTag>,
    /// Its health, once a `HealthChanged` told it (none: the world's maximum).
    health: Option<u32>,
}

/// Every player state and pawn clients have been told of, in id order.
#[derive(Debug, Default)]
pub struct KnownWorld {
    players: BTreeMap<PlayerId, Known>,
    pawns: BTreeMap<PawnId, PawnView>,
    /// The pawns of each player, by id.
    owned: BTreeMap<PlayerId, Vec<PawnId>>,
}

impl KnownWorld {
    /// Applies one change, as a client does (docs/protocol.md 5: a tag or health change for a
    /// player nobody was told of, or a death or teleport of an unknown pawn, changes nothing).
    pub fn apply(&mut self, change: &ReplicatedChange) {
        match change {
            ReplicatedChange::PlayerStateUpdated(view) => {
                match self.players.get_mut(&view.player_id) {
                    Some(known) => known.view = view.clone(),
                    None => {
                        let known = Known { view: view.clone(), tags: Vec::new(), health: None };
                        self.players.insert(view.player_id.clone(), known);
                    }
                }
            }
            ReplicatedChange::PlayerLeft { player_id } => {
                self.players.remove(player_id);
            }
            ReplicatedChange::PawnSpawned(view) => {
                self.owned.entry(view.owner.clone()).or_default().push(view.pawn_id);
                self.pawns.insert(view.pawn_id, view.clone());
            }
            ReplicatedChange::PawnDestroyed { pawn_id } => self.destroy(*pawn_id),
            ReplicatedChange::AbilityTagsChanged { player_id, tags } => {
                if let Some(known) = self.players.get_mut(player_id) {
                    known.tags = tags.clone();
                }
            }
            ReplicatedChange::HealthChanged { player_id, health } => {
                if let Some(known) = self.players.get_mut(player_id) {
                    known.health = Some(*health);
                }
            }
            ReplicatedChange::PawnDied { pawn_id } => {
                if let Some(pawn) = self.pawns.get_mut(pawn_id) {
                    pawn.alive = false;
                }
            }
            ReplicatedChange::PawnsTeleported { node, pawn_ids } => {
                for id in pawn_ids.iter() {
                    if let Some(pawn) = self.pawns.get_mut(&id) {
                        pawn.node = node.clone();
                    }
                }
            }
        }
    }

    fn destroy(&mut self, id: PawnId) {
        let Some(pawn) = self.pawns.remove(&id) else { return };
        if let Some(owned) = self.owned.get_mut(&pawn.owner) {
            owned.retain(|&p| p != id);
            if owned.is_empty() {
                self.owned.remove(&pawn.owner);
            }
        }
    }

    /// How many player states clients know of.
    pub fn player_count(&self) -> usize {
        self.players.len()
    }

    /// What tells a newcomer this world: `WorldSnapshot`s of every player with its tags,
    /// health and pawns, each message within `max_frame_len` bytes (docs/protocol.md 4.5); then
    /// any pawn whose owner is not known, on its own (`PawnSpawned`, and `PawnDied` when dead;
    /// none today: a leaving player's pawns go with it). Nothing for an empty world.
    pub fn messages(&self, max_frame_len: usize) -> Vec<ServerMessage> {
        let mut builder = SnapshotBuilder::new(max_frame_len);
        let mut pawns = Vec::new();
        for (id, known) in &self.players {
            pawns.clear();
            let owned = self.owned.get(id).into_iter().flatten();
            pawns.extend(owned.filter_map(|pawn| self.pawns.get(pawn)).cloned());
            builder.add(SnapshotEntry {
                player: &known.view,
                tags: &known.tags,
                health: known.health,
                pawns: &pawns,
            });
        }
        let mut messages: Vec<ServerMessage> = builder
            .finish()
            .into_iter()
            .map(|snapshot| ServerMessage::WorldSnapshot(Box::new(snapshot)))
            .collect();
        for pawn in self.pawns.values().filter(|p| !self.players.contains_key(&p.owner)) {
            messages.push(ServerMessage::PawnSpawned(pawn.clone()));
            if !pawn.alive {
                messages.push(ServerMessage::PawnDied { pawn_id: pawn.pawn_id });
            }
        }
        messages
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed expectation is a failed test.
    #![allow(clippy::unwrap_used)]

    use gatehouse_protocol::{CharacterDef, NodeId, PawnIdRuns, TeamId};

    use super::*;

    fn pid(name: &str) -> PlayerId {
        PlayerId::new(name).unwrap()
    }

    fn state(name: &str) -> ReplicatedChange {
        ReplicatedChange::PlayerStateUpdated(PlayerStateView {
            player_id: pid(name),
            team: Some(TeamId(1)),
            character_def: Some(CharacterDef::new("Vanguard").unwrap()),
        })
    }

    fn spawned(id: u64, owner: &str) -> ReplicatedChange {
        ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(id),
            owner: pid(owner),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        })
    }

    /// The messages a newcomer is greeted with, each snapshot expanded.
    fn greeting(known: &KnownWorld) -> Vec<ServerMessage> {
        known
            .messages(65_536)
            .into_iter()
            .flat_map(|m| match m {
                ServerMessage::WorldSnapshot(s) => s.messages().collect(),
                other => vec![other],
            })
            .collect()
    }

    /// Teleports move, destroyed pawns and departed players go, and a player who comes back
    /// starts with no tags and full health until told otherwise: what a client that saw every
    /// change holds.
    #[test]
    fn the_known_world_is_every_change_applied_as_a_client_applies_it() {
        let mut known = KnownWorld::default();
        let changes = [
            state("a"),
            state("b"),
            spawned(1, "a"),
            spawned(2, "b"),
            ReplicatedChange::HealthChanged { player_id: pid("b"), health: 5 },
            ReplicatedChange::PawnsTeleported {
                node: NodeId::new("forest").unwrap(),
                pawn_ids: PawnIdRuns::from_ids([PawnId(1)]),
            },
            ReplicatedChange::PawnDestroyed { pawn_id: PawnId(2) },
            ReplicatedChange::PlayerLeft { player_id: pid("b") },
            state("b"),
        ];
        for change in &changes {
            known.apply(change);
        }
        let names: Vec<_> = greeting(&known).iter().map(ServerMessage::name).collect();
        assert_eq!(names, ["PlayerStateUpdated", "PlayerStateUpdated", "PawnSpawned"]);
        let ServerMessage::PawnSpawned(pawn) = &greeting(&known)[2] else { unreachable!() };
        assert_eq!((pawn.pawn_id, pawn.node.as_str()), (PawnId(1), "forest"));
        assert_eq!(known.player_count(), 2);
    }

    /// A destroyed pawn leaves nothing behind: its owner's list forgets it, and a player whose
    /// pawns are all gone keeps no list (what the world keeps does not grow with the deaths).
    #[test]
    fn a_destroyed_pawn_leaves_nothing_behind() {
        let mut known = KnownWorld::default();
        known.apply(&state("a"));
        known.apply(&spawned(1, "a"));
        known.apply(&spawned(2, "a"));
        known.apply(&ReplicatedChange::PawnDestroyed { pawn_id: PawnId(1) });
        assert_eq!(known.owned.get(&pid("a")), Some(&vec![PawnId(2)]));
        known.apply(&ReplicatedChange::PawnDestroyed { pawn_id: PawnId(2) });
        assert!(known.owned.is_empty() && known.pawns.is_empty());
    }

    /// A pawn whose owner clients were never told of still reaches a newcomer, on its own.
    #[test]
    fn a_pawn_without_a_known_owner_is_greeted_on_its_own() {
        let mut known = KnownWorld::default();
        known.apply(&spawned(7, "ghost"));
        known.apply(&ReplicatedChange::PawnDied { pawn_id: PawnId(7) });
        let names: Vec<_> = known.messages(65_536).iter().map(ServerMessage::name).collect();
        assert_eq!(names, ["PawnSpawned", "PawnDied"]);
    }
}

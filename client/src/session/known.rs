//! What a session knows of one server it plays on, or played on and may come back to
//! ([`Server`]): its link, the player it welcomed, the node, the own pawns, and the world as the
//! session told it to the game ([`KnownWorld`]).
//!
//! A move keeps the server it leaves here for as long as that server may still take the player
//! back (docs/spec/travel.md V3, V7): its changes go on being recorded, unseen by the game, so
//! that a move that reached the destination and then failed gives the game the world it comes
//! back to as it stands, not as it was left. Nothing here decides anything of the protocol.

use std::collections::BTreeMap;

use gatehouse_protocol::{NodeId, PawnId, PawnView, PlayerId, PlayerStateView};
use gatehouse_tags::GameplayTag;

use crate::event::WorldChange;
use crate::link::LinkId;
use crate::session::WorldEvents;

/// One server, as the session knows it.
#[derive(Debug)]
pub(super) struct Server {
    /// The link to it.
    pub(super) link: LinkId,
    /// The player its `Welcome` named.
    pub(super) player: Option<PlayerId>,
    /// Its frame limit, from its `Welcome` (bytes).
    pub(super) max_frame_len: u32,
    /// The node the world is on for this client there: `Welcome`'s, then each ended load's.
    pub(super) current_node: Option<NodeId>,
    /// The pawn this client controls there.
    pub(super) pawn: Option<PawnId>,
    /// The own player's pawns there, spawned and not destroyed (a dead one lingers beside its
    /// replacement): what makes a pawn's change the own one for [`WorldEvents::Own`].
    pub(super) own_pawns: Vec<PawnId>,
    /// Its world as the session told it to the game.
    pub(super) known: KnownWorld,
}

impl Server {
    /// A server on `link` not welcomed yet.
    pub(super) fn new(link: LinkId) -> Server {
        Server {
            link,
            player: None,
            max_frame_len: 0,
            current_node: None,
            pawn: None,
            own_pawns: Vec::new(),
            known: KnownWorld::default(),
        }
    }

    /// Whether `player` is the one this server welcomed.
    pub(super) fn is_me(&self, player: &PlayerId) -> bool {
        self.player.as_ref() == Some(player)
    }

    /// Takes one change of this server's world: the own pawns and the controlled pawn follow
    /// it, and it is recorded if `world_events` has the game told of it. Returns whether the
    /// game is told of it.
    pub(super) fn take(&mut self, change: &WorldChange, world_events: WorldEvents) -> bool {
        let wanted = match world_events {
            WorldEvents::All => true,
            WorldEvents::Own => self.is_own(change),
        };
        self.track_own_pawns(change);
        if wanted {
            self.known.apply(change);
        }
        wanted
    }

    /// Whether `change` is about the own player or one of its pawns (before
    /// [`Server::track_own_pawns`] took it into account: a destroyed pawn was own).
    fn is_own(&self, change: &WorldChange) -> bool {
        let mine = |pawn: &PawnId| self.own_pawns.contains(pawn);
        match change {
            WorldChange::PlayerStateUpdated(view) => self.is_me(&view.player_id),
            WorldChange::PawnSpawned(view) => self.is_me(&view.owner),
            WorldChange::PlayerLeft { player }
            | WorldChange::TagsChanged { player, .. }
            | WorldChange::HealthChanged { player, .. } => self.is_me(player),
            WorldChange::PawnDied { pawn } | WorldChange::PawnDestroyed { pawn } => mine(pawn),
            WorldChange::PawnsTeleported { pawns, .. } => {
                self.own_pawns.iter().any(|own| pawns.contains(*own))
            }
        }
    }

    /// Keeps the own pawns and the controlled pawn up to date with a pawn spawned or destroyed.
    fn track_own_pawns(&mut self, change: &WorldChange) {
        match change {
            WorldChange::PawnSpawned(view)
                if self.is_me(&view.owner) && !self.own_pawns.contains(&view.pawn_id) =>
            {
                self.own_pawns.push(view.pawn_id);
            }
            WorldChange::PawnDestroyed { pawn } => {
                self.own_pawns.retain(|own| own != pawn);
                if self.pawn == Some(*pawn) {
                    self.pawn = None;
                }
            }
            _ => {}
        }
    }
}

/// A server's world as the session told it to the game: every player state with its tags and
/// health, and every pawn, as the changes left them.
#[derive(Debug, Default)]
pub(super) struct KnownWorld {
    players: BTreeMap<PlayerId, PlayerStateView>,
    /// Every tag each player holds, for those the server told of any.
    tags: BTreeMap<PlayerId, Vec<GameplayTag>>,
    /// Each player's health, for those the server told of it.
    health: BTreeMap<PlayerId, u32>,
    pawns: BTreeMap<PawnId, PawnView>,
}

impl KnownWorld {
    /// Applies `change`, as a game's copy of the world would.
    pub(super) fn apply(&mut self, change: &WorldChange) {
        match change {
            WorldChange::PlayerStateUpdated(view) => {
                self.players.insert(view.player_id.clone(), view.clone());
            }
            WorldChange::PlayerLeft { player } => {
                self.players.remove(player);
                self.tags.remove(player);
                self.health.remove(player);
            }
            WorldChange::TagsChanged { player, tags } => {
                self.tags.insert(player.clone(), tags.clone());
            }
            WorldChange::HealthChanged { player, health } => {
                self.health.insert(player.clone(), *health);
            }
            WorldChange::PawnSpawned(view) => {
                self.pawns.insert(view.pawn_id, view.clone());
            }
            WorldChange::PawnsTeleported { node, pawns } => {
                // Run by run: a copy that knows a pawn or two is told of thousands at a time.
                for ids in pawns.ranges() {
                    for view in self.pawns.range_mut(ids).map(|(_, view)| view) {
                        view.node = node.clone();
                    }
                }
            }
            WorldChange::PawnDied { pawn } => {
                if let Some(view) = self.pawns.get_mut(pawn) {
                    view.alive = false;
                }
            }
            WorldChange::PawnDestroyed { pawn } => {
                self.pawns.remove(pawn);
            }
        }
    }

    /// The world as changes a game applies to an empty copy, in a snapshot's order
    /// (docs/protocol.md 4.5): each player state, its tags and its health; then the tags and
    /// health of players with no player state; then each pawn spawned, followed by its death
    /// when it is not alive.
    pub(super) fn changes(&self) -> Vec<WorldChange> {
        let mut out = Vec::new();
        let tags = |player: &PlayerId| {
            self.tags
                .get(player)
                .map(|tags| WorldChange::TagsChanged { player: player.clone(), tags: tags.clone() })
        };
        let health = |player: &PlayerId| {
            self.health.get(player).map(|health| WorldChange::HealthChanged {
                player: player.clone(),
                health: *health,
            })
        };
        for (player, view) in &self.players {
            out.push(WorldChange::PlayerStateUpdated(view.clone()));
            out.extend(tags(player));
            out.extend(health(player));
        }
        let stateless = |player: &&PlayerId| !self.players.contains_key(*player);
        out.extend(self.tags.keys().filter(stateless).filter_map(tags));
        out.extend(self.health.keys().filter(stateless).filter_map(health));
        for view in self.pawns.values() {
            out.push(WorldChange::PawnSpawned(view.clone()));
            if !view.alive {
                out.push(WorldChange::PawnDied { pawn: view.pawn_id });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::{CharacterDef, PawnIdRuns, TeamId};
    use gatehouse_tags::catalog::STATE_DEAD;

    use super::*;

    fn player(name: &str) -> PlayerId {
        PlayerId::new(name).unwrap()
    }

    fn pawn(id: u64, owner: &str, node: &str) -> PawnView {
        PawnView {
            pawn_id: PawnId(id),
            owner: player(owner),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: NodeId::new(node).unwrap(),
            alive: true,
        }
    }

    /// A known world gives back, as changes, the world its changes left: players with their
    /// tags and health, stateless tags after them, pawns moved, dead or gone as told.
    #[test]
    fn a_known_world_gives_back_the_world_its_changes_left() {
        let mut known = KnownWorld::default();
        let view = |name: &str| PlayerStateView {
            player_id: player(name),
            team: Some(TeamId(1)),
            character_def: None,
        };
        let harbor = NodeId::new("harbor").unwrap();
        for change in [
            WorldChange::PlayerStateUpdated(view("a")),
            WorldChange::PlayerStateUpdated(view("b")),
            WorldChange::TagsChanged { player: player("a"), tags: vec![STATE_DEAD] },
            WorldChange::HealthChanged { player: player("a"), health: 0 },
            WorldChange::HealthChanged { player: player("ghost"), health: 7 },
            WorldChange::PawnSpawned(pawn(1, "a", "crypt")),
            WorldChange::PawnSpawned(pawn(2, "b", "crypt")),
            WorldChange::PawnSpawned(pawn(3, "b", "crypt")),
            WorldChange::PawnsTeleported {
                node: harbor.clone(),
                pawns: PawnIdRuns::from_ids([PawnId(1)]),
            },
            WorldChange::PawnDied { pawn: PawnId(1) },
            WorldChange::PawnDestroyed { pawn: PawnId(3) },
            WorldChange::PlayerLeft { player: player("b") },
        ] {
            known.apply(&change);
        }
        let dead_at_harbor = PawnView { node: harbor, alive: false, ..pawn(1, "a", "crypt") };
        assert_eq!(
            known.changes(),
            [
                WorldChange::PlayerStateUpdated(view("a")),
                WorldChange::TagsChanged { player: player("a"), tags: vec![STATE_DEAD] },
                WorldChange::HealthChanged { player: player("a"), health: 0 },
                WorldChange::HealthChanged { player: player("ghost"), health: 7 },
                WorldChange::PawnSpawned(dead_at_harbor),
                WorldChange::PawnDied { pawn: PawnId(1) },
                WorldChange::PawnSpawned(pawn(2, "b", "crypt")),
            ]
        );
    }

    /// A server keeps only its own player's changes for a client that keeps no world, and its
    /// own pawns and controlled pawn follow spawns and destructions.
    #[test]
    fn a_server_records_what_the_game_is_told_and_tracks_its_own_pawns() {
        let mut server = Server::new(LinkId::FIRST);
        server.player = Some(player("me"));
        server.pawn = Some(PawnId(1));
        assert!(server.take(&WorldChange::PawnSpawned(pawn(1, "me", "crypt")), WorldEvents::Own));
        assert!(
            !server.take(&WorldChange::PawnSpawned(pawn(2, "other", "crypt")), WorldEvents::Own)
        );
        assert_eq!(server.own_pawns, [PawnId(1)]);
        assert_eq!(server.known.changes(), [WorldChange::PawnSpawned(pawn(1, "me", "crypt"))]);
        assert!(server.take(&WorldChange::PawnDestroyed { pawn: PawnId(1) }, WorldEvents::Own));
        assert_eq!((server.pawn, server.own_pawns.len()), (None, 0));
        assert!(server.known.changes().is_empty());
    }
}

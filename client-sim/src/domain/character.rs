//! Characters: every pawn this client knows of, as the client's own game objects.
//!
//! Owns each pawn's replicated view, its network role on this client, whether it has begun play
//! in the current world, whether this client acknowledged its possession, and its local
//! movement state while characters are frozen (seed 001: gravity does not replicate, so every
//! client zeroes it on every pawn; input is disabled only on the locally controlled pawn). It
//! knows nothing of readiness facts, gates, the registry or the router: the character adapter
//! observes it.

use std::collections::BTreeMap;

use gatehouse_protocol::{CharacterDef, NodeId, PawnId, PawnView, PlayerId};

/// A character's network role on this client (Unreal's `ENetRole` as the seed routes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetRole {
    /// No relationship: an own pawn after unpossession, waiting for its destruction.
    None,
    /// Another player's pawn, replicated to this client.
    SimulatedProxy,
    /// This client's own pawn, controlled here.
    AutonomousProxy,
    /// This process has authority (a listen server or standalone game): local or remote is
    /// decided by the pawn's controller, and unresolved while it has none.
    Authority {
        /// `Some(true)` when its controller is a local controller; `None` without a controller.
        locally_controlled: Option<bool>,
    },
}

/// One pawn, as this client sees it.
#[derive(Debug, Clone)]
pub struct Character {
    view: PawnView,
    role: NetRole,
    begun_play: bool,
    possession_acknowledged: bool,
    /// Local gravity scale: 1 normally, 0 while characters are frozen.
    gravity_scale: f32,
    /// Whether this client feeds input to it (only ever false on the locally controlled pawn).
    input_enabled: bool,
}

impl Character {
    /// The pawn.
    pub fn pawn(&self) -> PawnId {
        self.view.pawn_id
    }

    /// The player whose pawn it is.
    pub fn owner(&self) -> &PlayerId {
        &self.view.owner
    }

    /// The pawn's class.
    pub fn class(&self) -> &CharacterDef {
        &self.view.character_def
    }

    /// The node it stands on.
    pub fn node(&self) -> &NodeId {
        &self.view.node
    }

    /// False once its owner died in it.
    pub fn is_alive(&self) -> bool {
        self.view.alive
    }

    /// Its network role on this client.
    pub fn role(&self) -> NetRole {
        self.role
    }

    /// Whether it has begun play in the current world.
    pub fn has_begun_play(&self) -> bool {
        self.begun_play
    }

    /// Whether this client acknowledged possessing it (`AcknowledgePossession`).
    pub fn is_possession_acknowledged(&self) -> bool {
        self.possession_acknowledged
    }

    /// The replicated view.
    pub fn view(&self) -> &PawnView {
        &self.view
    }

    /// Local gravity scale: 0 while characters are frozen, else 1.
    pub fn gravity_scale(&self) -> f32 {
        self.gravity_scale
    }

    /// Whether this client's input drives it.
    pub fn is_input_enabled(&self) -> bool {
        self.input_enabled
    }

    /// Whether this client controls it.
    pub fn is_locally_controlled(&self) -> bool {
        matches!(
            self.role,
            NetRole::AutonomousProxy | NetRole::Authority { locally_controlled: Some(true) }
        )
    }

    /// Applies the frozen state: gravity off on every pawn, input off only where locally
    /// controlled.
    fn apply_freeze(&mut self, frozen: bool) {
        self.gravity_scale = if frozen { 0.0 } else { 1.0 };
        self.input_enabled = !(frozen && self.is_locally_controlled());
    }
}

/// What a `PawnSpawned` did to the set of characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spawned {
    /// A character this client did not know.
    New,
    /// A duplicate notification for a known pawn: its view was refreshed, nothing else.
    Known,
}

/// Every character this client knows of, by pawn.
#[derive(Debug, Default)]
pub struct Characters {
    by_pawn: BTreeMap<PawnId, Character>,
    /// Whether a transition froze characters (until it ends).
    frozen: bool,
}

impl Characters {
    /// The character of `pawn`.
    pub fn get(&self, pawn: PawnId) -> Option<&Character> {
        self.by_pawn.get(&pawn)
    }

    /// Every character, by pawn id.
    pub fn iter(&self) -> impl Iterator<Item = &Character> + '_ {
        self.by_pawn.values()
    }

    /// The pawns `player` owns, in pawn order.
    pub fn owned_by(&self, player: &PlayerId) -> Vec<PawnId> {
        self.by_pawn.values().filter(|c| c.owner() == player).map(Character::pawn).collect()
    }

    /// How many characters.
    pub fn len(&self) -> usize {
        self.by_pawn.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_pawn.is_empty()
    }

    /// A pawn spawned (or was replicated again). An own pawn is an autonomous proxy, any other
    /// a simulated proxy; it begins play at once if the world already plays.
    pub(crate) fn spawn(
        &mut self,
        view: PawnView,
        local_player: Option<&PlayerId>,
        world_playing: bool,
    ) -> Spawned {
        if let Some(known) = self.by_pawn.get_mut(&view.pawn_id) {
            known.view = view;
            return Spawned::Known;
        }
        let role = if Some(&view.owner) == local_player {
            NetRole::AutonomousProxy
        } else {
            NetRole::SimulatedProxy
        };
        let mut character = Character {
            view,
            role,
            begun_play: world_playing,
            possession_acknowledged: false,
            gravity_scale: 1.0,
            input_enabled: true,
        };
        // A pawn replicated while characters are frozen is frozen too, or it would fall.
        character.apply_freeze(self.frozen);
        self.by_pawn.insert(character.view.pawn_id, character);
        Spawned::New
    }

    /// Freezes (`FreezeCharacters`) or unfreezes (`EndTransition`) every character locally.
    pub(crate) fn set_frozen(&mut self, frozen: bool) {
        self.frozen = frozen;
        for character in self.by_pawn.values_mut() {
            character.apply_freeze(frozen);
        }
    }

    /// Whether characters are frozen.
    pub fn are_frozen(&self) -> bool {
        self.frozen
    }

    /// The server possessed `pawn` for this client and the client acknowledged it. Returns
    /// whether anything changed (a duplicate `Possessed` changes nothing).
    pub(crate) fn possess(&mut self, pawn: PawnId) -> bool {
        let Some(character) = self.by_pawn.get_mut(&pawn) else { return false };
        let changed =
            character.role != NetRole::AutonomousProxy || !character.possession_acknowledged;
        character.role = NetRole::AutonomousProxy;
        character.possession_acknowledged = true;
        character.apply_freeze(self.frozen);
        changed
    }

    /// The server unpossessed `pawn`: its relationship with this client ended. Returns whether
    /// it was possessed.
    pub(crate) fn unpossess(&mut self, pawn: PawnId) -> bool {
        let Some(character) = self.by_pawn.get_mut(&pawn) else { return false };
        let was = character.role == NetRole::AutonomousProxy;
        character.role = NetRole::None;
        character.possession_acknowledged = false;
        character.apply_freeze(self.frozen);
        was
    }

    /// The pawn moved. Returns whether it did: false for an unknown pawn or its current node.
    pub(crate) fn teleport(&mut self, pawn: PawnId, node: NodeId) -> bool {
        let Some(character) = self.by_pawn.get_mut(&pawn) else { return false };
        let moved = character.view.node != node;
        character.view.node = node;
        moved
    }

    /// The pawn's owner died in it. Returns whether it was alive.
    pub(crate) fn die(&mut self, pawn: PawnId) -> bool {
        let Some(character) = self.by_pawn.get_mut(&pawn) else { return false };
        std::mem::replace(&mut character.view.alive, false)
    }

    /// The pawn was destroyed.
    pub(crate) fn destroy(&mut self, pawn: PawnId) -> Option<Character> {
        self.by_pawn.remove(&pawn)
    }

    /// Every character begins play (its world began play), or stops (its world was torn down).
    pub(crate) fn set_begun_play(&mut self, begun: bool) {
        for character in self.by_pawn.values_mut() {
            character.begun_play = begun;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(pawn: u64, owner: &str) -> PawnView {
        PawnView {
            pawn_id: PawnId(pawn),
            owner: PlayerId::new(owner).unwrap(),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        }
    }

    #[test]
    fn own_pawns_are_autonomous_and_others_simulated() {
        let me = PlayerId::new("me").unwrap();
        let mut characters = Characters::default();
        assert_eq!(characters.spawn(view(1, "me"), Some(&me), false), Spawned::New);
        assert_eq!(characters.spawn(view(2, "you"), Some(&me), true), Spawned::New);
        assert_eq!(characters.get(PawnId(1)).unwrap().role(), NetRole::AutonomousProxy);
        assert!(!characters.get(PawnId(1)).unwrap().has_begun_play());
        assert_eq!(characters.get(PawnId(2)).unwrap().role(), NetRole::SimulatedProxy);
        assert!(characters.get(PawnId(2)).unwrap().has_begun_play());
    }

    #[test]
    fn duplicates_change_nothing_and_unpossession_ends_the_relationship() {
        let me = PlayerId::new("me").unwrap();
        let mut characters = Characters::default();
        characters.spawn(view(1, "me"), Some(&me), true);
        assert!(characters.possess(PawnId(1)));
        assert!(!characters.possess(PawnId(1)), "a duplicate Possessed changes nothing");
        assert_eq!(characters.spawn(view(1, "me"), Some(&me), true), Spawned::Known);
        assert!(characters.get(PawnId(1)).unwrap().is_possession_acknowledged());
        assert!(characters.unpossess(PawnId(1)));
        let character = characters.get(PawnId(1)).unwrap();
        assert_eq!(character.role(), NetRole::None);
        assert!(!character.is_possession_acknowledged());
    }

    #[test]
    fn moves_and_deaths_report_only_changes() {
        let mut characters = Characters::default();
        characters.spawn(view(1, "you"), None, true);
        assert!(!characters.teleport(PawnId(1), NodeId::new("harbor").unwrap()), "already there");
        assert!(characters.teleport(PawnId(1), NodeId::new("marsh").unwrap()));
        assert!(!characters.teleport(PawnId(9), NodeId::new("marsh").unwrap()), "unknown pawn");
        assert!(characters.die(PawnId(1)));
        assert!(!characters.die(PawnId(1)), "a duplicate death is no change");
        assert!(!characters.get(PawnId(1)).unwrap().is_alive());
    }

    /// Seed 001: "Freezing happens on every machine: GravityScale does not replicate, so each
    /// client zeroes it locally or the frozen pawn falls. Input is disabled only where the pawn
    /// is locally controlled."
    #[test]
    fn freezing_zeroes_gravity_on_every_pawn_and_disables_input_only_on_the_local_one() {
        let me = PlayerId::new("me").unwrap();
        let mut characters = Characters::default();
        characters.spawn(view(1, "me"), Some(&me), true);
        characters.spawn(view(2, "you"), Some(&me), true);
        characters.set_frozen(true);
        let (mine, theirs) =
            (characters.get(PawnId(1)).unwrap(), characters.get(PawnId(2)).unwrap());
        assert_eq!((mine.gravity_scale(), theirs.gravity_scale()), (0.0, 0.0));
        assert!(!mine.is_input_enabled(), "the locally controlled pawn takes no input");
        assert!(theirs.is_input_enabled(), "input is not touched where the pawn is not local");
        // A pawn replicated while frozen arrives frozen.
        characters.spawn(view(3, "them"), Some(&me), true);
        assert_eq!(characters.get(PawnId(3)).unwrap().gravity_scale(), 0.0);
        characters.set_frozen(false);
        assert!(characters.iter().all(|c| c.gravity_scale() == 1.0 && c.is_input_enabled()));
    }
}

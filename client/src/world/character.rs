//! Characters: every pawn this client knows of, as the client's own game objects.
//!
//! Owns each pawn's replicated view, its network role on this client, whether it has begun play
//! in the current world, whether this client acknowledged its possession, and its local
//! movement state while characters are frozen (docs/client.md, "Events": gravity does not
//! replicate, so every client zeroes it on every pawn; input is disabled only on the locally
//! controlled pawn). It knows nothing of readiness facts, gates, the registry or the router:
//! those observe it through the notifications.

use std::collections::{BTreeMap, BTreeSet};

use gatehouse_protocol::{CharacterDef, NodeId, PawnId, PawnView, PlayerId};

/// A character's network role on this client (as Unreal's `ENetRole` names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
pub(crate) enum Spawned {
    /// A character this client did not know.
    New,
    /// A duplicate notification for a known pawn: its view was refreshed, nothing else.
    Known,
}

/// Every character this client knows of, by pawn.
#[derive(Debug, Default)]
pub struct Characters {
    by_pawn: BTreeMap<PawnId, Character>,
    /// The pawns whose role is autonomous proxy (this client's own), so finding the local
    /// viewer's pawn does not walk every character (a client among thousands of players).
    autonomous: BTreeSet<PawnId>,
    /// The pawns of each owner, so a player's notice finds its pawns without walking every
    /// character.
    by_owner: BTreeMap<PlayerId, BTreeSet<PawnId>>,
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

    /// The characters this client controls or owns as an autonomous proxy, by pawn id: its own
    /// pawns, possessed or spawned for it.
    pub fn autonomous(&self) -> impl Iterator<Item = &Character> + '_ {
        self.autonomous.iter().filter_map(|pawn| self.by_pawn.get(pawn))
    }

    /// The pawns `player` owns, in pawn order.
    pub fn owned_by(&self, player: &PlayerId) -> Vec<PawnId> {
        self.by_owner.get(player).map(|pawns| pawns.iter().copied().collect()).unwrap_or_default()
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
            let previous = std::mem::replace(&mut known.view, view);
            if previous.owner != known.view.owner {
                let (pawn, owner) = (known.view.pawn_id, known.view.owner.clone());
                self.forget_owner(&previous.owner, pawn);
                self.by_owner.entry(owner).or_default().insert(pawn);
            }
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
        self.note_role(character.view.pawn_id, role);
        let owned = self.by_owner.entry(character.view.owner.clone()).or_default();
        owned.insert(character.view.pawn_id);
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
        self.note_role(pawn, NetRole::AutonomousProxy);
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
        self.note_role(pawn, NetRole::None);
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
        self.autonomous.remove(&pawn);
        let character = self.by_pawn.remove(&pawn)?;
        self.forget_owner(character.owner(), pawn);
        Some(character)
    }

    /// Drops `pawn` from `owner`'s pawns (and the owner once it has none).
    fn forget_owner(&mut self, owner: &PlayerId, pawn: PawnId) {
        if let Some(owned) = self.by_owner.get_mut(owner) {
            owned.remove(&pawn);
            if owned.is_empty() {
                self.by_owner.remove(owner);
            }
        }
    }

    /// Keeps the autonomous index in step with `pawn`'s role.
    fn note_role(&mut self, pawn: PawnId, role: NetRole) {
        match role {
            NetRole::AutonomousProxy => self.autonomous.insert(pawn),
            _ => self.autonomous.remove(&pawn),
        };
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

    /// The owner and autonomous indexes follow spawns, a refreshed view naming another owner,
    /// possession and destruction: they always answer as a walk over every character would.
    #[test]
    fn the_owner_and_autonomous_indexes_follow_every_change() {
        let me = PlayerId::new("me").unwrap();
        let you = PlayerId::new("you").unwrap();
        let mut characters = Characters::default();
        characters.spawn(view(1, "me"), Some(&me), true);
        characters.spawn(view(2, "you"), Some(&me), true);
        characters.spawn(view(3, "you"), Some(&me), true);
        assert_eq!(characters.owned_by(&you), [PawnId(2), PawnId(3)]);
        let autonomous = |c: &Characters| c.autonomous().map(Character::pawn).collect::<Vec<_>>();
        assert_eq!(autonomous(&characters), [PawnId(1)]);
        characters.spawn(view(3, "me"), Some(&me), true);
        assert_eq!(characters.owned_by(&you), [PawnId(2)]);
        assert_eq!(characters.owned_by(&me), [PawnId(1), PawnId(3)]);
        assert!(characters.possess(PawnId(3)));
        assert_eq!(autonomous(&characters), [PawnId(1), PawnId(3)]);
        assert!(characters.unpossess(PawnId(1)));
        assert_eq!(autonomous(&characters), [PawnId(3)]);
        characters.destroy(PawnId(3));
        characters.destroy(PawnId(2));
        assert_eq!(characters.owned_by(&me), [PawnId(1)]);
        assert!(characters.owned_by(&you).is_empty());
        assert!(autonomous(&characters).is_empty());
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
        assert!(characters.get(PawnId(1)).unwrap().is_alive());
        assert!(characters.die(PawnId(1)));
        assert!(!characters.die(PawnId(1)), "a duplicate death is no change");
        assert!(!characters.get(PawnId(1)).unwrap().is_alive());
    }

    /// What the set says of itself follows its spawns and destructions, and the freeze.
    #[test]
    fn the_set_counts_and_lists_its_characters() {
        let mut characters = Characters::default();
        assert!(characters.is_empty());
        assert_eq!((characters.len(), characters.iter().count()), (0, 0));
        characters.spawn(view(2, "you"), None, true);
        characters.spawn(view(1, "me"), None, true);
        assert!(!characters.is_empty());
        assert_eq!(characters.len(), 2);
        let pawns: Vec<PawnId> = characters.iter().map(Character::pawn).collect();
        assert_eq!(pawns, [PawnId(1), PawnId(2)], "by pawn id");
        characters.destroy(PawnId(2));
        assert_eq!(characters.len(), 1);
        assert!(!characters.are_frozen());
        characters.set_frozen(true);
        assert!(characters.are_frozen());
    }

    /// Freezing happens on every machine: gravity does not replicate, so each client zeroes it
    /// locally or the frozen pawn falls. Input is disabled only where the pawn is locally
    /// controlled.
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

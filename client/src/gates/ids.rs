//! Object identities the lifecycle registry speaks in: which [`ObjectId`] names the game
//! instance, the login, the local player, a world, a player state, a pawn, or a consumer's
//! listener object.
//!
//! Ids are plain numbers with a kind in the top byte, so two kinds of object can never share an
//! id. A pawn's id is its server [`PawnId`] (never reused by the server); a player state's id is
//! interned once per player and kept across worlds, so scoping it under a new world replaces its
//! old scope with a new generation. This module owns the numbering only; it never touches the
//! registry, the router or a domain object.

use std::collections::BTreeMap;

use gatehouse_lifecycle::ObjectId;
use gatehouse_protocol::{PawnId, PlayerId};

pub use crate::world::WorldId;

/// The kind of object an id names (its top byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// The game instance: the lifetime that survives travel.
    GameInstance,
    /// The login (the game's online-session subsystem).
    Login,
    /// The local player (the viewer whose dispatch the remote gate waits for).
    LocalPlayer,
    /// A world, by its serial.
    World,
    /// A player state, by its interned number.
    PlayerState,
    /// A pawn, by its server id.
    Pawn,
    /// An object a consumer scopes to own or guard its gate subscriptions.
    Listener,
}

impl ObjectKind {
    const ALL: [ObjectKind; 7] = [
        ObjectKind::GameInstance,
        ObjectKind::Login,
        ObjectKind::LocalPlayer,
        ObjectKind::World,
        ObjectKind::PlayerState,
        ObjectKind::Pawn,
        ObjectKind::Listener,
    ];

    const fn tag(self) -> u64 {
        match self {
            ObjectKind::GameInstance => 1,
            ObjectKind::Login => 2,
            ObjectKind::LocalPlayer => 3,
            ObjectKind::World => 4,
            ObjectKind::PlayerState => 5,
            ObjectKind::Pawn => 6,
            ObjectKind::Listener => 7,
        }
    }

    /// The kind of `object`, if it was made here.
    pub fn of(object: ObjectId) -> Option<ObjectKind> {
        let tag = object.get() >> SHIFT;
        ObjectKind::ALL.into_iter().find(|kind| kind.tag() == tag)
    }
}

const SHIFT: u32 = 56;
/// The bits of an id that hold its number.
const NUMBER_MASK: u64 = (1 << SHIFT) - 1;

/// The number of `object` within its kind: a world's serial, a pawn's id, a listener's number.
pub const fn number_of(object: ObjectId) -> u64 {
    object.get() & NUMBER_MASK
}

const fn make(kind: ObjectKind, number: u64) -> ObjectId {
    ObjectId::new((kind.tag() << SHIFT) | (number & NUMBER_MASK))
}

/// The game instance: lifetime of the login fact, survives every travel.
pub const GAME_INSTANCE: ObjectId = make(ObjectKind::GameInstance, 0);

/// The login object (the game's online-session subsystem), scoped under the game instance.
pub const LOGIN: ObjectId = make(ObjectKind::Login, 0);

/// The one local player of a client: the viewer of every remote pawn.
pub const LOCAL_PLAYER: ObjectId = make(ObjectKind::LocalPlayer, 0);

/// The object of world `world`.
pub const fn world_object(world: WorldId) -> ObjectId {
    make(ObjectKind::World, world.0)
}

/// The object of pawn `pawn`.
pub const fn pawn_object(pawn: PawnId) -> ObjectId {
    make(ObjectKind::Pawn, pawn.0)
}

/// The pawn an object names, if it names one.
pub fn pawn_of(object: ObjectId) -> Option<PawnId> {
    (ObjectKind::of(object) == Some(ObjectKind::Pawn)).then(|| PawnId(object.get() & NUMBER_MASK))
}

/// A consumer's listener object number `n` (a widget, a feature component).
pub const fn listener_object(n: u64) -> ObjectId {
    make(ObjectKind::Listener, n)
}

/// Player-state ids, interned per player for the whole session.
#[derive(Debug, Default)]
pub struct PlayerStateIds {
    by_player: BTreeMap<PlayerId, ObjectId>,
}

impl PlayerStateIds {
    /// The id of `player`'s player state, interned on first use.
    pub fn intern(&mut self, player: &PlayerId) -> ObjectId {
        let next = self.by_player.len() as u64 + 1;
        *self.by_player.entry(player.clone()).or_insert_with(|| make(ObjectKind::PlayerState, next))
    }

    /// The id of `player`'s player state, if one was interned.
    pub fn get(&self, player: &PlayerId) -> Option<ObjectId> {
        self.by_player.get(player).copied()
    }

    /// The player whose player state `object` is.
    pub fn player_of(&self, object: ObjectId) -> Option<&PlayerId> {
        self.by_player.iter().find(|(_, id)| **id == object).map(|(player, _)| player)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_never_share_an_id_and_are_recovered() {
        let pawn = pawn_object(PawnId(7));
        let world = world_object(WorldId(7));
        assert_ne!(pawn, world);
        assert_eq!(ObjectKind::of(pawn), Some(ObjectKind::Pawn));
        assert_eq!(ObjectKind::of(world), Some(ObjectKind::World));
        assert_eq!(pawn_of(pawn), Some(PawnId(7)));
        assert_eq!(pawn_of(world), None);
        assert_eq!(ObjectKind::of(ObjectId::new(3)), None);
    }

    /// An id's number comes back out of it, and a player state's id names its player.
    #[test]
    fn an_ids_number_and_a_player_states_player_are_recovered() {
        assert_eq!(number_of(world_object(WorldId(42))), 42);
        assert_eq!(number_of(pawn_object(PawnId(9))), 9);
        assert_eq!(number_of(listener_object(7)), 7);
        let mut ids = PlayerStateIds::default();
        let a = PlayerId::new("a").unwrap();
        let b = PlayerId::new("b").unwrap();
        let (of_a, of_b) = (ids.intern(&a), ids.intern(&b));
        assert_eq!(ids.player_of(of_a), Some(&a));
        assert_eq!(ids.player_of(of_b), Some(&b));
        assert_eq!(ids.player_of(pawn_object(PawnId(1))), None);
    }

    #[test]
    fn a_player_state_keeps_its_id_for_the_session() {
        let mut ids = PlayerStateIds::default();
        let a = PlayerId::new("a").unwrap();
        let b = PlayerId::new("b").unwrap();
        let first = ids.intern(&a);
        assert_ne!(ids.intern(&b), first);
        assert_eq!(ids.intern(&a), first);
        assert_eq!(ids.get(&a), Some(first));
    }
}

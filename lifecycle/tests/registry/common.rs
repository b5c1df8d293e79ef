//! Shared fixtures: object ids named after the game objects the gates observe, and callbacks that
//! log.

use gatehouse_lifecycle::{ObjectId, Registry, Requirement, ScopeToken};
use gatehouse_tags::GameplayTag;

/// The caller state handed to callbacks: what has happened, in order.
pub(crate) type Log = Vec<&'static str>;

pub(crate) const GAME_INSTANCE: ObjectId = ObjectId::new(1);
pub(crate) const WORLD: ObjectId = ObjectId::new(2);
pub(crate) const NEXT_WORLD: ObjectId = ObjectId::new(3);
pub(crate) const PLAYER_STATE: ObjectId = ObjectId::new(10);
pub(crate) const REMOTE_PLAYER_STATE: ObjectId = ObjectId::new(11);
pub(crate) const PAWN: ObjectId = ObjectId::new(20);
pub(crate) const OTHER_PAWN: ObjectId = ObjectId::new(21);
pub(crate) const LOCAL_PLAYER: ObjectId = ObjectId::new(30);
pub(crate) const LOGIN: ObjectId = ObjectId::new(40);
pub(crate) const CONTROLLER: ObjectId = ObjectId::new(50);
pub(crate) const WIDGET: ObjectId = ObjectId::new(60);

pub(crate) fn registry() -> (Registry<Log>, Log) {
    (Registry::new(), Vec::new())
}

pub(crate) fn req(token: ScopeToken, fact: GameplayTag) -> Requirement {
    Requirement::new(token, fact)
}

/// A callback that only records `label`.
pub(crate) fn note(label: &'static str) -> impl FnOnce(&mut Registry<Log>, &mut Log) + 'static {
    move |_, log| log.push(label)
}

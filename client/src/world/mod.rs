//! The replicated world as the game's objects: the login, the level instance the client plays
//! in, every player state and every character, kept from the session's [`Event`]s, and a
//! [`Notice`] for each change, to announce on a `gatehouse-messaging` router.
//!
//! The truth is always in the [`Replica`]; a notice only names what changed, so a listener
//! that attaches late samples the replica and is as correct as one that heard every notice.
//! [`Replication`] applies an event one change at a time and hands out a change's notices
//! before it applies the next, so a listener sees the world after its notice's change and
//! before the next (docs/client.md, "The replicated world").
//!
//! A game announces each notice on its router ([`Notice::broadcast`], or through its own
//! [`Announce`] when it runs more after each notice, such as a gate pump). Nothing here knows
//! of readiness facts or gates: the game's adapters observe the notices and publish those.
//!
//! [`Event`]: crate::Event

mod character;
mod level;
mod login;
mod notify;
mod player_state;
mod replication;

use std::fmt;
use std::time::Instant;

use gatehouse_protocol::{NodeId, PlayerId, TransitionId};

use character::Spawned;
pub use character::{Character, Characters, NetRole};
pub use level::{World, WorldPhase};
pub use login::Login;
pub use notify::{
    ABILITY_TAGS_CHANGED, Announce, CHARACTERS_FROZEN, CHARACTERS_UNFROZEN, HEALTH_CHANGED,
    LOGIN_ENDED, LOGIN_SUCCEEDED, Notice, PAWN_DESTROYED, PAWN_DIED, PAWN_SPAWNED, PAWN_TELEPORTED,
    PLAYER_STATE_CHANGED, PLAYER_STATE_REMOVED, POSSESSED, PawnNotice, PlayerNotice,
    TRANSITION_ENDED, TRANSITION_SHOWN, TransitionNotice, UNPOSSESSED, WORLD_BEGIN_PLAY,
    WORLD_CREATED, WORLD_TORN_DOWN, WorldNotice, declare_channels,
};
pub use player_state::{PlayerState, PlayerStateChange, PlayerStates, is_valid_team};
pub use replication::Replication;

use crate::event::Event;

/// The serial of a world this client created: 1 for the first, one more per travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorldId(pub u64);

impl fmt::Display for WorldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "world#{}", self.0)
    }
}

/// What a travel did to the worlds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Travelled {
    /// The world torn down, if there was one.
    torn_down: Option<WorldId>,
    /// The world created for the destination.
    created: WorldId,
}

/// The client's copy of the replicated world: the login, the current world, every player
/// state and every character.
#[derive(Debug, Default)]
pub struct Replica {
    login: Login,
    world: Option<World>,
    worlds_created: u64,
    player_states: PlayerStates,
    characters: Characters,
}

impl Replica {
    /// A client before login: no world, nothing replicated.
    pub fn new() -> Replica {
        Replica::default()
    }

    /// Applies the whole of `event`, received at `now`, and returns its notices in order. A
    /// game whose listeners must see the world as of each notice drives [`Replication`]
    /// instead, announcing each notice before the next change.
    pub fn replicate(&mut self, now: Instant, event: &Event) -> Vec<Notice> {
        let mut replication = Replication::of(event);
        std::iter::from_fn(|| replication.next(self, now)).collect()
    }

    /// The login.
    pub fn login(&self) -> &Login {
        &self.login
    }

    /// The player this client is, once logged in.
    pub fn local_player(&self) -> Option<&PlayerId> {
        self.login.player()
    }

    /// The local player's player state, once replicated.
    pub fn local_player_state(&self) -> Option<&PlayerState> {
        self.player_states.get(self.local_player()?)
    }

    /// The current world.
    pub fn world(&self) -> Option<&World> {
        self.world.as_ref()
    }

    /// Whether the current world plays.
    pub fn is_playing(&self) -> bool {
        self.world.as_ref().is_some_and(World::is_playing)
    }

    /// Every player state.
    pub fn player_states(&self) -> &PlayerStates {
        &self.player_states
    }

    /// Every character.
    pub fn characters(&self) -> &Characters {
        &self.characters
    }

    /// The session token was validated: the client is `player`. Returns false for a repeat.
    fn log_in(&mut self, player: PlayerId) -> bool {
        if self.login.player() == Some(&player) {
            return false;
        }
        self.login = Login::Succeeded { player };
        true
    }

    /// The validated login ended. Returns the player whose login it was, if it was active.
    fn log_out(&mut self) -> Option<PlayerId> {
        let player = self.login.player().cloned();
        self.login = Login::Ended;
        player
    }

    /// Travels: tears down the current world (its characters stop playing) and creates a new
    /// one for `node`.
    fn travel(
        &mut self,
        now: Instant,
        node: Option<NodeId>,
        transition: Option<TransitionId>,
    ) -> Travelled {
        let torn_down = self.world.take().map(|world| {
            self.characters.set_begun_play(false);
            world.id()
        });
        self.worlds_created += 1;
        let created = WorldId(self.worlds_created);
        self.world = Some(World::new(created, node, transition, now));
        Travelled { torn_down, created }
    }

    /// The current world begins play, and every character in it. Returns the world if it was
    /// loading.
    fn begin_play(&mut self, now: Instant) -> Option<WorldId> {
        let world = self.world.as_mut()?;
        if !world.begin_play(now) {
            return None;
        }
        self.characters.set_begun_play(true);
        Some(world.id())
    }
}

//! The replicated world's notifications: each [`Notice`] a change of the [`super::Replica`]
//! makes, the channel it is announced on (bound once to its payload type), and the payloads.
//!
//! Two families travel here: replication notifications (`Message.Replication.*`,
//! `Message.Transition.*`), announced after the replicated state was applied; and the client's
//! own (`Message.Login.*`, `Message.World.*`), announced after the login or the world changed.
//! A payload names what changed by id and carries none of the state: a listener reads the state
//! from the replica, so a late listener is as correct as an early one. A game announces its own
//! notifications on channels it declares itself.

use gatehouse_messaging::{Channel, Channels, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId, TransitionId};
use gatehouse_tags::catalog::*;

use super::{PlayerStateChange, WorldId};

/// Something happened to a pawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PawnNotice {
    /// The pawn.
    pub pawn: PawnId,
}
impl Payload for PawnNotice {
    const NAME: &'static str = "PawnNotice";
}

/// Something happened to a player (its player state, its login).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayerNotice {
    /// The player.
    pub player: PlayerId,
}
impl Payload for PlayerNotice {
    const NAME: &'static str = "PlayerNotice";
}

/// Something happened to a world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldNotice {
    /// The world.
    pub world: WorldId,
}
impl Payload for WorldNotice {
    const NAME: &'static str = "WorldNotice";
}

/// A transition phase arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionNotice {
    /// The transition.
    pub transition: TransitionId,
}
impl Payload for TransitionNotice {
    const NAME: &'static str = "TransitionNotice";
}

/// A pawn was spawned and applied locally.
pub const PAWN_SPAWNED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_PAWN_SPAWNED);
/// A pawn was destroyed and removed locally.
pub const PAWN_DESTROYED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_PAWN_DESTROYED);
/// The server possessed this pawn for the client, and the client acknowledged it.
pub const POSSESSED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_POSSESSED);
/// The server unpossessed the client's pawn.
pub const UNPOSSESSED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_UNPOSSESSED);
/// A pawn moved to another node.
pub const PAWN_TELEPORTED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_PAWN_TELEPORTED);
/// A pawn's owner died in it.
pub const PAWN_DIED: Channel<PawnNotice> = Channel::new(MESSAGE_REPLICATION_PAWN_DIED);
/// A player's health changed.
pub const HEALTH_CHANGED: Channel<PlayerNotice> = Channel::new(MESSAGE_REPLICATION_HEALTH_CHANGED);
/// A player state appeared or changed (team, CharacterDef).
pub const PLAYER_STATE_CHANGED: Channel<PlayerNotice> =
    Channel::new(MESSAGE_REPLICATION_PLAYER_STATE_CHANGED);
/// A player left and its player state was removed.
pub const PLAYER_STATE_REMOVED: Channel<PlayerNotice> =
    Channel::new(MESSAGE_REPLICATION_PLAYER_STATE_REMOVED);
/// A player's ability tags changed.
pub const ABILITY_TAGS_CHANGED: Channel<PlayerNotice> =
    Channel::new(MESSAGE_REPLICATION_ABILITY_TAGS_CHANGED);
/// A transition's destination is shown (its streaming starts).
pub const TRANSITION_SHOWN: Channel<TransitionNotice> = Channel::new(MESSAGE_TRANSITION_SHOWN);
/// Characters froze for a transition.
pub const CHARACTERS_FROZEN: Channel<TransitionNotice> =
    Channel::new(MESSAGE_TRANSITION_CHARACTERS_FROZEN);
/// Characters unfroze after a transition.
pub const CHARACTERS_UNFROZEN: Channel<TransitionNotice> =
    Channel::new(MESSAGE_TRANSITION_CHARACTERS_UNFROZEN);
/// A transition ended.
pub const TRANSITION_ENDED: Channel<TransitionNotice> = Channel::new(MESSAGE_TRANSITION_ENDED);
/// The login-success state became active.
pub const LOGIN_SUCCEEDED: Channel<PlayerNotice> = Channel::new(MESSAGE_LOGIN_SUCCEEDED);
/// The login-success state ended.
pub const LOGIN_ENDED: Channel<PlayerNotice> = Channel::new(MESSAGE_LOGIN_ENDED);
/// A world was created for a travel destination.
pub const WORLD_CREATED: Channel<WorldNotice> = Channel::new(MESSAGE_WORLD_CREATED);
/// The current world began play.
pub const WORLD_BEGIN_PLAY: Channel<WorldNotice> = Channel::new(MESSAGE_WORLD_BEGIN_PLAY);
/// A world was torn down.
pub const WORLD_TORN_DOWN: Channel<WorldNotice> = Channel::new(MESSAGE_WORLD_TORN_DOWN);

/// Declares every channel above, once each, into a game's `channels`.
///
/// # Errors
/// A [`gatehouse_messaging::Error`] if a channel were declared twice or its tag were missing from
/// the catalog.
pub fn declare_channels(
    channels: &mut Channels,
) -> Result<&mut Channels, gatehouse_messaging::Error> {
    channels
        .declare(PAWN_SPAWNED)?
        .declare(PAWN_DESTROYED)?
        .declare(POSSESSED)?
        .declare(UNPOSSESSED)?
        .declare(PAWN_TELEPORTED)?
        .declare(PAWN_DIED)?
        .declare(HEALTH_CHANGED)?
        .declare(PLAYER_STATE_CHANGED)?
        .declare(PLAYER_STATE_REMOVED)?
        .declare(ABILITY_TAGS_CHANGED)?
        .declare(TRANSITION_SHOWN)?
        .declare(CHARACTERS_FROZEN)?
        .declare(CHARACTERS_UNFROZEN)?
        .declare(TRANSITION_ENDED)?
        .declare(LOGIN_SUCCEEDED)?
        .declare(LOGIN_ENDED)?
        .declare(WORLD_CREATED)?
        .declare(WORLD_BEGIN_PLAY)?
        .declare(WORLD_TORN_DOWN)
}

/// One change of the replica, to announce on its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// [`LOGIN_SUCCEEDED`]: the client logged in as `player`.
    LoginSucceeded(PlayerId),
    /// [`LOGIN_ENDED`]: `player`'s login ended (refused, closed, or the session ended).
    LoginEnded(PlayerId),
    /// [`WORLD_TORN_DOWN`]: the world was torn down; its characters stopped playing.
    WorldTornDown(WorldId),
    /// [`WORLD_CREATED`]: a world was created for a destination; it loads.
    WorldCreated(WorldId),
    /// [`WORLD_BEGIN_PLAY`]: the current world began play, and every character in it.
    WorldBeganPlay(WorldId),
    /// [`TRANSITION_SHOWN`]: the transition's destination is shown.
    TransitionShown(TransitionId),
    /// [`CHARACTERS_FROZEN`]: every character froze for the transition.
    CharactersFrozen(TransitionId),
    /// [`CHARACTERS_UNFROZEN`]: every character unfroze; the transition is over.
    CharactersUnfrozen(TransitionId),
    /// [`TRANSITION_ENDED`]: the transition ended.
    TransitionEnded(TransitionId),
    /// [`PLAYER_STATE_CHANGED`]: the player state appeared or changed, as `change` says.
    PlayerStateChanged(PlayerId, PlayerStateChange),
    /// [`PLAYER_STATE_REMOVED`]: the player left and its player state was removed.
    PlayerStateRemoved(PlayerId),
    /// [`HEALTH_CHANGED`]: the player's health changed.
    HealthChanged(PlayerId),
    /// [`ABILITY_TAGS_CHANGED`]: the player's ability tags changed.
    AbilityTagsChanged(PlayerId),
    /// [`PAWN_SPAWNED`]: a character this client did not know.
    PawnSpawned(PawnId),
    /// [`PAWN_DESTROYED`]: the character is gone.
    PawnDestroyed(PawnId),
    /// [`POSSESSED`]: this client controls the pawn (and acknowledged it).
    Possessed(PawnId),
    /// [`UNPOSSESSED`]: this client no longer controls the pawn.
    Unpossessed(PawnId),
    /// [`PAWN_TELEPORTED`]: the pawn moved to another node.
    PawnTeleported(PawnId),
    /// [`PAWN_DIED`]: the pawn's owner died in it.
    PawnDied(PawnId),
}

/// Puts a notice's payload on its channel: a plain router ([`Notice::broadcast`]), or a game's
/// own announcer that does more around each broadcast (counts a refusal, runs a gate pump).
pub trait Announce {
    /// Announces `payload` on `channel`.
    fn announce<T: Payload>(&mut self, channel: Channel<T>, payload: &T);
}

impl Notice {
    /// Announces this notice on its channel through `to`.
    pub fn announce(&self, to: &mut impl Announce) {
        let pawn = |pawn: &PawnId| PawnNotice { pawn: *pawn };
        let player = |player: &PlayerId| PlayerNotice { player: player.clone() };
        let world = |world: &WorldId| WorldNotice { world: *world };
        let transition = |transition: &TransitionId| TransitionNotice { transition: *transition };
        match self {
            Notice::LoginSucceeded(p) => to.announce(LOGIN_SUCCEEDED, &player(p)),
            Notice::LoginEnded(p) => to.announce(LOGIN_ENDED, &player(p)),
            Notice::WorldTornDown(w) => to.announce(WORLD_TORN_DOWN, &world(w)),
            Notice::WorldCreated(w) => to.announce(WORLD_CREATED, &world(w)),
            Notice::WorldBeganPlay(w) => to.announce(WORLD_BEGIN_PLAY, &world(w)),
            Notice::TransitionShown(t) => to.announce(TRANSITION_SHOWN, &transition(t)),
            Notice::CharactersFrozen(t) => to.announce(CHARACTERS_FROZEN, &transition(t)),
            Notice::CharactersUnfrozen(t) => to.announce(CHARACTERS_UNFROZEN, &transition(t)),
            Notice::TransitionEnded(t) => to.announce(TRANSITION_ENDED, &transition(t)),
            Notice::PlayerStateChanged(p, _) => to.announce(PLAYER_STATE_CHANGED, &player(p)),
            Notice::PlayerStateRemoved(p) => to.announce(PLAYER_STATE_REMOVED, &player(p)),
            Notice::HealthChanged(p) => to.announce(HEALTH_CHANGED, &player(p)),
            Notice::AbilityTagsChanged(p) => to.announce(ABILITY_TAGS_CHANGED, &player(p)),
            Notice::PawnSpawned(p) => to.announce(PAWN_SPAWNED, &pawn(p)),
            Notice::PawnDestroyed(p) => to.announce(PAWN_DESTROYED, &pawn(p)),
            Notice::Possessed(p) => to.announce(POSSESSED, &pawn(p)),
            Notice::Unpossessed(p) => to.announce(UNPOSSESSED, &pawn(p)),
            Notice::PawnTeleported(p) => to.announce(PAWN_TELEPORTED, &pawn(p)),
            Notice::PawnDied(p) => to.announce(PAWN_DIED, &pawn(p)),
        }
    }

    /// Broadcasts this notice on `router`, whose listeners get `state`.
    ///
    /// # Errors
    /// The [`gatehouse_messaging::Error`] of a refused broadcast: the channel was not declared
    /// ([`declare_channels`]).
    pub fn broadcast<C: 'static>(
        &self,
        router: &Router<C>,
        state: &mut C,
    ) -> Result<(), gatehouse_messaging::Error> {
        let mut plain = Plain { router, state, refused: None };
        self.announce(&mut plain);
        plain.refused.map_or(Ok(()), Err)
    }
}

/// [`Announce`] straight onto a router, keeping the refusal.
struct Plain<'a, C: 'static> {
    router: &'a Router<C>,
    state: &'a mut C,
    refused: Option<gatehouse_messaging::Error>,
}

impl<C: 'static> Announce for Plain<'_, C> {
    fn announce<T: Payload>(&mut self, channel: Channel<T>, payload: &T) {
        if let Err(error) = self.router.broadcast(self.state, channel, payload) {
            self.refused = Some(error);
        }
    }
}

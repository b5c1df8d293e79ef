//! The domain's notifications: every channel replication announces on, bound once to its
//! payload type, and the payload types themselves.
//!
//! Two families travel here (seed 002, section 7, third pattern): replication notifications
//! (`Message.Replication.*`, `Message.Transition.*`), announced after the replicated state was
//! applied; and domain notifications (`Message.Login.*`, `Message.World.*`, `Message.UI.*`,
//! `Message.Team.Changed`), announced after a domain object changed. A payload names what changed
//! by id and carries none of the state: a listener reads the state from the domain object, so a
//! late listener is as correct as an early one. The layers above announce on channels of their
//! own (the adapters' generations, RepNotifies and presentations; the gates' delegates), declared
//! where they are owned. This module declares; it never broadcasts, and it imports only the ids.

use gatehouse_messaging::{Channel, Channels, Payload};
use gatehouse_protocol::{PawnId, PlayerId, TeamId, TransitionId};
use gatehouse_tags::catalog::*;

use crate::ids::WorldId;

/// Something happened to a pawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PawnNotice {
    /// The pawn.
    pub pawn: PawnId,
}
impl Payload for PawnNotice {
    const NAME: &'static str = "PawnNotice";
}

/// Something happened to a player (its player state, its login, its widget controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayerNotice {
    /// The player.
    pub player: PlayerId,
}
impl Payload for PlayerNotice {
    const NAME: &'static str = "PlayerNotice";
}

/// A player's team changed in the team cache, or is presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamNotice {
    /// The player.
    pub player: PlayerId,
    /// The team before the change (for a presentation: `None`).
    pub old: Option<TeamId>,
    /// The team now (for a presentation: the team cached when it was sent).
    pub new: Option<TeamId>,
}
impl Payload for TeamNotice {
    const NAME: &'static str = "TeamNotice";
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

/// The UI subsystem reset its tracking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiResetNotice;
impl Payload for UiResetNotice {
    const NAME: &'static str = "UiResetNotice";
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
/// A transition's loading screen is shown.
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
/// A player state's widget controller became ready.
pub const WIDGET_CONTROLLER_READY: Channel<PlayerNotice> =
    Channel::new(MESSAGE_UI_WIDGET_CONTROLLER_READY);
/// The UI subsystem reset its tracking.
pub const UI_RESET: Channel<UiResetNotice> = Channel::new(MESSAGE_UI_RESET);
/// The raw team change, sent the moment the team cache changes.
pub const TEAM_CHANGED: Channel<TeamNotice> = Channel::new(MESSAGE_TEAM_CHANGED);

/// Declares every channel above, once each.
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
        .declare(WORLD_TORN_DOWN)?
        .declare(WIDGET_CONTROLLER_READY)?
        .declare(UI_RESET)?
        .declare(TEAM_CHANGED)
}

//! The domain's notifications: the replicated world's, from the library
//! ([`gatehouse_client::world`]: `Message.Replication.*`, `Message.Transition.*`,
//! `Message.Login.*`, `Message.World.*`), and the example game's own (`Message.UI.*`,
//! `Message.Team.Changed`), announced after its UI subsystem or team cache changed.
//!
//! A payload names what changed by id and carries none of the state: a listener reads the state
//! from the domain object, so a late listener is as correct as an early one. The layers above
//! announce on channels of their own (the adapters' generations, RepNotifies and presentations;
//! the gates' delegates), declared where they are owned. This module declares; it never
//! broadcasts, and it imports only the ids.

use gatehouse_messaging::{Channel, Channels, Payload};
use gatehouse_protocol::{PlayerId, TeamId};
use gatehouse_tags::catalog::*;

pub use gatehouse_client::world::{
    ABILITY_TAGS_CHANGED, CHARACTERS_FROZEN, CHARACTERS_UNFROZEN, HEALTH_CHANGED, LOGIN_ENDED,
    LOGIN_SUCCEEDED, PAWN_DESTROYED, PAWN_DIED, PAWN_SPAWNED, PAWN_TELEPORTED,
    PLAYER_STATE_CHANGED, PLAYER_STATE_REMOVED, POSSESSED, PawnNotice, PlayerNotice,
    TRANSITION_ENDED, TRANSITION_SHOWN, TransitionNotice, UNPOSSESSED, WORLD_BEGIN_PLAY,
    WORLD_CREATED, WORLD_TORN_DOWN, WorldNotice,
};

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

/// The UI subsystem reset its tracking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiResetNotice;
impl Payload for UiResetNotice {
    const NAME: &'static str = "UiResetNotice";
}

/// A player state's widget controller became ready.
pub const WIDGET_CONTROLLER_READY: Channel<PlayerNotice> =
    Channel::new(MESSAGE_UI_WIDGET_CONTROLLER_READY);
/// The UI subsystem reset its tracking.
pub const UI_RESET: Channel<UiResetNotice> = Channel::new(MESSAGE_UI_RESET);
/// The raw team change, sent the moment the team cache changes.
pub const TEAM_CHANGED: Channel<TeamNotice> = Channel::new(MESSAGE_TEAM_CHANGED);

/// Declares every channel of the replicated world and of the example game, once each.
///
/// # Errors
/// A [`gatehouse_messaging::Error`] if a channel were declared twice or its tag were missing from
/// the catalog.
pub fn declare_channels(
    channels: &mut Channels,
) -> Result<&mut Channels, gatehouse_messaging::Error> {
    gatehouse_client::world::declare_channels(channels)?
        .declare(WIDGET_CONTROLLER_READY)?
        .declare(UI_RESET)?
        .declare(TEAM_CHANGED)
}

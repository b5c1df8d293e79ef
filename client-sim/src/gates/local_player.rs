//! The dispatch of `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady` (docs/spec/gates.md
//! G15): once the local player adapter latched a readiness period,
//! `OnLocalPlayerWidgetControllerAndTeamReady` is broadcast, then the gate is cached on the world
//! and the local player state (public subscriptions run). Cached facts woke it; live state decides:
//! a period that is no longer the current one is dropped, and one whose live state disagrees is a
//! violation. The requirements and the period are the adapter's; this module never registers a
//! wait.

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Payload, Router};
use gatehouse_protocol::PlayerId;
use gatehouse_tags::catalog::{
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY as GATE,
    MESSAGE_LIFECYCLE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
};

use crate::adapters::{ClientCore, broadcast, publish};
use crate::domain::is_valid_team;
use crate::ids::WorldId;

/// `OnLocalPlayerWidgetControllerAndTeamReady(LocalPlayerState)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPlayerReady {
    /// The local player.
    pub player: PlayerId,
    /// The local player state's generation.
    pub token: ScopeToken,
    /// The world it opened in.
    pub world: WorldId,
}
impl Payload for LocalPlayerReady {
    const NAME: &'static str = "LocalPlayerReady";
}

/// `OnLocalPlayerWidgetControllerAndTeamReady`.
pub const LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY: Channel<LocalPlayerReady> =
    Channel::new(MESSAGE_LIFECYCLE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY);

/// Opens the period, if it is still this one and live state agrees: broadcasts
/// `OnLocalPlayerWidgetControllerAndTeamReady`, then caches the gate on the world and the local
/// player state (public subscriptions run).
pub(crate) fn dispatch(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    player: PlayerId,
    player_state: ScopeToken,
    world: ScopeToken,
) {
    let current = core.registry.is_current(player_state)
        && core.registry.is_current(world)
        && core.state.local_player_gate.is_open_for(player_state);
    if !current {
        return;
    }
    let domain = &core.state.domain;
    let live =
        domain.ui().is_ready(&player) && domain.teams().team_of(&player).is_some_and(is_valid_team);
    if !live {
        core.state
            .stats
            .violation(format!("widget/team gate of {player} woke while live state is not ready"));
        return;
    }
    let Some(world_id) = core.state.world.map(|w| w.id) else { return };
    let notice = LocalPlayerReady { player, token: player_state, world: world_id };
    broadcast(router, core, LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, &notice);
    publish(core, world, GATE, true);
    publish(core, player_state, GATE, true);
}

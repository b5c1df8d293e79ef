//! The team adapter: mirrors the team cache onto `Lifecycle.Fact.Team.AssignmentReady` (each
//! player state) and `Lifecycle.Fact.LocalPlayer.TeamReady` (the world, for the local player),
//! and sends the presentation-only team change once the player state's widget controller is
//! ready (docs/spec/gates.md G16).
//!
//! The cache changes at once; the presentation waits. A change arriving while one waits replaces
//! it (same owner and request name), and the presentation reads the team cached when it is sent,
//! never a stale id. The wait is scoped to the player state alone: no pawn is required.

use gatehouse_lifecycle::{Requirement, ScopeToken};
use gatehouse_messaging::{Channel, Lifetime, Router};
use gatehouse_protocol::PlayerId;
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY,
    LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, MESSAGE_TEAM_PRESENTATION_CHANGED,
};

use crate::notifications::{TEAM_CHANGED, TeamNotice};

use super::{ClientCore, Dispatch, broadcast, hold, player_state_token, publish};

/// The request name of the pending presentation on a player state.
pub const PRESENTATION: &str = "Team.Presentation";

/// The presentation-only team change, sent once the widget controller is ready.
pub const TEAM_PRESENTATION_CHANGED: Channel<TeamNotice> =
    Channel::new(MESSAGE_TEAM_PRESENTATION_CHANGED);

/// World listener: the raw team change.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, TEAM_CHANGED, |d, n| {
        let core = d.state();
        mirror(core, &n.player);
        schedule(core, &n.player);
    });
}

/// Mirrors every cached team and schedules its presentation, so a world attached after the
/// teams arrived still presents their initial colours.
pub(super) fn sample(core: &mut ClientCore) {
    let players: Vec<PlayerId> =
        core.state.domain.player_states().iter().map(|s| s.player().clone()).collect();
    for player in &players {
        mirror(core, player);
        if core.state.domain.teams().team_of(player).is_some() {
            schedule(core, player);
        }
    }
}

fn mirror(core: &mut ClientCore, player: &PlayerId) {
    let valid = core.state.domain.teams().team_of(player).is_some();
    if let Some(token) = player_state_token(core, player) {
        publish(core, token, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY, valid);
    }
    if core.state.domain.local_player() == Some(player)
        && let Some(world) = core.state.world
    {
        // A valid-to-valid change republishes a ready fact: no change, no new period.
        publish(core, world.world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, valid);
    }
}

/// (Re)registers the presentation wait of `player`, replacing a pending one.
fn schedule(core: &mut ClientCore, player: &PlayerId) {
    let Some(token) = player_state_token(core, player) else { return };
    let who = player.clone();
    let result = core.registry.wait_for_all(
        token,
        PRESENTATION,
        &[Requirement::new(token, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)],
        &mut core.state,
        move |_, state| {
            state.outbox.push_back(Dispatch::TeamPresentation { player: who, player_state: token });
        },
    );
    if let Err(error) = result {
        tracing::debug!(%error, "team presentation wait refused");
    }
}

/// Sends the presentation-only team change, with the team cached now, if the player state is
/// still the one the wait was for and its widget controller is still ready.
pub(crate) fn present(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    player: PlayerId,
    player_state: ScopeToken,
) {
    let live = core.registry.is_current(player_state) && core.state.domain.ui().is_ready(&player);
    if !live {
        return;
    }
    let new = core.state.domain.teams().team_of(&player);
    broadcast(router, core, TEAM_PRESENTATION_CHANGED, &TeamNotice { player, old: None, new });
}

//! `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady` (docs/spec/gates.md G15): the
//! world-scoped `Lifecycle.Fact.LocalPlayer.TeamReady` and the local player state's
//! `Lifecycle.Fact.UI.WidgetControllerReady`, for the same local controlled player state. No pawn,
//! possession, CharacterDef or character gate; a remote player state cannot satisfy it.
//!
//! It opens once per continuous readiness period: the wait is one-shot, and it is registered
//! again only after the period closes, which happens on UI loss, loss of a valid team, or
//! replacement of the local player state (its scope is reset, or the world goes). A valid-to-valid
//! team change republishes a ready fact, which changes nothing: no new period. When open, the gate
//! is cached on both the world and the local player state.
//!
//! This adapter owns the gate's requirements, its wait and its readiness period, and closes the
//! cached gate when a period ends; the gate callback only latches the period and queues the
//! dispatch, which the gates layer performs (the delegate, then the cached gate).

use gatehouse_lifecycle::{Requirement, ScopeToken};
use gatehouse_messaging::{Lifetime, Router};
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY,
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY as GATE,
};

use crate::notifications::{PLAYER_STATE_CHANGED, PLAYER_STATE_REMOVED, TEAM_CHANGED, UI_RESET};

use super::{ClientCore, Dispatch, hold, player_state_token, publish};

/// The request name of the gate's wait, owned by the local player state.
pub const LOCAL_PLAYER_GATE: &str = "Gate.LocalPlayer.WidgetControllerAndTeamReady";

/// The gate's readiness period in the current world.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalPlayerGate {
    /// The period is open, for this player state generation (latched in the gate callback).
    open: Option<ScopeToken>,
}

impl LocalPlayerGate {
    /// Whether the period is open for the player state generation `player_state`.
    pub(crate) fn is_open_for(&self, player_state: ScopeToken) -> bool {
        self.open == Some(player_state)
    }
}

/// World listeners: anything that can open or close a period re-evaluates it. They run after
/// the UI and team adapters, so the facts they read are current.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, _| evaluate(d.state()));
    hold(router, core, lifetime, PLAYER_STATE_REMOVED, |d, _| evaluate(d.state()));
    hold(router, core, lifetime, UI_RESET, |d, _| evaluate(d.state()));
    hold(router, core, lifetime, TEAM_CHANGED, |d, _| evaluate(d.state()));
}

/// Closes an open period whose requirements stopped holding, then arms the wait for the next.
pub(super) fn evaluate(core: &mut ClientCore) {
    let Some(world) = core.state.world else { return };
    let player_state = local_player_state(core);
    if let Some(open) = core.state.local_player_gate.open {
        let holds = player_state == Some(open)
            && core
                .registry
                .is_ready(Requirement::new(open, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY))
            && core
                .registry
                .is_ready(Requirement::new(world.world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY));
        if holds {
            return;
        }
        core.state.local_player_gate.open = None;
        publish(core, world.world, GATE, false);
        if core.registry.is_current(open) {
            publish(core, open, GATE, false);
        }
    }
    let Some(player_state) = player_state else { return };
    if core.registry.is_pending(player_state.object(), LOCAL_PLAYER_GATE) {
        return;
    }
    let requirements = [
        Requirement::new(world.world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY),
        Requirement::new(player_state, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
    ];
    let Some(player) = core.state.domain.local_player().cloned() else { return };
    let world_token = world.world;
    let result = core.registry.wait_for_all(
        player_state,
        LOCAL_PLAYER_GATE,
        &requirements,
        &mut core.state,
        move |_, state| {
            if state.local_player_gate.open.is_none() {
                state.local_player_gate.open = Some(player_state);
                state.outbox.push_back(Dispatch::LocalPlayerReady {
                    player,
                    player_state,
                    world: world_token,
                });
            }
        },
    );
    if let Err(error) = result {
        tracing::debug!(%error, "local player gate refused");
    }
}

fn local_player_state(core: &ClientCore) -> Option<ScopeToken> {
    let player = core.state.domain.local_player()?;
    player_state_token(core, player)
}

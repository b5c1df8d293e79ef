//! The UI adapter: mirrors the UI subsystem's widget-controller readiness onto
//! `Lifecycle.Fact.UI.WidgetControllerReady` on each player state, closing it at a tracking
//! reset, and samples every player state when it attaches (docs/spec/gates.md G13). It reads the UI
//! subsystem and never drives it; scoping player states is the player-state adapter's job.

use gatehouse_messaging::{Lifetime, Router};
use gatehouse_protocol::PlayerId;
use gatehouse_tags::catalog::LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY;

use crate::notifications::{PLAYER_STATE_CHANGED, UI_RESET, WIDGET_CONTROLLER_READY};

use super::{ClientCore, hold, player_state_token, publish};

/// World listeners: player state changed, widget controller ready, UI reset.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, n| mirror(d.state(), &n.player));
    hold(router, core, lifetime, WIDGET_CONTROLLER_READY, |d, n| mirror(d.state(), &n.player));
    hold(router, core, lifetime, UI_RESET, |d, _| sample(d.state()));
}

/// Mirrors every player state's controller.
pub(super) fn sample(core: &mut ClientCore) {
    let players: Vec<PlayerId> =
        core.state.domain.player_states().iter().map(|s| s.player().clone()).collect();
    for player in &players {
        mirror(core, player);
    }
}

fn mirror(core: &mut ClientCore, player: &PlayerId) {
    let Some(token) = player_state_token(core, player) else { return };
    let ready = core.state.domain.ui().is_ready(player);
    publish(core, token, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, ready);
}

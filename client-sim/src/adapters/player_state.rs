//! The player-state adapter: scopes each player state under the current world and mirrors its
//! team processing and CharacterDef onto `Lifecycle.Fact.PlayerState.TeamReady` and
//! `Lifecycle.Fact.PlayerState.CharacterDefReady`; a removed player state's scope is reset,
//! retiring every wait that references it. It owns the player-state scopes and nothing else: the
//! UI and team facts on the same scope belong to their adapters.

use gatehouse_messaging::{Lifetime, Router};
use gatehouse_protocol::PlayerId;
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY,
};

use crate::ids::world_object;
use crate::notifications::{PLAYER_STATE_CHANGED, PLAYER_STATE_REMOVED};

use super::{ClientCore, hold, publish};

/// World listeners: player state changed, player state removed.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, n| changed(d.state(), &n.player));
    hold(router, core, lifetime, PLAYER_STATE_REMOVED, |d, n| removed(d.state(), &n.player));
}

/// Scopes and mirrors every player state that exists.
pub(super) fn sample(core: &mut ClientCore) {
    let players: Vec<PlayerId> =
        core.state.domain.player_states().iter().map(|s| s.player().clone()).collect();
    for player in &players {
        changed(core, player);
    }
}

fn changed(core: &mut ClientCore, player: &PlayerId) {
    let Some(world) = core.state.world else { return };
    let Some(state) = core.state.domain.player_states().get(player) else { return };
    let (team, def) = (state.is_team_processed(), state.character_def().is_some());
    let object = core.state.player_state_ids.intern(player);
    let token = core.registry.scope(object, world_object(world.id));
    publish(core, token, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, team);
    publish(core, token, LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY, def);
}

fn removed(core: &mut ClientCore, player: &PlayerId) {
    if let Some(object) = core.state.player_state_ids.get(player) {
        core.registry.reset_scope(object);
    }
}

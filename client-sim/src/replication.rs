//! Replication into the client: each server message is applied to the domain objects first, and
//! then announced as a local notification on the router (seed 002, section 7, third pattern).
//!
//! The same holds for what the session drives locally: a travel (tear the world down, create the
//! next), begin-play once the levels streamed, and the UI subsystem's timers. The truth is always
//! in the domain; a notification only says what changed, so a listener that attaches late
//! samples the domain and is as correct as one that heard every message. This module is the only
//! writer of the domain objects and never touches the registry.

use gatehouse_messaging::Router;
use gatehouse_protocol::{NodeId, PlayerId, ServerMessage, TransitionId};

use crate::adapters::ClientCore;
use crate::domain::Spawned;
use crate::gates::announce;
use crate::notifications::*;

/// Applies `message` to the domain and announces what changed.
pub(crate) fn apply(router: &Router<ClientCore>, core: &mut ClientCore, message: &ServerMessage) {
    let now = core.state.now;
    let domain = &mut core.state.domain;
    match message {
        ServerMessage::Welcome { player_id, current_node, .. } => {
            if domain.log_in(now, player_id.clone()) {
                announce(
                    router,
                    core,
                    LOGIN_SUCCEEDED,
                    &PlayerNotice { player: player_id.clone() },
                );
                // The world the server streams now is the one the client enters: it plays at once.
                travel(router, core, current_node.clone(), None);
                begin_play(router, core);
            }
        }
        ServerMessage::Rejected { .. } => {
            if let Some(player) = domain.local_player().cloned() {
                domain.log_out();
                announce(router, core, LOGIN_ENDED, &PlayerNotice { player });
            }
        }
        ServerMessage::FreezeCharacters { transition_id } => {
            domain.set_characters_frozen(true);
            announce(router, core, CHARACTERS_FROZEN, &transition(*transition_id));
        }
        ServerMessage::ShowTransition { transition_id, .. } => {
            announce(router, core, TRANSITION_SHOWN, &transition(*transition_id));
        }
        ServerMessage::EndTransition { transition_id } => {
            domain.set_characters_frozen(false);
            announce(router, core, CHARACTERS_UNFROZEN, &transition(*transition_id));
            announce(router, core, TRANSITION_ENDED, &transition(*transition_id));
        }
        ServerMessage::PlayerStateUpdated(view) => {
            let player = view.player_id.clone();
            let (change, team) = domain.apply_player_state(now, view.clone());
            if !change.is_duplicate() {
                announce(
                    router,
                    core,
                    PLAYER_STATE_CHANGED,
                    &PlayerNotice { player: player.clone() },
                );
            }
            if let Some(team) = team {
                let notice = TeamNotice { player, old: team.old, new: team.new };
                announce(router, core, TEAM_CHANGED, &notice);
            }
        }
        ServerMessage::PlayerLeft { player_id } => {
            if domain.remove_player_state(player_id) {
                announce(
                    router,
                    core,
                    PLAYER_STATE_REMOVED,
                    &PlayerNotice { player: player_id.clone() },
                );
            }
        }
        ServerMessage::PawnSpawned(view) => {
            let pawn = view.pawn_id;
            let local = domain.local_player().cloned();
            let playing = domain.is_playing();
            if domain.characters.spawn(view.clone(), local.as_ref(), playing) == Spawned::New {
                announce(router, core, PAWN_SPAWNED, &PawnNotice { pawn });
            }
        }
        ServerMessage::PawnsTeleported { node, pawn_ids } => {
            // One replicated move per pawn, as if each had come alone.
            for pawn_id in pawn_ids.iter() {
                if core.state.domain.characters.teleport(pawn_id, node.clone()) {
                    announce(router, core, PAWN_TELEPORTED, &PawnNotice { pawn: pawn_id });
                }
            }
        }
        ServerMessage::PawnDied { pawn_id } => {
            if domain.characters.die(*pawn_id) {
                announce(router, core, PAWN_DIED, &PawnNotice { pawn: *pawn_id });
            }
        }
        ServerMessage::PawnDestroyed { pawn_id } => {
            if domain.characters.destroy(*pawn_id).is_some() {
                announce(router, core, PAWN_DESTROYED, &PawnNotice { pawn: *pawn_id });
            }
        }
        ServerMessage::Possessed { pawn_id } => {
            if domain.characters.possess(*pawn_id) {
                announce(router, core, POSSESSED, &PawnNotice { pawn: *pawn_id });
            }
        }
        ServerMessage::Unpossessed { pawn_id } => {
            if domain.characters.unpossess(*pawn_id) {
                announce(router, core, UNPOSSESSED, &PawnNotice { pawn: *pawn_id });
            }
        }
        ServerMessage::AbilityTagsChanged { player_id, .. } => {
            announce(
                router,
                core,
                ABILITY_TAGS_CHANGED,
                &PlayerNotice { player: player_id.clone() },
            );
        }
        ServerMessage::HealthChanged { player_id, health } => {
            if domain.player_states.set_health(player_id, *health) {
                announce(router, core, HEALTH_CHANGED, &PlayerNotice { player: player_id.clone() });
            }
        }
        // A join's screen and a failed transition are the session's transport duties; the
        // recovery travel arrives as a transition of its own.
        ServerMessage::KitsGranted { .. }
        | ServerMessage::Error { .. }
        | ServerMessage::ShowJoin { .. }
        | ServerMessage::EndJoin { .. }
        | ServerMessage::TransitionFailed { .. }
        | ServerMessage::Closing { .. } => {}
    }
}

/// Travels to `node`: the current world is torn down and announced, then the next one is created
/// and announced (adapters attach to it and sample it).
pub(crate) fn travel(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    node: Option<NodeId>,
    transition: Option<TransitionId>,
) {
    let now = core.state.now;
    let travelled = core.state.domain.travel(now, node, transition);
    if let Some(world) = travelled.torn_down {
        announce(router, core, WORLD_TORN_DOWN, &WorldNotice { world });
    }
    announce(router, core, WORLD_CREATED, &WorldNotice { world: travelled.created });
}

/// The current world's levels streamed: it begins play, and every character in it.
pub(crate) fn begin_play(router: &Router<ClientCore>, core: &mut ClientCore) {
    let now = core.state.now;
    if let Some(world) = core.state.domain.begin_play(now) {
        announce(router, core, WORLD_BEGIN_PLAY, &WorldNotice { world });
    }
}

/// The UI subsystem's timers at `now`: a tracking reset, then controllers that became ready.
pub(crate) fn ui_timeout(router: &Router<ClientCore>, core: &mut ClientCore) {
    let now = core.state.now;
    let events = core.state.domain.ui.handle_timeout(now);
    if events.reset {
        announce(router, core, UI_RESET, &UiResetNotice);
    }
    for player in events.ready {
        announce(router, core, WIDGET_CONTROLLER_READY, &PlayerNotice { player });
    }
}

/// Resets UI tracking now (a UI rebuild): every widget controller closes and rebuilds.
pub(crate) fn reset_ui(router: &Router<ClientCore>, core: &mut ClientCore) {
    let now = core.state.now;
    core.state.domain.ui.rebuild(now);
    announce(router, core, UI_RESET, &UiResetNotice);
}

/// The session ends: the login-success state ends, and the login fact with it.
pub(crate) fn end_session(router: &Router<ClientCore>, core: &mut ClientCore) {
    let player: Option<PlayerId> = core.state.domain.local_player().cloned();
    if core.state.domain.log_out()
        && let Some(player) = player
    {
        announce(router, core, LOGIN_ENDED, &PlayerNotice { player });
    }
}

fn transition(transition: TransitionId) -> TransitionNotice {
    TransitionNotice { transition }
}

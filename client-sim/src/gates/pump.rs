//! The outbox pump: how the work registry callbacks left for the router is performed, and how a
//! notification is announced (broadcast, then pump).
//!
//! [`pump`] runs after every announcement and performs each [`Dispatch`] in order, with the
//! router at hand: for a character gate, the sequence of docs/spec/gates.md G14 (broadcast the
//! delegate, replay a remote generation's deferred RepNotifies, publish the public gate tag,
//! publish the local viewer's dispatch-returned fact); for the adapters' own work, their
//! announcements and presentations. Nothing else in the client drains the outbox.

use gatehouse_messaging::{Channel, Payload, Router};

use crate::adapters::{
    CHARACTER_RETIRED, CHARACTER_SCOPED, ClientCore, Dispatch, REMOTE_CHARACTER_REP_NOTIFY,
    broadcast, pawn_team, team,
};

use super::{character, local_player};

/// Broadcasts `payload` on `channel`, then pumps the outbox. A refused broadcast is counted.
pub(crate) fn announce<T: Payload>(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    channel: Channel<T>,
    payload: &T,
) {
    broadcast(router, core, channel, payload);
    pump(router, core);
}

/// Performs every queued dispatch, in order, including those queued while pumping. A nested call
/// (from a listener reached by the pump) returns at once; the outer loop drains.
pub(crate) fn pump(router: &Router<ClientCore>, core: &mut ClientCore) {
    if core.state.pumping {
        return;
    }
    core.state.pumping = true;
    while let Some(dispatch) = core.state.outbox.pop_front() {
        match dispatch {
            Dispatch::Scoped(notice) => broadcast(router, core, CHARACTER_SCOPED, &notice),
            Dispatch::Retired(notice) => broadcast(router, core, CHARACTER_RETIRED, &notice),
            Dispatch::LocalCharacter { pawn, token, viewer } => {
                character::dispatch_local(router, core, pawn, token, viewer);
            }
            Dispatch::RemoteCharacter { pawn, token } => {
                character::dispatch_remote(router, core, pawn, token);
            }
            Dispatch::LocalPlayerReady { player, player_state, world } => {
                local_player::dispatch(router, core, player, player_state, world);
            }
            Dispatch::TeamPresentation { player, player_state } => {
                team::present(router, core, player, player_state);
            }
            Dispatch::RepNotify(notice) => {
                // Its generation may have been retired since it was queued: stale, not sent.
                if core.registry.is_current(notice.token) {
                    broadcast(router, core, REMOTE_CHARACTER_REP_NOTIFY, &notice);
                }
            }
            Dispatch::PawnTeamPresentation { pawn, presentation } => {
                pawn_team::present(router, core, pawn, presentation);
            }
        }
    }
    core.state.pumping = false;
}

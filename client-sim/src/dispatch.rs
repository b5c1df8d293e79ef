//! How work leaves the client core: announcing a notification on the router, and pumping the
//! outbox of what registry callbacks left for the router.
//!
//! A registry callback receives the registry and [`ClientState`](crate::core::ClientState), not
//! the router, so a gate that opens pushes a [`Dispatch`] and returns. [`pump`] runs after every
//! broadcast and performs each dispatch in order, with the router at hand: for a character gate,
//! the seed's sequence (broadcast the delegate, replay a remote generation's deferred
//! RepNotifies, publish the public gate tag, publish the local viewer's dispatch-returned fact).
//! Nothing else in the client broadcasts.

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId};

use crate::adapters::pawn_team::{self, Presentation};
use crate::core::ClientCore;
use crate::gates;
use crate::notifications::{
    CHARACTER_RETIRED, CHARACTER_SCOPED, GenerationRetired, GenerationScoped,
    REMOTE_CHARACTER_REP_NOTIFY, RemoteRepNotify,
};

/// Work a registry callback or an adapter left for the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dispatch {
    /// Announce a pawn generation the character adapter scoped.
    Scoped(GenerationScoped),
    /// Announce a pawn generation the character adapter retired.
    Retired(GenerationRetired),
    /// The local character gate of this generation latched: dispatch it.
    LocalCharacter {
        /// The pawn.
        pawn: PawnId,
        /// Its generation.
        token: ScopeToken,
        /// The local viewer whose dispatch-returned fact follows the dispatch.
        viewer: ScopeToken,
    },
    /// The remote character gate of this generation latched: dispatch it.
    RemoteCharacter {
        /// The pawn.
        pawn: PawnId,
        /// Its generation.
        token: ScopeToken,
    },
    /// The local player's widget/team gate latched for this readiness period.
    LocalPlayerReady {
        /// The local player.
        player: PlayerId,
        /// The local player state's generation.
        player_state: ScopeToken,
        /// The world's scope.
        world: ScopeToken,
    },
    /// The widget controller of a player state with a pending team change is ready.
    TeamPresentation {
        /// The player.
        player: PlayerId,
        /// Its player state's generation.
        player_state: ScopeToken,
    },
    /// A Blueprint RepNotify of a remote generation whose gate released: send it.
    RepNotify(RemoteRepNotify),
    /// A pawn team presentation request woke: revalidate it and dispatch it.
    PawnTeamPresentation {
        /// The target pawn.
        pawn: PawnId,
        /// What the request presents.
        presentation: Presentation,
    },
}

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

/// Broadcasts without pumping (for use inside the pump). A refused broadcast is counted and
/// logged; the router has logged it too.
pub(crate) fn broadcast<T: Payload>(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    channel: Channel<T>,
    payload: &T,
) {
    if let Err(error) = router.broadcast(core, channel, payload) {
        core.state.checks.router_error(format!("broadcast on {} refused: {error}", channel.tag()));
    }
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
                gates::character::dispatch_local(router, core, pawn, token, viewer);
            }
            Dispatch::RemoteCharacter { pawn, token } => {
                gates::character::dispatch_remote(router, core, pawn, token);
            }
            Dispatch::LocalPlayerReady { player, player_state, world } => {
                gates::local_player::dispatch(router, core, player, player_state, world);
            }
            Dispatch::TeamPresentation { player, player_state } => {
                crate::adapters::team::present(router, core, player, player_state);
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

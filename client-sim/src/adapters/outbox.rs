//! The outbox: work a registry callback or an adapter left for the router, and the one way the
//! client broadcasts.
//!
//! A registry callback receives the registry and [`ClientState`](super::ClientState), not the
//! router, so a gate that latches pushes a [`Dispatch`] and returns; the gates' pump
//! (`gates::pump`) performs each in order with the router at hand. This module owns the outbox's
//! vocabulary and [`broadcast`]; it performs nothing.

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId};

use super::ClientCore;
use super::character::{GenerationRetired, GenerationScoped};
use super::pawn_team::Presentation;
use super::rep_notify::RemoteRepNotify;

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

/// Broadcasts `payload` on `channel`, without pumping the outbox (the caller pumps, or is the
/// pump). A refused broadcast is a violation, and the router has logged it too.
pub(crate) fn broadcast<T: Payload>(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    channel: Channel<T>,
    payload: &T,
) {
    if let Err(error) = router.broadcast(core, channel, payload) {
        core.state
            .stats
            .violation(format!("router: broadcast on {} refused: {error}", channel.tag()));
    }
}

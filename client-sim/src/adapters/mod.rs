//! Feature adapters: they observe the domain objects through router notifications and by
//! sampling current state when they attach to a world, and publish readiness facts into the
//! lifecycle registry (docs/spec/gates.md G13: producers → adapters → registry).
//!
//! Two adapters live as long as the game instance: the world adapter (which attaches and
//! detaches the others at each world's creation and teardown) and the login adapter. The others
//! attach to one world: their listeners are held by that world's [`Lifetime`] and retired with
//! it, and they start by sampling what already exists, so they never depend on arrival order.
//! Attach order is delivery order (the router delivers in registration order): player state,
//! UI, team, character, then the local player's widget/team gate, so each finds the scopes and
//! facts of the ones before it; then the character adapter's deferred RepNotifies and the pawn
//! team presentation, which need the generations and facts of all of them. Adapters define the
//! requirements of their gates; the registry knows none of them. They never change a domain
//! object.
//!
//! This is the lowest layer that listens, so it also owns what the layers above share: the
//! client's state ([`ClientCore`], [`ClientState`]), the outbox of work left for the router, the
//! listening and publishing helpers, and its own announcements on the router (pawn generations
//! scoped and retired, deferred RepNotifies, team presentations). It imports the domain, the
//! domain's notifications, the ids and the figures, and nothing of the gates or the checks.

mod character;
mod local_player;
mod login;
mod outbox;
pub(crate) mod pawn_team;
mod player_state;
pub(crate) mod rep_notify;
mod state;
pub(crate) mod team;
mod ui;
mod world;

use gatehouse_messaging::{Channel, Channels, Delivery, Lifetime, Listen, Match, Payload, Router};

pub use character::{
    CHARACTER_RETIRED, CHARACTER_SCOPED, GenerationRetired, GenerationScoped, LOCAL_GATE,
    REMOTE_GATE, RetireReason, Route, route,
};
pub use local_player::LOCAL_PLAYER_GATE;
pub(crate) use outbox::{Dispatch, broadcast};
pub use pawn_team::{PAWN_PRESENTATION, PAWN_TEAM_PRESENTATION, PawnTeamPresented};
pub use rep_notify::{REMOTE_CHARACTER_REP_NOTIFY, RemoteRepNotify, RepNotifyKind};
pub(crate) use state::WorldScopes;
pub use state::{ClientCore, ClientState};
pub use team::{PRESENTATION, TEAM_PRESENTATION_CHANGED};

/// Declares the adapters' own channels, once each.
///
/// # Errors
/// A [`gatehouse_messaging::Error`] if a channel were declared twice or its tag were missing from
/// the catalog.
pub fn declare_channels(
    channels: &mut Channels,
) -> Result<&mut Channels, gatehouse_messaging::Error> {
    channels
        .declare(TEAM_PRESENTATION_CHANGED)?
        .declare(PAWN_TEAM_PRESENTATION)?
        .declare(CHARACTER_SCOPED)?
        .declare(CHARACTER_RETIRED)?
        .declare(REMOTE_CHARACTER_REP_NOTIFY)
}

/// Registers `callback` on `channel` (exact match) and gives the listener to `lifetime`. A refused
/// registration is counted by the live checks and logged by the router.
pub(crate) fn hold<T: Payload>(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    lifetime: &mut Lifetime,
    channel: Channel<T>,
    callback: impl Fn(&mut Delivery<'_, ClientCore>, &T) + 'static,
) {
    match router.listen(core, Listen::channel(channel, Match::Exact), callback) {
        Ok(listener) => lifetime.hold(listener),
        Err(error) => core
            .state
            .stats
            .violation(format!("router: listener on {} refused: {error}", channel.tag())),
    }
}

/// Registers the game-instance adapters (world, login) into `lifetime` and samples the login.
pub(crate) fn attach_game_instance(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    lifetime: &mut Lifetime,
) {
    world::listen(router, core, lifetime);
    login::listen(router, core, lifetime);
    login::sample(core);
}

/// Attaches the world adapters to the world just scoped: each registers its listeners into the
/// world's lifetime, then samples current state, in delivery order.
pub(crate) fn attach_world(router: &Router<ClientCore>, core: &mut ClientCore) -> Lifetime {
    let mut lifetime = Lifetime::new("world");
    world::listen_world(router, core, &mut lifetime);
    player_state::listen(router, core, &mut lifetime);
    ui::listen(router, core, &mut lifetime);
    team::listen(router, core, &mut lifetime);
    character::listen(router, core, &mut lifetime);
    local_player::listen(router, core, &mut lifetime);
    rep_notify::listen(router, core, &mut lifetime);
    pawn_team::listen(router, core, &mut lifetime);

    world::sample(core);
    player_state::sample(core);
    ui::sample(core);
    team::sample(core);
    character::sample(core);
    local_player::evaluate(core);
    pawn_team::sample(core);
    lifetime
}

/// Detaches the world adapters from the world being torn down: every pawn generation is
/// announced retired and its deferred RepNotifies discarded, and the pawn team requests are
/// forgotten; the caller then retires the world's scopes (and their waits) and listeners.
pub(crate) fn detach_world(core: &mut ClientCore) {
    character::detach(core);
    rep_notify::discard_all(core);
    core.state.local_player_gate = Default::default();
    core.state.pawn_team = Default::default();
}

/// Publishes (`ready`) or closes `fact` on `token`. A refusal means the scope was retired under
/// the caller, which is the registry doing its job; it is logged, not propagated.
pub(crate) fn publish(
    core: &mut ClientCore,
    token: gatehouse_lifecycle::ScopeToken,
    fact: gatehouse_tags::GameplayTag,
    ready: bool,
) {
    let result = if ready {
        core.registry.set_ready(token, fact, true, &mut core.state)
    } else {
        core.registry.clear(token, fact)
    };
    if let Err(error) = result {
        tracing::debug!(%error, "fact refused");
    }
}

/// The current scope of `player`'s player state, if it is scoped in the current world.
pub(crate) fn player_state_token(
    core: &ClientCore,
    player: &gatehouse_protocol::PlayerId,
) -> Option<gatehouse_lifecycle::ScopeToken> {
    let object = core.state.player_state_ids.get(player)?;
    core.registry.token(object)
}

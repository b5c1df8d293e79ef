//! The world adapter: attaches the world adapters when a world is created, publishes
//! `Lifecycle.Fact.World.BeginPlay` when it begins play, and at teardown retires every scope the
//! world is the lifetime of and every listener its [`Lifetime`](gatehouse_messaging::Lifetime)
//! holds (docs/spec/gates.md G7).
//!
//! Its creation and teardown listeners live as long as the game instance; its begin-play
//! listener is attached to each world like the other adapters.

use gatehouse_messaging::{Lifetime, Router};
use gatehouse_tags::catalog::LIFECYCLE_FACT_WORLD_BEGIN_PLAY;

use crate::ids::{LOCAL_PLAYER, WorldId, world_object};
use crate::notifications::{WORLD_BEGIN_PLAY, WORLD_CREATED, WORLD_TORN_DOWN};

use super::{ClientCore, WorldScopes, attach_world, detach_world, hold, publish};

/// Game-instance listeners: world created, world torn down.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, WORLD_CREATED, |d, notice| {
        let router = d.router();
        created(router, d.state(), notice.world);
    });
    hold(router, core, lifetime, WORLD_TORN_DOWN, |d, notice| torn_down(d.state(), notice.world));
}

/// World listener: begin play.
pub(super) fn listen_world(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    lifetime: &mut Lifetime,
) {
    hold(router, core, lifetime, WORLD_BEGIN_PLAY, |d, _| sample(d.state()));
}

/// Publishes begin-play if the world already plays.
pub(super) fn sample(core: &mut ClientCore) {
    let Some(scopes) = core.state.world else { return };
    if core.state.domain.is_playing() {
        publish(core, scopes.world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true);
    }
}

/// A world was created:
/// 1. scope it (its own lifetime) and the local player under it;
/// 2. attach the world adapters, which sample what already exists.
fn created(router: &Router<ClientCore>, core: &mut ClientCore, world: WorldId) {
    if core.state.domain.world().map(|w| w.id()) != Some(world) {
        return;
    }
    let object = world_object(world);
    let token = core.registry.scope(object, object);
    let local_player = core
        .state
        .domain
        .local_player()
        .is_some()
        .then(|| core.registry.scope(LOCAL_PLAYER, object));
    core.state.world = Some(WorldScopes { id: world, world: token, local_player });
    let lifetime = attach_world(router, core);
    core.state.world_listeners = Some(lifetime);
}

/// A world was torn down:
/// 1. the adapters detach (every pawn generation is announced retired);
/// 2. every scope whose lifetime is the world is reset, with its facts and waits;
/// 3. the world's listeners are removed.
fn torn_down(core: &mut ClientCore, world: WorldId) {
    if core.state.world.map(|w| w.id) != Some(world) {
        return;
    }
    detach_world(core);
    let retired = core.registry.reset_lifetime(world_object(world));
    core.state.world = None;
    let listeners = core.state.world_listeners.take();
    let held = listeners.as_ref().map_or(0, Lifetime::held_count);
    drop(listeners);
    let router = &mut core.state.stats.router;
    router.world_lifetimes_retired += 1;
    router.world_listeners_retired += held as u64;
    router.world_scopes_retired += retired as u64;
}

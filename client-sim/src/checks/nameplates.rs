//! A consumer of the public gate API, as a character Blueprint would use it: for every pawn
//! generation, a nameplate subscribes to that pawn's character gate (local or remote by its
//! route) with the pawn as both listener and subject. Its callbacks feed the live checks, which
//! expect exactly one per generation whose gate opened. It uses only the public gate API, never
//! the registry.

use gatehouse_messaging::{Lifetime, Router};
use gatehouse_tags::catalog::{
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY, LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
};

use crate::adapters::{CHARACTER_SCOPED, ClientCore, Route, hold};
use crate::ids::pawn_object;

use super::GateChecks;

/// Registers the nameplate consumer for the game instance's lifetime; what it sees feeds `checks`.
pub(crate) fn listen(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    lifetime: &mut Lifetime,
    checks: &GateChecks,
) {
    let checks = checks.clone();
    hold(router, core, lifetime, CHARACTER_SCOPED, move |d, notice| {
        let core = d.state();
        let gate = match notice.route {
            Route::Local => LIFECYCLE_GATE_CHARACTER_LOCAL_READY,
            Route::Remote => LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
        };
        let pawn = pawn_object(notice.pawn);
        if core.registry.token(pawn) != Some(notice.token) {
            // Retired again before its announcement arrived: nothing to subscribe to.
            return;
        }
        let fired = checks.clone();
        let callback = move |state: &mut _, fired_gate| {
            fired.run(state, |account, state| {
                account.subscription_fired(fired_gate, &mut state.stats)
            });
        };
        let ClientCore { registry, state, subscriptions } = &mut *core;
        match subscriptions.subscribe(registry, state, pawn, pawn, gate, callback) {
            Ok(_) => checks.run(&mut core.state, |account, state| {
                account.subscribed(notice.token, &mut state.stats);
            }),
            Err(error) => core.state.stats.violation(format!(
                "nameplate of pawn {} could not subscribe: {error}",
                notice.pawn
            )),
        }
    });
}

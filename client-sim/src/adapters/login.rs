//! The login adapter: mirrors the validated login state onto `Lifecycle.Fact.Nakama.LoginSucceeded`
//! on the login object, scoped under the game instance, so travel never clears it; the end of
//! the login retires the scope (seed 000, login fact). It never touches world scopes, and no world
//! teardown touches it.

use gatehouse_messaging::{Lifetime, Router};
use gatehouse_tags::catalog::LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED;

use crate::ids::{GAME_INSTANCE, LOGIN};
use crate::notifications::{LOGIN_ENDED, LOGIN_SUCCEEDED};

use super::{ClientCore, hold, publish};

/// Game-instance listeners: login succeeded, login ended.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, LOGIN_SUCCEEDED, |d, _| sample(d.state()));
    hold(router, core, lifetime, LOGIN_ENDED, |d, _| sample(d.state()));
}

/// Publishes the fact while the login is active; retires the login scope once it is not.
pub(super) fn sample(core: &mut ClientCore) {
    if core.state.domain.login().is_active() {
        let token = core.registry.scope(LOGIN, GAME_INSTANCE);
        publish(core, token, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED, true);
    } else {
        core.registry.reset_scope(LOGIN);
    }
}

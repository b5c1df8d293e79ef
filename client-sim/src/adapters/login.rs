//! The login adapter: mirrors the validated login state onto `Lifecycle.Fact.Nakama.LoginSucceeded`
//! on the login object, scoped under the game instance, so travel never clears it; the end of
//! the login retires the scope, and so does its replacement by another session (authentication
//! loss, session replacement and shutdown each close or retire the login fact), so the new
//! session's fact lives in a new generation and no wait on the old one survives. It never touches
//! world scopes, and no world teardown touches it.

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

/// Publishes the fact while the login is active, in a new generation for each validated session;
/// retires the login scope once it is not active.
pub(super) fn sample(core: &mut ClientCore) {
    let session = core.state.domain.login().player().cloned();
    if session != core.state.login_session {
        // Ended, or replaced by another session: the old generation and its waits go.
        core.registry.reset_scope(LOGIN);
    }
    core.state.login_session = session;
    if core.state.login_session.is_some() {
        let token = core.registry.scope(LOGIN, GAME_INSTANCE);
        publish(core, token, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED, true);
    }
}

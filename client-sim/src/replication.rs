//! Replication into the client: the library's session events are applied to the replicated
//! world one change at a time ([`Replication`]), and each change is announced as a local
//! notification on the router before the next lands (docs/client.md, "The replicated world").
//!
//! Before each notice the example game brings its own objects in step (the UI subsystem and the
//! team cache, [`crate::domain::Domain::before`]), and after a player state's notice the team
//! cache's change is announced. The UI subsystem's timers are announced here too. The truth is
//! always in the domain; a notification only says what changed, so a listener that attaches
//! late samples the domain and is as correct as one that heard every message. This module is the
//! only writer of the domain objects and never touches the registry.

use gatehouse_client::world::{Announce, Notice, Replication};
use gatehouse_messaging::{Channel, Payload, Router};

use crate::adapters::ClientCore;
use crate::gates::announce;
use crate::notifications::*;

/// Applies every change of `replication` to the domain, announcing each as it lands.
pub(crate) fn replicate(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    mut replication: Replication,
) {
    let now = core.state.now;
    while let Some(notice) = replication.next(&mut core.state.domain.replica, now) {
        let team = core.state.domain.before(now, &notice);
        notice.announce(&mut Announcing { router, core });
        if let (Notice::PlayerStateChanged(player, _), Some(team)) = (&notice, team) {
            let notice = TeamNotice { player: player.clone(), old: team.old, new: team.new };
            announce(router, core, TEAM_CHANGED, &notice);
        }
    }
}

/// The library's notices onto the client's router, each followed by the gates' pump.
struct Announcing<'a> {
    router: &'a Router<ClientCore>,
    core: &'a mut ClientCore,
}

impl Announce for Announcing<'_> {
    fn announce<T: Payload>(&mut self, channel: Channel<T>, payload: &T) {
        announce(self.router, self.core, channel, payload);
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

//! Live checks of the gates' contract (docs/spec/gates.md), run in every simulated client: one
//! local event per local pawn generation, one remote event per remote pawn generation, no
//! source-world callback after travel; and the widget/team gate once per readiness period. They
//! also check the remote generations' Blueprint RepNotifies (sent only once the remote gate
//! dispatched; replayed ones before any live one and before the RemoteReady subscribers; at most
//! one replay per kind) and the pawn team presentation (never for a stale generation or viewer,
//! never with a team other than the one cached, never twice for an unchanged relationship).
//!
//! The checks listen on the router, like any consumer: the character adapter's generation
//! announcements, the gate delegates, and the domain notifications that open and close a
//! readiness period. They keep their own account and never read the adapters' bookkeeping, so a
//! wrong adapter shows up as a violation here. A generation that ends before its gate could open
//! (destroyed, unpossessed, its world or the session gone) is counted apart, never as a
//! violation. `nameplates` is a consumer of the public subscription API, checked the same way.
//! `session` checks what the server promises one session (placement, one pawn, one grant per
//! kit, no end before the acknowledgement), fed by the session with each message.
//!
//! This is the top layer of the game side: it imports the gates, the adapters and the domain,
//! and nothing below imports it. What it counts goes into the client state's figures; its own
//! account of generations and periods is its own (`GateChecks`).

pub(crate) mod nameplates;
pub(crate) mod session;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Lifetime, Payload, Router};
use gatehouse_protocol::{PawnId, TeamId};

use crate::adapters::{
    self, CHARACTER_RETIRED, CHARACTER_SCOPED, ClientCore, ClientState, GenerationRetired,
    GenerationScoped, PAWN_TEAM_PRESENTATION, PawnTeamPresented, REMOTE_CHARACTER_REP_NOTIFY,
    RemoteRepNotify, RetireReason, Route, TEAM_PRESENTATION_CHANGED, hold,
};
use crate::domain::Domain;
use crate::figures::{EndedBeforeGate, GateStats, RouteCounts};
use crate::gates::{
    CharacterGateOpened, GateFired, LOCAL_CHARACTER_INIT_GATE_OPENED,
    LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, LocalPlayerReady,
    REMOTE_CHARACTER_INIT_GATE_OPENED,
};
use crate::ids::WorldId;
use crate::notifications::{
    PLAYER_STATE_REMOVED, TEAM_CHANGED, UI_RESET, WORLD_CREATED, WORLD_TORN_DOWN,
};

/// A generation pending this long, in a world that existed this long, at the session's end is
/// reported stuck (whether or not the world began play: a world that never does is stuck too).
pub const STUCK_AFTER: Duration = Duration::from_secs(5);

/// One pawn generation as the checks saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    pawn: PawnId,
    route: Route,
    world: WorldId,
    scoped_at: Instant,
    opened: bool,
    subscribed: bool,
    subscriptions_fired: u32,
    /// A RepNotify was sent live (after the release) for it.
    rep_notified_live: bool,
    /// The kinds of RepNotify replayed for it, one bit each.
    replayed_kinds: u8,
    /// The last pawn team presentation: viewer generation, team, viewer team.
    presented: Option<(ScopeToken, TeamId, TeamId)>,
}

/// The live checks of one client: their own account of every generation and readiness period,
/// shared by their listeners and subscription callbacks. The router and the registry hand those
/// the client's state, which belongs to the layers below and holds no type of this one, so the
/// account lives here, behind a shared cell; the figures it produces go to the client state's
/// [`GateStats`] like everyone else's.
#[derive(Debug, Clone, Default)]
pub(crate) struct GateChecks {
    account: Rc<RefCell<Account>>,
}

impl GateChecks {
    /// Runs `check` on the account with the client state. The checks never reach the router or
    /// the registry while they hold the account, so it is never busy; if it were, the observation
    /// is lost and counted as a violation rather than a panic.
    fn run(&self, state: &mut ClientState, check: impl FnOnce(&mut Account, &mut ClientState)) {
        match self.account.try_borrow_mut() {
            Ok(mut account) => check(&mut account, state),
            Err(_) => {
                state.stats.violation("live checks re-entered: an observation was lost".into())
            }
        }
    }

    /// Registers a listener on `channel` (for `lifetime`) that runs `check` on the account for
    /// each notice.
    fn hold<T: Payload>(
        &self,
        router: &Router<ClientCore>,
        core: &mut ClientCore,
        lifetime: &mut Lifetime,
        channel: Channel<T>,
        check: impl Fn(&mut Account, &mut ClientState, &T) + 'static,
    ) {
        let checks = self.clone();
        hold(router, core, lifetime, channel, move |d, notice| {
            checks.run(&mut d.state().state, |account, state| check(account, state, notice));
        });
    }

    /// The figures at the end of the session, from `stats` (the client's figures so far): every
    /// generation still live and unopened is counted as ended by the session (and as stuck if it
    /// waited long in a playing world). Changes nothing.
    pub(crate) fn finish(&self, now: Instant, stats: &GateStats) -> GateStats {
        let mut stats = stats.clone();
        match self.account.try_borrow() {
            Ok(account) => account.finish(now, &mut stats),
            Err(_) => stats.violation("live checks busy at the end of the session".into()),
        }
        stats
    }
}

/// What the live checks saw.
#[derive(Debug, Clone, Default)]
struct Account {
    /// The current world and when it was created.
    world: Option<(WorldId, Instant)>,
    /// Every live generation.
    generations: BTreeMap<ScopeToken, Seen>,
    /// The local generation whose local gate dispatched in the current world, while it lives.
    local_dispatched: Option<ScopeToken>,
    /// The widget/team readiness period is open.
    period_open: bool,
}

impl Account {
    fn world_created(&mut self, world: WorldId, now: Instant, stats: &mut GateStats) {
        self.world = Some((world, now));
        self.local_dispatched = None;
        self.period_open = false;
        stats.worlds_created += 1;
    }

    fn world_torn_down(&mut self) {
        self.world = None;
        self.period_open = false;
    }

    fn current_world(&self) -> Option<WorldId> {
        self.world.map(|(world, _)| world)
    }

    fn scoped(&mut self, notice: &GenerationScoped, now: Instant, stats: &mut GateStats) {
        let seen = Seen {
            pawn: notice.pawn,
            route: notice.route,
            world: notice.world,
            scoped_at: now,
            opened: false,
            subscribed: false,
            subscriptions_fired: 0,
            rep_notified_live: false,
            replayed_kinds: 0,
            presented: None,
        };
        if self.generations.insert(notice.token, seen).is_some() {
            stats.violation(format!(
                "pawn {} generation {} scoped twice",
                notice.pawn, notice.token
            ));
        }
        if Some(notice.world) != self.current_world() {
            stats.violation(format!(
                "pawn {} scoped in {} while the current world is another",
                notice.pawn, notice.world
            ));
        }
        bump_route(&mut stats.pawn_generations, notice.route);
    }

    fn retired(&mut self, notice: &GenerationRetired, stats: &mut GateStats) {
        let Some(seen) = self.generations.remove(&notice.token) else {
            stats.violation(format!("pawn {} retired a generation never scoped", notice.pawn));
            return;
        };
        self.close_generation(notice.token, seen, notice.reason, stats);
    }

    fn close_generation(
        &mut self,
        token: ScopeToken,
        seen: Seen,
        reason: RetireReason,
        stats: &mut GateStats,
    ) {
        if self.local_dispatched == Some(token) {
            self.local_dispatched = None;
        }
        if !seen.opened {
            match seen.route {
                Route::Local => bump_reason(&mut stats.local_ended_before_gate, reason),
                Route::Remote => bump_reason(&mut stats.remote_ended_before_gate, reason),
            }
        } else if seen.subscribed && seen.subscriptions_fired == 0 {
            stats.violation(format!(
                "pawn {} generation {token}: its gate opened but its public subscription never fired",
                seen.pawn
            ));
        }
    }

    /// One gate event for a generation: checks it is known, of the right route, first, current
    /// and consistent with the live character.
    fn character_gate(
        &mut self,
        opened: &CharacterGateOpened,
        route: Route,
        domain: &Domain,
        now: Instant,
        stats: &mut GateStats,
    ) {
        let what = match route {
            Route::Local => "local",
            Route::Remote => "remote",
        };
        let current = self.current_world();
        let Some(seen) = self.generations.get_mut(&opened.token) else {
            stats.violation(format!(
                "{what} gate of pawn {} for an unknown or retired generation",
                opened.pawn
            ));
            return;
        };
        let mut problems = Vec::new();
        if seen.route != route {
            problems.push(format!("routed {:?}: exclusive routing broken", seen.route));
        }
        if seen.opened {
            problems.push("opened twice in one generation".to_owned());
        }
        if Some(opened.world) != current || seen.world != opened.world {
            problems.push(format!("callback from {} after travelling away", opened.world));
        }
        let live_route =
            domain.characters().get(opened.pawn).and_then(|c| adapters::route(c.role()));
        if live_route != Some(route) {
            problems.push(format!("the live character routes {live_route:?}"));
        }
        seen.opened = true;
        let waited = now.saturating_duration_since(seen.scoped_at);
        stats.gate_wait_ms.push(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
        match route {
            Route::Local => {
                stats.local_ready_opened += 1;
                self.local_dispatched = Some(opened.token);
            }
            Route::Remote => {
                stats.remote_ready_opened += 1;
                let local_first = self
                    .local_dispatched
                    .and_then(|local| self.generations.get(&local))
                    .is_some_and(|local| local.opened && Some(local.world) == current);
                if !local_first {
                    problems.push("remote gate before the local viewer's dispatch returned".into());
                }
            }
        }
        for problem in problems {
            stats.violation(format!(
                "{what} gate of pawn {} ({}): {problem}",
                opened.pawn, opened.token
            ));
        }
    }

    fn local_player_ready(
        &mut self,
        notice: &LocalPlayerReady,
        domain: &Domain,
        stats: &mut GateStats,
    ) {
        let mut problems = Vec::new();
        if self.period_open {
            problems.push("opened twice in one readiness period");
        }
        if Some(notice.world) != self.current_world() {
            problems.push("callback from a world travelled away from");
        }
        if domain.local_player() != Some(&notice.player) {
            problems.push("not the local player");
        }
        let live = domain.ui().is_ready(&notice.player)
            && domain.teams().team_of(&notice.player).is_some();
        if !live {
            problems.push("widget controller or team not ready");
        }
        self.period_open = true;
        stats.widget_controller_and_team_ready_opened += 1;
        for problem in problems {
            stats.violation(format!("widget/team gate of {}: {problem}", notice.player));
        }
    }

    /// Something that may end a readiness period happened: it ends if the local player's widget
    /// controller or valid team is gone now.
    fn period_maybe_closed(&mut self, domain: &Domain) {
        let Some(me) = domain.local_player() else { return };
        // Both go with the player state: its widget controller and cached team.
        let holds = domain.ui().is_ready(me) && domain.teams().team_of(me).is_some();
        if !holds {
            self.period_open = false;
        }
    }

    /// A Blueprint RepNotify of a remote generation was sent: checks it is for a live remote
    /// generation whose gate dispatched, and that a replayed one comes before every live one and
    /// before the RemoteReady subscribers, once per kind.
    fn rep_notify(&mut self, notice: &RemoteRepNotify, stats: &mut GateStats) {
        if notice.replayed {
            stats.rep_notifies_replayed += 1;
        } else {
            stats.rep_notifies_delivered += 1;
        }
        let problem = match self.generations.get_mut(&notice.token) {
            None => Some("for an unknown or retired generation"),
            Some(seen) if seen.route != Route::Remote => Some("for a local generation"),
            Some(seen) if !seen.opened => Some("before its remote gate opened"),
            Some(seen) if !notice.replayed => {
                seen.rep_notified_live = true;
                None
            }
            Some(seen) => {
                let bit = 1u8 << (notice.kind as u8);
                let first = seen.replayed_kinds & bit == 0;
                seen.replayed_kinds |= bit;
                if seen.rep_notified_live {
                    Some("replayed after a live one")
                } else if seen.subscriptions_fired > 0 {
                    Some("replayed after its RemoteReady subscribers ran")
                } else if !first {
                    Some("replayed twice for one kind: deferral not coalesced")
                } else {
                    None
                }
            }
        };
        if let Some(problem) = problem {
            stats.violation(format!(
                "RepNotify {:?} of pawn {} ({}) {problem}",
                notice.kind, notice.pawn, notice.token
            ));
        }
    }

    /// `DispatchTeamPresentation`: checks the target and the viewer are live generations whose
    /// gates dispatched in the current world, the viewer being the local pawn, that both teams
    /// are the ones cached now, and that the relationship was not presented already.
    fn pawn_team_presented(
        &mut self,
        notice: &PawnTeamPresented,
        domain: &Domain,
        stats: &mut GateStats,
    ) {
        stats.pawn_team_presentations += 1;
        let mut problems: Vec<String> = Vec::new();
        if Some(notice.world) != self.current_world() {
            problems.push(format!("presented from {} after travelling away", notice.world));
        }
        let viewer = self.generations.get(&notice.viewer);
        if !viewer.is_some_and(|v| v.route == Route::Local && v.opened) {
            problems.push("for a stale viewer generation or one whose gate did not open".into());
        } else if self.local_dispatched != Some(notice.viewer) {
            problems.push("the viewer is not the local pawn whose gate dispatched".into());
        }
        let owner = domain.characters().get(notice.pawn).map(|c| c.owner());
        if owner != Some(&notice.player) {
            problems.push(format!("{} does not own the pawn", notice.player));
        }
        let cached = domain.teams().team_of(&notice.player);
        if cached != Some(notice.team) {
            problems
                .push(format!("mismatched team: presented {:?}, cached {cached:?}", notice.team));
        }
        let viewer_cached = domain.local_player().and_then(|me| domain.teams().team_of(me));
        if viewer_cached != Some(notice.viewer_team) {
            problems.push(format!(
                "mismatched viewer team: presented {:?}, cached {viewer_cached:?}",
                notice.viewer_team
            ));
        }
        let presented = (notice.viewer, notice.team, notice.viewer_team);
        match self.generations.get_mut(&notice.token) {
            None => problems.push("for a stale generation".into()),
            Some(seen) if !seen.opened => problems.push("before the target's gate opened".into()),
            Some(seen) => {
                if seen.presented.replace(presented) == Some(presented) {
                    problems.push("presented twice for an unchanged relationship".into());
                }
            }
        }
        for problem in problems {
            stats.violation(format!(
                "pawn team presentation of pawn {} ({}): {problem}",
                notice.pawn, notice.token
            ));
        }
    }

    /// The nameplate consumer subscribed for this generation.
    fn subscribed(&mut self, token: ScopeToken, stats: &mut GateStats) {
        stats.subscriptions_registered += 1;
        if let Some(seen) = self.generations.get_mut(&token) {
            seen.subscribed = true;
        }
    }

    /// A public subscription fired.
    fn subscription_fired(&mut self, fired: GateFired, stats: &mut GateStats) {
        stats.subscriptions_fired += 1;
        let problem = match self.generations.get_mut(&fired.subject) {
            None => Some("for a retired generation"),
            Some(seen) => {
                seen.subscriptions_fired += 1;
                if !seen.opened {
                    Some("before its gate dispatched")
                } else if seen.subscriptions_fired > 1 {
                    Some("twice for one generation")
                } else {
                    None
                }
            }
        };
        if let Some(problem) = problem {
            stats.violation(format!(
                "subscription to {} on {} fired {problem}",
                fired.gate, fired.subject
            ));
        }
    }

    /// Closes every generation still live into `stats` as ended by the session, and counts as
    /// stuck those that waited long in a world that existed long.
    fn finish(&self, now: Instant, stats: &mut GateStats) {
        let mut copy = self.clone();
        let created = self.world.map(|(_, created)| created);
        for (token, seen) in std::mem::take(&mut copy.generations) {
            let long = |since: Instant| now.saturating_duration_since(since) >= STUCK_AFTER;
            if !seen.opened && long(seen.scoped_at) && created.is_some_and(long) {
                stats.stuck_at_end += 1;
            }
            copy.close_generation(token, seen, RetireReason::SessionEnded, stats);
        }
    }
}

/// Counts a generation of `route`.
fn bump_route(counts: &mut RouteCounts, route: Route) {
    match route {
        Route::Local => counts.local += 1,
        Route::Remote => counts.remote += 1,
    }
}

/// Counts a generation that ended before its gate opened, for `reason`.
fn bump_reason(ended: &mut EndedBeforeGate, reason: RetireReason) {
    match reason {
        RetireReason::Unpossessed => ended.unpossessed += 1,
        RetireReason::Destroyed => ended.destroyed += 1,
        RetireReason::Rerouted => ended.rerouted += 1,
        RetireReason::WorldTornDown => ended.world_torn_down += 1,
        RetireReason::SessionEnded => ended.session_ended += 1,
    }
}

/// Registers the checks' listeners for the game instance's lifetime.
pub(crate) fn listen(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    lifetime: &mut Lifetime,
    checks: &GateChecks,
) {
    checks.hold(router, core, lifetime, WORLD_CREATED, |account, state, n| {
        account.world_created(n.world, state.now, &mut state.stats);
    });
    checks.hold(router, core, lifetime, WORLD_TORN_DOWN, |account, _, _| {
        account.world_torn_down();
    });
    checks.hold(router, core, lifetime, CHARACTER_SCOPED, |account, state, n| {
        account.scoped(n, state.now, &mut state.stats);
    });
    checks.hold(router, core, lifetime, CHARACTER_RETIRED, |account, state, n| {
        account.retired(n, &mut state.stats);
    });
    checks.hold(router, core, lifetime, LOCAL_CHARACTER_INIT_GATE_OPENED, |account, state, n| {
        account.character_gate(n, Route::Local, &state.domain, state.now, &mut state.stats);
    });
    checks.hold(router, core, lifetime, REMOTE_CHARACTER_INIT_GATE_OPENED, |account, state, n| {
        account.character_gate(n, Route::Remote, &state.domain, state.now, &mut state.stats);
    });
    checks.hold(
        router,
        core,
        lifetime,
        LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
        |account, state, n| account.local_player_ready(n, &state.domain, &mut state.stats),
    );
    checks.hold(router, core, lifetime, UI_RESET, |account, state, _| {
        state.stats.ui_resets += 1;
        account.period_maybe_closed(&state.domain);
    });
    checks.hold(router, core, lifetime, TEAM_CHANGED, |account, state, _| {
        state.stats.team_changes += 1;
        account.period_maybe_closed(&state.domain);
    });
    checks.hold(router, core, lifetime, PLAYER_STATE_REMOVED, |account, state, _| {
        account.period_maybe_closed(&state.domain);
    });
    checks.hold(router, core, lifetime, TEAM_PRESENTATION_CHANGED, |_, state, _| {
        state.stats.team_presentations += 1;
    });
    checks.hold(router, core, lifetime, REMOTE_CHARACTER_REP_NOTIFY, |account, state, n| {
        account.rep_notify(n, &mut state.stats);
    });
    checks.hold(router, core, lifetime, PAWN_TEAM_PRESENTATION, |account, state, n| {
        account.pawn_team_presented(n, &state.domain, &mut state.stats);
    });
}

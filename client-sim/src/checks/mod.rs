//! Live checks of seed 000's runtime expectations, run in every simulated client ("Verification
//! coverage": one local event per local pawn generation, one remote event per remote pawn
//! generation, no source-world callback after travel; and the widget/team gate once per
//! readiness period). They also check the remote generations' Blueprint RepNotifies (sent only
//! once the remote gate dispatched; replayed ones before any live one and before the RemoteReady
//! subscribers; at most one replay per kind) and the pawn team presentation (never for a stale
//! generation or viewer, never with a team other than the one cached, never twice for an
//! unchanged relationship).
//!
//! The checks listen on the router, like any consumer: the character adapter's generation
//! announcements, the gate delegates, and the domain notifications that open and close a
//! readiness period. They keep their own account and never read the adapters' bookkeeping, so a
//! wrong adapter shows up as a violation here. A generation that ends before its gate could open
//! (destroyed, unpossessed, its world or the session gone) is counted apart, never as a
//! violation. `nameplates` is a consumer of the public subscription API, checked the same way.

pub(crate) mod nameplates;
mod stats;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Lifetime, Router};
use gatehouse_protocol::{PawnId, TeamId};

pub use stats::{EndedBeforeGate, GateStats, RouteCounts, RouterFigures};

use crate::adapters::{self, RetireReason, Route, hold};
use crate::core::ClientCore;
use crate::domain::Domain;
use crate::gates::GateFired;
use crate::ids::WorldId;
use crate::notifications::*;

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

/// The live checks' account.
#[derive(Debug, Default)]
pub struct GateChecks {
    /// The current world and when it was created.
    world: Option<(WorldId, Instant)>,
    /// Every live generation.
    generations: BTreeMap<ScopeToken, Seen>,
    /// The local generation whose local gate dispatched in the current world, while it lives.
    local_dispatched: Option<ScopeToken>,
    /// The widget/team readiness period is open.
    period_open: bool,
    stats: GateStats,
}

impl GateChecks {
    /// The figures so far.
    pub fn stats(&self) -> &GateStats {
        &self.stats
    }

    /// Records a violation of a runtime expectation.
    pub(crate) fn violation(&mut self, what: String) {
        tracing::warn!(violation = %what, "lifecycle gate violation");
        self.stats.gate_violations += 1;
        if self.stats.violation_samples.len() < stats::VIOLATION_SAMPLES {
            self.stats.violation_samples.push(what);
        }
    }

    /// A router refusal in the client: the gate machinery lost a listener or a notification.
    pub(crate) fn router_error(&mut self, what: String) {
        self.violation(format!("router: {what}"));
    }

    /// A world lifetime was retired with `listeners` listeners and `scopes` scopes.
    pub(crate) fn world_retired(&mut self, scopes: usize, listeners: usize) {
        let router = &mut self.stats.router;
        router.world_lifetimes_retired += 1;
        router.world_listeners_retired += listeners as u64;
        router.world_scopes_retired += scopes as u64;
    }

    pub(crate) fn router_figures(&mut self) -> &mut RouterFigures {
        &mut self.stats.router
    }

    fn world_created(&mut self, world: WorldId, now: Instant) {
        self.world = Some((world, now));
        self.local_dispatched = None;
        self.period_open = false;
        self.stats.worlds_created += 1;
    }

    fn world_torn_down(&mut self) {
        self.world = None;
        self.period_open = false;
    }

    fn current_world(&self) -> Option<WorldId> {
        self.world.map(|(world, _)| world)
    }

    fn scoped(&mut self, notice: &GenerationScoped, now: Instant) {
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
            self.violation(format!(
                "pawn {} generation {} scoped twice",
                notice.pawn, notice.token
            ));
        }
        if Some(notice.world) != self.current_world() {
            self.violation(format!(
                "pawn {} scoped in {} while the current world is another",
                notice.pawn, notice.world
            ));
        }
        self.stats.pawn_generations.bump(notice.route);
    }

    fn retired(&mut self, notice: &GenerationRetired) {
        let Some(seen) = self.generations.remove(&notice.token) else {
            self.violation(format!("pawn {} retired a generation never scoped", notice.pawn));
            return;
        };
        self.close_generation(notice.token, seen, notice.reason);
    }

    fn close_generation(&mut self, token: ScopeToken, seen: Seen, reason: RetireReason) {
        if self.local_dispatched == Some(token) {
            self.local_dispatched = None;
        }
        if !seen.opened {
            match seen.route {
                Route::Local => self.stats.local_ended_before_gate.bump(reason),
                Route::Remote => self.stats.remote_ended_before_gate.bump(reason),
            }
        } else if seen.subscribed && seen.subscriptions_fired == 0 {
            self.violation(format!(
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
    ) {
        let what = match route {
            Route::Local => "local",
            Route::Remote => "remote",
        };
        let current = self.current_world();
        let Some(seen) = self.generations.get_mut(&opened.token) else {
            self.violation(format!(
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
        self.stats.gate_wait_ms.push(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
        match route {
            Route::Local => {
                self.stats.local_ready_opened += 1;
                self.local_dispatched = Some(opened.token);
            }
            Route::Remote => {
                self.stats.remote_ready_opened += 1;
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
            self.violation(format!(
                "{what} gate of pawn {} ({}): {problem}",
                opened.pawn, opened.token
            ));
        }
    }

    fn local_player_ready(&mut self, notice: &LocalPlayerReady, domain: &Domain) {
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
        self.stats.widget_controller_and_team_ready_opened += 1;
        for problem in problems {
            self.violation(format!("widget/team gate of {}: {problem}", notice.player));
        }
    }

    /// Something that may end a readiness period happened: it ends if the local player's widget
    /// controller or valid team is gone now.
    fn period_maybe_closed(&mut self, domain: &Domain) {
        let Some(me) = domain.local_player() else { return };
        let holds = domain.local_player_state().is_some()
            && domain.ui().is_ready(me)
            && domain.teams().team_of(me).is_some();
        if !holds {
            self.period_open = false;
        }
    }

    /// A Blueprint RepNotify of a remote generation was sent: checks it is for a live remote
    /// generation whose gate dispatched, and that a replayed one comes before every live one and
    /// before the RemoteReady subscribers, once per kind.
    fn rep_notify(&mut self, notice: &RemoteRepNotify) {
        if notice.replayed {
            self.stats.rep_notifies_replayed += 1;
        } else {
            self.stats.rep_notifies_delivered += 1;
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
            self.violation(format!(
                "RepNotify {:?} of pawn {} ({}) {problem}",
                notice.kind, notice.pawn, notice.token
            ));
        }
    }

    /// The character adapter deferred a RepNotify (`coalesced`: replacing one of its kind).
    pub(crate) fn rep_notify_deferred(&mut self, coalesced: bool) {
        self.stats.rep_notifies_deferred += 1;
        if coalesced {
            self.stats.rep_notifies_coalesced += 1;
        }
    }

    /// The character adapter discarded `count` deferred RepNotifies with a retired generation.
    pub(crate) fn rep_notifies_discarded(&mut self, count: usize) {
        self.stats.rep_notifies_discarded += count as u64;
    }

    /// The pawn team presentation refused a woken request that live state contradicted.
    pub(crate) fn pawn_team_presentation_refused(&mut self) {
        self.stats.pawn_team_presentations_refused += 1;
    }

    /// `DispatchTeamPresentation`: checks the target and the viewer are live generations whose
    /// gates dispatched in the current world, the viewer being the local pawn, that both teams
    /// are the ones cached now, and that the relationship was not presented already.
    fn pawn_team_presented(&mut self, notice: &PawnTeamPresented, domain: &Domain) {
        self.stats.pawn_team_presentations += 1;
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
            self.violation(format!(
                "pawn team presentation of pawn {} ({}): {problem}",
                notice.pawn, notice.token
            ));
        }
    }

    /// The nameplate consumer subscribed for this generation.
    pub(crate) fn subscribed(&mut self, token: ScopeToken) {
        self.stats.subscriptions_registered += 1;
        if let Some(seen) = self.generations.get_mut(&token) {
            seen.subscribed = true;
        }
    }

    /// A public subscription fired.
    pub(crate) fn subscription_fired(&mut self, fired: GateFired) {
        self.stats.subscriptions_fired += 1;
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
            self.violation(format!(
                "subscription to {} on {} fired {problem}",
                fired.gate, fired.subject
            ));
        }
    }

    /// The figures at the end of the session: every generation still live and unopened is
    /// counted as ended by the session (and as stuck if it waited long in a playing world).
    pub(crate) fn finish(&self, now: Instant) -> GateStats {
        let mut copy = GateChecks {
            world: self.world,
            generations: self.generations.clone(),
            local_dispatched: self.local_dispatched,
            period_open: self.period_open,
            stats: self.stats.clone(),
        };
        let created = self.world.map(|(_, created)| created);
        for (token, seen) in std::mem::take(&mut copy.generations) {
            let long = |since: Instant| now.saturating_duration_since(since) >= STUCK_AFTER;
            if !seen.opened && long(seen.scoped_at) && created.is_some_and(long) {
                copy.stats.stuck_at_end += 1;
            }
            copy.close_generation(token, seen, RetireReason::SessionEnded);
        }
        copy.stats
    }
}

/// Registers the checks' listeners for the game instance's lifetime.
pub(crate) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, WORLD_CREATED, |d, n| {
        let state = &mut d.state().state;
        state.checks.world_created(n.world, state.now);
    });
    hold(router, core, lifetime, WORLD_TORN_DOWN, |d, _| d.state().state.checks.world_torn_down());
    hold(router, core, lifetime, CHARACTER_SCOPED, |d, n| {
        let state = &mut d.state().state;
        state.checks.scoped(n, state.now);
    });
    hold(router, core, lifetime, CHARACTER_RETIRED, |d, n| d.state().state.checks.retired(n));
    hold(router, core, lifetime, LOCAL_CHARACTER_INIT_GATE_OPENED, |d, n| {
        let state = &mut d.state().state;
        state.checks.character_gate(n, Route::Local, &state.domain, state.now);
    });
    hold(router, core, lifetime, REMOTE_CHARACTER_INIT_GATE_OPENED, |d, n| {
        let state = &mut d.state().state;
        state.checks.character_gate(n, Route::Remote, &state.domain, state.now);
    });
    hold(router, core, lifetime, LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, |d, n| {
        let state = &mut d.state().state;
        state.checks.local_player_ready(n, &state.domain);
    });
    hold(router, core, lifetime, UI_RESET, |d, _| {
        let state = &mut d.state().state;
        state.checks.stats.ui_resets += 1;
        state.checks.period_maybe_closed(&state.domain);
    });
    hold(router, core, lifetime, TEAM_CHANGED, |d, _| {
        let state = &mut d.state().state;
        state.checks.stats.team_changes += 1;
        state.checks.period_maybe_closed(&state.domain);
    });
    hold(router, core, lifetime, PLAYER_STATE_REMOVED, |d, _| {
        let state = &mut d.state().state;
        state.checks.period_maybe_closed(&state.domain);
    });
    hold(router, core, lifetime, TEAM_PRESENTATION_CHANGED, |d, _| {
        d.state().state.checks.stats.team_presentations += 1;
    });
    hold(router, core, lifetime, REMOTE_CHARACTER_REP_NOTIFY, |d, n| {
        d.state().state.checks.rep_notify(n);
    });
    hold(router, core, lifetime, PAWN_TEAM_PRESENTATION, |d, n| {
        let state = &mut d.state().state;
        state.checks.pawn_team_presented(n, &state.domain);
    });
}

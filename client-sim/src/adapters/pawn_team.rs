//! The pawn team presentation adapter: a pawn's team is presented to the local viewer
//! (`DispatchTeamPresentation`, the [`PAWN_TEAM_PRESENTATION`] broadcast) once both the target and
//! the local viewer have a valid team assignment, a ready widget controller, and an opened
//! character-init gate on their current pawns. Every pawn generation is a target, the viewer's own
//! included.
//!
//! - One request per target pawn generation, owned by its scope and named
//!   [`PAWN_PRESENTATION`]. Its requirements span four scopes (the target's pawn and player state,
//!   the viewer's pawn and player state), so resetting any of them retires it.
//! - A request names what it presents: those four generations and the two teams cached when it
//!   was registered. It is registered again for a new relationship (a new target or viewer pawn
//!   generation, a new player state) and when either cached team changes; a registration
//!   replaces the pending one, so a team change while waiting never presents the stale team.
//! - Cached facts wake the request; live state decides. Before dispatching, the request is checked
//!   against the live domain: both pawns, the viewer's local control, both player states, widget
//!   controllers and cached teams. A request whose scopes were retired is dropped; one that live
//!   state contradicts is refused, counted, and registered again for live state. When live state
//!   would ask for the very request just refused, its facts are stale and the notification that
//!   corrects them is on its way: that notification's listener registers it again.
//!
//! It owns its requests and nothing else: facts are the other adapters'.

use std::collections::BTreeMap;

use gatehouse_lifecycle::{Requirement, ScopeToken};
use gatehouse_messaging::{Channel, Lifetime, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId, TeamId};
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY,
    LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, MESSAGE_TEAM_PAWN_PRESENTATION,
};

use crate::domain::{Character, NetRole};
use crate::ids::{WorldId, pawn_object, pawn_of};
use crate::notifications::{
    PAWN_DESTROYED, PAWN_SPAWNED, PLAYER_STATE_CHANGED, PLAYER_STATE_REMOVED, POSSESSED,
    TEAM_CHANGED, UI_RESET, UNPOSSESSED, WORLD_BEGIN_PLAY,
};

use super::{ClientCore, Dispatch, Route, broadcast, hold, player_state_token, route};

/// `DispatchTeamPresentation`: a pawn's team is presented to the local viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PawnTeamPresented {
    /// The target pawn.
    pub pawn: PawnId,
    /// The target pawn's generation.
    pub token: ScopeToken,
    /// The target pawn's owner.
    pub player: PlayerId,
    /// The owner's cached team, presented.
    pub team: TeamId,
    /// The local viewer's current pawn generation.
    pub viewer: ScopeToken,
    /// The local viewer's cached team.
    pub viewer_team: TeamId,
    /// The world it was presented in.
    pub world: WorldId,
}
impl Payload for PawnTeamPresented {
    const NAME: &'static str = "PawnTeamPresented";
}

/// `DispatchTeamPresentation`: a pawn's team presented to the local viewer.
pub const PAWN_TEAM_PRESENTATION: Channel<PawnTeamPresented> =
    Channel::new(MESSAGE_TEAM_PAWN_PRESENTATION);

/// The request name of a pawn's team presentation, owned by the target pawn's scope.
pub const PAWN_PRESENTATION: &str = "Team.PawnPresentation";

/// What one request presents: the generations it relates and the teams cached for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Presentation {
    /// The target pawn's generation.
    target: ScopeToken,
    /// The target's owner's player state.
    target_state: ScopeToken,
    /// The target owner's cached team.
    team: TeamId,
    /// The local viewer's current pawn generation.
    viewer: ScopeToken,
    /// The local player state.
    viewer_state: ScopeToken,
    /// The local player's cached team.
    viewer_team: TeamId,
}

impl Presentation {
    /// Whether `other` relates the same generations (whatever the teams).
    fn same_relationship(&self, other: &Presentation) -> bool {
        (self.target, self.target_state, self.viewer, self.viewer_state)
            == (other.target, other.target_state, other.viewer, other.viewer_state)
    }
}

/// The adapter's account of one target pawn.
#[derive(Debug, Default, Clone, Copy)]
struct Target {
    /// Registered and not yet dispatched (pending in the registry, or woken and queued).
    pending: Option<Presentation>,
    /// The last presentation dispatched.
    presented: Option<Presentation>,
    /// The last request refused by live state, until a notification registers again.
    refused: Option<Presentation>,
}

/// Every target pawn with a request, a presentation or a refusal in the current world.
#[derive(Debug, Default)]
pub(crate) struct PawnTeamRequests {
    by_pawn: BTreeMap<PawnId, Target>,
    /// The local viewer's pawn generation when every target was last evaluated: a pawn notice
    /// that leaves it unchanged concerns only its own pawn.
    viewer: Option<ScopeToken>,
}

/// Why a target is evaluated: which differences call for a new registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A relationship may have changed (pawn, possession, player state, UI, world): only a
    /// different set of generations registers again; team changes are `Team`'s to apply.
    Relationship,
    /// A cached team changed: different teams register again too.
    Team,
    /// A request was just refused or dropped: as `Team`, but never the request just refused.
    Refused,
}

/// What live state says of a woken request.
enum Verdict {
    /// Present it.
    Agrees(PawnTeamPresented),
    /// One of its scopes was retired: stale work, dropped.
    Retired,
    /// Live state contradicts its facts.
    Disagrees(&'static str),
}

/// World listeners, after the character and team adapters so their generations and facts are
/// current: relationship changes re-evaluate, team changes re-evaluate teams. A widget controller
/// becoming ready is no relationship change: it is a fact the pending request waits for.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PAWN_SPAWNED, |d, n| pawn(d.state(), n.pawn));
    hold(router, core, lifetime, POSSESSED, |d, n| pawn(d.state(), n.pawn));
    hold(router, core, lifetime, UNPOSSESSED, |d, n| pawn(d.state(), n.pawn));
    hold(router, core, lifetime, PAWN_DESTROYED, |d, n| pawn(d.state(), n.pawn));
    hold(router, core, lifetime, WORLD_BEGIN_PLAY, |d, _| every(d.state(), Cause::Relationship));
    hold(router, core, lifetime, UI_RESET, |d, _| every(d.state(), Cause::Relationship));
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, n| {
        player(d.state(), &n.player, Cause::Relationship)
    });
    hold(router, core, lifetime, PLAYER_STATE_REMOVED, |d, n| {
        player(d.state(), &n.player, Cause::Relationship)
    });
    hold(router, core, lifetime, TEAM_CHANGED, |d, n| player(d.state(), &n.player, Cause::Team));
}

/// Registers a request for every pawn generation that exists.
pub(super) fn sample(core: &mut ClientCore) {
    every(core, Cause::Relationship);
}

/// Something about `player` changed: the local player's change concerns every target (it is the
/// viewer), another player's only its own pawns.
fn player(core: &mut ClientCore, player: &PlayerId, cause: Cause) {
    if core.state.domain.local_player() == Some(player) {
        return every(core, cause);
    }
    let pawns = core.state.domain.characters().owned_by(player);
    for pawn in pawns {
        evaluate(core, pawn, cause);
    }
}

/// Something happened to `pawn` (spawned, possessed, unpossessed, destroyed): a relationship
/// change for that pawn's target only, unless the local viewer's pawn changed with it, which
/// every target presents against. (Re-evaluating every target on every pawn notice made a
/// client's work grow with the square of the players.)
fn pawn(core: &mut ClientCore, pawn: PawnId) {
    if viewer_generation(core) != core.state.pawn_team.viewer {
        return every(core, Cause::Relationship);
    }
    evaluate(core, pawn, Cause::Relationship);
}

/// Evaluates every pawn with a generation, and every target left from one.
fn every(core: &mut ClientCore, cause: Cause) {
    core.state.pawn_team.viewer = viewer_generation(core);
    let mut pawns: Vec<PawnId> = core.state.pawn_team.by_pawn.keys().copied().collect();
    pawns.extend(core.state.domain.characters().iter().map(Character::pawn));
    pawns.sort_unstable();
    pawns.dedup();
    for pawn in pawns {
        evaluate(core, pawn, cause);
    }
}

/// Brings `pawn`'s request in line with live state:
/// 1. without a presentation to make (no generation, player state, viewer or valid team),
///    cancel what is pending and forget a target whose generation is gone;
/// 2. do nothing if that presentation was made, or is pending, as far as `cause` tells them apart,
///    or was just refused (`Cause::Refused` only);
/// 3. otherwise register it, replacing the pending request.
fn evaluate(core: &mut ClientCore, pawn: PawnId, cause: Cause) {
    let wanted = wanted(core, pawn);
    let target = core.state.pawn_team.by_pawn.entry(pawn).or_default();
    let Some(wanted) = wanted else {
        if target.pending.take().is_some() {
            core.registry.cancel(pawn_object(pawn), PAWN_PRESENTATION);
        }
        if core.state.characters.get(pawn).is_none() {
            core.state.pawn_team.by_pawn.remove(&pawn);
        }
        return;
    };
    let same = |made: Option<Presentation>| {
        made.is_some_and(|made| match cause {
            Cause::Relationship => made.same_relationship(&wanted),
            Cause::Team | Cause::Refused => made == wanted,
        })
    };
    if same(target.presented) || same(target.pending) {
        return;
    }
    if cause == Cause::Refused && target.refused == Some(wanted) {
        return;
    }
    target.refused = None;
    register(core, pawn, wanted);
}

/// The presentation live state asks for on `pawn` now, if there is one to make.
fn wanted(core: &ClientCore, pawn: PawnId) -> Option<Presentation> {
    let state = &core.state;
    let domain = &state.domain;
    let target = state.characters.get(pawn)?.token;
    let owner = domain.characters().get(pawn)?.owner();
    let me = domain.local_player()?;
    Some(Presentation {
        target,
        target_state: player_state_token(core, owner)?,
        team: domain.teams().team_of(owner)?,
        viewer: viewer_generation(core)?,
        viewer_state: player_state_token(core, me)?,
        viewer_team: domain.teams().team_of(me)?,
    })
}

/// The local viewer's current pawn: the generation the character adapter routed local whose live
/// character this client controls (autonomous proxy, possession acknowledged).
fn viewer_generation(core: &ClientCore) -> Option<ScopeToken> {
    let domain = &core.state.domain;
    let me = domain.local_player()?;
    domain.characters().autonomous().find_map(|character| {
        let record = core.state.characters.get(character.pawn())?;
        let controlled = character.owner() == me
            && character.role() == NetRole::AutonomousProxy
            && character.is_possession_acknowledged();
        (record.route == Route::Local && controlled).then_some(record.token)
    })
}

/// Registers `presentation` for `pawn`, replacing its pending request. The callback only queues
/// the dispatch: revalidation needs the live domain and the router, which [`present`] has.
fn register(core: &mut ClientCore, pawn: PawnId, presentation: Presentation) {
    let p = presentation;
    let requirements = [
        Requirement::new(p.target_state, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY),
        Requirement::new(p.target_state, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
        Requirement::new(p.target, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED),
        Requirement::new(p.viewer_state, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY),
        Requirement::new(p.viewer_state, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
        Requirement::new(p.viewer, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED),
    ];
    // Recorded first: a request whose facts are all cached is woken during registration.
    core.state.pawn_team.by_pawn.entry(pawn).or_default().pending = Some(p);
    let result = core.registry.wait_for_all(
        p.target,
        PAWN_PRESENTATION,
        &requirements,
        &mut core.state,
        move |_, state| {
            state.outbox.push_back(Dispatch::PawnTeamPresentation { pawn, presentation: p });
        },
    );
    if let Err(error) = result {
        tracing::debug!(%error, %pawn, "pawn team presentation refused by the registry");
        if let Some(target) = core.state.pawn_team.by_pawn.get_mut(&pawn) {
            target.pending = None;
        }
    }
}

/// `DispatchTeamPresentation` for a woken request, if it is still the pending one and live state
/// agrees with it; otherwise it is dropped or refused and `pawn` is evaluated again.
pub(crate) fn present(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    pawn: PawnId,
    presentation: Presentation,
) {
    let Some(target) = core.state.pawn_team.by_pawn.get_mut(&pawn) else { return };
    if target.pending != Some(presentation) {
        // Replaced after it woke (a team change in the same step): the newer request decides.
        return;
    }
    target.pending = None;
    match verdict(core, pawn, presentation) {
        Verdict::Agrees(notice) => {
            if let Some(target) = core.state.pawn_team.by_pawn.get_mut(&pawn) {
                target.presented = Some(presentation);
            }
            broadcast(router, core, PAWN_TEAM_PRESENTATION, &notice);
        }
        Verdict::Retired => evaluate(core, pawn, Cause::Refused),
        Verdict::Disagrees(why) => {
            tracing::debug!(%pawn, why, "pawn team presentation refused by live state");
            core.state.stats.pawn_team_presentations_refused += 1;
            if let Some(target) = core.state.pawn_team.by_pawn.get_mut(&pawn) {
                target.refused = Some(presentation);
            }
            evaluate(core, pawn, Cause::Refused);
        }
    }
}

/// Revalidates `p` against the registry, the character adapter's generations and the live
/// domain objects: the relationships of both pawns, both player states, local control, widget
/// controllers and cached teams.
fn verdict(core: &ClientCore, pawn: PawnId, p: Presentation) -> Verdict {
    let tokens = [p.target, p.target_state, p.viewer, p.viewer_state];
    if !tokens.into_iter().all(|token| core.registry.is_current(token)) {
        return Verdict::Retired;
    }
    match live_notice(core, pawn, p) {
        Ok(notice) => Verdict::Agrees(notice),
        Err(why) => Verdict::Disagrees(why),
    }
}

/// The notice to broadcast for `p` if live state agrees with it, or what contradicts it.
fn live_notice(
    core: &ClientCore,
    pawn: PawnId,
    p: Presentation,
) -> Result<PawnTeamPresented, &'static str> {
    let state = &core.state;
    let domain = &state.domain;
    let world = state.world.ok_or("no world")?;
    if !domain.world().is_some_and(|w| w.is_playing() && w.id() == world.id) {
        return Err("the world is not the playing one");
    }
    // The target: its generation opened its gate and still routes as it did; its owner's player
    // state is the one the request waited on; widget controller and team are live.
    let record = state.characters.get(pawn).filter(|r| r.token == p.target);
    let record = record.ok_or("the target's generation was replaced")?;
    let character = domain.characters().get(pawn).ok_or("the target pawn is gone")?;
    if !record.latched || route(character.role()) != Some(record.route) {
        return Err("the target's character gate is not open for its live role");
    }
    let owner = character.owner();
    if domain.player_states().get(owner).is_none()
        || player_state_token(core, owner) != Some(p.target_state)
    {
        return Err("the target's player state was replaced");
    }
    if !domain.ui().is_ready(owner) {
        return Err("the target's widget controller is not ready");
    }
    if domain.teams().team_of(owner) != Some(p.team) {
        return Err("the target's cached team changed");
    }
    // The viewer: the local player controls the viewer pawn, whose gate opened; its player state,
    // widget controller and team are live.
    let me = domain.local_player().ok_or("no local player")?;
    let viewer_pawn = pawn_of(p.viewer.object()).ok_or("the viewer is not a pawn")?;
    let viewer_record = state.characters.get(viewer_pawn).filter(|r| r.token == p.viewer);
    let viewer_record = viewer_record.ok_or("the viewer's generation was replaced")?;
    let viewer = domain.characters().get(viewer_pawn).ok_or("the viewer's pawn is gone")?;
    let controlled = viewer.owner() == me
        && viewer.role() == NetRole::AutonomousProxy
        && viewer.is_possession_acknowledged();
    if !controlled || viewer_record.route != Route::Local || !viewer_record.latched {
        return Err("the local player no longer controls the viewer pawn");
    }
    if player_state_token(core, me) != Some(p.viewer_state) {
        return Err("the local player state was replaced");
    }
    if !domain.ui().is_ready(me) {
        return Err("the viewer's widget controller is not ready");
    }
    if domain.teams().team_of(me) != Some(p.viewer_team) {
        return Err("the viewer's cached team changed");
    }
    Ok(PawnTeamPresented {
        pawn,
        token: p.target,
        player: owner.clone(),
        team: p.team,
        viewer: p.viewer,
        viewer_team: p.viewer_team,
        world: world.id,
    })
}

//! The character adapter: routes each pawn to the local or the remote character gate by its
//! network role, scopes one generation per pawn relationship, mirrors the character facts, and
//! registers the gate with the exact requirements of docs/spec/gates.md G14.
//!
//! - Routing is exclusive: a generation is routed once, and a pawn whose role changes is retired
//!   and scoped again (a new generation), so one generation never opens both gates.
//! - Relationship reset: unpossession or removal resets the pawn scope (its facts, its waits,
//!   every subscription on it) and, when it was the last local generation whose dispatch
//!   returned, revokes the local viewer's dispatch-returned fact (a newer local pawn that already
//!   returned its dispatch keeps it: the new possession may arrive before the old pawn's
//!   unpossession); a replacement relationship must satisfy a new generation.
//! - The gate callback only latches and queues the dispatch; the gates layer performs it with the
//!   router at hand.
//! - Every generation scoped and retired is announced on the router ([`CHARACTER_SCOPED`],
//!   [`CHARACTER_RETIRED`]), so consumers and the live checks keep their own account.

use std::collections::BTreeMap;

use gatehouse_lifecycle::{Requirement, ScopeToken};
use gatehouse_messaging::{Channel, Lifetime, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId};
use gatehouse_tags::catalog::*;

use crate::domain::{Character, NetRole};
use crate::ids::{WorldId, pawn_object, world_object};
use crate::notifications::{
    PAWN_DESTROYED, PAWN_SPAWNED, PLAYER_STATE_CHANGED, POSSESSED, UI_RESET, UNPOSSESSED,
    WIDGET_CONTROLLER_READY, WORLD_BEGIN_PLAY,
};

use super::{ClientCore, Dispatch, hold, player_state_token, publish};

/// The request name of the local character gate, owned by the pawn scope.
pub const LOCAL_GATE: &str = "Character.LocalGate";
/// The request name of the remote character gate, owned by the pawn scope.
pub const REMOTE_GATE: &str = "Character.RemoteGate";

/// Which character gate a generation routes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Route {
    /// The local character gate (`Lifecycle.Gate.Character.LocalReady`).
    Local,
    /// The remote character gate (`Lifecycle.Gate.Character.RemoteReady`).
    Remote,
}

/// The routing rule (docs/spec/gates.md G14), which never asks "is it locally controlled" during
/// early begin-play: autonomous proxy is local, simulated proxy is remote, authority follows its
/// controller and stays unresolved without one; a pawn with no relationship is unresolved.
pub fn route(role: NetRole) -> Option<Route> {
    match role {
        NetRole::AutonomousProxy => Some(Route::Local),
        NetRole::SimulatedProxy => Some(Route::Remote),
        NetRole::Authority { locally_controlled: Some(true) } => Some(Route::Local),
        NetRole::Authority { locally_controlled: Some(false) } => Some(Route::Remote),
        NetRole::Authority { locally_controlled: None } | NetRole::None => None,
    }
}

/// Why a pawn generation was retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum RetireReason {
    /// The server unpossessed the pawn (a respawn): the relationship ended.
    Unpossessed,
    /// The pawn was destroyed.
    Destroyed,
    /// The pawn's role changed, so its route did.
    Rerouted,
    /// Its world was torn down (travel).
    WorldTornDown,
    /// The session ended with the generation still live.
    SessionEnded,
}

/// The character adapter scoped a pawn generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationScoped {
    /// The pawn.
    pub pawn: PawnId,
    /// Its scope: the pawn and the generation.
    pub token: ScopeToken,
    /// Which character gate it routes to.
    pub route: Route,
    /// The world it lives in.
    pub world: WorldId,
}
impl Payload for GenerationScoped {
    const NAME: &'static str = "GenerationScoped";
}

/// The character adapter retired a pawn generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationRetired {
    /// The pawn.
    pub pawn: PawnId,
    /// The retired scope.
    pub token: ScopeToken,
    /// Its route.
    pub route: Route,
    /// Why it retired.
    pub reason: RetireReason,
    /// Whether its character gate had opened.
    pub gate_opened: bool,
}
impl Payload for GenerationRetired {
    const NAME: &'static str = "GenerationRetired";
}

/// A pawn generation was scoped.
pub const CHARACTER_SCOPED: Channel<GenerationScoped> =
    Channel::new(MESSAGE_LIFECYCLE_CHARACTER_SCOPED);
/// A pawn generation was retired.
pub const CHARACTER_RETIRED: Channel<GenerationRetired> =
    Channel::new(MESSAGE_LIFECYCLE_CHARACTER_RETIRED);

/// The adapter's record of one scoped pawn generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CharacterRecord {
    /// The generation.
    pub(crate) token: ScopeToken,
    pub(crate) route: Route,
    /// The gate callback ran for this generation (an Unreal game's `bClientInitGateOpened`), set
    /// before any external callback.
    pub(crate) latched: bool,
    /// Its dispatch passed revalidation and began: from here on, before the delegate runs,
    /// `IsCharacterInitGateOpen` reads true for this generation.
    pub(crate) opened: bool,
}

/// Every pawn generation scoped in the current world.
#[derive(Debug, Default)]
pub(crate) struct CharacterRecords {
    by_pawn: BTreeMap<PawnId, CharacterRecord>,
    /// The local generations whose dispatch published the local viewer's dispatch-returned fact
    /// and that have not retired: the fact is revoked when the last of them retires.
    returned: Vec<ScopeToken>,
}

impl CharacterRecords {
    pub(crate) fn get(&self, pawn: PawnId) -> Option<&CharacterRecord> {
        self.by_pawn.get(&pawn)
    }

    /// Whether `pawn`'s current generation has opened its gate (the dispatch began).
    pub(crate) fn is_open(&self, pawn: PawnId) -> bool {
        self.get(pawn).is_some_and(|record| record.opened)
    }

    /// Marks the dispatch of `pawn`'s current generation as begun. The gates call it only after
    /// revalidating that the current record is the generation being dispatched.
    pub(crate) fn open(&mut self, pawn: PawnId) {
        if let Some(record) = self.by_pawn.get_mut(&pawn) {
            record.opened = true;
        }
    }

    /// The local generation `token` returned its dispatch to the local viewer.
    pub(crate) fn dispatch_returned(&mut self, token: ScopeToken) {
        if !self.returned.contains(&token) {
            self.returned.push(token);
        }
    }

    /// Latches the record of `pawn` if it is still generation `token`; false otherwise.
    pub(crate) fn latch(&mut self, pawn: PawnId, token: ScopeToken) -> bool {
        match self.by_pawn.get_mut(&pawn) {
            Some(record) if record.token == token && !record.latched => {
                record.latched = true;
                true
            }
            _ => false,
        }
    }
}

/// World listeners. Each re-samples the characters the notification concerns.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PAWN_SPAWNED, |d, n| observe(d.state(), n.pawn));
    hold(router, core, lifetime, POSSESSED, |d, n| observe(d.state(), n.pawn));
    hold(router, core, lifetime, UNPOSSESSED, |d, n| {
        retire(d.state(), n.pawn, RetireReason::Unpossessed)
    });
    hold(router, core, lifetime, PAWN_DESTROYED, |d, n| {
        retire(d.state(), n.pawn, RetireReason::Destroyed)
    });
    hold(router, core, lifetime, WORLD_BEGIN_PLAY, |d, _| sample(d.state()));
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, n| owned_by(d.state(), &n.player));
    hold(router, core, lifetime, WIDGET_CONTROLLER_READY, |d, n| owned_by(d.state(), &n.player));
    hold(router, core, lifetime, UI_RESET, |d, _| sample(d.state()));
}

/// Observes every character that exists.
pub(super) fn sample(core: &mut ClientCore) {
    let pawns: Vec<PawnId> = core.state.domain.characters().iter().map(Character::pawn).collect();
    for pawn in pawns {
        observe(core, pawn);
    }
}

/// Announces every generation of the world being torn down as retired; the world adapter then
/// resets their scopes with the world's lifetime.
pub(super) fn detach(core: &mut ClientCore) {
    let records = std::mem::take(&mut core.state.characters);
    for (pawn, record) in records.by_pawn {
        announce_retired(core, pawn, record, RetireReason::WorldTornDown);
    }
}

fn owned_by(core: &mut ClientCore, player: &PlayerId) {
    let pawns = core.state.domain.characters().owned_by(player);
    for pawn in pawns {
        observe(core, pawn);
    }
}

/// Brings `pawn`'s generation in line with the character:
/// 1. route it; an unresolved character is left alone (it is evaluated again when its
///    relationship changes), and a route change retires the old generation;
/// 2. without a record, reset any leftover scope and scope a new generation under the world;
/// 3. mirror the character facts from current state;
/// 4. register the gate, once its requirement scopes exist.
fn observe(core: &mut ClientCore, pawn: PawnId) {
    let Some(world) = core.state.world else { return };
    let Some(character) = core.state.domain.characters().get(pawn) else { return };
    let Some(route) = route(character.role()) else { return };
    if let Some(record) = core.state.characters.get(pawn).copied()
        && record.route != route
    {
        retire(core, pawn, RetireReason::Rerouted);
    }
    if core.state.characters.get(pawn).is_none() {
        let object = pawn_object(pawn);
        core.registry.reset_scope(object);
        let token = core.registry.scope(object, world_object(world.id));
        core.state
            .characters
            .by_pawn
            .insert(pawn, CharacterRecord { token, route, latched: false, opened: false });
        core.state.outbox.push_back(Dispatch::Scoped(GenerationScoped {
            pawn,
            token,
            route,
            world: world.id,
        }));
    }
    mirror(core, pawn);
    arm(core, pawn);
}

/// Publishes or closes each character fact of `pawn`'s generation from current state.
fn mirror(core: &mut ClientCore, pawn: PawnId) {
    let Some(record) = core.state.characters.get(pawn).copied() else { return };
    let domain = &core.state.domain;
    let Some(character) = domain.characters().get(pawn) else { return };
    let owner_def = domain.player_states().get(character.owner()).and_then(|s| s.character_def());
    let begun = character.has_begun_play();
    let facts: Vec<(gatehouse_tags::GameplayTag, bool)> = match record.route {
        Route::Local => vec![
            (LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, begun),
            // The local path satisfies the class policy directly.
            (LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES, true),
            (
                LIFECYCLE_FACT_CHARACTER_OWNING_CLIENT_POSSESSION_ACKNOWLEDGED,
                character.is_possession_acknowledged(),
            ),
        ],
        Route::Remote => vec![
            (LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, begun),
            (LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES, owner_def == Some(character.class())),
            (LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY, domain.ui().is_ready(character.owner())),
        ],
    };
    for (fact, ready) in facts {
        publish(core, record.token, fact, ready);
    }
}

/// The requirements of `pawn`'s gate, or `None` while a scope they name does not exist yet (the
/// owner's player state, the local viewer).
fn requirements(
    core: &ClientCore,
    pawn: PawnId,
    record: CharacterRecord,
) -> Option<Vec<Requirement>> {
    let owner = core.state.domain.characters().get(pawn)?.owner();
    let player_state = player_state_token(core, owner)?;
    let token = record.token;
    let requirement = Requirement::new;
    Some(match record.route {
        Route::Local => vec![
            requirement(player_state, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY),
            requirement(player_state, LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY),
            requirement(token, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
            requirement(token, LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES),
            requirement(token, LIFECYCLE_FACT_CHARACTER_OWNING_CLIENT_POSSESSION_ACKNOWLEDGED),
            requirement(player_state, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
        ],
        Route::Remote => {
            let mut list = vec![
                requirement(player_state, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY),
                requirement(token, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
                requirement(token, LIFECYCLE_FACT_CHARACTER_CHARACTER_DEF_MATCHES),
                requirement(token, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY),
            ];
            // Every local viewer's dispatch-returned fact. With none, the gate cannot be
            // registered at all: a process without local players never releases it.
            let viewers = core.state.world.and_then(|w| w.local_player);
            list.push(requirement(viewers?, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED));
            list
        }
    })
}

/// Registers the gate of `pawn`'s generation unless it latched or is already pending.
fn arm(core: &mut ClientCore, pawn: PawnId) {
    let Some(record) = core.state.characters.get(pawn).copied() else { return };
    let request = match record.route {
        Route::Local => LOCAL_GATE,
        Route::Remote => REMOTE_GATE,
    };
    if record.latched || core.registry.is_pending(pawn_object(pawn), request) {
        return;
    }
    let Some(requirements) = requirements(core, pawn, record) else { return };
    let token = record.token;
    let result =
        match record.route {
            Route::Local => {
                let viewer = core.state.world.and_then(|w| w.local_player);
                core.registry.wait_for_all(
                    token,
                    request,
                    &requirements,
                    &mut core.state,
                    move |_, state| {
                        if state.characters.latch(pawn, token) {
                            match viewer {
                        Some(viewer) => {
                            state.outbox.push_back(Dispatch::LocalCharacter { pawn, token, viewer })
                        }
                        None => state.stats.violation(format!(
                            "local gate of pawn {pawn} opened with no local viewer to return to"
                        )),
                    }
                        }
                    },
                )
            }
            Route::Remote => core.registry.wait_for_all(
                token,
                request,
                &requirements,
                &mut core.state,
                move |_, state| {
                    if state.characters.latch(pawn, token) {
                        state.outbox.push_back(Dispatch::RemoteCharacter { pawn, token });
                    }
                },
            ),
        };
    if let Err(error) = result {
        tracing::debug!(%error, %pawn, "character gate refused");
    }
}

/// Ends `pawn`'s current generation: resets its scope (facts, waits, subscriptions), discards its
/// deferred RepNotifies, revokes the local viewer's dispatch-returned fact if this was the last
/// live local generation that returned it, and announces the retirement.
pub(crate) fn retire(core: &mut ClientCore, pawn: PawnId, reason: RetireReason) {
    let Some(record) = core.state.characters.by_pawn.remove(&pawn) else { return };
    core.registry.reset_scope(pawn_object(pawn));
    super::rep_notify::discard(core, record.token);
    let returned = &mut core.state.characters.returned;
    let had_returned = returned.contains(&record.token);
    returned.retain(|token| *token != record.token);
    if had_returned
        && returned.is_empty()
        && let Some(viewer) = core.state.world.and_then(|w| w.local_player)
    {
        publish(core, viewer, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED, false);
    }
    announce_retired(core, pawn, record, reason);
}

fn announce_retired(
    core: &mut ClientCore,
    pawn: PawnId,
    record: CharacterRecord,
    reason: RetireReason,
) {
    core.state.outbox.push_back(Dispatch::Retired(GenerationRetired {
        pawn,
        token: record.token,
        route: record.route,
        reason,
        gate_opened: record.latched,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/spec/gates.md G14: each role has one route, and authority without a controller stays
    /// unresolved.
    #[test]
    fn routing_is_by_role_and_exclusive() {
        assert_eq!(route(NetRole::AutonomousProxy), Some(Route::Local));
        assert_eq!(route(NetRole::SimulatedProxy), Some(Route::Remote));
        assert_eq!(
            route(NetRole::Authority { locally_controlled: Some(true) }),
            Some(Route::Local)
        );
        assert_eq!(
            route(NetRole::Authority { locally_controlled: Some(false) }),
            Some(Route::Remote)
        );
        assert_eq!(route(NetRole::Authority { locally_controlled: None }), None);
        assert_eq!(route(NetRole::None), None);
    }
}

//! Dispatch of the character gates, in the order of docs/spec/gates.md G14 (the local and the
//! remote character requirements).
//!
//! Local: the adapter latched the generation in the gate callback (an Unreal game's
//! `bClientInitGateOpened`, set before any external callback); here, after revalidating live state,
//! the generation is marked open (so `IsCharacterInitGateOpen` reads true inside the delegate),
//! `OnLocalCharacterInitGateOpened` is broadcast, then the dispatch path is complete: the
//! character's `InitGateOpened` fact and `Lifecycle.Gate.Character.LocalReady` are published
//! (public subscriptions run), and only then `LocalDispatchReturned` on the local viewer, which may
//! release remote gates. Remote: the same without the viewer fact, with
//! `Lifecycle.Gate.Character.RemoteReady`, and with the generation's deferred Blueprint RepNotifies
//! replayed, in arrival order, right after `OnRemoteCharacterInitGateOpened` and before the
//! dispatch path completes (so before any RemoteReady subscriber runs). Cached facts woke the gate;
//! live state decides: a retired generation is dropped silently (stale work), and a current one
//! whose live state disagrees with its facts is a violation. The requirements are the character
//! adapter's; this module never registers a wait.

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Payload, Router};
use gatehouse_protocol::PawnId;
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED,
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY, LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
    MESSAGE_LIFECYCLE_LOCAL_CHARACTER_INIT_GATE_OPENED,
    MESSAGE_LIFECYCLE_REMOTE_CHARACTER_INIT_GATE_OPENED,
};

use crate::adapters::{
    ClientCore, REMOTE_CHARACTER_REP_NOTIFY, RemoteRepNotify, Route, broadcast, publish, rep_notify,
};
use crate::domain::NetRole;
use crate::ids::WorldId;

/// A character gate dispatched (`OnLocalCharacterInitGateOpened`,
/// `OnRemoteCharacterInitGateOpened`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharacterGateOpened {
    /// The pawn.
    pub pawn: PawnId,
    /// The generation whose gate opened.
    pub token: ScopeToken,
    /// The world it opened in.
    pub world: WorldId,
}
impl Payload for CharacterGateOpened {
    const NAME: &'static str = "CharacterGateOpened";
}

/// `OnLocalCharacterInitGateOpened`.
pub const LOCAL_CHARACTER_INIT_GATE_OPENED: Channel<CharacterGateOpened> =
    Channel::new(MESSAGE_LIFECYCLE_LOCAL_CHARACTER_INIT_GATE_OPENED);
/// `OnRemoteCharacterInitGateOpened`.
pub const REMOTE_CHARACTER_INIT_GATE_OPENED: Channel<CharacterGateOpened> =
    Channel::new(MESSAGE_LIFECYCLE_REMOTE_CHARACTER_INIT_GATE_OPENED);

/// Dispatches the local character gate of `pawn`'s generation `token`.
pub(crate) fn dispatch_local(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    pawn: PawnId,
    token: ScopeToken,
    viewer: ScopeToken,
) {
    let Some(world) = live(core, pawn, token, Route::Local) else { return };
    let opened = CharacterGateOpened { pawn, token, world };
    broadcast(router, core, LOCAL_CHARACTER_INIT_GATE_OPENED, &opened);
    publish(core, token, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true);
    publish(core, token, LIFECYCLE_GATE_CHARACTER_LOCAL_READY, true);
    // Recorded before publishing: the publish may release remote gates, and the fact is revoked
    // only when the last local generation that returned it retires.
    core.state.characters.dispatch_returned(token);
    publish(core, viewer, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED, true);
}

/// Dispatches the remote character gate of `pawn`'s generation `token`.
pub(crate) fn dispatch_remote(
    router: &Router<ClientCore>,
    core: &mut ClientCore,
    pawn: PawnId,
    token: ScopeToken,
) {
    let Some(world) = live(core, pawn, token, Route::Remote) else { return };
    let opened = CharacterGateOpened { pawn, token, world };
    broadcast(router, core, REMOTE_CHARACTER_INIT_GATE_OPENED, &opened);
    for kind in rep_notify::release(core, token) {
        let notice = RemoteRepNotify { pawn, token, kind, replayed: true };
        broadcast(router, core, REMOTE_CHARACTER_REP_NOTIFY, &notice);
    }
    publish(core, token, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true);
    publish(core, token, LIFECYCLE_GATE_CHARACTER_REMOTE_READY, true);
}

/// The world of a generation whose gate may be dispatched now, after revalidating it against the
/// registry, the adapter's record and the live domain objects. A generation that passes is open
/// from here on (`IsCharacterInitGateOpen`), before any consumer hears of it.
fn live(core: &mut ClientCore, pawn: PawnId, token: ScopeToken, route: Route) -> Option<WorldId> {
    if !core.registry.is_current(token) {
        return None;
    }
    let problem = disagreement(core, pawn, token, route);
    if let Some(problem) = problem {
        core.state.stats.violation(format!(
            "{route:?} gate of pawn {pawn} woke while live state disagrees: {problem}"
        ));
        return None;
    }
    let world = core.state.world.map(|w| w.id)?;
    // `disagreement` checked that the current record is generation `token`.
    core.state.characters.open(pawn);
    Some(world)
}

/// What live state says against opening the gate, if anything.
fn disagreement(
    core: &ClientCore,
    pawn: PawnId,
    token: ScopeToken,
    route: Route,
) -> Option<String> {
    let state = &core.state;
    let record = state.characters.get(pawn);
    if record.is_none_or(|r| r.token != token || r.route != route || !r.latched) {
        return Some("the adapter holds another generation".into());
    }
    let world = state.domain.world()?;
    if !world.is_playing() || state.world.map(|w| w.id) != Some(world.id()) {
        return Some(format!("{} is not the playing world", world.id()));
    }
    let character = state.domain.characters().get(pawn)?;
    let owner = character.owner();
    let Some(player_state) = state.domain.player_states().get(owner) else {
        return Some(format!("no player state for {owner}"));
    };
    let ui_ready = state.domain.ui().is_ready(owner);
    let checks: Vec<(bool, &str)> = match route {
        Route::Local => vec![
            (character.role() == NetRole::AutonomousProxy, "not an autonomous proxy"),
            (character.is_possession_acknowledged(), "possession not acknowledged"),
            (character.has_begun_play(), "not begun play"),
            (player_state.is_team_processed(), "team not processed"),
            (player_state.character_def().is_some(), "no CharacterDef"),
            (ui_ready, "widget controller not ready"),
        ],
        Route::Remote => vec![
            (character.role() == NetRole::SimulatedProxy, "not a simulated proxy"),
            (character.has_begun_play(), "not begun play"),
            (player_state.is_team_processed(), "team not processed"),
            (player_state.character_def() == Some(character.class()), "class mismatch"),
            (ui_ready, "widget controller not ready"),
        ],
    };
    checks.into_iter().find(|(ok, _)| !ok).map(|(_, what)| what.to_owned())
}

//! The character adapter's deferred Blueprint RepNotifies (docs/spec/gates.md G14, the remote
//! character requirements: on remote release, the adapter broadcasts
//! `OnRemoteCharacterInitGateOpened`, replays deferred Blueprint RepNotifies, and publishes
//! `Lifecycle.Gate.Character.RemoteReady`).
//!
//! A Blueprint RepNotify is the presentation-side notice that replicated state about a remote pawn
//! (its node, its death) or about its owner's player state (team and CharacterDef, ability tags,
//! health) changed: a [`RemoteRepNotify`] on [`REMOTE_CHARACTER_REP_NOTIFY`]. Replication has
//! already applied the state to the domain; only the notice is held back.
//!
//! - Until the remote gate of the pawn's generation released, its notices are deferred on that
//!   generation, never dropped and never sent. They are coalesced per [`RepNotifyKind`]: a kind
//!   already deferred moves to the back, to the place of its latest arrival, so a generation holds
//!   at most one notice per kind however long its gate waits.
//! - At release ([`release`], from the remote gate's dispatch), the generation is marked released
//!   and its notices are handed back in arrival order, to be replayed before the gate tag is
//!   published; from then on each notice is sent as it arrives.
//! - A generation retired before its release discards its notices ([`discard`], [`discard_all`]).
//!
//! Local pawns have no deferred RepNotifies, and a notice about a pawn with no generation (no world
//! yet) concerns nothing presented: the generation scoped later presents current state when its
//! gate opens. This module owns the deferral queues and never touches a gate's requirements.

use std::collections::{BTreeMap, VecDeque};

use gatehouse_lifecycle::ScopeToken;
use gatehouse_messaging::{Channel, Lifetime, Payload, Router};
use gatehouse_protocol::{PawnId, PlayerId};
use gatehouse_tags::catalog::MESSAGE_LIFECYCLE_REMOTE_CHARACTER_REP_NOTIFY;

use crate::notifications::{
    ABILITY_TAGS_CHANGED, HEALTH_CHANGED, PAWN_DIED, PAWN_TELEPORTED, PLAYER_STATE_CHANGED,
};

use super::{ClientCore, Dispatch, Route, hold};

/// A Blueprint RepNotify of a remote pawn generation: replicated state about the pawn, or about
/// its owner's player state, changed. The state itself is already in the domain; this is the
/// presentation-side notice, held back until the generation's remote gate released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRepNotify {
    /// The remote pawn.
    pub pawn: PawnId,
    /// Its generation.
    pub token: ScopeToken,
    /// What changed.
    pub kind: RepNotifyKind,
    /// Deferred before the remote gate released and replayed at its release (`false`: sent as
    /// it arrived, the gate being open already).
    pub replayed: bool,
}
impl Payload for RemoteRepNotify {
    const NAME: &'static str = "RemoteRepNotify";
}

/// A Blueprint RepNotify of a remote pawn generation, live or replayed at its gate's release.
pub const REMOTE_CHARACTER_REP_NOTIFY: Channel<RemoteRepNotify> =
    Channel::new(MESSAGE_LIFECYCLE_REMOTE_CHARACTER_REP_NOTIFY);

/// What a Blueprint RepNotify of a remote pawn is about. Notices of one kind coalesce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum RepNotifyKind {
    /// The owner's player state changed (team, CharacterDef): `OnRep_PlayerState`.
    PlayerState,
    /// The owner's ability tags changed (e.g. `State.Dead` added or removed).
    AbilityTags,
    /// The owner's health changed.
    Health,
    /// The pawn moved to another node.
    Movement,
    /// The pawn's owner died in it.
    Death,
}

impl RepNotifyKind {
    /// Every kind: the most notices one generation can hold deferred.
    pub const ALL: [RepNotifyKind; 5] = [
        RepNotifyKind::PlayerState,
        RepNotifyKind::AbilityTags,
        RepNotifyKind::Health,
        RepNotifyKind::Movement,
        RepNotifyKind::Death,
    ];
}

/// Where one remote generation's notices go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The gate has not released: notices wait here, one per kind, in arrival order.
    Deferring(VecDeque<RepNotifyKind>),
    /// The gate released: notices are sent as they arrive.
    Released,
}

/// The phase of every live remote generation that received a notice or released, by generation:
/// a replacement generation of the same pawn can never inherit another's notices.
#[derive(Debug, Default)]
pub(crate) struct RepNotifies {
    by_generation: BTreeMap<ScopeToken, Phase>,
}

impl RepNotifies {
    /// How many notices are deferred now, over every generation.
    pub(crate) fn deferred_count(&self) -> usize {
        self.by_generation.values().map(deferred_count).sum()
    }
}

/// World listeners: each replicated change a remote presentation reacts to. They run after the
/// character adapter's, so a generation scoped by the same notification is found.
pub(super) fn listen(router: &Router<ClientCore>, core: &mut ClientCore, lifetime: &mut Lifetime) {
    hold(router, core, lifetime, PAWN_TELEPORTED, |d, n| {
        arrived(d.state(), n.pawn, RepNotifyKind::Movement)
    });
    hold(router, core, lifetime, PAWN_DIED, |d, n| {
        arrived(d.state(), n.pawn, RepNotifyKind::Death)
    });
    hold(router, core, lifetime, PLAYER_STATE_CHANGED, |d, n| {
        owned_by(d.state(), &n.player, RepNotifyKind::PlayerState)
    });
    hold(router, core, lifetime, ABILITY_TAGS_CHANGED, |d, n| {
        owned_by(d.state(), &n.player, RepNotifyKind::AbilityTags)
    });
    hold(router, core, lifetime, HEALTH_CHANGED, |d, n| {
        owned_by(d.state(), &n.player, RepNotifyKind::Health)
    });
}

fn owned_by(core: &mut ClientCore, player: &PlayerId, kind: RepNotifyKind) {
    let pawns = core.state.domain.characters().owned_by(player);
    for pawn in pawns {
        arrived(core, pawn, kind);
    }
}

/// A notice of `kind` about `pawn` arrived: sent at once if its remote generation released,
/// deferred (coalesced) on that generation otherwise.
fn arrived(core: &mut ClientCore, pawn: PawnId, kind: RepNotifyKind) {
    let Some(record) = core.state.characters.get(pawn).copied() else { return };
    if record.route != Route::Remote {
        return;
    }
    let token = record.token;
    let phase = core
        .state
        .rep_notifies
        .by_generation
        .entry(token)
        .or_insert_with(|| Phase::Deferring(VecDeque::new()));
    match phase {
        Phase::Released => {
            let notice = RemoteRepNotify { pawn, token, kind, replayed: false };
            core.state.outbox.push_back(Dispatch::RepNotify(notice));
        }
        Phase::Deferring(queue) => {
            let coalesced = defer(queue, kind);
            let stats = &mut core.state.stats;
            stats.rep_notifies_deferred += 1;
            if coalesced {
                stats.rep_notifies_coalesced += 1;
            }
        }
    }
}

/// The remote gate of generation `token` released: marks it released and hands back its deferred
/// notices in arrival order, for the dispatch to replay before the gate tag.
pub(crate) fn release(core: &mut ClientCore, token: ScopeToken) -> Vec<RepNotifyKind> {
    match core.state.rep_notifies.by_generation.insert(token, Phase::Released) {
        Some(Phase::Deferring(queue)) => queue.into(),
        Some(Phase::Released) | None => Vec::new(),
    }
}

/// Generation `token` was retired: its deferred notices are discarded, never replayed.
pub(crate) fn discard(core: &mut ClientCore, token: ScopeToken) {
    if let Some(phase) = core.state.rep_notifies.by_generation.remove(&token) {
        core.state.stats.rep_notifies_discarded += deferred_count(&phase) as u64;
    }
}

/// Every generation of the world being torn down was retired: every deferred notice goes.
pub(crate) fn discard_all(core: &mut ClientCore) {
    let all = std::mem::take(&mut core.state.rep_notifies.by_generation);
    let count: usize = all.values().map(deferred_count).sum();
    core.state.stats.rep_notifies_discarded += count as u64;
}

/// Defers `kind` at the back of `queue`, removing an earlier notice of the same kind. Returns
/// whether one was removed (coalesced).
fn defer(queue: &mut VecDeque<RepNotifyKind>, kind: RepNotifyKind) -> bool {
    let earlier = queue.iter().position(|k| *k == kind);
    if let Some(at) = earlier {
        queue.remove(at);
    }
    queue.push_back(kind);
    earlier.is_some()
}

fn deferred_count(phase: &Phase) -> usize {
    match phase {
        Phase::Deferring(queue) => queue.len(),
        Phase::Released => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/spec/gates.md G14 (deferred RepNotifies), bounded: however many notices arrive, a
    /// generation holds one per kind, each at the place of its latest arrival.
    #[test]
    fn deferral_coalesces_per_kind_at_the_latest_arrival() {
        use RepNotifyKind::*;
        let mut queue = VecDeque::new();
        assert!(!defer(&mut queue, Health));
        assert!(!defer(&mut queue, Movement));
        assert!(defer(&mut queue, Health), "a second Health coalesces");
        assert_eq!(Vec::from(queue.clone()), [Movement, Health]);
        for _ in 0..1000 {
            for kind in RepNotifyKind::ALL {
                defer(&mut queue, kind);
            }
        }
        assert_eq!(queue.len(), RepNotifyKind::ALL.len(), "bounded by the kinds");
        assert_eq!(Vec::from(queue), RepNotifyKind::ALL, "in order of latest arrival");
    }
}

//! Live checks of what the server promises one client session (docs/spec/transitions.md and
//! docs/spec/sessions.md as a client sees them):
//! - an own pawn lands on the node the client expects: the destination of the transition on
//!   screen (or of its join), or the world's current node;
//! - an own pawn lands only on a node the client streamed (its join's, or the transition's it
//!   reported ready for): never a pawn before its level;
//! - the client never owns two live pawns at once;
//! - a kit is granted once per session, never again (not on respawn, not on travel);
//! - a transition (or a join) ends only after the client acknowledged the pawn it possesses, or
//!   a transition's end is followed at once by a join of the client's own (a player who logged
//!   in while the transition waited for its clients is not waited for: docs/protocol.md 4.2),
//!   and an end names the transition on screen (an end for an older one is stale and ignored,
//!   one for a transition never shown is an error);
//! - ids never go backwards: no transition or join id below one already shown, and every new
//!   own pawn's id above the own pawns' before it;
//! - every rejection and server-reported error is recorded.
//!
//! The session feeds each server message here with what it knew when the message arrived
//! ([`Expected`]); the checks count into [`SessionStats`] and change nothing else, so the session
//! keeps only its transport duties. None of them needs the client lifecycle: the checks keep
//! their own account of the client's own pawns, so a thin client (one with no game side) runs
//! them too (docs/simulator.md).

use std::collections::{BTreeMap, BTreeSet};

use gatehouse_protocol::{JoinId, NodeId, PawnId, PlayerId, ServerMessage, TransitionId};
use gatehouse_tags::GameplayTag;

use crate::figures::SessionStats;

/// What the session knew when a message arrived, before its transport duties ran.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expected<'a> {
    /// The player this client was welcomed as.
    pub(crate) player: Option<&'a PlayerId>,
    /// The node an own pawn should land on now, if the client knows one.
    pub(crate) node: Option<&'a NodeId>,
    /// The transition on screen, while the loading screen is up for one.
    pub(crate) on_screen: Option<TransitionId>,
    /// The join on screen, while the loading screen is up for one.
    pub(crate) on_join: Option<JoinId>,
    /// The node this client streamed: its join's, or the transition's it reported ready for.
    pub(crate) streamed: Option<&'a NodeId>,
    /// The client possesses a pawn and acknowledged that possession.
    pub(crate) placed_pawn: bool,
}

/// The session checks' account: the kits granted so far, the own pawns and whether each is
/// alive, and the newest ids seen.
#[derive(Debug, Default)]
pub(crate) struct SessionChecks {
    kits: BTreeSet<GameplayTag>,
    /// Own pawns spawned and not destroyed: alive or not.
    own: BTreeMap<PawnId, bool>,
    newest_transition: Option<TransitionId>,
    newest_join: Option<JoinId>,
    newest_own_pawn: Option<PawnId>,
    /// An `EndTransition` came before the client was placed: the next message must be the
    /// `ShowJoin` of a join of its own, or the end counts as `ended_before_placed`.
    ended_unplaced: bool,
}

impl SessionChecks {
    /// The session ended: an end before placement still waiting for its join counts.
    pub(crate) fn finish(&mut self, stats: &mut SessionStats) {
        if std::mem::take(&mut self.ended_unplaced) {
            stats.ended_before_placed += 1;
        }
    }

    /// Own pawns spawned and not destroyed, alive or not.
    pub(crate) fn own_pawns(&self) -> usize {
        self.own.len()
    }

    /// Checks `message` against what the client expected, counting into `stats`.
    pub(crate) fn observe(
        &mut self,
        message: &ServerMessage,
        expected: Expected<'_>,
        stats: &mut SessionStats,
    ) {
        if std::mem::take(&mut self.ended_unplaced)
            && !matches!(message, ServerMessage::ShowJoin { .. })
        {
            stats.ended_before_placed += 1;
        }
        match message {
            ServerMessage::Rejected { reason, detail } => {
                stats.errors.push(format!("rejected ({reason:?}): {detail}"));
            }
            ServerMessage::Error { code, detail } => {
                stats.errors.push(format!("server error ({code:?}): {detail}"));
                *stats.server_errors.entry(code.to_string()).or_default() += 1;
            }
            ServerMessage::PawnSpawned(view) if Some(&view.owner) == expected.player => {
                if self.own.insert(view.pawn_id, view.alive).is_none() {
                    // A new own pawn: its id comes after every own pawn before it.
                    if self.newest_own_pawn.is_some_and(|newest| view.pawn_id <= newest) {
                        backwards(
                            stats,
                            format!("own pawn {} after {:?}", view.pawn_id, self.newest_own_pawn),
                        );
                    }
                    self.newest_own_pawn = self.newest_own_pawn.max(Some(view.pawn_id));
                }
                placement(view.pawn_id, &view.node, expected, stats);
                let live = self.own.values().filter(|alive| **alive).count();
                if live > 1 {
                    stats.double_pawns += 1;
                    stats.errors.push(format!("{live} live pawns owned at once"));
                }
            }
            ServerMessage::PawnsTeleported { node, pawn_ids } => {
                for pawn_id in pawn_ids.iter().filter(|p| self.own.contains_key(p)) {
                    placement(pawn_id, node, expected, stats);
                }
            }
            ServerMessage::PawnDied { pawn_id } => {
                if let Some(alive) = self.own.get_mut(pawn_id) {
                    *alive = false;
                }
            }
            ServerMessage::PawnDestroyed { pawn_id } => {
                self.own.remove(pawn_id);
            }
            ServerMessage::FreezeCharacters { transition_id }
            | ServerMessage::ShowTransition { transition_id, .. } => {
                if self.newest_transition.is_some_and(|newest| *transition_id < newest) {
                    backwards(
                        stats,
                        format!("transition {transition_id} after {:?}", self.newest_transition),
                    );
                }
                self.newest_transition = self.newest_transition.max(Some(*transition_id));
            }
            ServerMessage::ShowJoin { join_id, .. } => {
                if self.newest_join.is_some_and(|newest| *join_id < newest) {
                    backwards(stats, format!("join {join_id} after {:?}", self.newest_join));
                }
                self.newest_join = self.newest_join.max(Some(*join_id));
            }
            ServerMessage::KitsGranted { kits } => {
                for kit in kits {
                    if !self.kits.insert(*kit) {
                        stats.double_grants += 1;
                        stats.errors.push(format!("kit {kit} granted twice"));
                    }
                }
            }
            ServerMessage::EndTransition { transition_id } => {
                self.ended_unplaced = transition_end(*transition_id, expected, stats);
            }
            ServerMessage::EndJoin { join_id } => join_end(*join_id, expected, stats),
            _ => {}
        }
    }
}

/// An own pawn placed on `node`: it must be the expected node, when the client knows one, and a
/// node the client streamed.
fn placement(pawn: PawnId, node: &NodeId, expected: Expected<'_>, stats: &mut SessionStats) {
    if expected.streamed != Some(node) {
        stats.pawns_on_unloaded_node += 1;
        stats.errors.push(format!(
            "own pawn {pawn} placed on {node}, which this client has not streamed ({:?})",
            expected.streamed
        ));
    }
    if let Some(want) = expected.node
        && want != node
    {
        stats.spawns_at_stale_node += 1;
        stats.errors.push(format!("own pawn {pawn} placed on {node}, expected {want}"));
    }
}

/// An id that went backwards, counted with its error.
fn backwards(stats: &mut SessionStats, what: String) {
    stats.ids_backwards += 1;
    stats.errors.push(format!("id went backwards: {what}"));
}

/// An end names the transition on screen. Returns whether it ended that transition before the
/// client was placed (then a join of its own must follow).
fn transition_end(id: TransitionId, expected: Expected<'_>, stats: &mut SessionStats) -> bool {
    let Some(on_screen) = expected.on_screen else {
        stats.errors.push(format!("EndTransition {id} with no loading screen up"));
        return false;
    };
    if id > on_screen {
        stats.errors.push(format!("EndTransition {id} for a transition never shown"));
    }
    id == on_screen && !expected.placed_pawn
}

/// A join's end names the join on screen, and comes only once the client is placed.
fn join_end(id: JoinId, expected: Expected<'_>, stats: &mut SessionStats) {
    match expected.on_join {
        Some(on_join) if on_join == id => {
            if !expected.placed_pawn {
                stats.ended_before_placed += 1;
            }
        }
        // A join superseded by a transition: its end is stale.
        Some(_) => {}
        None if expected.on_screen.is_some() => {}
        None => stats.errors.push(format!("EndJoin {id} with no join on screen")),
    }
}

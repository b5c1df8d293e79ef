//! Live checks of what the server promises one client session (seed 001 as a client sees it):
//! - an own pawn lands on the node the client expects: the destination of the transition on
//!   screen (or of its join), or the world's current node;
//! - an own pawn lands only on a node the client streamed (its join's, or the transition's it
//!   reported ready for): never a pawn before its level;
//! - the client never owns two live pawns at once;
//! - a kit is granted once per session, never again (not on respawn, not on travel);
//! - a transition (or a join) ends only after the client acknowledged the pawn it possesses, and
//!   an end names the transition on screen (an end for an older one is stale and ignored, one for
//!   a transition never shown is an error);
//! - every rejection and server-reported error is recorded.
//!
//! The session feeds each server message here with what it knew when the message arrived
//! ([`Expected`]); the checks count into [`SessionStats`] and change nothing else, so the session
//! keeps only its transport duties.

use std::collections::BTreeSet;

use gatehouse_protocol::{JoinId, NodeId, PawnId, PlayerId, ServerMessage, TransitionId};
use gatehouse_tags::GameplayTag;

use crate::domain::Domain;
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
    /// The client's domain objects, with `message` applied.
    pub(crate) domain: &'a Domain,
}

/// The session checks' account: the kits granted so far.
#[derive(Debug, Default)]
pub(crate) struct SessionChecks {
    kits: BTreeSet<GameplayTag>,
}

impl SessionChecks {
    /// Checks `message` against what the client expected, counting into `stats`.
    pub(crate) fn observe(
        &mut self,
        message: &ServerMessage,
        expected: Expected<'_>,
        stats: &mut SessionStats,
    ) {
        match message {
            ServerMessage::Rejected { reason, detail } => {
                stats.errors.push(format!("rejected ({reason:?}): {detail}"));
            }
            ServerMessage::Error { code, detail } => {
                stats.errors.push(format!("server error ({code:?}): {detail}"));
            }
            ServerMessage::PawnSpawned(view) if Some(&view.owner) == expected.player => {
                placement(view.pawn_id, &view.node, expected, stats);
                live_pawns(expected, stats);
            }
            ServerMessage::PawnTeleported { pawn_id, node } => {
                let characters = expected.domain.characters();
                let mine =
                    characters.get(*pawn_id).is_some_and(|c| Some(c.owner()) == expected.player);
                if mine {
                    placement(*pawn_id, node, expected, stats);
                }
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
                transition_end(*transition_id, expected, stats);
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
    if let Some(want) = expected.node {
        if want != node {
            stats.spawns_at_stale_node += 1;
            stats.errors.push(format!("own pawn {pawn} placed on {node}, expected {want}"));
        }
    }
}

/// At most one live pawn owned by this client.
fn live_pawns(expected: Expected<'_>, stats: &mut SessionStats) {
    let Some(me) = expected.player else { return };
    let characters = expected.domain.characters();
    let live = characters.iter().filter(|c| c.owner() == me && c.is_alive()).count();
    if live > 1 {
        stats.double_pawns += 1;
        stats.errors.push(format!("{live} live pawns owned at once"));
    }
}

/// An end names the transition on screen, and comes only once the client is placed.
fn transition_end(id: TransitionId, expected: Expected<'_>, stats: &mut SessionStats) {
    let Some(on_screen) = expected.on_screen else {
        stats.errors.push(format!("EndTransition {id} with no loading screen up"));
        return;
    };
    if id > on_screen {
        stats.errors.push(format!("EndTransition {id} for a transition never shown"));
    } else if id == on_screen && !expected.placed_pawn {
        stats.ended_before_placed += 1;
    }
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

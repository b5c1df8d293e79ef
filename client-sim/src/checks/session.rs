//! Live checks of what the server promises one client session (docs/spec/transitions.md and
//! docs/spec/sessions.md as a client sees them):
//! - an own pawn lands on the node the client expects: the destination of the transition on
//!   screen (or of its join), or the world's current node (an own pawn in the world snapshot
//!   a newcomer is greeted with is its older connection's, not a landing: docs/protocol.md 4.5);
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
//! The session feeds each server message here with the link it came on and what it knew when
//! the message arrived ([`Expected`]); the checks count into [`SessionStats`] and change nothing
//! else, so the session keeps only its transport duties. None of them needs the client
//! lifecycle: the checks keep their own account of the client's own pawns, so a thin client
//! (one with no game side) runs them too (docs/simulator.md).
//!
//! Each server has an account of its own (ids, pawns and kits are a server's): a move to another
//! server (docs/spec/travel.md V3) starts the destination's afresh, as a relaunch starts a new
//! session, while the source's goes on with what the source still sends. Only the messages of
//! the server the session plays on are judged; the other's only keep its account, so a move
//! that comes back finds the source's account as it stands. One loading screen across the two
//! servers is one screen here too: the destination's join ends it, and a transition's end that
//! is no end of the move is never one before placement.

use std::collections::{BTreeMap, BTreeSet};

use gatehouse_client::LinkId;
use gatehouse_protocol::{
    ErrorCode, JoinId, NodeId, PawnId, PlayerId, ServerMessage, TransitionId,
};
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
    /// The message is an entry of the world snapshot a newcomer is greeted with
    /// (docs/protocol.md 4.5): the world as of the last replication interval, not a spawn.
    pub(crate) in_snapshot: bool,
}

/// The session checks: an account per server the session holds a link to (module docs).
#[derive(Debug, Default)]
pub(crate) struct SessionChecks {
    accounts: BTreeMap<LinkId, Account>,
}

/// One server's account: the kits granted so far, the own pawns and whether each is alive, and
/// the newest ids seen.
#[derive(Debug, Default)]
struct Account {
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
        for account in self.accounts.values_mut() {
            if std::mem::take(&mut account.ended_unplaced) {
                stats.ended_before_placed += 1;
            }
        }
    }

    /// Own pawns spawned and not destroyed on the server of `link`, alive or not.
    pub(crate) fn own_pawns(&self, link: LinkId) -> usize {
        self.accounts.get(&link).map_or(0, |account| account.own.len())
    }

    /// The session closed `link`: that server's account goes.
    pub(crate) fn forget(&mut self, link: LinkId) {
        self.accounts.remove(&link);
    }

    /// Checks `message`, which came on `link`, counting into `stats`: against what the client
    /// expected when `expected` is given (a message of the server the session plays on), else
    /// only into that server's account.
    pub(crate) fn observe(
        &mut self,
        link: LinkId,
        message: &ServerMessage,
        expected: Option<Expected<'_>>,
        stats: &mut SessionStats,
    ) {
        let account = self.accounts.entry(link).or_default();
        match expected {
            Some(expected) => account.judge(message, expected, stats),
            None => account.keep(message, stats),
        }
    }
}

impl Account {
    /// Checks a message of the server the session plays on against what the client expected.
    fn judge(&mut self, message: &ServerMessage, expected: Expected<'_>, stats: &mut SessionStats) {
        if std::mem::take(&mut self.ended_unplaced)
            && !matches!(message, ServerMessage::ShowJoin { .. })
        {
            stats.ended_before_placed += 1;
        }
        match message {
            ServerMessage::Rejected { reason, detail } => {
                stats.errors.push(format!("rejected ({reason:?}): {detail}"));
            }
            ServerMessage::Error { code, detail } => server_error(*code, detail, stats),
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
                // An own pawn in the snapshot is its older connection's, whose
                // `PawnDestroyed` follows (a relaunch within the interval, docs/protocol.md
                // 4.5): the world as it stood, not a placement.
                if !expected.in_snapshot {
                    placement(view.pawn_id, &view.node, expected, stats);
                }
                let live = self.own.values().filter(|alive| **alive).count();
                if live > 1 {
                    stats.double_pawns += 1;
                    stats.errors.push(format!("{live} live pawns owned at once"));
                }
            }
            ServerMessage::PawnsTeleported { node, pawn_ids } => {
                // Its own pawns (a few) looked up in the set (thousands), not the other way.
                for pawn_id in self.own.keys().filter(|p| pawn_ids.contains(**p)) {
                    placement(*pawn_id, node, expected, stats);
                }
            }
            ServerMessage::PawnDied { .. } | ServerMessage::PawnDestroyed { .. } => {
                self.follow_own_pawns(message)
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

    /// Keeps the account of a server the session does not play on (the other server of a
    /// move): its own pawns and newest ids follow its messages, nothing is judged. A server
    /// error is one wherever it comes from.
    fn keep(&mut self, message: &ServerMessage, stats: &mut SessionStats) {
        match message {
            ServerMessage::Error { code, detail } => server_error(*code, detail, stats),
            ServerMessage::FreezeCharacters { transition_id }
            | ServerMessage::ShowTransition { transition_id, .. } => {
                self.newest_transition = self.newest_transition.max(Some(*transition_id));
            }
            message => self.follow_own_pawns(message),
        }
    }

    /// An own pawn died (it stays, dead) or was destroyed (it goes).
    fn follow_own_pawns(&mut self, message: &ServerMessage) {
        match message {
            ServerMessage::PawnDied { pawn_id } => {
                if let Some(alive) = self.own.get_mut(pawn_id) {
                    *alive = false;
                }
            }
            ServerMessage::PawnDestroyed { pawn_id } => {
                self.own.remove(pawn_id);
            }
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

/// A server-reported error, recorded and counted by its code.
fn server_error(code: ErrorCode, detail: &str, stats: &mut SessionStats) {
    stats.errors.push(format!("server error ({code:?}): {detail}"));
    *stats.server_errors.entry(code.to_string()).or_default() += 1;
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

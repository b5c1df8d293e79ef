//! A misbehaving client as a wrapper around a well-behaved session: it rewrites what the
//! library's session sends and adds what the misbehaviour sends on its own.
//!
//! The session ([`crate::session`]) hands every output of its `gatehouse_client::Session` to
//! [`Misbehaving::rewrite`], shows it every server message ([`Misbehaving::observe`]) and wakes
//! it at [`Misbehaving::poll_timeout`]. The well-behaved session knows nothing of it: the
//! misbehaviour lives here alone (the kinds are described on [`Misbehaviour`]).

use std::collections::VecDeque;
use std::time::Instant;

use gatehouse_protocol::{ClientMessage, JoinId, PawnId, PlayerId, ServerMessage, TransitionId};

use crate::misbehaviour::{Misbehaviour, RESTART_SPAM_EVERY, TRANSPORT_MISBEHAVIOUR_AFTER};

/// The misbehaviour of one client and what it needs to remember.
#[derive(Debug, Clone)]
pub struct Misbehaving {
    kind: Misbehaviour,
    /// The newest pawn seen spawned for another player (a wrong id for a stale-ids client).
    foreign_pawn: Option<PawnId>,
    /// The transition shown before the newest (a stale id for a stale-ids client).
    previous_transition: Option<TransitionId>,
    /// A restart-spam client's next `RestartRequest`.
    spam_at: Option<Instant>,
    /// When a transport misbehaviour is due if the client is not placed before; `None` before
    /// `Welcome` and once it was taken.
    transport_due_at: Option<Instant>,
}

impl Misbehaving {
    /// A client misbehaving as `kind`, not welcomed yet.
    pub fn new(kind: Misbehaviour) -> Self {
        Misbehaving {
            kind,
            foreign_pawn: None,
            previous_transition: None,
            spam_at: None,
            transport_due_at: None,
        }
    }

    /// How it misbehaves.
    pub fn kind(&self) -> Misbehaviour {
        self.kind
    }

    /// Sees a server message before the session handles it; `me` is the player welcomed, if
    /// any.
    pub fn observe(&mut self, now: Instant, me: Option<&PlayerId>, message: &ServerMessage) {
        match message {
            ServerMessage::Welcome { .. } => match self.kind {
                Misbehaviour::RestartSpam => self.spam_at = Some(now),
                kind if kind.is_transport() => {
                    self.transport_due_at = Some(now + TRANSPORT_MISBEHAVIOUR_AFTER);
                }
                _ => {}
            },
            ServerMessage::PawnSpawned(view) if me.is_some_and(|me| *me != view.owner) => {
                self.foreign_pawn = Some(view.pawn_id);
            }
            _ => {}
        }
    }

    /// The session started streaming its join `id`: a stale-ids client reports a join never
    /// started first.
    pub fn join_shown(&mut self, id: JoinId, out: &mut VecDeque<ClientMessage>) {
        if self.kind == Misbehaviour::StaleIds {
            out.push_back(ClientMessage::JoinReady { join_id: JoinId(id.0.saturating_add(1000)) });
        }
    }

    /// Rewrites one output of the well-behaved session into `out`.
    pub fn rewrite(&mut self, message: ClientMessage, out: &mut VecDeque<ClientMessage>) {
        match message {
            ClientMessage::TransitionShown { transition_id: id } => {
                out.push_back(message);
                let previous = self.previous_transition.replace(id).filter(|p| *p != id);
                if self.kind == Misbehaviour::StaleIds {
                    // A ready report for the previous transition (stale) and for one never
                    // started (unknown), before its own.
                    let unknown = TransitionId(id.0.saturating_add(1000));
                    for wrong in previous.into_iter().chain([unknown]) {
                        out.push_back(ClientMessage::TransitionReady { transition_id: wrong });
                    }
                }
            }
            ClientMessage::PossessionAcknowledged { pawn_id } => match self.kind {
                Misbehaviour::NeverAcknowledge => {}
                Misbehaviour::StaleIds => {
                    // Another player's pawn, and one never issued, before its own.
                    let never_issued = PawnId(pawn_id.0.saturating_add(1 << 40));
                    for wrong in self.foreign_pawn.into_iter().chain([never_issued]) {
                        out.push_back(ClientMessage::PossessionAcknowledged { pawn_id: wrong });
                    }
                    out.push_back(message);
                }
                _ => out.push_back(message),
            },
            _ => out.push_back(message),
        }
    }

    /// Sends what is due at `now` (a restart-spam client's next request).
    pub fn handle_timeout(&mut self, now: Instant, out: &mut VecDeque<ClientMessage>) {
        if let Some(at) = self.spam_at.filter(|at| *at <= now) {
            // Far above the refusal rate limit; a missed beat is not made up.
            self.spam_at = Some((at + RESTART_SPAM_EVERY).max(now));
            out.push_back(ClientMessage::RestartRequest);
        }
    }

    /// When [`Misbehaving::handle_timeout`] or a transport misbehaviour is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.spam_at, self.transport_due_at].into_iter().flatten().min()
    }

    /// A transport misbehaviour that is due at `now`: once the client is `placed`, or
    /// [`TRANSPORT_MISBEHAVIOUR_AFTER`] after `Welcome`. Returned once.
    pub fn take_transport(&mut self, now: Instant, placed: bool) -> Option<Misbehaviour> {
        let due = self.transport_due_at?;
        if !(placed || due <= now) {
            return None;
        }
        self.transport_due_at = None;
        Some(self.kind)
    }
}

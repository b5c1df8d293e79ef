//! A move to another server behind one loading screen (docs/spec/travel.md V3), as phases of
//! the session: [`Travel`].
//!
//! 1. **Dialling.** The source (the server the session plays on) sent `TravelTo` in place of
//!    `ShowTransition`: the session answers `TransitionShown` there at once, keeps the screen
//!    up ([`TransitionStage::Travelling`]), asks its shell to open a link to the destination
//!    and sends `Hello` with the ticket on it. It still plays on the source, whose world the
//!    game keeps. A newer transition or `TransitionFailed` from the source takes the player
//!    back (the destination's link is closed); a destination that refuses the ticket, closes,
//!    cannot be reached or does not admit the client within
//!    [`SessionConfig::connect_timeout`](super::SessionConfig::connect_timeout) is given up:
//!    `TravelAbandoned` on the source, which sends the player back.
//! 2. **Arrived.** The destination's `Welcome`: the session plays there from now
//!    ([`Event::ServerChanged`]: the game's world is the destination's), on the same screen,
//!    which the destination's join (or a transition of its own) continues and ends. The
//!    source's link is kept, and its world recorded unseen, so that a recall from the source
//!    (`TransitionFailed`, a newer transition) or a destination that fails before the end
//!    brings the player back to the source's world as it stands.
//! 3. **Releasing.** The destination placed the player (its screen dropped): the move is
//!    over for the game, and the source's link waits for its `Closing { 11 }` (`Travelled`),
//!    at most [`SOURCE_RELEASE`](super::SOURCE_RELEASE), then is closed. A close of the source
//!    is the expected end here, never an error.

use std::time::Instant;

use gatehouse_protocol::messages::TravelTo;
use gatehouse_protocol::{
    ClientMessage, NodeId, PROTOCOL_VERSION, PlayerId, ServerMessage, TransitionId,
};

use super::known::Server;
use super::{Session, world_change};
use crate::event::{AbandonReason, CloseReason, Event};
use crate::link::{Dial, LinkId, Output};
use crate::pin::CertificatePin;
use crate::screen::{Screen, TransitionScreen, TransitionStage};
use crate::timers::Timer;

/// A move in flight, by phase (module docs).
#[derive(Debug)]
pub(super) enum Travel {
    /// The destination is being dialled; the session plays on the source.
    Dialling(Dialling),
    /// The destination welcomed the client; the source may still take it back.
    Arrived(Arrived),
    /// The destination placed the client; the source's link waits for its release.
    Releasing(Releasing),
}

/// Dialling the destination.
#[derive(Debug)]
pub(super) struct Dialling {
    /// The source's transition that moves the player.
    transition: TransitionId,
    /// The link to the destination.
    destination: LinkId,
    /// Why the source's link ended meanwhile, if it did: the move can no longer fall back on
    /// it, and a destination that fails ends the session for this reason (docs/spec/travel.md
    /// V10: a client whose source connection dropped may still redeem its ticket).
    source_lost: Option<CloseReason>,
}

/// Playing on the destination, before its end.
#[derive(Debug)]
pub(super) struct Arrived {
    /// The source's transition that moves the player.
    transition: TransitionId,
    /// The source, kept for a way back: its link, its player, its world as it stands.
    source: Server,
}

/// Placed at the destination; the source lets the player go.
#[derive(Debug)]
pub(super) struct Releasing {
    /// The link to the source.
    source: LinkId,
}

/// Why a move that reached the destination comes back to the source.
enum ComeBack {
    /// The source took the player back (`TransitionFailed`, a newer transition): the
    /// destination is left.
    Recalled,
    /// The destination failed before its end: the source is told (`TravelAbandoned`).
    Abandoned(AbandonReason),
}

impl Session {
    /// Whether a move's destination is being dialled: the session still plays on the source,
    /// which is sent nothing but the move's answers.
    pub(super) fn is_dialling(&self) -> bool {
        matches!(self.travel, Some(Travel::Dialling(_)))
    }

    /// Whether a move reached its destination and plays there before its end.
    pub(super) fn travel_arrived(&self) -> bool {
        matches!(self.travel, Some(Travel::Arrived(_)))
    }

    /// `TravelTo` from the server the session plays on: the move starts (module docs, 1). An
    /// older id than the transition on screen is stale; a repeat of the one on screen changes
    /// nothing.
    pub(super) fn on_travel_to(&mut self, now: Instant, travel: TravelTo) {
        let id = travel.transition_id;
        if !self.see_transition(now, id) {
            return;
        }
        let Screen::Transition(screen) = &mut self.screen else { return };
        if screen.stage != TransitionStage::AwaitingDestination {
            return; // Shown already: answered once.
        }
        screen.stage = TransitionStage::Travelling { target: travel.node.clone() };
        // At once, as for `ShowTransition`: the source sets aside a client that does not
        // answer within its response timeout (docs/protocol.md 5).
        self.send(ClientMessage::TransitionShown { transition_id: id });
        // A move from a server this session came to by a move: the server before is done with.
        self.release_source();
        let link = self.next_link;
        self.next_link = link.next();
        let TravelTo { node, address, server_name, certificate_sha256, ticket, valid_ms, .. } =
            travel;
        let pin = certificate_sha256.map(|digest| CertificatePin::from_bytes(digest.0));
        let dial = Dial { address: address.clone(), server_name: server_name.clone(), pin, node };
        let node = dial.node.clone();
        self.outputs.push_back(Output::Dial { link, dial });
        let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token: ticket };
        self.outputs.push_back(Output::Send { link, message: hello });
        // The seat is held `valid_ms` from now: waiting longer would only meet a stale ticket.
        let seat = std::time::Duration::from_millis(u64::from(valid_ms));
        self.timers.set(Timer::Admission, now + self.config.connect_timeout.min(seat));
        let dialling = Dialling { transition: id, destination: link, source_lost: None };
        self.travel = Some(Travel::Dialling(dialling));
        self.events.push_back(Event::Travelling { transition: id, node, address, server_name });
    }

    /// What a move does with a message of the server the session plays on, before it is
    /// handled as usual. Returns true if the move took it whole.
    ///
    /// While dialling (here is the source): a newer transition or the move's failure leaves
    /// the destination, then is handled as usual; the source's close leaves the move to the
    /// destination alone. Once arrived (here is the destination): its close before its end
    /// brings the player back to the source.
    pub(super) fn intercept_here(&mut self, message: &ServerMessage) -> bool {
        match &mut self.travel {
            Some(Travel::Dialling(dialling)) => {
                let recalled = match message {
                    ServerMessage::FreezeCharacters { transition_id }
                    | ServerMessage::ShowTransition { transition_id, .. } => {
                        *transition_id > dialling.transition
                    }
                    ServerMessage::TravelTo(travel) => travel.transition_id > dialling.transition,
                    ServerMessage::TransitionFailed { transition_id, .. } => {
                        *transition_id == dialling.transition
                    }
                    ServerMessage::Closing { code, reason } => {
                        let lost = CloseReason::Server { code: *code, reason: reason.clone() };
                        dialling.source_lost.get_or_insert(lost);
                        return true;
                    }
                    _ => false,
                };
                if recalled {
                    self.drop_destination();
                }
                false
            }
            Some(Travel::Arrived(_)) => match message {
                ServerMessage::Closing { code, reason } => {
                    let closed = AbandonReason::Closed { code: *code, reason: reason.clone() };
                    self.come_back(ComeBack::Abandoned(closed));
                    true
                }
                _ => false,
            },
            Some(Travel::Releasing(_)) | None => false,
        }
    }

    /// One message on a link other than the one the session plays on: the destination's while
    /// dialling, the source's after the arrival; any other link's is dropped (a link the
    /// session closed).
    pub(super) fn on_other_link(&mut self, now: Instant, link: LinkId, message: ServerMessage) {
        match &self.travel {
            Some(Travel::Dialling(dialling)) if dialling.destination == link => {
                self.on_destination(message)
            }
            Some(Travel::Arrived(arrived)) if arrived.source.link == link => {
                self.on_source_away(now, message)
            }
            Some(Travel::Releasing(releasing)) if releasing.source == link => {
                if let ServerMessage::Closing { .. } = message {
                    self.release_source();
                }
            }
            _ => {}
        }
    }

    /// The destination's message while dialling: its `Welcome` is the arrival, its refusal or
    /// close gives the move up. Nothing else comes before `Welcome` (docs/protocol.md 4).
    fn on_destination(&mut self, message: ServerMessage) {
        match message {
            ServerMessage::Welcome { player_id, current_node, max_frame_len } => {
                self.arrive(player_id, current_node, max_frame_len)
            }
            ServerMessage::Rejected { reason, detail } => {
                self.abandon(AbandonReason::Refused { reason, detail })
            }
            ServerMessage::Closing { code, reason } => {
                self.abandon(AbandonReason::Closed { code, reason })
            }
            _ => {}
        }
    }

    /// The source's message once arrived: a recall brings the player back and is then handled
    /// as usual; its close ends the move; its world changes are recorded for a way back.
    fn on_source_away(&mut self, now: Instant, message: ServerMessage) {
        let Some(Travel::Arrived(arrived)) = &self.travel else { return };
        let transition = arrived.transition;
        let recalled = match &message {
            ServerMessage::FreezeCharacters { transition_id }
            | ServerMessage::ShowTransition { transition_id, .. } => *transition_id > transition,
            ServerMessage::TravelTo(travel) => travel.transition_id > transition,
            ServerMessage::TransitionFailed { transition_id, .. } => *transition_id == transition,
            // `Travelled` (the destination placed the player) or the source going: either way
            // nothing can take the player back now.
            ServerMessage::Closing { .. } => {
                self.release_source();
                return;
            }
            _ => false,
        };
        if recalled {
            self.come_back(ComeBack::Recalled);
            self.on_here(now, message);
            return;
        }
        // The source plays on without this client: its world is kept as it stands. It has no
        // other duty of this client while away (it sends there only keep-alives and
        // `TravelAbandoned`, docs/spec/travel.md V3).
        let world_events = self.config.world_events;
        if let Some(change) = world_change(message)
            && let Some(Travel::Arrived(arrived)) = &mut self.travel
        {
            arrived.source.take(&change, world_events);
        }
    }

    /// The destination welcomed the client: the session plays there (module docs, 2).
    fn arrive(&mut self, player: PlayerId, node: Option<NodeId>, max_frame_len: u32) {
        let Some(Travel::Dialling(dialling)) = self.travel.take() else { return };
        self.timers.stop(Timer::Admission);
        let mut destination = Server::new(dialling.destination);
        destination.player = Some(player.clone());
        destination.max_frame_len = max_frame_len;
        destination.current_node = node.clone();
        let source = std::mem::replace(&mut self.here, destination);
        self.travel = match dialling.source_lost {
            None => {
                let arrived = Arrived { transition: dialling.transition, source };
                Some(Travel::Arrived(arrived))
            }
            // Nothing to come back to: the move is over but for the destination's end.
            Some(_) => {
                self.outputs.push_back(Output::Close { link: source.link });
                None
            }
        };
        self.streamed = None;
        self.events.push_back(Event::ServerChanged { player, node, max_frame_len });
    }

    /// The client gives the move up while dialling: the destination's link is closed and the
    /// source told (`TravelAbandoned`), which sends the player back; the screen stays up for
    /// that. With the source gone as well, the session ends.
    fn abandon(&mut self, reason: AbandonReason) {
        let Some(Travel::Dialling(dialling)) = self.travel.take() else { return };
        self.timers.stop(Timer::Admission);
        self.outputs.push_back(Output::Close { link: dialling.destination });
        if let Some(lost) = dialling.source_lost {
            self.close(lost);
            return;
        }
        let transition = dialling.transition;
        self.send(ClientMessage::TravelAbandoned { transition_id: transition });
        if let Screen::Transition(screen) = &mut self.screen
            && screen.transition == transition
        {
            screen.stage = TransitionStage::AwaitingDestination;
        }
        self.events.push_back(Event::TravelAbandoned { transition, reason });
    }

    /// The source recalled the player while dialling: the destination's link is closed. The
    /// source's message that recalled it then puts the screen where it belongs.
    fn drop_destination(&mut self) {
        let Some(Travel::Dialling(dialling)) = self.travel.take() else { return };
        self.timers.stop(Timer::Admission);
        self.outputs.push_back(Output::Close { link: dialling.destination });
    }

    /// A move that reached the destination comes back to the source before its end: the
    /// destination's link is closed (left first, if the source recalled the player), the
    /// screen shows the source's transition again, and the game is given the source's world
    /// as it stands ([`Event::ServerChanged`], then the world as changes, then
    /// [`Event::Possessed`] for the pawn it controls there). A destination that failed is given
    /// up on the source (`TravelAbandoned`).
    fn come_back(&mut self, why: ComeBack) {
        let Some(Travel::Arrived(arrived)) = self.travel.take() else { return };
        self.timers.stop(Timer::JoinAfterEnd);
        let destination = std::mem::replace(&mut self.here, arrived.source);
        if let ComeBack::Recalled = why {
            self.outputs
                .push_back(Output::Send { link: destination.link, message: ClientMessage::Leave });
        }
        self.outputs.push_back(Output::Close { link: destination.link });
        // Arrived ends when the destination's screen drops, so the move's screen is up.
        self.cancel_streaming();
        if let Some(raised_at) = self.screen.raised_at() {
            let stage = TransitionStage::AwaitingDestination;
            let screen = TransitionScreen { transition: arrived.transition, raised_at, stage };
            self.screen = Screen::Transition(screen);
        }
        self.streamed = None;
        if let Some(player) = self.here.player.clone() {
            let node = self.here.current_node.clone();
            let max_frame_len = self.here.max_frame_len;
            self.events.push_back(Event::ServerChanged { player, node, max_frame_len });
        }
        for change in self.here.known.changes() {
            self.tell(change);
        }
        // The game's world is new: the pawn this client controls there is told again, or the
        // game would never bind to it (the way back's transition keeps it where it stands).
        if let Some(pawn) = self.here.pawn {
            self.events.push_back(Event::Possessed { pawn });
        }
        if let ComeBack::Abandoned(reason) = why {
            let transition = arrived.transition;
            self.send(ClientMessage::TravelAbandoned { transition_id: transition });
            self.events.push_back(Event::TravelAbandoned { transition, reason });
        }
    }

    /// The destination's screen dropped at `now`: an arrived move is over for the game, and
    /// the source has [`super::SOURCE_RELEASE`] to let the player go (module docs, 3).
    pub(super) fn placed_at_destination(&mut self, now: Instant) {
        if let Some(Travel::Arrived(arrived)) = self.travel.take() {
            let releasing = Releasing { source: arrived.source.link };
            self.travel = Some(Travel::Releasing(releasing));
            self.timers.set(Timer::SourceRelease, now + super::SOURCE_RELEASE);
        }
    }

    /// The source let the player go (`Travelled`), went, or took too long to: its link is
    /// closed and the move is over. Nothing for a move that has not arrived.
    pub(super) fn release_source(&mut self) {
        let source = match &self.travel {
            Some(Travel::Arrived(arrived)) => arrived.source.link,
            Some(Travel::Releasing(releasing)) => releasing.source,
            Some(Travel::Dialling(_)) | None => return,
        };
        self.travel = None;
        self.timers.stop(Timer::SourceRelease);
        self.outputs.push_back(Output::Close { link: source });
    }

    /// The destination did not admit the client in time.
    pub(super) fn admission_timed_out(&mut self) {
        self.abandon(AbandonReason::TimedOut);
    }

    /// The link the session plays on was lost during a move. Returns true if the move carries
    /// on: while dialling it goes on without the source (which can no longer take the player
    /// back); once arrived, a destination lost before its end brings the player back to the
    /// source.
    pub(super) fn here_lost_during_travel(&mut self, why: &str) -> bool {
        match &mut self.travel {
            Some(Travel::Dialling(dialling)) => {
                dialling.source_lost.get_or_insert(CloseReason::Lost { why: why.to_owned() });
                true
            }
            Some(Travel::Arrived(_)) => {
                let lost = AbandonReason::Unreachable { why: why.to_owned() };
                self.come_back(ComeBack::Abandoned(lost));
                true
            }
            Some(Travel::Releasing(_)) | None => false,
        }
    }

    /// Another link than the one the session plays on was lost: the destination being dialled
    /// is given up; the source, once arrived, can no longer take the player back.
    pub(super) fn other_link_lost(&mut self, link: LinkId, why: String) {
        match &self.travel {
            Some(Travel::Dialling(dialling)) if dialling.destination == link => {
                self.abandon(AbandonReason::Unreachable { why })
            }
            Some(Travel::Arrived(arrived)) if arrived.source.link == link => self.release_source(),
            Some(Travel::Releasing(releasing)) if releasing.source == link => self.release_source(),
            _ => {}
        }
    }

    /// The player leaves during a move: the other server is left too and its link closed.
    pub(super) fn end_travel_for_leave(&mut self) {
        match self.travel.take() {
            Some(Travel::Dialling(dialling)) => {
                self.timers.stop(Timer::Admission);
                self.outputs.push_back(Output::Close { link: dialling.destination });
            }
            Some(Travel::Arrived(arrived)) => {
                let link = arrived.source.link;
                self.outputs.push_back(Output::Send { link, message: ClientMessage::Leave });
                self.outputs.push_back(Output::Close { link });
            }
            Some(Travel::Releasing(releasing)) => {
                self.timers.stop(Timer::SourceRelease);
                self.outputs.push_back(Output::Close { link: releasing.source });
            }
            None => {}
        }
    }
}

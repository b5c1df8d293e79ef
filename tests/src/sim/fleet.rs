//! What a second server adds (docs/spec/travel.md): the shells' share of a travel between the
//! simulated servers, and the test hooks that break it.
//!
//! - **Peer links.** `Output::Peer` reaches the other core as `Input::Peer` after a delay drawn
//!   from [`SimConfig::peer`](super::SimConfig::peer), in order per direction (one ordered
//!   stream each way, as the real link's). A hold ([`Sim::hold_peer`]) keeps messages back for
//!   an arrival order, or for ever (a silent peer); a cut ([`Sim::cut_peer`]) loses what is in
//!   flight and what is sent until it is healed, and each side hears `Input::PeerLost` after
//!   `fleet.peer_idle_timeout_ms` (a message sent into a cut, after `fleet.peer_timeout_ms`:
//!   the real shell dials again and is not linked in time).
//! - **The directory.** `Output::FindDestination` is answered at once with the first server
//!   the directory names for the node that this travel has not asked yet (by default every
//!   other server whose world hosts the node, in the order they were added; a test sets its
//!   own list, or none, with [`Sim::set_directory`]).
//! - **Tickets.** `Output::TravelTo` becomes the `TravelTo` the shell mints: an opaque ticket
//!   string the harness maps back to its claims (signing and verifying are
//!   `protocol/src/ticket.rs`'s, tested there), the destination's id as its address and server
//!   name, no pin. A `Hello` carrying a ticket is the shell's check: a ticket for another server
//!   is refused `TicketStale`, one for this server logs in as `Input::TravellerLogin` with the
//!   seat its claims name.
//! - **The store's half.** A handoff save is written as any save of its server and answered
//!   `Input::HandoffSaved` with the version written (none when [`Sim::fail_handoff_saves`]
//!   says so); a claim or recall is written only at its version and answered
//!   `Input::HandoverDecided` (`store`), unless [`Sim::hold_handovers`] keeps it back for the
//!   test to release in the order it wants.
//! - **A crash** ([`Sim::crash`]): the server stops; its clients notice at their idle timeout,
//!   the servers it linked with at the peer idle timeout.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::messages::TravelTo;
use gatehouse_protocol::{
    CloseCode, NodeId, PlayerId, RejectReason, ServerId, ServerMessage, TransitionId,
};
use gatehouse_server::game::{ConnectionId, HandoverSide, Input, Output, TicketedSeat};
use gatehouse_server::store::PlayerSave;

use super::hold::HoldId;
use super::link::Link;
use super::servers::Scheduled;
use super::{ClientId, Event, Sim};

/// What one minted ticket names.
#[derive(Debug, Clone)]
struct Ticket {
    /// `uid`.
    player: PlayerId,
    /// `dst`.
    destination: ServerId,
    /// `src`, `trn`, `ver`, `gen`.
    seat: TicketedSeat,
}

/// A claim or a recall the store keeps back for the test.
#[derive(Debug, Clone)]
struct HeldHandover {
    server: usize,
    side: HandoverSide,
    save: PlayerSave,
    ticket: u64,
}

/// The fleet's state between the simulated servers (module docs).
#[derive(Debug, Default)]
pub(crate) struct Fleet {
    /// Peer messages in flight, by (sender, receiver).
    links: BTreeMap<(usize, usize), Link<PeerMessage>>,
    /// Pairs of servers whose link is cut, the lower index first.
    cut: BTreeSet<(usize, usize)>,
    /// `Input::PeerLost` reports scheduled and not yet delivered: (to whom, about whom).
    lost_pending: BTreeSet<(usize, usize)>,
    /// What the directory names for a node, where a test set it.
    directory: BTreeMap<NodeId, Vec<ServerId>>,
    /// Every ticket minted, by its text.
    tickets: BTreeMap<String, Ticket>,
    /// Whether claims and recalls wait in `held` for the test.
    hold_handovers: bool,
    held: Vec<HeldHandover>,
    /// Servers whose handoff saves the store does not acknowledge.
    failing_handoffs: BTreeSet<usize>,
}

impl Fleet {
    /// When the next peer message is delivered.
    pub(crate) fn next_delivery(&self) -> Option<Instant> {
        self.links.values().filter_map(Link::next_at).min()
    }

    /// A `PeerLost` report reached `at` about `about`: another may be scheduled.
    pub(crate) fn lost_reported(&mut self, at: usize, about: usize) {
        self.lost_pending.remove(&(at, about));
    }

    fn is_cut(&self, a: usize, b: usize) -> bool {
        self.cut.contains(&(a.min(b), a.max(b)))
    }
}

impl Sim {
    /// An operator travel to `node` on the server `server`, now.
    ///
    /// # Panics
    /// If `node` is not a valid node id or the harness runs no such server.
    pub fn travel_at(&mut self, server: &ServerId, node: &str) {
        let index = self.server_index(server);
        self.travel_on(index, node);
    }

    /// From now on, the directory names `servers` for `node`, in order (none: no server hosts
    /// it); each travel asks them in turn, skipping those it asked.
    ///
    /// # Panics
    /// If `node` is not a valid node id.
    pub fn set_directory(&mut self, node: &str, servers: &[ServerId]) {
        let node = NodeId::new(node).unwrap_or_else(|e| panic!("node id {node:?}: {e}"));
        self.fleet.directory.insert(node, servers.to_vec());
    }

    /// From now on, keeps back the peer messages from `from` to `to` that match `filter`, until
    /// [`Sim::release`] (never released: a peer silent to those). The others flow past them.
    pub fn hold_peer(
        &mut self,
        from: &ServerId,
        to: &ServerId,
        filter: impl Fn(&PeerMessage) -> bool + 'static,
    ) -> HoldId {
        let (from, to) = (self.server_index(from), self.server_index(to));
        self.holds.hold_peer(from, to, filter)
    }

    /// Cuts the peer link between `a` and `b` (a partition): what is in flight either way is
    /// lost, and so is what is sent until [`Sim::heal_peer`]; each side is told the link is
    /// lost after `fleet.peer_idle_timeout_ms`. Clients still reach both.
    pub fn cut_peer(&mut self, a: &ServerId, b: &ServerId) {
        let (a, b) = (self.server_index(a), self.server_index(b));
        self.fleet.cut.insert((a.min(b), a.max(b)));
        for (from, to) in [(a, b), (b, a)] {
            let lost = self.fleet.links.get_mut(&(from, to)).map_or(0, Link::clear);
            self.net.dropped += lost as u64;
            let other = self.servers[to].id.clone();
            self.record_at(from, Event::PeerCut { server: other });
            let idle = self.config.peer_idle_timeout;
            self.report_lost_later(from, to, idle);
        }
    }

    /// Heals a cut: messages cross the link again from now.
    pub fn heal_peer(&mut self, a: &ServerId, b: &ServerId) {
        let (a, b) = (self.server_index(a), self.server_index(b));
        self.fleet.cut.remove(&(a.min(b), a.max(b)));
    }

    /// Crashes `server` now: its core stops, every client link to it goes silent (each client
    /// notices at its idle timeout), and every server it had a peer link with is told the link
    /// is lost after `fleet.peer_idle_timeout_ms`.
    pub fn crash(&mut self, server: &ServerId) {
        let index = self.server_index(server);
        self.record_at(index, Event::Crashed);
        self.servers[index].crash();
        for client in 0..self.clients.len() {
            let links: Vec<_> = self.clients[client]
                .link_ids()
                .into_iter()
                .filter(|l| self.clients[client].connection_on(*l).is_some_and(|(s, _)| s == index))
                .collect();
            for link in links {
                self.lose_link_later(ClientId(client), link);
            }
        }
        let linked: BTreeSet<usize> = self
            .fleet
            .links
            .keys()
            .filter_map(|&(from, to)| match (from == index, to == index) {
                (true, false) => Some(to),
                (false, true) => Some(from),
                _ => None,
            })
            .collect();
        let idle = self.config.peer_idle_timeout;
        for other in linked {
            for key in [(other, index), (index, other)] {
                let lost = self.fleet.links.get_mut(&key).map_or(0, Link::clear);
                self.net.dropped += lost as u64;
            }
            self.report_lost_later(other, index, idle);
        }
    }

    /// From now on, the store keeps every claim and recall back, undecided, until
    /// [`Sim::release_handover`].
    pub fn hold_handovers(&mut self) {
        self.fleet.hold_handovers = true;
    }

    /// The claims and recalls the store keeps back, in the order they were made: which server
    /// made each, which side it is and whose it is.
    pub fn held_handovers(&self) -> Vec<(ServerId, HandoverSide, PlayerId)> {
        let held = self.fleet.held.iter();
        held.map(|h| (self.servers[h.server].id.clone(), h.side, h.save.player.clone())).collect()
    }

    /// The store decides the held claim or recall at `index` of [`Sim::held_handovers`] now,
    /// and answers after its latency.
    ///
    /// # Panics
    /// If there is none at `index`.
    pub fn release_handover(&mut self, index: usize) {
        assert!(index < self.fleet.held.len(), "no handover held at {index}");
        let held = self.fleet.held.remove(index);
        self.decide_handover(held.server, held.save, held.ticket);
    }

    /// From now on (while `failing`), the store answers `server`'s handoff saves unwritten, as
    /// after its attempts (docs/spec/travel.md V7: the player is sent back).
    pub fn fail_handoff_saves(&mut self, server: &ServerId, failing: bool) {
        let index = self.server_index(server);
        if failing {
            self.fleet.failing_handoffs.insert(index);
        } else {
            self.fleet.failing_handoffs.remove(&index);
        }
    }

    // --- The shells' share ---------------------------------------------------------------

    /// `Output::FindDestination` of `server`: the directory's next candidate, answered at once.
    pub(crate) fn find_destination(
        &mut self,
        server: usize,
        transition: TransitionId,
        node: &NodeId,
        asked: &[ServerId],
    ) {
        let named: Vec<ServerId> = match self.fleet.directory.get(node) {
            Some(listed) => listed.clone(),
            None => self
                .servers
                .iter()
                .filter(|s| s.world.node(node).is_some() && !s.world.is_remote(node))
                .map(|s| s.id.clone())
                .collect(),
        };
        let me = &self.servers[server].id;
        let found = named.into_iter().find(|s| s != me && !asked.contains(s));
        let now = self.now;
        self.schedule(now, server, Scheduled::DestinationFound { transition, server: found });
    }

    /// `Output::Peer` of `from` to `to`: held, lost in a cut or to a crashed server (whose loss
    /// `from` hears of after the peer timeout), or put on the link.
    pub(crate) fn send_peer(&mut self, from: usize, to: &ServerId, message: PeerMessage) {
        let Some(to) = self.servers.iter().position(|s| s.id == *to) else {
            // A server the harness does not run: nothing ever answers.
            return;
        };
        match self.holds.divert_peer(from, to, message) {
            Some(message) => self.put_on_peer_link(from, to, message),
            None => self.net.held += 1,
        }
    }

    /// Puts `message` on the link from `from` to `to`, unless the link is down.
    pub(crate) fn put_on_peer_link(&mut self, from: usize, to: usize, message: PeerMessage) {
        if self.fleet.is_cut(from, to) || !self.servers[to].is_up() {
            self.net.dropped += 1;
            let timeout = self.config.rules.peer_timeout;
            self.report_lost_later(from, to, timeout);
            return;
        }
        let (delay, lost) = self.config.peer.draw(&mut self.rng);
        let now = self.now;
        self.fleet.links.entry((from, to)).or_default().send(now, delay, message);
        self.net.messages += 1;
        self.net.retransmissions += u64::from(lost);
    }

    /// Tells `at`, `after` from now, that its link to `about` is lost (once until told).
    fn report_lost_later(&mut self, at: usize, about: usize, after: Duration) {
        if !self.servers[at].is_up() || !self.fleet.lost_pending.insert((at, about)) {
            return;
        }
        let other = self.servers[about].id.clone();
        let due = self.now + after;
        self.schedule(due, at, Scheduled::PeerLost(other));
    }

    /// Step 3 of [`Sim::step`]: the peer messages due at `now`, link by link, each in order.
    pub(crate) fn deliver_peer_messages(&mut self, now: Instant) {
        let keys: Vec<(usize, usize)> = self.fleet.links.keys().copied().collect();
        for (from, to) in keys {
            while let Some(message) =
                self.fleet.links.get_mut(&(from, to)).and_then(|l| l.pop_due(now))
            {
                let sender = self.servers[from].id.clone();
                let peer = Event::Peer { from: sender.clone(), message: message.clone() };
                self.record_at(to, peer);
                self.feed(to, Input::Peer { from: sender, message });
            }
        }
    }

    /// `Output::SaveHandoff` of `server`: written as any of its saves, answered after the
    /// store's latency with the version written.
    pub(crate) fn save_handoff(&mut self, server: usize, save: PlayerSave, ticket: u64) {
        let player = save.player.clone();
        let version = if self.fleet.failing_handoffs.contains(&server) {
            None
        } else {
            self.store.save_player(server, save)
        };
        let at = self.store_answer_at();
        self.schedule(at, server, Scheduled::HandoffSaved { player, ticket, version });
    }

    /// `Output::Handover` of `server`: kept back for the test, or decided now.
    pub(crate) fn handover(
        &mut self,
        server: usize,
        side: HandoverSide,
        save: PlayerSave,
        ticket: u64,
    ) {
        if self.fleet.hold_handovers {
            self.fleet.held.push(HeldHandover { server, side, save, ticket });
            return;
        }
        self.decide_handover(server, save, ticket);
    }

    /// The store decides a claim or a recall now, and answers after its latency.
    fn decide_handover(&mut self, server: usize, save: PlayerSave, ticket: u64) {
        let player = save.player.clone();
        let outcome = self.store.handover(server, save);
        let at = self.store_answer_at();
        self.schedule(at, server, Scheduled::HandoverDecided { player, ticket, outcome });
    }

    /// `Output::TravelTo` of `server`: the `TravelTo` the shell mints, to its connection.
    pub(crate) fn send_travel_to(&mut self, server: usize, output: Output) {
        let Output::TravelTo {
            connection,
            player,
            transition,
            node,
            server: destination,
            version,
            generation,
            valid,
        } = output
        else {
            return;
        };
        let source = self.servers[server].id.clone();
        let ticket = format!(
            "ticket-{}:{source}:{}:{player}:{generation}",
            self.fleet.tickets.len() + 1,
            transition.0
        );
        let seat = TicketedSeat { source, travel: transition, version, generation };
        let minted = Ticket { player, destination: destination.clone(), seat };
        self.fleet.tickets.insert(ticket.clone(), minted);
        let travel = TravelTo {
            transition_id: transition,
            node,
            address: format!("{destination}:7777"),
            server_name: destination.to_string(),
            certificate_sha256: None,
            ticket,
            valid_ms: u32::try_from(valid.as_millis()).unwrap_or(u32::MAX),
        };
        self.send_on(server, connection, ServerMessage::TravelTo(Box::new(travel)));
    }

    /// The shell's check of a `Hello` on `connection` of `server` carrying `token`: a ticket
    /// this harness minted logs in as its traveller, or is refused `TicketStale` when it names
    /// another server. Returns false for any other token (a session token's login).
    pub(crate) fn traveller_hello(
        &mut self,
        server: usize,
        connection: ConnectionId,
        token: &str,
    ) -> bool {
        let Some(ticket) = self.fleet.tickets.get(token).cloned() else { return false };
        if ticket.destination != self.servers[server].id {
            let detail = format!("the ticket is for {}, not this server", ticket.destination);
            let refused = ServerMessage::Rejected { reason: RejectReason::TicketStale, detail };
            self.send_on(server, connection, refused);
            self.close_on(server, connection, CloseCode::Rejected);
            return true;
        }
        self.record_at(server, Event::TravellerLogin { connection });
        let login = Input::TravellerLogin { connection, player: ticket.player, seat: ticket.seat };
        self.feed(server, login);
        true
    }
}

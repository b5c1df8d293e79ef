//! Holds: the test hook for arrival orders. A hold keeps back every message of one client's
//! connections, in one direction, or of one peer link's direction, that matches its filter,
//! until the test releases it; the rest flows.
//!
//! A hold breaks the stream's order on purpose: it produces the orders that the ids in every
//! message exist to survive (a late `EndTransition`, a ready report overtaken by a travel, a
//! ticket before its seat's confirmation). On release the kept messages are sent again, in the
//! order they were kept; a hold never released is a path that drops what it matches.

use gatehouse_client::LinkId;
use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{ClientMessage, ServerMessage};

use super::ClientId;

/// Names one hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HoldId(usize);

/// One hold and what it kept back.
pub(crate) enum Hold {
    /// Server messages to `client`, each with the link it was meant for.
    ToClient {
        client: ClientId,
        filter: Box<dyn Fn(&ServerMessage) -> bool>,
        held: Vec<(LinkId, ServerMessage)>,
    },
    /// `client`'s messages to a server, each with the link it was sent on.
    ToServer {
        client: ClientId,
        filter: Box<dyn Fn(&ClientMessage) -> bool>,
        held: Vec<(LinkId, ClientMessage)>,
    },
    /// Peer messages from the server `from` to the server `to` (indices of the simulation's
    /// servers).
    Peer {
        from: usize,
        to: usize,
        filter: Box<dyn Fn(&PeerMessage) -> bool>,
        held: Vec<PeerMessage>,
    },
}

impl Hold {
    fn held_count(&self) -> usize {
        match self {
            Hold::ToClient { held, .. } => held.len(),
            Hold::ToServer { held, .. } => held.len(),
            Hold::Peer { held, .. } => held.len(),
        }
    }
}

/// Every hold of a run; a released hold keeps its slot so ids are never reused.
#[derive(Default)]
pub(crate) struct Holds {
    holds: Vec<Option<Hold>>,
}

impl Holds {
    /// Starts holding server messages to `client` that match `filter`.
    pub(crate) fn hold_to_client(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ServerMessage) -> bool + 'static,
    ) -> HoldId {
        self.add(Hold::ToClient { client, filter: Box::new(filter), held: Vec::new() })
    }

    /// Starts holding `client`'s messages to the server that match `filter`.
    pub(crate) fn hold_to_server(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ClientMessage) -> bool + 'static,
    ) -> HoldId {
        self.add(Hold::ToServer { client, filter: Box::new(filter), held: Vec::new() })
    }

    /// Starts holding peer messages from server `from` to server `to` that match `filter`.
    pub(crate) fn hold_peer(
        &mut self,
        from: usize,
        to: usize,
        filter: impl Fn(&PeerMessage) -> bool + 'static,
    ) -> HoldId {
        self.add(Hold::Peer { from, to, filter: Box::new(filter), held: Vec::new() })
    }

    fn add(&mut self, hold: Hold) -> HoldId {
        self.holds.push(Some(hold));
        HoldId(self.holds.len() - 1)
    }

    /// Keeps `message`, for `to` on `link`, back if a hold on `to` matches it; otherwise
    /// gives it back.
    pub(crate) fn divert_to_client(
        &mut self,
        to: ClientId,
        link: LinkId,
        message: ServerMessage,
    ) -> Option<ServerMessage> {
        for hold in self.holds.iter_mut().flatten() {
            if let Hold::ToClient { client, filter, held } = hold
                && *client == to
                && filter(&message)
            {
                held.push((link, message));
                return None;
            }
        }
        Some(message)
    }

    /// Keeps `message`, from `from` on `link`, back if a hold on `from` matches it; otherwise
    /// gives it back.
    pub(crate) fn divert_to_server(
        &mut self,
        from: ClientId,
        link: LinkId,
        message: ClientMessage,
    ) -> Option<ClientMessage> {
        for hold in self.holds.iter_mut().flatten() {
            if let Hold::ToServer { client, filter, held } = hold
                && *client == from
                && filter(&message)
            {
                held.push((link, message));
                return None;
            }
        }
        Some(message)
    }

    /// Keeps `message` back if a hold on the link from `from` to `to` matches it; otherwise
    /// gives it back.
    pub(crate) fn divert_peer(
        &mut self,
        from: usize,
        to: usize,
        message: PeerMessage,
    ) -> Option<PeerMessage> {
        for hold in self.holds.iter_mut().flatten() {
            if let Hold::Peer { from: f, to: t, filter, held } = hold
                && (*f, *t) == (from, to)
                && filter(&message)
            {
                held.push(message);
                return None;
            }
        }
        Some(message)
    }

    /// Ends a hold and hands back what it kept; `None` if it was already released.
    pub(crate) fn release(&mut self, id: HoldId) -> Option<Hold> {
        self.holds.get_mut(id.0).and_then(Option::take)
    }

    /// How many messages `id` keeps back now (0 once released).
    pub(crate) fn held_count(&self, id: HoldId) -> usize {
        self.holds.get(id.0).and_then(Option::as_ref).map_or(0, Hold::held_count)
    }
}

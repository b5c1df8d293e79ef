//! The clients and the swarm's shell: each client's links (one per connection its session holds,
//! each to one server) and what travels on them, the routing of the session's link-addressed
//! outputs (`client-sim/src/session.rs`, "Links: what a driver routes"), and the arrival of
//! what the servers send.
//!
//! A session starts on [`LinkId::FIRST`], to the server its options name. `Output::Dial` opens
//! the next link to the server the dial's `server_name` names (this harness's network: a new
//! connection there, whose `Hello` the server's shell reads); a dial to a server the harness
//! does not run is refused at once (`link_lost`). `Output::Send` goes on its link,
//! `Output::Close` closes it (the server learns of it one uplink delay later). A server's close
//! reaches the session as the `Closing` the real carrier writes last, then the link's end.

use std::collections::BTreeMap;
use std::time::Instant;

use gatehouse_client::{Dial, LinkId, Output as ClientOutput};
use gatehouse_client_sim::session::ClientSession;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId, ServerMessage};
use gatehouse_server::game::ConnectionId;

use super::link::{Conditions, Link};
use super::servers::Scheduled;
use super::{ClientId, ClientOptions, Event, Sim, player_id};

/// What travels client → server on a connection.
#[derive(Debug)]
pub(crate) enum Up {
    /// The first frame, with its token (a session token, or a travel ticket): the server's
    /// shell logs the connection in when it arrives.
    Hello { token: String },
    /// A control message.
    Message(ClientMessage),
    /// The client dropped the connection; the server notices when this arrives.
    Dropped,
    /// The client closed the connection, done with it; the server notices when this arrives.
    Closed,
}

/// What travels server → client on a connection.
#[derive(Debug)]
pub(crate) enum Down {
    /// A control message.
    Message(ServerMessage),
    /// The server's close, after everything queued before it.
    Close(CloseCode),
    /// The server is gone without a word (it crashed): the client's idle timeout.
    Lost,
}

/// Whether a link is still up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    /// The server's close arrived.
    Closed(CloseCode),
    /// The client dropped or closed it.
    Dropped,
    /// The client noticed its server is gone.
    Lost,
}

/// One connection of a client, to one server.
struct SimLink {
    /// The server's index.
    server: usize,
    /// Its id on that server.
    connection: ConnectionId,
    up: Link<Up>,
    down: Link<Down>,
    end: End,
}

/// One simulated client and its links.
pub(crate) struct SimClient {
    pub(crate) player: PlayerId,
    pub(crate) session: ClientSession,
    pub(crate) uplink: Conditions,
    pub(crate) downlink: Conditions,
    links: BTreeMap<LinkId, SimLink>,
    /// The client's process is gone (it dropped every link).
    dropped: bool,
}

impl SimClient {
    /// Its links, in order.
    pub(crate) fn link_ids(&self) -> Vec<LinkId> {
        self.links.keys().copied().collect()
    }

    /// The server index and connection of `link`, if the session opened it.
    pub(crate) fn connection_on(&self, link: LinkId) -> Option<(usize, ConnectionId)> {
        self.links.get(&link).map(|l| (l.server, l.connection))
    }

    /// Every (server index, connection) the client held, in link order.
    pub(crate) fn connections(&self) -> impl Iterator<Item = (usize, ConnectionId)> + '_ {
        self.links.values().map(|l| (l.server, l.connection))
    }

    /// Whether `link` is up (opened, no close arrived, not dropped, not lost).
    pub(crate) fn is_open(&self, link: LinkId) -> bool {
        self.links.get(&link).is_some_and(|l| l.end == End::Open)
    }

    /// Whether the client still runs: not dropped, and some link is up.
    pub(crate) fn is_live(&self) -> bool {
        !self.dropped && self.links.values().any(|l| l.end == End::Open)
    }

    /// The code of the server's close that reached `link`, if one did.
    pub(crate) fn close_code(&self, link: LinkId) -> Option<CloseCode> {
        match self.links.get(&link)?.end {
            End::Closed(code) => Some(code),
            End::Open | End::Dropped | End::Lost => None,
        }
    }

    /// The oldest message due at `now` to a server, on the first link (in order) that has one.
    pub(crate) fn pop_due_up(&mut self, now: Instant) -> Option<(LinkId, Up)> {
        self.links.iter_mut().find_map(|(id, l)| Some((*id, l.up.pop_due(now)?)))
    }

    /// The oldest message due at `now` to the client, on the first link (in order) that has
    /// one.
    pub(crate) fn pop_due_down(&mut self, now: Instant) -> Option<(LinkId, Down)> {
        self.links.iter_mut().find_map(|(id, l)| Some((*id, l.down.pop_due(now)?)))
    }

    /// When anything of this client is next due: a message on a link, its session's timers
    /// while it runs.
    pub(crate) fn next_wakeup(&self) -> impl Iterator<Item = Option<Instant>> + '_ {
        let live = self.is_live();
        let links = self.links.values().flat_map(|l| {
            let open = l.end == End::Open;
            [l.up.next_at(), l.down.next_at().filter(|_| open)]
        });
        links.chain([self.session.poll_timeout().filter(|_| live)])
    }

    /// Marks `link` ended by the client's side; returns whether it was up, and how many
    /// messages in flight to the client it dropped.
    fn end(&mut self, link: LinkId, end: End) -> Option<(ConnectionId, usize, usize)> {
        let l = self.links.get_mut(&link).filter(|l| l.end == End::Open)?;
        l.end = end;
        Some((l.connection, l.server, l.down.clear()))
    }
}

impl Sim {
    /// Connects a client playing `name` to the server `options.server` names; its `Hello`
    /// leaves now. Connecting a name already connected there is a relaunch: the server
    /// replaces the older connection.
    ///
    /// # Panics
    /// If `name` is not a valid player id, or the server is not one the harness runs.
    pub fn connect_with(&mut self, name: &str, options: ClientOptions) -> ClientId {
        let player = player_id(name);
        let server = self.server_index(&options.server);
        let client = ClientId(self.clients.len());
        let connection = self.servers[server].open_connection();
        let session = match options.client {
            Some(game_side) => ClientSession::with_client(self.now, options.session, game_side),
            None => ClientSession::new(self.now, options.session),
        };
        let first = SimLink {
            server,
            connection,
            up: Link::default(),
            down: Link::default(),
            end: End::Open,
        };
        self.clients.push(SimClient {
            player: player.clone(),
            session,
            uplink: options.uplink,
            downlink: options.downlink,
            links: BTreeMap::from([(LinkId::FIRST, first)]),
            dropped: false,
        });
        self.record_at(server, Event::Connect { client, connection, player });
        // Its session's first output is its `Hello`.
        self.send_client_outputs(client);
        client
    }

    /// `client` drops every connection without a word (its process is gone): nothing more
    /// reaches it, and each server learns of it one uplink delay later.
    pub fn disconnect(&mut self, client: ClientId) {
        if std::mem::replace(&mut self.clients[client.0].dropped, true) {
            return;
        }
        for link in self.clients[client.0].link_ids() {
            let Some((connection, server, dropped)) =
                self.clients[client.0].end(link, End::Dropped)
            else {
                continue;
            };
            self.net.dropped += dropped as u64;
            self.record_at(server, Event::Dropped { connection });
            self.send_up(client, link, Up::Dropped);
        }
    }

    /// Records the event `make` builds from `client`'s connection on `link`, at its server.
    pub(crate) fn record_link(
        &mut self,
        client: ClientId,
        link: LinkId,
        make: impl FnOnce(ConnectionId) -> Event,
    ) {
        if let Some((server, connection)) = self.clients[client.0].connection_on(link) {
            self.record_at(server, make(connection));
        }
    }

    /// Carries everything `client`'s session wants done with its links (module docs).
    pub(crate) fn send_client_outputs(&mut self, client: ClientId) {
        while let Some(output) = self.clients[client.0].session.poll_output() {
            match output {
                // A link the client no longer holds drops it, as the real shell does.
                ClientOutput::Send { link, message } if self.clients[client.0].is_open(link) => {
                    self.client_sends(client, link, message)
                }
                ClientOutput::Dial { link, dial } => self.dial(client, link, &dial),
                ClientOutput::Close { link } => self.close_link(client, link),
                // What a later library asks for: this harness carries none of it.
                _ => {}
            }
        }
        // As the swarm does: the game side's share runs once the replies are out.
        self.clients[client.0].session.run_game_side();
    }

    /// `Output::Dial`: a new connection to the server `dial.server_name` names; refused at
    /// once for a server the harness does not run.
    fn dial(&mut self, client: ClientId, link: LinkId, dial: &Dial) {
        let found = self.servers.iter().position(|s| s.id.as_str() == dial.server_name);
        let Some(server) = found else {
            let why = format!("no server named {} in this harness", dial.server_name);
            let now = self.now;
            self.clients[client.0].session.link_lost(now, link, why);
            return;
        };
        let connection = self.servers[server].open_connection();
        let opened = SimLink {
            server,
            connection,
            up: Link::default(),
            down: Link::default(),
            end: End::Open,
        };
        self.clients[client.0].links.insert(link, opened);
        let player = self.clients[client.0].player.clone();
        self.record_at(server, Event::Connect { client, connection, player });
        if !self.servers[server].is_up() {
            // Nothing answers there: the dial times out as an idle link does.
            self.lose_link_later(client, link);
        }
    }

    /// `Output::Close`: the client is done with `link`; its server notices one uplink delay
    /// later, after what was sent on it before.
    fn close_link(&mut self, client: ClientId, link: LinkId) {
        let Some((connection, server, dropped)) = self.clients[client.0].end(link, End::Dropped)
        else {
            return;
        };
        self.net.dropped += dropped as u64;
        self.record_at(server, Event::LinkClosed { connection });
        self.send_up(client, link, Up::Closed);
    }

    /// `client`'s link notices, a client idle timeout after what is in flight on it, that its
    /// server is gone.
    pub(crate) fn lose_link_later(&mut self, client: ClientId, link: LinkId) {
        let idle = self.config.client_idle_timeout;
        let now = self.now;
        if let Some(l) = self.clients[client.0].links.get_mut(&link)
            && l.end == End::Open
        {
            l.down.send(now, idle, Down::Lost);
        }
    }

    /// One message `client` sends on `link`: kept back by a hold, or put on the link.
    pub(crate) fn client_sends(&mut self, client: ClientId, link: LinkId, message: ClientMessage) {
        if let ClientMessage::Hello { token, .. } = message {
            // The server's shell reads the token (`servers`): it is never traced.
            self.send_up(client, link, Up::Hello { token });
            return;
        }
        let sent = message.clone();
        self.record_link(client, link, |connection| Event::ClientSent {
            connection,
            message: sent,
        });
        match self.holds.divert_to_server(client, link, message) {
            Some(message) => self.send_up(client, link, Up::Message(message)),
            None => {
                self.net.held += 1;
                self.record_link(client, link, |connection| Event::Held { connection });
            }
        }
    }

    /// One server message for `client` on `link`: kept back by a hold, or put on the link.
    pub(crate) fn server_sends(&mut self, client: ClientId, link: LinkId, message: ServerMessage) {
        match self.holds.divert_to_client(client, link, message) {
            Some(message) => self.send_down(client, link, Down::Message(message)),
            None => {
                self.net.held += 1;
                self.record_link(client, link, |connection| Event::Held { connection });
            }
        }
    }

    pub(crate) fn send_down(&mut self, client: ClientId, link: LinkId, message: Down) {
        let c = &mut self.clients[client.0];
        let Some(l) = c.links.get_mut(&link).filter(|l| l.end == End::Open) else {
            self.net.dropped += 1;
            return;
        };
        let (delay, lost) = c.downlink.draw(&mut self.rng);
        l.down.send(self.now, delay, message);
        self.net.messages += 1;
        self.net.retransmissions += u64::from(lost);
    }

    pub(crate) fn send_up(&mut self, client: ClientId, link: LinkId, message: Up) {
        let c = &mut self.clients[client.0];
        let Some(l) = c.links.get_mut(&link) else { return };
        let (delay, lost) = c.uplink.draw(&mut self.rng);
        l.up.send(self.now, delay, message);
        self.net.messages += 1;
        self.net.retransmissions += u64::from(lost);
    }

    /// What reaches the client on `link`: a message is fed to the session; the server's close
    /// arrives as its `Closing`, then ends the link; a crashed server's silence ends it.
    pub(crate) fn arrive_at_client(&mut self, client: ClientId, link: LinkId, down: Down) {
        let now = self.now;
        let Some((server, connection)) = self.clients[client.0].connection_on(link) else {
            return;
        };
        match down {
            Down::Message(message) => {
                self.clients[client.0].session.handle_on(now, link, message.clone());
                self.record_at(server, Event::ToClient { connection, message });
            }
            Down::Close(code) => {
                let Some((_, _, dropped)) = self.clients[client.0].end(link, End::Closed(code))
                else {
                    return;
                };
                self.net.dropped += dropped as u64;
                self.record_at(server, Event::Closed { connection, code });
                // The driver ends the connection once its close went out; the core hears of it
                // then.
                self.schedule(now, server, Scheduled::Disconnected(connection));
                let closing =
                    ServerMessage::Closing { code: code.code(), reason: code.reason().into() };
                let session = &mut self.clients[client.0].session;
                session.handle_on(now, link, closing);
                session.link_lost(now, link, "the server closed the connection");
            }
            Down::Lost => {
                if self.clients[client.0].end(link, End::Lost).is_none() {
                    return;
                }
                self.record_at(server, Event::LinkLost { connection });
                let why = "nothing from the server within the idle timeout";
                self.clients[client.0].session.link_lost(now, link, why);
            }
        }
        self.send_client_outputs(client);
    }
}

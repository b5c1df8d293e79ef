//! What tests read of a run: the cores, the sessions, the links, the store and the trace.
//! Nothing here changes the run.
//!
//! The single-server readings (`game`, `connection`, `close_code`) are the first server's and a
//! client's first link's; the rest name a server, or read every link a client held, in order.

use std::time::{Duration, Instant};

use gatehouse_client::LinkId;
use gatehouse_client_sim::session::ClientSession;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId, ServerId, ServerMessage};
use gatehouse_server::game::{ConnectionId, Game, Output};
use gatehouse_server::store::{PlayerSave, SessionSave};

use super::{ClientId, Event, NetStats, Sim, TraceEvent};

impl Sim {
    /// The simulated instant now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Simulated time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.now - self.base
    }

    /// The first server's core (snapshot, counters, transition id).
    pub fn game(&self) -> &Game {
        &self.servers[0].game
    }

    /// The core of the server `server`.
    ///
    /// # Panics
    /// If the harness runs no such server.
    pub fn game_at(&self, server: &ServerId) -> &Game {
        &self.servers[self.server_index(server)].game
    }

    /// Every server's id, in the order they were added.
    pub fn server_ids(&self) -> Vec<ServerId> {
        self.servers.iter().map(|s| s.id.clone()).collect()
    }

    /// The servers whose core holds `player` now (logged in there, on any connection).
    pub fn servers_holding(&self, player: &PlayerId) -> Vec<ServerId> {
        let holds = |game: &Game| game.snapshot().players.iter().any(|p| p.player == *player);
        let up = self.servers.iter().filter(|s| s.is_up());
        up.filter(|s| holds(&s.game)).map(|s| s.id.clone()).collect()
    }

    /// `client`'s session.
    pub fn session(&self, client: ClientId) -> &ClientSession {
        &self.clients[client.0].session
    }

    /// `client`'s session, mutably (to subscribe to gates, or to `finish` it).
    pub fn session_mut(&mut self, client: ClientId) -> &mut ClientSession {
        &mut self.clients[client.0].session
    }

    /// The player `client` plays.
    pub fn player(&self, client: ClientId) -> &PlayerId {
        &self.clients[client.0].player
    }

    /// `client`'s first connection (on the server its options named).
    pub fn connection(&self, client: ClientId) -> ConnectionId {
        // Every client is created with its first link; 0 is no server's connection id.
        self.clients[client.0].connection_on(LinkId::FIRST).map_or(ConnectionId(0), |(_, c)| c)
    }

    /// The server and connection of `client`'s `link`, if its session opened it.
    pub fn connection_on(
        &self,
        client: ClientId,
        link: LinkId,
    ) -> Option<(ServerId, ConnectionId)> {
        let (server, connection) = self.clients[client.0].connection_on(link)?;
        Some((self.servers[server].id.clone(), connection))
    }

    /// The server of the link `client`'s session plays on.
    pub fn server_of(&self, client: ClientId) -> Option<ServerId> {
        let c = &self.clients[client.0];
        c.connection_on(c.session.link()).map(|(server, _)| self.servers[server].id.clone())
    }

    /// Whether `client` still plays: the link its session plays on is up (no close arrived,
    /// not dropped, not lost).
    pub fn is_open(&self, client: ClientId) -> bool {
        let c = &self.clients[client.0];
        c.is_live() && c.is_open(c.session.link())
    }

    /// The code of the server's close that reached `client`'s first link, if one did.
    pub fn close_code(&self, client: ClientId) -> Option<CloseCode> {
        self.close_code_on(client, LinkId::FIRST)
    }

    /// The code of the server's close that reached `client`'s `link`, if one did.
    pub fn close_code_on(&self, client: ClientId, link: LinkId) -> Option<CloseCode> {
        self.clients[client.0].close_code(link)
    }

    /// Every client, in the order they connected.
    pub fn clients(&self) -> impl Iterator<Item = ClientId> + use<> {
        (0..self.clients.len()).map(ClientId)
    }

    /// Everything that happened so far.
    pub fn trace(&self) -> &[TraceEvent] {
        &self.trace
    }

    /// The last `count` trace events, one per line.
    pub fn trace_text(&self, count: usize) -> String {
        let skip = self.trace.len().saturating_sub(count);
        self.trace[skip..].iter().map(|e| format!("{e}\n")).collect()
    }

    /// What the links carried.
    pub fn net_stats(&self) -> NetStats {
        self.net
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The save the store holds for `player`.
    pub fn stored_player(&self, player: &PlayerId) -> Option<&PlayerSave> {
        self.store.player(player)
    }

    /// The session save the store holds for the first server.
    pub fn stored_session(&self) -> Option<&SessionSave> {
        self.store.session(0)
    }

    /// Player saves the servers wrote so far.
    pub fn player_saves(&self) -> u64 {
        self.store.player_saves
    }

    /// Player saves the store refused so far because another server wrote the player since
    /// they were based: a server that saved a player it no longer held.
    pub fn store_conflicts(&self) -> u64 {
        self.store.conflicts
    }

    /// Whether `e` happened on one of `client`'s connections, naming `connection`.
    fn is_on(&self, client: ClientId, e: &TraceEvent, connection: ConnectionId) -> bool {
        self.clients[client.0]
            .connections()
            .any(|(s, c)| c == connection && self.servers[s].id == e.server)
    }

    /// Every server message that reached `client`, on any of its links, in order.
    pub fn received(&self, client: ClientId) -> Vec<&ServerMessage> {
        self.trace
            .iter()
            .filter_map(|e| match &e.event {
                Event::ToClient { connection, message } if self.is_on(client, e, *connection) => {
                    Some(message)
                }
                _ => None,
            })
            .collect()
    }

    /// When the first server message matching `matches` reached `client`, on any link.
    pub fn received_at(
        &self,
        client: ClientId,
        matches: impl Fn(&ServerMessage) -> bool,
    ) -> Option<Duration> {
        self.trace.iter().find_map(|e| match &e.event {
            Event::ToClient { connection, message }
                if matches(message) && self.is_on(client, e, *connection) =>
            {
                Some(e.at)
            }
            _ => None,
        })
    }

    /// Every message `client` sent (held or not), on any link, in order.
    pub fn sent(&self, client: ClientId) -> Vec<&ClientMessage> {
        self.trace
            .iter()
            .filter_map(|e| match &e.event {
                Event::ClientSent { connection, message } if self.is_on(client, e, *connection) => {
                    Some(message)
                }
                _ => None,
            })
            .collect()
    }

    /// When the first message of `client` matching `matches` reached a server.
    pub fn arrived_at_server(
        &self,
        client: ClientId,
        matches: impl Fn(&ClientMessage) -> bool,
    ) -> Option<Duration> {
        self.trace.iter().find_map(|e| match &e.event {
            Event::ToServer { connection, message }
                if matches(message) && self.is_on(client, e, *connection) =>
            {
                Some(e.at)
            }
            _ => None,
        })
    }

    /// When a core first put out an output matching `matches`.
    pub fn output_at(&self, matches: impl Fn(&Output) -> bool) -> Option<Duration> {
        self.event_at(|e| matches!(e, Event::Output(output) if matches(output)))
    }

    /// When the core of `server` first put out an output matching `matches`.
    pub fn output_at_server(
        &self,
        server: &ServerId,
        matches: impl Fn(&Output) -> bool,
    ) -> Option<Duration> {
        self.trace.iter().find_map(|e| match &e.event {
            Event::Output(output) if e.server == *server && matches(output) => Some(e.at),
            _ => None,
        })
    }

    /// When the first trace event matching `matches` happened.
    pub fn event_at(&self, matches: impl Fn(&Event) -> bool) -> Option<Duration> {
        self.trace.iter().find(|e| matches(&e.event)).map(|e| e.at)
    }
}

//! Each server's shell: one real [`Game`] on its own world, with its own connection ids, its
//! own streaming and its own session save, and what its network driver and carrier do for it.
//!
//! A connection is logged in when its `Hello` arrives: a session token's as the client's
//! player (the sim verifies no token), a travel ticket's as the traveller the ticket names,
//! once the fleet's check of it held (`fleet`). The core's outputs go to the connections they
//! name; a broadcast reaches every connection whose `Welcome` was carried before it; a close
//! follows what was queued before it. Streaming is the simulated world's, and the store
//! answers after its latency. A crashed server handles nothing more.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_client::LinkId;
use gatehouse_protocol::{CloseCode, PlayerId};
use gatehouse_protocol::{ReplicatedChange, ServerId, ServerMessage, TransitionId};
use gatehouse_server::config::{WorldMap, parse_world};
use gatehouse_server::game::{
    ConnectionId, Departure, Game, GameRules, HandoverOutcome, Input, KnownWorld, LoadId, Output,
};
use gatehouse_server::store::LoadOutcome;
use gatehouse_server::store::PlayerSave;
use gatehouse_server::world::SimulatedWorld;

use super::clients::{Down, Up};
use super::{ClientId, Event, ServerSpec, Sim};

/// A server input the simulated shell scheduled.
#[derive(Debug)]
pub(crate) enum Scheduled {
    Streamed(LoadId),
    SpawnPointsRegistered(LoadId),
    PlayerLoad {
        player: PlayerId,
        ticket: u64,
    },
    SessionLoad,
    /// The server's network driver ended the connection (after its close was delivered).
    Disconnected(ConnectionId),
    /// The directory's answer to `Output::FindDestination`.
    DestinationFound {
        transition: TransitionId,
        server: Option<ServerId>,
    },
    /// The store's answer to `Output::SaveHandoff`.
    HandoffSaved {
        player: PlayerId,
        ticket: u64,
        version: Option<u64>,
    },
    /// The store's answer to `Output::Handover`.
    HandoverDecided {
        player: PlayerId,
        ticket: u64,
        outcome: HandoverOutcome,
    },
    /// The peer link to this server is reported lost.
    PeerLost(ServerId),
    /// The store's answer to a player save it refused as a conflict (docs/spec/travel.md V17).
    SaveConflicted {
        player: PlayerId,
        found: Option<u64>,
    },
}

/// One simulated server and its shell's state.
pub(crate) struct SimServer {
    /// Its fleet id.
    pub(crate) id: ServerId,
    pub(crate) game: Game,
    /// Its world map: what the directory reads to know which nodes it hosts.
    pub(crate) world: Arc<WorldMap>,
    /// Its world: the simulated one's timings, drawn from the run's seed.
    streamer: SimulatedWorld,
    /// `network.max_frame_len`, for the world a newcomer is greeted with.
    max_frame_len: usize,
    /// Connections whose `Hello` arrived and that the server has not closed, in id order:
    /// which client and which of its links each is.
    accepted: BTreeMap<ConnectionId, (ClientId, LinkId)>,
    /// Of those, the ones whose `Welcome` was carried (broadcast targets), in id order.
    logged_in: BTreeMap<ConnectionId, (ClientId, LinkId)>,
    /// The world as every client has been told it, which greets a newcomer after its
    /// `Welcome`, as the server's carrier does (docs/protocol.md 4.5).
    known: KnownWorld,
    /// The last connection id given out.
    last_connection: u64,
    /// It crashed: its core handles nothing more.
    crashed: bool,
}

impl SimServer {
    /// Whether it runs (it has not crashed).
    pub(crate) fn is_up(&self) -> bool {
        !self.crashed
    }

    /// A new connection's id: never reused within the server.
    pub(crate) fn open_connection(&mut self) -> ConnectionId {
        self.last_connection += 1;
        ConnectionId(self.last_connection)
    }

    /// Stops it: nothing it has is carried any more. Returns the connections it held.
    pub(crate) fn crash(&mut self) -> Vec<(ClientId, LinkId)> {
        self.crashed = true;
        self.logged_in.clear();
        std::mem::take(&mut self.accepted).into_values().collect()
    }
}

impl Sim {
    /// Boots another server of the fleet on its own world, now, and carries its first outputs.
    /// Its clients connect with [`crate::sim::ClientOptions::server`]; tickets name it by its
    /// id.
    ///
    /// # Panics
    /// If its world text is not a valid world map, or a server with its id runs already.
    pub fn add_server(&mut self, spec: ServerSpec) {
        assert!(
            self.servers.iter().all(|s| s.id != spec.id),
            "server {} is in the harness already",
            spec.id
        );
        let file = format!("{}-world.toml", spec.id);
        let world = parse_world(Path::new(&file), &spec.world)
            .unwrap_or_else(|e| panic!("the world of {}: {e}", spec.id));
        let world = Arc::new(world);
        let streamer = SimulatedWorld::new(world.clone());
        let max_frame_len = spec.rules.max_frame_len as usize;
        // Every simulated server is in the fleet: its saves name it (docs/spec/travel.md V17).
        let server = Some(spec.rules.server.clone().unwrap_or_else(|| spec.id.clone()));
        let rules = GameRules { server, ..spec.rules };
        let game = Game::new(rules, world.clone(), self.now);
        self.servers.push(SimServer {
            id: spec.id,
            game,
            world,
            streamer,
            max_frame_len,
            accepted: BTreeMap::new(),
            logged_in: BTreeMap::new(),
            known: KnownWorld::default(),
            last_connection: 0,
            crashed: false,
        });
        self.carry_outputs(self.servers.len() - 1);
    }

    /// The shutdown drain of every running server (`Game::drain`): each saves every player it
    /// holds, now. A save of a player another server wrote since counts in
    /// [`Sim::store_conflicts`]: a server held an older copy than the store's.
    pub fn drain_servers(&mut self) {
        for server in 0..self.servers.len() {
            if self.servers[server].is_up() {
                self.servers[server].game.drain();
                self.carry_outputs(server);
            }
        }
    }

    /// The index of the server `id`.
    ///
    /// # Panics
    /// If the harness runs no such server: a test's typo.
    pub(crate) fn server_index(&self, id: &ServerId) -> usize {
        let found = self.servers.iter().position(|s| s.id == *id);
        found.unwrap_or_else(|| panic!("no server {id} in this harness"))
    }

    /// Feeds server `server`'s core one input now, then carries what it put out.
    pub(crate) fn feed(&mut self, server: usize, input: Input) {
        if !self.servers[server].is_up() {
            return;
        }
        self.servers[server].game.handle(self.now, input);
        self.carry_outputs(server);
    }

    /// Sends a newcomer the world as clients know it, right after its `Welcome`.
    fn greet(&mut self, server: usize, client: ClientId, link: LinkId) {
        let s = &self.servers[server];
        for message in s.known.messages(s.max_frame_len) {
            self.server_sends(client, link, message);
        }
    }

    /// One message for the connection `connection` of `server`, if it is still accepted; after
    /// a `Welcome`, the world as clients know it.
    pub(crate) fn send_on(
        &mut self,
        server: usize,
        connection: ConnectionId,
        message: ServerMessage,
    ) {
        let Some(&(client, link)) = self.servers[server].accepted.get(&connection) else { return };
        let welcome = matches!(message, ServerMessage::Welcome { .. });
        self.server_sends(client, link, message);
        if welcome {
            self.servers[server].logged_in.insert(connection, (client, link));
            self.greet(server, client, link);
        }
    }

    /// Closes `connection` of `server` with `code`, after what was queued for it.
    pub(crate) fn close_on(&mut self, server: usize, connection: ConnectionId, code: CloseCode) {
        // No broadcast reaches a closed connection, even before its close arrives.
        let s = &mut self.servers[server];
        s.logged_in.remove(&connection);
        if let Some((client, link)) = s.accepted.remove(&connection) {
            self.send_down(client, link, Down::Close(code));
        }
    }

    /// The server shell's carry: every output `server`'s core has, until it has none.
    pub(crate) fn carry_outputs(&mut self, server: usize) {
        while let Some(output) = self.servers[server].game.poll_output() {
            self.record_at(server, Event::Output(output.clone()));
            match output {
                Output::Send { connection, message } => self.send_on(server, connection, message),
                Output::Broadcast { message } => {
                    let s = &mut self.servers[server];
                    if let Ok(change) = ReplicatedChange::from_message(message.clone()) {
                        s.known.apply(&change);
                    }
                    let targets: Vec<(ClientId, LinkId)> = s.logged_in.values().copied().collect();
                    for (client, link) in targets {
                        self.server_sends(client, link, message.clone());
                    }
                }
                Output::Close { connection, code } => self.close_on(server, connection, code),
                Output::Stream(request) => {
                    let Some(timing) = self.servers[server].streamer.timing(&request) else {
                        panic!("the core streamed {}, which the world lacks", request.node);
                    };
                    let jitter = self.draw_between(Duration::ZERO, timing.jitter);
                    let streamed = self.now + timing.duration + jitter;
                    self.schedule(streamed, server, Scheduled::Streamed(request.load));
                    if let Some(after) = timing.spawn_points_after {
                        let registered = Scheduled::SpawnPointsRegistered(request.load);
                        self.schedule(streamed + after, server, registered);
                    }
                }
                Output::LoadPlayer { player, ticket } => {
                    let at = self.store_answer_at();
                    self.schedule(at, server, Scheduled::PlayerLoad { player, ticket });
                }
                Output::SavePlayer(save) => self.save_player(server, save),
                Output::SavePlayers(saves) => {
                    for save in saves {
                        self.save_player(server, save);
                    }
                }
                Output::LoadSession => {
                    let at = self.store_answer_at();
                    self.schedule(at, server, Scheduled::SessionLoad);
                }
                Output::SaveSession { node, version } => {
                    self.store.save_session(server, node, version)
                }
                // Recorded above; the real shell stops the server here, after the closes
                // before it, which the clients hear.
                Output::WorldUnavailable { .. } => {}
                Output::FindDestination { transition, node, asked, .. } => {
                    self.find_destination(server, transition, &node, &asked)
                }
                Output::Peer { to, message } => self.send_peer(server, &to, message),
                Output::SaveHandoff { save, ticket } => self.save_handoff(server, save, ticket),
                Output::Handover { side, save, ticket } => {
                    self.handover(server, side, save, ticket)
                }
                travel @ Output::TravelTo { .. } => self.send_travel_to(server, travel),
            }
        }
    }

    /// A scheduled input of `server` came due (a crashed server's are dropped).
    pub(crate) fn handle_scheduled(&mut self, server: usize, scheduled: Scheduled) {
        if !self.servers[server].is_up() {
            return;
        }
        let input = match scheduled {
            Scheduled::Streamed(load) => {
                self.record_at(server, Event::Streamed { load });
                Input::Streamed { load }
            }
            Scheduled::SpawnPointsRegistered(load) => {
                self.record_at(server, Event::SpawnPointsRegistered { load });
                Input::SpawnPointsRegistered { load }
            }
            Scheduled::PlayerLoad { player, ticket } => {
                // Read when answered, so a save written meanwhile is seen (as the worker does).
                let outcome = self.store.load_player(server, &player);
                let found = matches!(outcome, LoadOutcome::Found(_));
                self.record_at(server, Event::PlayerLoaded { player: player.clone(), found });
                Input::PlayerLoaded { player, ticket, outcome }
            }
            Scheduled::SessionLoad => {
                let outcome = self.store.load_session(server);
                let found = matches!(outcome, LoadOutcome::Found(_));
                self.record_at(server, Event::SessionLoaded { found });
                Input::SessionLoaded { outcome }
            }
            Scheduled::Disconnected(connection) => {
                return self.connection_ended(server, connection, "the connection ended");
            }
            Scheduled::DestinationFound { transition, server: found } => {
                self.record_at(server, Event::DestinationFound { server: found.clone() });
                Input::DestinationFound { transition, server: found }
            }
            Scheduled::HandoffSaved { player, ticket, version } => {
                self.record_at(server, Event::HandoffSaved { player: player.clone(), version });
                Input::HandoffSaved { player, ticket, version }
            }
            Scheduled::HandoverDecided { player, ticket, outcome } => {
                let decided = Event::HandoverDecided { player: player.clone(), outcome };
                self.record_at(server, decided);
                Input::HandoverDecided { player, ticket, outcome }
            }
            Scheduled::SaveConflicted { player, found } => {
                let conflicted = Event::SaveConflicted { player: player.clone(), found };
                self.record_at(server, conflicted);
                Input::PlayerSaveConflicted { player, found }
            }
            Scheduled::PeerLost(other) => {
                let about = self.server_index(&other);
                self.fleet.lost_reported(server, about);
                self.record_at(server, Event::PeerLost { server: other.clone() });
                Input::PeerLost { server: other }
            }
        };
        self.feed(server, input);
    }

    /// A player save of `server`, written now; a conflict is answered after the store's latency
    /// with the version it met, as the real shell feeds the worker's (docs/spec/travel.md V17).
    fn save_player(&mut self, server: usize, save: PlayerSave) {
        let player = save.player.clone();
        if self.store.save_player(server, save).is_none() {
            let found = self.store.player(&player).map(|s| s.version);
            let at = self.store_answer_at();
            self.schedule(at, server, Scheduled::SaveConflicted { player, found });
        }
    }

    /// The server's network driver learnt that `connection` ended: the core hears of it.
    fn connection_ended(&mut self, server: usize, connection: ConnectionId, why: &str) {
        let s = &mut self.servers[server];
        s.accepted.remove(&connection);
        s.logged_in.remove(&connection);
        self.record_at(server, Event::Disconnected { connection });
        self.feed(server, Input::Disconnected { connection, departure: Departure::lost(why) });
    }

    /// The server's network driver, for one connection of `client`: a `Hello` logs in (a
    /// ticket's as a traveller), a message is fed, an end is reported. Nothing reaches a
    /// crashed server.
    pub(crate) fn arrive_at_server(&mut self, client: ClientId, link: LinkId, up: Up) {
        let c = &self.clients[client.0];
        let Some((server, connection)) = c.connection_on(link) else { return };
        if !self.servers[server].is_up() {
            return;
        }
        let player = c.player.clone();
        match up {
            Up::Hello { token } => {
                self.servers[server].accepted.insert(connection, (client, link));
                if !self.traveller_hello(server, connection, &token) {
                    self.record_at(server, Event::Login { connection });
                    self.feed(server, Input::Login { connection, player });
                }
            }
            Up::Message(message) => {
                self.record_at(server, Event::ToServer { connection, message: message.clone() });
                self.feed(server, Input::Message { connection, message });
            }
            Up::Dropped => self.connection_ended(server, connection, "the connection ended"),
            Up::Closed => self.connection_ended(server, connection, "the client closed it"),
        }
    }
}

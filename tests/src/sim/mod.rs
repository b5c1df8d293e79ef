//! A deterministic harness for both sides: real [`Game`]s and N real [`ClientSession`]s
//! connected in memory, on simulated time, with per-message latency and loss drawn from one
//! seed (quinn-proto's test `Pair` is the model).
//!
//! [`Sim`] plays every shell. Each server's (`servers`): it logs a connection in when its
//! `Hello` arrives (a ticket's `Hello` as a traveller, after the ticket check the real shell
//! makes), carries its core's outputs to the clients' links (a broadcast to every connection
//! whose `Welcome` was carried before it, as the server's carrier does: nothing before
//! `Welcome`; a close after what was queued before it, as `Closing`), simulates streaming and
//! answers the store. The swarm's (`clients`): it feeds each client what arrives on each of its
//! links and sends what the client says on the link it names, opening a link to the server a
//! `Dial` names and closing one the client is done with. The fleet's (`fleet`), once a second
//! server is added ([`Sim::add_server`], docs/spec/travel.md): peer links between the cores,
//! a directory, the ticket a `TravelTo` carries, and the hooks that hold, cut or crash them.
//! One store serves every server (`store`), with the real worker's rebasing and conditional
//! writes. There are no sockets, no tasks and no sleeps; the real clock is read once, for the
//! base instant.
//!
//! [`Game`]: gatehouse_server::game::Game
//! [`ClientSession`]: gatehouse_client_sim::session::ClientSession
//!
//! [`Sim::step`] jumps to the earliest wakeup of any core, any client, any message in flight
//! (on a client's link or a peer link), or any scheduled server input, and handles everything
//! due then in one fixed order:
//!
//! 1. scheduled server inputs (streaming, spawn points, store and directory answers,
//!    disconnect notices, lost peer links), in the order they were scheduled;
//! 2. client messages arriving at the servers, client by client, the first link with one due
//!    first;
//! 3. peer messages arriving, link by link (by the sender's index, then the receiver's), each
//!    in order;
//! 4. the cores' timers, server by server (after the inputs, as the shell's biased select
//!    does);
//! 5. server messages arriving at clients, client by client, the first link with one due
//!    first;
//! 6. each client's timers.
//!
//! After each input a core's outputs are drained and carried, and after each client input its
//! messages are sent. Every draw comes from one seeded generator in that fixed order, so the
//! same seed and the same script give the same [`Sim::trace`].
//!
//! Modules: `servers` (each server's shell), `clients` (each client's links and the swarm's
//! shell), `fleet` (what a second server adds: peer links, directory, tickets, their hooks),
//! `link` (one ordered, lossy stream), `hold` (test hooks for arrival orders), `store` (saves
//! in memory), `observe` (what tests read), `trace` (the record of a run).

mod clients;
mod fleet;
mod hold;
mod link;
mod observe;
mod servers;
mod store;
mod trace;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gatehouse_client_sim::client::ClientConfig;
use gatehouse_client_sim::session::SessionConfig;
use gatehouse_protocol::{ClientMessage, NodeId, PlayerId, ServerId, ServerMessage};
use gatehouse_server::config::{AuthConfig, FleetConfig, GameConfig, NetworkConfig};
use gatehouse_server::game::{GameRules, Input};
use gatehouse_server::store::PlayerSave;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

pub use hold::HoldId;
pub use link::{Conditions, NetStats};
pub use trace::{Event, TraceEvent};

use clients::SimClient;
use fleet::Fleet;
use hold::{Hold, Holds};
use servers::{Scheduled, SimServer};
use store::MemoryStore;

/// Steps one `run_*` call may take: far more than any scenario needs, so a loop that makes no
/// progress in simulated time fails instead of hanging.
const MAX_STEPS: u64 = 500_000;

/// Trace lines shown when a run fails.
const TRACE_TAIL: usize = 60;

/// Names one simulated client: its index in the order clients connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub usize);

/// How a simulated run is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seeds every draw: latency, jitter, loss, streaming jitter, store latency, and (derived per
    /// client) each client's own stream times and UI delays.
    pub seed: u64,
    /// The first server's fleet id (`fleet.server_id`): what tickets name as its source or
    /// destination, and what the other servers' peer messages come from.
    pub server: ServerId,
    /// The first server's world map, as `world.toml` text.
    pub world: String,
    /// The first server's rules: the server's defaults (settle 15 s, spawn retry 100 ms,
    /// client-ready 30 s, kick; `fleet.seat_hold_ms` 10 s, `fleet.peer_timeout_ms` 2 s,
    /// `fleet.resolve_timeout_ms` 5 s) and 64 players unless changed.
    pub rules: GameRules,
    /// Each direction of each client connection, unless a client is connected with its own.
    pub net: Conditions,
    /// Each direction of each peer link between two servers.
    pub peer: Conditions,
    /// How long a peer link whose other end went silent (cut, or its server crashed) takes to be
    /// reported lost (`fleet.peer_idle_timeout_ms`, 3 s); a message to a server whose link is
    /// down is reported lost after `fleet.peer_timeout_ms` (a dial that never links).
    pub peer_idle_timeout: Duration,
    /// How long a client takes to notice that the server at the other end of a link crashed
    /// (the client's QUIC idle timeout, 10 s by default: docs/client.md).
    pub client_idle_timeout: Duration,
    /// A store answer comes this long after it was asked for: uniformly between the bounds
    /// (inclusive).
    pub store_latency: (Duration, Duration),
    /// Clients' behaviour, unless a client is connected with its own; its seed is replaced by
    /// one derived from [`SimConfig::seed`] and the client's index.
    pub session: SessionConfig,
}

impl SimConfig {
    /// A run of `world` seeded with `seed`, on one server named `sim-1`: the server's default
    /// rules, a LAN-like network ([`Conditions::lan`]) for clients and peer links, a 5 – 20 ms
    /// store and the default client behaviour. The world is checked by [`Sim::new`].
    pub fn new(world: &str, seed: u64) -> SimConfig {
        SimConfig {
            seed,
            server: server_id("sim-1"),
            world: world.to_owned(),
            rules: default_rules(),
            net: Conditions::lan(),
            peer: Conditions::lan(),
            peer_idle_timeout: FleetConfig::default().peer_idle_timeout,
            client_idle_timeout: Duration::from_secs(10),
            store_latency: (Duration::from_millis(5), Duration::from_millis(20)),
            session: SessionConfig::default(),
        }
    }
}

/// Another server of the fleet ([`Sim::add_server`]).
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Its fleet id.
    pub id: ServerId,
    /// Its world map, as `world.toml` text.
    pub world: String,
    /// Its rules.
    pub rules: GameRules,
}

impl ServerSpec {
    /// A server `id` on `world`, with the rules [`SimConfig::new`] gives.
    ///
    /// # Panics
    /// If `id` is not a valid server id.
    pub fn new(id: &str, world: &str) -> ServerSpec {
        ServerSpec { id: server_id(id), world: world.to_owned(), rules: default_rules() }
    }
}

/// The server's default rules, with a cap of 64 players.
fn default_rules() -> GameRules {
    gatehouse_server::config::game_rules(
        &GameConfig::default(),
        &AuthConfig::default(),
        &NetworkConfig { max_players: 64, ..NetworkConfig::default() },
        &FleetConfig::default(),
    )
}

/// `id` as a server id.
///
/// # Panics
/// If it is not a valid one: a test's typo.
fn server_id(id: &str) -> ServerId {
    ServerId::new(id).unwrap_or_else(|e| panic!("server id {id:?}: {e}"))
}

/// How one client is connected.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Its transport behaviour (stream times, restart after death, seed).
    pub session: SessionConfig,
    /// Its game side; `None`: [`ClientSession::new`](gatehouse_client_sim::session::ClientSession::new)'s default, seeded from the session seed.
    pub client: Option<ClientConfig>,
    /// Client → server.
    pub uplink: Conditions,
    /// Server → client.
    pub downlink: Conditions,
    /// The server its first link goes to: the first server unless changed.
    pub server: ServerId,
}

/// Real cores and real clients, in memory, on simulated time. See the module documentation.
pub struct Sim {
    config: SimConfig,
    rng: StdRng,
    /// The run's start: the one reading of the real clock.
    base: Instant,
    now: Instant,
    /// Every server, in the order they were added: the first is [`SimConfig`]'s.
    servers: Vec<SimServer>,
    clients: Vec<SimClient>,
    /// Server inputs by when they are due, then by the order they were scheduled in; each
    /// with the index of its server.
    scheduled: BTreeMap<(Instant, u64), (usize, Scheduled)>,
    scheduled_count: u64,
    store: MemoryStore,
    fleet: Fleet,
    holds: Holds,
    trace: Vec<TraceEvent>,
    net: NetStats,
    steps: u64,
}

impl Sim {
    /// Boots the first server's core on `config.world` at the run's start and carries its first
    /// outputs (the session load, the boot travel).
    ///
    /// # Panics
    /// If the world text is not a valid world map.
    pub fn new(config: SimConfig) -> Sim {
        let base = Instant::now();
        let first = ServerSpec {
            id: config.server.clone(),
            world: config.world.clone(),
            rules: config.rules.clone(),
        };
        let mut sim = Sim {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            base,
            now: base,
            servers: Vec::new(),
            clients: Vec::new(),
            scheduled: BTreeMap::new(),
            scheduled_count: 0,
            store: MemoryStore::default(),
            fleet: Fleet::default(),
            holds: Holds::default(),
            trace: Vec::new(),
            net: NetStats::default(),
            steps: 0,
        };
        sim.add_server(first);
        sim
    }

    // --- The script ----------------------------------------------------------------------

    /// The options the next client connects with by default: the run's network and session
    /// behaviour, with a seed derived from the run's seed and the client's index, on the first
    /// server.
    pub fn client_options(&self) -> ClientOptions {
        let index = self.clients.len() as u64 + 1;
        let seed = self.config.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ClientOptions {
            session: SessionConfig { seed, ..self.config.session.clone() },
            client: None,
            uplink: self.config.net,
            downlink: self.config.net,
            server: self.config.server.clone(),
        }
    }

    /// Connects a client playing `name` to the first server with the default options; its
    /// `Hello` leaves now.
    pub fn connect(&mut self, name: &str) -> ClientId {
        let options = self.client_options();
        self.connect_with(name, options)
    }

    /// Makes `client` send `message` now on the link it plays on, as if its session had (a
    /// `Leave`, or a forged or replayed message).
    pub fn send(&mut self, client: ClientId, message: ClientMessage) {
        let link = self.clients[client.0].session.link();
        if self.clients[client.0].is_open(link) {
            self.client_sends(client, link, message);
        }
    }

    /// Changes the conditions of `client`'s uplinks (client → server) for messages sent from
    /// now.
    pub fn set_uplink(&mut self, client: ClientId, conditions: Conditions) {
        self.clients[client.0].uplink = conditions;
    }

    /// Changes the conditions of `client`'s downlinks (server → client) for messages sent from
    /// now.
    pub fn set_downlink(&mut self, client: ClientId, conditions: Conditions) {
        self.clients[client.0].downlink = conditions;
    }

    /// An operator travel to `node` (the admin endpoint's) on the first server, now.
    ///
    /// # Panics
    /// If `node` is not a valid node id.
    pub fn travel(&mut self, node: &str) {
        self.travel_on(0, node);
    }

    /// An operator travel to `node` on server `server`, now.
    fn travel_on(&mut self, server: usize, node: &str) {
        let node = NodeId::new(node).unwrap_or_else(|e| panic!("node id {node:?}: {e}"));
        self.record_at(server, Event::Travel { node: node.clone() });
        self.feed(server, Input::Travel { node });
    }

    /// From now on, keeps back the server messages to `client` (on any of its links) that
    /// match `filter`, until [`Sim::release`]. The other messages flow past them.
    pub fn hold_to_client(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ServerMessage) -> bool + 'static,
    ) -> HoldId {
        self.holds.hold_to_client(client, filter)
    }

    /// From now on, keeps back the messages `client` sends (on any of its links) that match
    /// `filter`, until [`Sim::release`]. The other messages flow past them.
    pub fn hold_to_server(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ClientMessage) -> bool + 'static,
    ) -> HoldId {
        self.holds.hold_to_server(client, filter)
    }

    /// Ends a hold: what it kept back is sent now, in the order it was kept, each with a fresh
    /// delay, on the link it was meant for (dropped if that link is closed now). Returns how
    /// many messages that is (0 for a hold already released).
    pub fn release(&mut self, hold: HoldId) -> usize {
        let Some(hold) = self.holds.release(hold) else { return 0 };
        match hold {
            Hold::ToClient { client, held, .. } => {
                let count = held.len();
                let link = held.first().map_or(self.clients[client.0].session.link(), |h| h.0);
                self.record_link(client, link, |connection| Event::Released { connection, count });
                for (link, message) in held {
                    self.send_down(client, link, clients::Down::Message(message));
                }
                count
            }
            Hold::ToServer { client, held, .. } => {
                let count = held.len();
                let link = held.first().map_or(self.clients[client.0].session.link(), |h| h.0);
                self.record_link(client, link, |connection| Event::Released { connection, count });
                for (link, message) in held {
                    self.send_up(client, link, clients::Up::Message(message));
                }
                count
            }
            Hold::Peer { from, to, held, .. } => {
                let count = held.len();
                for message in held {
                    self.put_on_peer_link(from, to, message);
                }
                count
            }
        }
    }

    /// How many messages `hold` keeps back now.
    pub fn held_count(&self, hold: HoldId) -> usize {
        self.holds.held_count(hold)
    }

    /// Puts a player save in the store, as if an earlier session had written it.
    pub fn put_player_save(&mut self, save: PlayerSave) {
        self.store.put_player(save);
    }

    // --- Running -------------------------------------------------------------------------

    /// Jumps to the earliest wakeup and handles everything due then, in the order of the
    /// module documentation. False if nothing will ever happen again.
    pub fn step(&mut self) -> bool {
        let Some(at) = self.next_wakeup() else { return false };
        self.now = self.now.max(at);
        self.steps += 1;
        let now = self.now;
        // 1. Scheduled server inputs (one scheduled now, by a zero delay, runs in this loop).
        while let Some(entry) = self.scheduled.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (server, scheduled) = entry.remove();
            self.handle_scheduled(server, scheduled);
        }
        // 2. Client messages arriving at the servers.
        for index in 0..self.clients.len() {
            while let Some((link, up)) = self.clients[index].pop_due_up(now) {
                self.arrive_at_server(ClientId(index), link, up);
            }
        }
        // 3. Peer messages arriving.
        self.deliver_peer_messages(now);
        // 4. The cores' timers.
        for server in 0..self.servers.len() {
            let s = &self.servers[server];
            if s.is_up() && s.game.poll_timeout().is_some_and(|at| at <= now) {
                self.record_at(server, Event::ServerTimeout);
                self.servers[server].game.handle_timeout(now);
                self.carry_outputs(server);
            }
        }
        // 5. Server messages arriving at clients.
        for index in 0..self.clients.len() {
            while let Some((link, down)) = self.clients[index].pop_due_down(now) {
                self.arrive_at_client(ClientId(index), link, down);
            }
        }
        // 6. The clients' timers.
        for index in 0..self.clients.len() {
            let c = &mut self.clients[index];
            if c.is_live() && c.session.poll_timeout().is_some_and(|at| at <= now) {
                c.session.handle_timeout(now);
                let link = c.session.link();
                self.record_link(ClientId(index), link, |connection| Event::ClientTimeout {
                    connection,
                });
                self.send_client_outputs(ClientId(index));
            }
        }
        true
    }

    /// Steps until `done` holds, and returns the simulated time that took.
    ///
    /// # Panics
    /// If `done` does not hold within `limit` of simulated time (or within a step budget, or
    /// before nothing is left to happen), with `what` and the end of the trace in the message:
    /// a bug fails the test instead of hanging it.
    pub fn run_until(
        &mut self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&Sim) -> bool,
    ) -> Duration {
        let start = self.now;
        let deadline = start + limit;
        let mut steps = 0;
        while !done(self) {
            let next = self.next_wakeup();
            if next.is_none_or(|at| at > deadline) || steps >= MAX_STEPS {
                let why = match next {
                    None => "nothing is left to happen".to_owned(),
                    Some(_) if steps >= MAX_STEPS => format!("{MAX_STEPS} steps"),
                    Some(_) => format!("{limit:?} of simulated time"),
                };
                panic!(
                    "still waiting for {what} after {why} (at {:?}); the trace ends:\n{}",
                    self.elapsed(),
                    self.trace_text(TRACE_TAIL)
                );
            }
            self.step();
            steps += 1;
        }
        self.now - start
    }

    /// Steps through everything due within `span`, then sets the clock to its end.
    ///
    /// # Panics
    /// If that takes more than the step budget.
    pub fn run_for(&mut self, span: Duration) {
        self.run_for_observing(span, |_| {});
    }

    /// [`Sim::run_for`], calling `observe` after every step: for checks that must hold in
    /// every state a run passes through.
    ///
    /// # Panics
    /// If that takes more than the step budget.
    pub fn run_for_observing(&mut self, span: Duration, mut observe: impl FnMut(&Sim)) {
        let end = self.now + span;
        let mut steps = 0;
        while self.next_wakeup().is_some_and(|at| at <= end) {
            assert!(
                steps < MAX_STEPS,
                "no progress after {MAX_STEPS} steps; the trace ends:\n{}",
                self.trace_text(TRACE_TAIL)
            );
            self.step();
            observe(self);
            steps += 1;
        }
        self.now = end;
    }

    // --- The shells' duties --------------------------------------------------------------

    /// The earliest instant anything is due: a core timer, a scheduled input, a message in
    /// flight on a client's link or a peer link, a client timer.
    fn next_wakeup(&self) -> Option<Instant> {
        let cores = self.servers.iter().filter(|s| s.is_up()).map(|s| s.game.poll_timeout());
        let clients = self.clients.iter().flat_map(SimClient::next_wakeup);
        [self.scheduled.keys().next().map(|(at, _)| *at), self.fleet.next_delivery()]
            .into_iter()
            .chain(cores)
            .chain(clients)
            .flatten()
            .min()
    }

    /// Records `event` as happening now, at (or on a connection of) server `server`.
    fn record_at(&mut self, server: usize, event: Event) {
        let server = self.servers[server].id.clone();
        self.trace.push(TraceEvent { at: self.now - self.base, server, event });
    }

    fn schedule(&mut self, at: Instant, server: usize, what: Scheduled) {
        self.scheduled.insert((at, self.scheduled_count), (server, what));
        self.scheduled_count += 1;
    }

    /// Uniformly between `lo` and `hi` (inclusive), at microsecond resolution.
    fn draw_between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let (lo, hi) = (micros(lo), micros(hi).max(micros(lo)));
        Duration::from_micros(if lo == hi { lo } else { self.rng.random_range(lo..=hi) })
    }

    /// When a store answer asked for now arrives.
    fn store_answer_at(&mut self) -> Instant {
        let (lo, hi) = self.config.store_latency;
        self.now + self.draw_between(lo, hi)
    }
}

/// `name` as a player id.
///
/// # Panics
/// If it is not a valid one: a test's typo.
fn player_id(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap_or_else(|e| panic!("player id {name:?}: {e}"))
}

//! A deterministic harness for both sides: the real [`Game`] and N real [`ClientSession`]s
//! connected in memory, on simulated time, with per-message latency and loss drawn from one
//! seed (quinn-proto's test `Pair` is the model).
//!
//! [`Sim`] plays both shells. The server's: it logs a connection in when its `Hello` arrives,
//! carries the core's outputs to the clients' links (a broadcast to every connection whose
//! `Welcome` was carried before it, as the server's carrier does: nothing before `Welcome`; a
//! close after what was queued before it), simulates streaming and answers the store. The
//! swarm's: it feeds each client what arrives on its link and sends what the client says. There
//! are no sockets, no tasks and no sleeps; the real clock is read once, for the base instant.
//!
//! [`Sim::step`] jumps to the earliest wakeup of the core, of any client, of any message in
//! flight, or of any scheduled streaming or store answer, and handles everything due then in
//! one fixed order:
//!
//! 1. scheduled server inputs (streaming, spawn points, store answers, disconnect notices), in
//!    the order they were scheduled;
//! 2. client messages arriving at the server, client by client, each connection in order;
//! 3. the core's timers (after the inputs, as the shell's biased select does);
//! 4. server messages arriving at clients, client by client;
//! 5. each client's timers.
//!
//! After each input the core's outputs are drained and carried, and after each client input
//! its messages are sent. Every draw comes from one seeded generator in that fixed order, so
//! the same seed and the same script give the same [`Sim::trace`].
//!
//! Modules: `link` (one connection's ordered, lossy stream), `hold` (test hooks for arrival
//! orders), `store` (saves in memory), `trace` (the record of a run).

mod hold;
mod link;
mod store;
mod trace;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_client::LinkId;
use gatehouse_client_sim::client::ClientConfig;
use gatehouse_client_sim::session::{ClientSession, SessionConfig};
use gatehouse_protocol::{
    ClientMessage, CloseCode, NodeId, PlayerId, ReplicatedChange, ServerMessage,
};
use gatehouse_server::config::{AuthConfig, FleetConfig, GameConfig, NetworkConfig, parse_world};
use gatehouse_server::game::{
    ConnectionId, Departure, Game, GameRules, Input, KnownWorld, LoadId, Output,
};
use gatehouse_server::store::{LoadOutcome, PlayerSave, SessionSave};
use gatehouse_server::world::SimulatedWorld;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

pub use hold::HoldId;
pub use link::{Conditions, NetStats};
pub use trace::{Event, TraceEvent};

use hold::{Hold, Holds};
use link::Link;
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
    /// The world map, as `world.toml` text.
    pub world: String,
    /// The core's rules: the server's defaults (settle 15 s, spawn retry 100 ms, client-ready
    /// 30 s, kick) and 64 players unless changed.
    pub rules: GameRules,
    /// Each direction of each connection, unless a client is connected with its own.
    pub net: Conditions,
    /// A store answer comes this long after the load was asked for: uniformly between the
    /// bounds (inclusive).
    pub store_latency: (Duration, Duration),
    /// Clients' behaviour, unless a client is connected with its own; its seed is replaced by
    /// one derived from [`SimConfig::seed`] and the client's index.
    pub session: SessionConfig,
}

impl SimConfig {
    /// A run of `world` seeded with `seed`: the server's default rules, a LAN-like network
    /// ([`Conditions::lan`]), a 5 – 20 ms store and the default client behaviour. The world is
    /// checked by [`Sim::new`].
    pub fn new(world: &str, seed: u64) -> SimConfig {
        SimConfig {
            seed,
            world: world.to_owned(),
            rules: gatehouse_server::config::game_rules(
                &GameConfig::default(),
                &AuthConfig::default(),
                &NetworkConfig { max_players: 64, ..NetworkConfig::default() },
                &FleetConfig::default(),
            ),
            net: Conditions::lan(),
            store_latency: (Duration::from_millis(5), Duration::from_millis(20)),
            session: SessionConfig::default(),
        }
    }
}

/// How one client is connected.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Its transport behaviour (stream times, restart after death, seed).
    pub session: SessionConfig,
    /// Its game side; `None`: [`ClientSession::new`]'s default, seeded from the session seed.
    pub client: Option<ClientConfig>,
    /// Client → server.
    pub uplink: Conditions,
    /// Server → client.
    pub downlink: Conditions,
}

/// What travels client → server on a connection.
#[derive(Debug)]
enum Up {
    /// The first frame: the server logs the connection in when it arrives (the net shell has
    /// verified the token; the sim has no tokens).
    Hello,
    /// A control message.
    Message(ClientMessage),
    /// The client dropped the connection; the server notices when this arrives.
    Dropped,
}

/// What travels server → client on a connection.
#[derive(Debug)]
enum Down {
    /// A control message.
    Message(ServerMessage),
    /// The server's close, after everything queued before it.
    Close(CloseCode),
}

/// Whether a client's connection is still up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Open,
    /// The server's close arrived.
    Closed(CloseCode),
    /// The client dropped it.
    Dropped,
}

/// One simulated client and its connection.
struct SimClient {
    player: PlayerId,
    connection: ConnectionId,
    session: ClientSession,
    uplink: Conditions,
    downlink: Conditions,
    up: Link<Up>,
    down: Link<Down>,
    end: End,
}

/// A server input the simulated shell scheduled.
#[derive(Debug)]
enum Scheduled {
    Streamed(LoadId),
    SpawnPointsRegistered(LoadId),
    PlayerLoad {
        player: PlayerId,
        ticket: u64,
    },
    SessionLoad,
    /// The server's network driver ended the connection (after its close was delivered).
    Disconnected(ConnectionId),
}

/// The real core and real clients, in memory, on simulated time. See the module documentation.
pub struct Sim {
    config: SimConfig,
    rng: StdRng,
    /// The run's start: the one reading of the real clock.
    base: Instant,
    now: Instant,
    game: Game,
    /// The server's world: the simulated one's timings, drawn from this run's seed.
    streamer: SimulatedWorld,
    clients: Vec<SimClient>,
    /// Connections whose `Hello` arrived and that the server has not closed, in id order.
    accepted: BTreeMap<ConnectionId, ClientId>,
    /// Of those, the ones whose `Welcome` was carried (broadcast targets), in id order.
    logged_in: BTreeMap<ConnectionId, ClientId>,
    /// The world as every client has been told it, which greets a newcomer after its
    /// `Welcome`, as the server's carrier does (docs/protocol.md 4.5).
    known: KnownWorld,
    /// Server inputs by when they are due, then by the order they were scheduled in.
    scheduled: BTreeMap<(Instant, u64), Scheduled>,
    scheduled_count: u64,
    store: MemoryStore,
    holds: Holds,
    trace: Vec<TraceEvent>,
    net: NetStats,
    steps: u64,
}

impl Sim {
    /// Boots the core on `config.world` at the run's start and carries its first outputs (the
    /// session load, the boot travel).
    ///
    /// # Panics
    /// If the world text is not a valid world map.
    pub fn new(config: SimConfig) -> Sim {
        let world = parse_world(Path::new("sim-world.toml"), &config.world)
            .unwrap_or_else(|e| panic!("the simulated world: {e}"));
        let base = Instant::now();
        let world = Arc::new(world);
        let streamer = SimulatedWorld::new(world.clone());
        let game = Game::new(config.rules.clone(), world, base);
        let mut sim = Sim {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            base,
            now: base,
            game,
            streamer,
            clients: Vec::new(),
            accepted: BTreeMap::new(),
            logged_in: BTreeMap::new(),
            known: KnownWorld::default(),
            scheduled: BTreeMap::new(),
            scheduled_count: 0,
            store: MemoryStore::default(),
            holds: Holds::default(),
            trace: Vec::new(),
            net: NetStats::default(),
            steps: 0,
        };
        sim.carry_outputs();
        sim
    }

    // --- The script ----------------------------------------------------------------------

    /// The options the next client connects with by default: the run's network and session
    /// behaviour, with a seed derived from the run's seed and the client's index.
    pub fn client_options(&self) -> ClientOptions {
        let index = self.clients.len() as u64 + 1;
        let seed = self.config.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ClientOptions {
            session: SessionConfig { seed, ..self.config.session.clone() },
            client: None,
            uplink: self.config.net,
            downlink: self.config.net,
        }
    }

    /// Connects a client playing `name` with the default options; its `Hello` leaves now.
    pub fn connect(&mut self, name: &str) -> ClientId {
        let options = self.client_options();
        self.connect_with(name, options)
    }

    /// Connects a client playing `name`; its `Hello` leaves now. Connecting a name already
    /// connected is a relaunch: the server replaces the older connection.
    ///
    /// # Panics
    /// If `name` is not a valid player id.
    pub fn connect_with(&mut self, name: &str, options: ClientOptions) -> ClientId {
        let player = PlayerId::new(name).unwrap_or_else(|e| panic!("player id {name:?}: {e}"));
        let client = ClientId(self.clients.len());
        let connection = ConnectionId(client.0 as u64 + 1);
        let session = match options.client {
            Some(game_side) => ClientSession::with_client(self.now, options.session, game_side),
            None => ClientSession::new(self.now, options.session),
        };
        self.clients.push(SimClient {
            player: player.clone(),
            connection,
            session,
            uplink: options.uplink,
            downlink: options.downlink,
            up: Link::default(),
            down: Link::default(),
            end: End::Open,
        });
        self.record(Event::Connect { client, connection, player });
        // Its session's first output is its `Hello`.
        self.send_client_outputs(client);
        client
    }

    /// Makes `client` send `message` now, as if its session had (a `Leave`, or a forged or
    /// replayed message).
    pub fn send(&mut self, client: ClientId, message: ClientMessage) {
        if self.clients[client.0].end == End::Open {
            self.client_sends(client, message);
        }
    }

    /// Changes the conditions of `client`'s uplink (client → server) for messages sent from now.
    pub fn set_uplink(&mut self, client: ClientId, conditions: Conditions) {
        self.clients[client.0].uplink = conditions;
    }

    /// Changes the conditions of `client`'s downlink (server → client) for messages sent from
    /// now.
    pub fn set_downlink(&mut self, client: ClientId, conditions: Conditions) {
        self.clients[client.0].downlink = conditions;
    }

    /// `client` drops its connection without a word: nothing more reaches it, and the server
    /// learns of it one uplink delay later.
    pub fn disconnect(&mut self, client: ClientId) {
        let c = &mut self.clients[client.0];
        if c.end != End::Open {
            return;
        }
        c.end = End::Dropped;
        let connection = c.connection;
        self.net.dropped += c.down.clear() as u64;
        self.record(Event::Dropped { connection });
        self.send_up(client, Up::Dropped);
    }

    /// An operator travel to `node` (the admin endpoint's), now.
    ///
    /// # Panics
    /// If `node` is not a valid node id.
    pub fn travel(&mut self, node: &str) {
        let node = NodeId::new(node).unwrap_or_else(|e| panic!("node id {node:?}: {e}"));
        self.record(Event::Travel { node: node.clone() });
        self.feed(Input::Travel { node });
    }

    /// From now on, keeps back the server messages to `client` that match `filter`, until
    /// [`Sim::release`]. The other messages flow past them.
    pub fn hold_to_client(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ServerMessage) -> bool + 'static,
    ) -> HoldId {
        self.holds.hold_to_client(client, filter)
    }

    /// From now on, keeps back the messages `client` sends that match `filter`, until
    /// [`Sim::release`]. The other messages flow past them.
    pub fn hold_to_server(
        &mut self,
        client: ClientId,
        filter: impl Fn(&ClientMessage) -> bool + 'static,
    ) -> HoldId {
        self.holds.hold_to_server(client, filter)
    }

    /// Ends a hold: what it kept back is sent now, in the order it was kept, each with a fresh
    /// delay. Returns how many messages that is (0 for a hold already released).
    pub fn release(&mut self, hold: HoldId) -> usize {
        let Some(hold) = self.holds.release(hold) else { return 0 };
        let client = hold.client();
        let connection = self.clients[client.0].connection;
        match hold {
            Hold::ToClient { held, .. } => {
                self.record(Event::Released { connection, count: held.len() });
                let count = held.len();
                for message in held {
                    self.send_down(client, Down::Message(message));
                }
                count
            }
            Hold::ToServer { held, .. } => {
                self.record(Event::Released { connection, count: held.len() });
                let count = held.len();
                for message in held {
                    self.send_up(client, Up::Message(message));
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
            let scheduled = entry.remove();
            self.handle_scheduled(scheduled);
        }
        // 2. Client messages arriving at the server.
        for index in 0..self.clients.len() {
            while let Some(up) = self.clients[index].up.pop_due(now) {
                self.arrive_at_server(ClientId(index), up);
            }
        }
        // 3. The core's timers.
        if self.game.poll_timeout().is_some_and(|at| at <= now) {
            self.record(Event::ServerTimeout);
            self.game.handle_timeout(now);
            self.carry_outputs();
        }
        // 4. Server messages arriving at clients.
        for index in 0..self.clients.len() {
            while let Some(down) = self.clients[index].down.pop_due(now) {
                self.arrive_at_client(ClientId(index), down);
            }
        }
        // 5. The clients' timers.
        for index in 0..self.clients.len() {
            let c = &mut self.clients[index];
            if c.end == End::Open && c.session.poll_timeout().is_some_and(|at| at <= now) {
                let connection = c.connection;
                c.session.handle_timeout(now);
                self.record(Event::ClientTimeout { connection });
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

    // --- Observing -----------------------------------------------------------------------

    /// The simulated instant now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Simulated time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.now - self.base
    }

    /// The server core (snapshot, counters, transition id).
    pub fn game(&self) -> &Game {
        &self.game
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

    /// `client`'s connection.
    pub fn connection(&self, client: ClientId) -> ConnectionId {
        self.clients[client.0].connection
    }

    /// Whether `client`'s connection is up (no close arrived, not dropped).
    pub fn is_open(&self, client: ClientId) -> bool {
        self.clients[client.0].end == End::Open
    }

    /// The code of the server's close that reached `client`, if one did.
    pub fn close_code(&self, client: ClientId) -> Option<CloseCode> {
        match self.clients[client.0].end {
            End::Closed(code) => Some(code),
            End::Open | End::Dropped => None,
        }
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

    /// The session save the store holds.
    pub fn stored_session(&self) -> Option<&SessionSave> {
        self.store.session()
    }

    /// Player saves the server wrote so far.
    pub fn player_saves(&self) -> u64 {
        self.store.player_saves
    }

    /// Every server message that reached `client`, in order.
    pub fn received(&self, client: ClientId) -> Vec<&ServerMessage> {
        let connection = self.connection(client);
        self.trace
            .iter()
            .filter_map(|e| match &e.event {
                Event::ToClient { connection: c, message } if *c == connection => Some(message),
                _ => None,
            })
            .collect()
    }

    /// When the first server message matching `matches` reached `client`.
    pub fn received_at(
        &self,
        client: ClientId,
        matches: impl Fn(&ServerMessage) -> bool,
    ) -> Option<Duration> {
        let connection = self.connection(client);
        self.trace.iter().find_map(|e| match &e.event {
            Event::ToClient { connection: c, message } if *c == connection && matches(message) => {
                Some(e.at)
            }
            _ => None,
        })
    }

    /// Every message `client` sent (held or not), in order.
    pub fn sent(&self, client: ClientId) -> Vec<&ClientMessage> {
        let connection = self.connection(client);
        self.trace
            .iter()
            .filter_map(|e| match &e.event {
                Event::ClientSent { connection: c, message } if *c == connection => Some(message),
                _ => None,
            })
            .collect()
    }

    /// When the first message of `client` matching `matches` reached the server.
    pub fn arrived_at_server(
        &self,
        client: ClientId,
        matches: impl Fn(&ClientMessage) -> bool,
    ) -> Option<Duration> {
        let connection = self.connection(client);
        self.trace.iter().find_map(|e| match &e.event {
            Event::ToServer { connection: c, message } if *c == connection && matches(message) => {
                Some(e.at)
            }
            _ => None,
        })
    }

    /// When the core first put out an output matching `matches`.
    pub fn output_at(&self, matches: impl Fn(&Output) -> bool) -> Option<Duration> {
        self.trace.iter().find_map(|e| match &e.event {
            Event::Output(output) if matches(output) => Some(e.at),
            _ => None,
        })
    }

    /// When the first trace event matching `matches` happened.
    pub fn event_at(&self, matches: impl Fn(&Event) -> bool) -> Option<Duration> {
        self.trace.iter().find(|e| matches(&e.event)).map(|e| e.at)
    }

    // --- The shells' duties --------------------------------------------------------------

    /// The earliest instant anything is due: a core timer, a scheduled input, a message in
    /// flight, a client timer.
    fn next_wakeup(&self) -> Option<Instant> {
        let clients = self.clients.iter().flat_map(|c| {
            let open = c.end == End::Open;
            [
                c.up.next_at(),
                c.down.next_at().filter(|_| open),
                c.session.poll_timeout().filter(|_| open),
            ]
        });
        [self.game.poll_timeout(), self.scheduled.keys().next().map(|(at, _)| *at)]
            .into_iter()
            .chain(clients)
            .flatten()
            .min()
    }

    fn record(&mut self, event: Event) {
        self.trace.push(TraceEvent { at: self.now - self.base, event });
    }

    fn schedule(&mut self, at: Instant, what: Scheduled) {
        self.scheduled.insert((at, self.scheduled_count), what);
        self.scheduled_count += 1;
    }

    /// Uniformly between `lo` and `hi` (inclusive), at microsecond resolution.
    fn draw_between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let (lo, hi) = (micros(lo), micros(hi).max(micros(lo)));
        Duration::from_micros(if lo == hi { lo } else { self.rng.random_range(lo..=hi) })
    }

    /// Feeds the core one input now, then carries what it put out.
    fn feed(&mut self, input: Input) {
        self.game.handle(self.now, input);
        self.carry_outputs();
    }

    /// Sends a newcomer the world as clients know it, right after its `Welcome`.
    fn greet(&mut self, client: ClientId) {
        let max_frame_len = self.config.rules.max_frame_len as usize;
        for message in self.known.messages(max_frame_len) {
            self.server_sends(client, message);
        }
    }

    /// The server shell's carry: every output the core has, until it has none.
    fn carry_outputs(&mut self) {
        while let Some(output) = self.game.poll_output() {
            self.record(Event::Output(output.clone()));
            match output {
                Output::Send { connection, message } => {
                    if let Some(&client) = self.accepted.get(&connection) {
                        let welcome = matches!(message, ServerMessage::Welcome { .. });
                        self.server_sends(client, message);
                        if welcome {
                            self.logged_in.insert(connection, client);
                            self.greet(client);
                        }
                    }
                }
                Output::Broadcast { message } => {
                    if let Ok(change) = ReplicatedChange::from_message(message.clone()) {
                        self.known.apply(&change);
                    }
                    let targets: Vec<ClientId> = self.logged_in.values().copied().collect();
                    for client in targets {
                        self.server_sends(client, message.clone());
                    }
                }
                Output::Close { connection, code } => {
                    // No broadcast reaches a closed connection, even before its close arrives.
                    self.logged_in.remove(&connection);
                    if let Some(client) = self.accepted.remove(&connection) {
                        self.send_down(client, Down::Close(code));
                    }
                }
                Output::Stream(request) => {
                    let Some(timing) = self.streamer.timing(&request) else {
                        panic!("the core streamed {}, which the world lacks", request.node);
                    };
                    let jitter = self.draw_between(Duration::ZERO, timing.jitter);
                    let streamed = self.now + timing.duration + jitter;
                    self.schedule(streamed, Scheduled::Streamed(request.load));
                    if let Some(after) = timing.spawn_points_after {
                        let registered = Scheduled::SpawnPointsRegistered(request.load);
                        self.schedule(streamed + after, registered);
                    }
                }
                Output::LoadPlayer { player, ticket } => {
                    let (lo, hi) = self.config.store_latency;
                    let at = self.now + self.draw_between(lo, hi);
                    self.schedule(at, Scheduled::PlayerLoad { player, ticket });
                }
                Output::SavePlayer(save) => self.store.save_player(save),
                Output::SavePlayers(saves) => {
                    for save in saves {
                        self.store.save_player(save);
                    }
                }
                Output::LoadSession => {
                    let (lo, hi) = self.config.store_latency;
                    let at = self.now + self.draw_between(lo, hi);
                    self.schedule(at, Scheduled::SessionLoad);
                }
                Output::SaveSession { node, version } => self.store.save_session(node, version),
                // Recorded above; the real shell stops the server here, after the closes
                // before it, which the clients hear.
                Output::WorldUnavailable { .. } => {}
                // One core and no fleet: a travel to a remote node finds no server, and its
                // players are sent back (docs/spec/travel.md V7); nothing else of a travel
                // between servers follows (the harness of two cores is to be written).
                Output::FindDestination { transition, .. } => {
                    self.feed(Input::DestinationFound { transition, server: None });
                }
                Output::Peer { .. }
                | Output::SaveHandoff { .. }
                | Output::Handover { .. }
                | Output::TravelTo { .. } => {}
            }
        }
    }

    fn handle_scheduled(&mut self, scheduled: Scheduled) {
        match scheduled {
            Scheduled::Streamed(load) => {
                self.record(Event::Streamed { load });
                self.feed(Input::Streamed { load });
            }
            Scheduled::SpawnPointsRegistered(load) => {
                self.record(Event::SpawnPointsRegistered { load });
                self.feed(Input::SpawnPointsRegistered { load });
            }
            Scheduled::PlayerLoad { player, ticket } => {
                // Read when answered, so a save written meanwhile is seen (as the worker does).
                let outcome = self.store.load_player(&player);
                let found = matches!(outcome, LoadOutcome::Found(_));
                self.record(Event::PlayerLoaded { player: player.clone(), found });
                self.feed(Input::PlayerLoaded { player, ticket, outcome });
            }
            Scheduled::SessionLoad => {
                let outcome = self.store.load_session();
                let found = matches!(outcome, LoadOutcome::Found(_));
                self.record(Event::SessionLoaded { found });
                self.feed(Input::SessionLoaded { outcome });
            }
            Scheduled::Disconnected(connection) => {
                self.accepted.remove(&connection);
                self.logged_in.remove(&connection);
                self.record(Event::Disconnected { connection });
                self.feed(Input::Disconnected {
                    connection,
                    departure: Departure::lost("the connection ended"),
                });
            }
        }
    }

    /// One server message for `client`: kept back by a hold, or put on its link.
    fn server_sends(&mut self, client: ClientId, message: ServerMessage) {
        match self.holds.divert_to_client(client, message) {
            Some(message) => self.send_down(client, Down::Message(message)),
            None => {
                self.net.held += 1;
                let connection = self.clients[client.0].connection;
                self.record(Event::Held { connection });
            }
        }
    }

    /// One message `client` sends: kept back by a hold, or put on its link.
    fn client_sends(&mut self, client: ClientId, message: ClientMessage) {
        if let ClientMessage::Hello { .. } = message {
            // The sim has no tokens: a `Hello` logs in (the server's network driver's share).
            self.send_up(client, Up::Hello);
            return;
        }
        let connection = self.clients[client.0].connection;
        self.record(Event::ClientSent { connection, message: message.clone() });
        match self.holds.divert_to_server(client, message) {
            Some(message) => self.send_up(client, Up::Message(message)),
            None => {
                self.net.held += 1;
                self.record(Event::Held { connection });
            }
        }
    }

    fn send_down(&mut self, client: ClientId, message: Down) {
        let c = &mut self.clients[client.0];
        if c.end != End::Open {
            self.net.dropped += 1;
            return;
        }
        let (delay, lost) = c.downlink.draw(&mut self.rng);
        c.down.send(self.now, delay, message);
        self.net.messages += 1;
        self.net.retransmissions += u64::from(lost);
    }

    fn send_up(&mut self, client: ClientId, message: Up) {
        let c = &mut self.clients[client.0];
        let (delay, lost) = c.uplink.draw(&mut self.rng);
        c.up.send(self.now, delay, message);
        self.net.messages += 1;
        self.net.retransmissions += u64::from(lost);
    }

    /// Sends everything `client`'s session wants to say on its connection, the session's first
    /// link. The harness runs one core, so a move's destination cannot be dialled: the dial is
    /// refused at once and the session gives the move up on its source (the harness of two
    /// cores, docs/spec/travel.md, is to be written; it routes `Output::Dial`'s link to the
    /// other core instead).
    fn send_client_outputs(&mut self, client: ClientId) {
        while let Some(output) = self.clients[client.0].session.poll_output() {
            match output {
                gatehouse_client::Output::Send { link: LinkId::FIRST, message } => {
                    self.client_sends(client, message)
                }
                gatehouse_client::Output::Dial { link, .. } => {
                    let now = self.now;
                    let why = "the harness runs one server";
                    self.clients[client.0].session.link_lost(now, link, why);
                }
                // A message for, or the close of, a link this harness never opened.
                _ => {}
            }
        }
        // As the swarm does: the game side's share runs once the replies are out.
        self.clients[client.0].session.run_game_side();
    }

    /// The server's network driver, for one connection: a `Hello` logs in, a message is fed,
    /// a drop is reported.
    fn arrive_at_server(&mut self, client: ClientId, up: Up) {
        let c = &self.clients[client.0];
        let (connection, player) = (c.connection, c.player.clone());
        match up {
            Up::Hello => {
                self.accepted.insert(connection, client);
                self.record(Event::Login { connection });
                self.feed(Input::Login { connection, player });
            }
            Up::Message(message) => {
                self.record(Event::ToServer { connection, message: message.clone() });
                self.feed(Input::Message { connection, message });
            }
            Up::Dropped => {
                self.accepted.remove(&connection);
                self.logged_in.remove(&connection);
                self.record(Event::Disconnected { connection });
                self.feed(Input::Disconnected {
                    connection,
                    departure: Departure::lost("the connection ended"),
                });
            }
        }
    }

    /// The client's connection: a message is fed to the session, a close ends the connection.
    fn arrive_at_client(&mut self, client: ClientId, down: Down) {
        let now = self.now;
        let c = &mut self.clients[client.0];
        let connection = c.connection;
        match down {
            Down::Message(message) => {
                c.session.handle(now, message.clone());
                self.record(Event::ToClient { connection, message });
                self.send_client_outputs(client);
            }
            Down::Close(code) => {
                c.end = End::Closed(code);
                self.net.dropped += c.down.clear() as u64;
                self.record(Event::Closed { connection, code });
                // The driver ends the connection once its close went out; the core hears of it
                // then.
                self.schedule(now, Scheduled::Disconnected(connection));
            }
        }
    }
}

//! Fuzz target: the game core, driven through its public API only.
//!
//! The fuzz bytes decode (with `arbitrary`) into rules, a world and a sequence of operations:
//! logins and relaunches, disconnects, every client message (with current, stale and made-up
//! ids), streaming completions (pending, stale and unknown loads), spawn-point registrations,
//! store replies (found, missing, failed, stale tickets), travels (to known and unknown nodes,
//! and to `isle`, which another server hosts: the directory's answers, handoff saves, claims and
//! recalls, and every peer message of a travel both ways, docs/spec/travel.md), travellers'
//! logins with tickets,
//! time jumps that fire deadlines (deaths on the hazard world come from these), and spurious
//! wakes. The model follows the core's outputs the way a client follows the wire and checks
//! after every step (every `handle` and `handle_timeout`):
//!
//! 1. it never panics;
//! 2. no player has two live pawns;
//! 3. no pawn stands on a node that is not streamed: every spawn and teleport lands on the node
//!    streamed at that point of the output stream (a dungeon's rooms included), and whenever
//!    no transition is in flight (while one runs, the old level is unloaded and characters are
//!    frozen) every live pawn stands on the streamed node;
//! 4. the model agrees with the core's own snapshot (streamed node, pawns per player), so the
//!    replicated view clients build is the server's;
//! 5. metrics and counters tell one story: each spawn refusal, transition end and refused login
//!    is observed (`poll_observation`) exactly once per count in `counters()`.
//!
//! At the end the world is left to settle (every load answered, every stream finished, every
//! client ready and acknowledging): every transition must then end, as in the property test of
//! `game/src/tests/properties.rs`, which this target follows.

#![no_main]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{
    ClientMessage, JoinId, NodeId, PawnId, PlayerId, ServerId, ServerMessage, TransitionId,
};
use gatehouse_server::config::{ClientReadyPolicy, WorldMap, parse_world};
use gatehouse_server::game::{
    ConnectionId, Counters, Departure, Game, GameRules, HandoverOutcome, Input, LoadId,
    LoginRefusal, Observation, Output, SpawnRefusal, StreamPart, StreamRequest, TicketedSeat,
    TransitionOutcome,
};
use gatehouse_server::store::{InventoryItem, LoadOutcome, PlayerSave, Preset, SessionSave};
use gatehouse_tags::catalog::ALL_DECLARED;
use libfuzzer_sys::fuzz_target;

/// The scenario tests' world: harbor and forest, and the dungeon crypt.
const WORLD: &str = include_str!("../../tests/worlds/core.toml");

/// A burn on harbor that kills: two 60-damage ticks 100 ms apart, someone every 600 ms.
const HAZARD: &str = "\n[[hazard]]\nnode = \"harbor\"\neffect = \"Effect.DamageOverTime.Burn\"\ndamage_per_tick = 60\ntick_ms = 100\nduration_ms = 1000\nexposure_ms = 600\n";

const PLAYERS: [&str; 4] = ["p0", "p1", "p2", "p3"];
/// The world's nodes, one another server hosts, and one it lacks.
const NODES: [&str; 5] = ["harbor", "forest", "crypt", "isle", "nowhere"];

/// The node another server hosts (docs/spec/travel.md V1).
const REMOTE: &str = "\n[[node]]\nid = \"isle\"\nremote = true\n";

/// The servers a peer message may come from: sources moving players here, and the
/// destinations the directory names.
const SOURCES: [&str; 4] = ["hub-1", "hub-2", "isle-1", "isle-2"];

#[derive(Debug, Arbitrary)]
struct Case {
    setup: Setup,
    ops: Vec<Op>,
}

/// Rules and world options, each within what configuration accepts.
#[derive(Debug, Arbitrary)]
struct Setup {
    /// Each time below is 1 ms or more, as configuration requires.
    settle_ms: u16,
    retry_ms: u8,
    ready_ms: u16,
    proceed: bool,
    /// 1 to 4 players, so a login can find the server full.
    max_players: u8,
    /// The hard maximum's margin above the settle timeout.
    transition_extra_ms: u16,
    retention_ms: u16,
    hazard: bool,
    standalone: bool,
    rebalance_teams: bool,
    route: Option<(u8, u16)>,
    /// The response timeout (`TransitionShown`, acknowledgements), 1 ms to 20 s.
    response_ms: u16,
    /// The crowd rule's floor, 1 ms up to the response timeout, or none.
    crowd_floor_ms: Option<u16>,
    /// The login rate: a burst (1 to 8) and an interval.
    login_burst: u8,
    login_interval_ms: u16,
    /// Transitions in a row that may fail before the world is unavailable (1 to 4).
    max_failed_transitions: u8,
    /// How long a seat granted to another server waits for each step, 1 ms to 20 s.
    seat_hold_ms: u16,
}

#[derive(Debug, Arbitrary)]
enum Op {
    /// A player logs in on a new connection (a relaunch if it is still connected).
    Login(u8),
    /// A connection that ever existed closes (again, maybe).
    Disconnect(u8),
    /// A connection that ever existed sends a message.
    Send(u8, Msg),
    /// Every connection the core admitted sends the message (a shortcut to the deep states).
    Everyone(Msg),
    /// A pending streaming request completes.
    Stream(u8),
    /// A completion for any load id: stale, duplicate or never issued.
    StreamRaw(u8),
    /// The spawn points of a node load that completed (newest first) register.
    Points(u8),
    /// A registration for any load id.
    PointsRaw(u8),
    /// A held player load is answered.
    AnswerLoad(u8, Answer),
    /// Every held player load is answered, missing.
    AnswerLoads,
    /// A player load answer with any ticket (stale, duplicate, never issued).
    AnswerLoadRaw(u8, u8, Answer),
    /// The session load is answered (or answered again).
    AnswerSession(Option<u8>, bool),
    /// An operator travel.
    Travel(u8),
    /// Time passes, firing every deadline on the way.
    Advance(u16),
    /// Time jumps to the next deadline.
    Wake,
    /// A wake before any deadline is due.
    SpuriousWake,
    /// Another server of the fleet sends a message about seats (docs/spec/travel.md V14).
    Peer { source: u8, travel: u8, message: PeerOp },
    /// The directory answers the oldest question (a server, maybe one never asked, or none).
    Directory(Option<u8>),
    /// A held handoff save is answered, acknowledged or not.
    AnswerHandoff(u8, bool),
    /// A held claim or recall is answered: 0 won, 1 lost, else undecided.
    AnswerHandover(u8, u8),
    /// The peer link to a server is lost.
    PeerLost(u8),
    /// A connection logs in with a travel ticket (its signature checked by the shell).
    Traveller { player: u8, source: u8, travel: u8, version: u8, generation: u8 },
    /// A player save was refused as a conflict, meeting this version (travel.md V17).
    SaveConflicted { player: u8, found: Option<u8> },
}

/// A source's message about seats on this server.
#[derive(Debug, Arbitrary)]
enum PeerOp {
    Reserve {
        node: u8,
        players: Vec<u8>,
    },
    Confirm {
        player: u8,
        version: u8,
        generation: u8,
    },
    Release {
        players: Vec<u8>,
    },
    /// A destination's answers to this server's travel.
    Granted {
        hold_ms: u16,
    },
    Refused,
    Placed {
        player: u8,
    },
    Lost {
        player: u8,
    },
    /// Another server took a player at a version (travel.md V17).
    Taken {
        player: u8,
        version: u8,
    },
}

#[derive(Debug, Arbitrary)]
enum Msg {
    Hello(u32),
    TransitionReady(Id),
    PossessionAcknowledged(Id),
    RestartRequest,
    Leave,
    JoinReady(Id),
    TransitionShown(Id),
    TravelAbandoned(Id),
}

/// Which id a message names.
#[derive(Debug, Arbitrary)]
enum Id {
    /// The newest of its kind this connection was sent.
    Latest,
    /// An older one sent to anyone.
    Older(u8),
    /// Any number.
    Raw(u64),
}

/// A store's answer to a load.
#[derive(Debug, Arbitrary)]
enum Answer {
    Missing,
    Failed,
    Save { node: Option<u8>, preset: PresetChoice, equipment: Vec<u8>, version: u8 },
}

#[derive(Debug, Arbitrary)]
enum PresetChoice {
    /// A catalog preset by name: 0 Vanguard, 1 Scout, otherwise one the catalog lacks.
    ReadOnly(u8),
    Character {
        scout: bool,
        kits: Vec<u8>,
    },
}

fn pick<T: Copy>(items: &[T], i: u8) -> T {
    items[usize::from(i) % items.len()]
}

fn node(i: u8) -> NodeId {
    NodeId::new(pick(&NODES, i)).expect("a valid node id")
}

fn tag(i: u8) -> gatehouse_tags::GameplayTag {
    pick(&ALL_DECLARED, i)
}

impl Setup {
    fn rules(&self) -> GameRules {
        let ms = |n: u16, most: u16| Duration::from_millis(u64::from(n % most) + 1);
        let settle = ms(self.settle_ms, 20_000);
        let response = ms(self.response_ms, 20_000);
        GameRules {
            spawn_settle_timeout: settle,
            spawn_retry: ms(u16::from(self.retry_ms), 256),
            client_ready_timeout: ms(self.ready_ms, 40_000),
            client_response_timeout: response,
            // Configuration keeps the floor at most the response timeout.
            client_response_crowd_floor: self.crowd_floor_ms.map(|f| ms(f, 20_000).min(response)),
            client_ready_policy: match self.proceed {
                true => ClientReadyPolicy::Proceed,
                false => ClientReadyPolicy::Kick,
            },
            max_players: usize::from(self.max_players % 5).max(1),
            // At least 100 ms above the settle timeout: configuration needs it above, and a
            // transition that fails every millisecond only slows the search down.
            transition_max: settle
                + ms(self.transition_extra_ms, 60_000)
                + Duration::from_millis(100),
            player_state_retention: Duration::from_millis(u64::from(self.retention_ms)),
            login_burst: u32::from(self.login_burst % 8) + 1,
            login_interval: ms(self.login_interval_ms, 10_000),
            max_frame_len: 65_536,
            max_failed_transitions: u32::from(self.max_failed_transitions % 4) + 1,
            seat_hold: ms(self.seat_hold_ms, 20_000),
            peer_timeout: ms(self.seat_hold_ms / 3, 5_000),
            resolve_timeout: ms(self.seat_hold_ms / 2, 10_000),
            // In a fleet: loaded saves naming another server are taken (travel.md V17).
            server: Some(ServerId::new("fuzz-1").expect("a valid server id")),
        }
    }

    fn world(&self) -> WorldMap {
        let mut text = String::new();
        if self.standalone {
            text.push_str("world_map = false\n");
        }
        if self.rebalance_teams {
            text.push_str("rebalance_teams = true\n");
        }
        text.push_str(WORLD);
        text.push_str(REMOTE);
        if self.hazard {
            text.push_str(HAZARD);
        }
        if let Some((start, interval)) = self.route {
            let route: Vec<String> =
                (0..3).map(|k| format!("{:?}", NODES[(usize::from(start) + k) % 3])).collect();
            text.push_str(&format!(
                "\n[travel]\nroute = [{}]\ninterval_ms = {}\n",
                route.join(", "),
                100 + u32::from(interval)
            ));
        }
        parse_world(Path::new("fuzz-world.toml"), &text).expect("the fuzz world parses")
    }
}

/// A pawn as the outputs describe it.
#[derive(Debug)]
struct PawnModel {
    owner: PlayerId,
    node: NodeId,
    alive: bool,
}

/// The core, the world outside it, and what its outputs told.
struct Model {
    game: Game,
    now: Instant,
    /// Every connection ever made.
    connections: Vec<ConnectionId>,
    streams: Vec<StreamRequest>,
    /// Node loads that completed, newest last (spawn points may register for them).
    streamed_loads: Vec<LoadId>,
    /// Player loads asked for and not answered.
    loads: Vec<(PlayerId, u64)>,
    /// Every ticket ever issued.
    tickets: Vec<u64>,
    session_load: bool,
    /// Pawns, from the broadcasts.
    pawns: BTreeMap<PawnId, PawnModel>,
    /// The node streamed now, from the outputs and the completions fed in.
    streamed: Option<NodeId>,
    /// The node load in flight and, once `ShowTransition` named it, its node.
    node_load: Option<(LoadId, Option<NodeId>)>,
    /// The streamed dungeon's rooms while they stream: part of its level, so no pawn yet.
    rooms_load: Option<LoadId>,
    transitions: Vec<TransitionId>,
    joins: Vec<JoinId>,
    possessed: Vec<PawnId>,
    /// Per connection: the newest ids it was sent.
    latest: BTreeMap<ConnectionId, Told>,
    /// Connections the core admitted and has not closed.
    open: BTreeMap<ConnectionId, PlayerId>,
    /// The counters after the last step.
    counted: Tally,
    /// The core declared the world unavailable: nothing starts or ends from then on.
    unavailable: bool,
    /// The servers that sent the core a message, or the directory named.
    peers: std::collections::BTreeSet<ServerId>,
    /// Questions to the directory not yet answered: the travel's id.
    finds: Vec<TransitionId>,
    /// Handoff saves not yet answered: (player, ticket).
    handoffs: Vec<(PlayerId, u64, u64)>,
    /// Claims and recalls not yet answered: (player, ticket, version).
    handovers: Vec<(PlayerId, u64, u64)>,
}

/// The newest transition, join and possessed pawn one connection was sent.
#[derive(Debug, Default, Clone, Copy)]
struct Told {
    transition: Option<TransitionId>,
    join: Option<JoinId>,
    pawn: Option<PawnId>,
}

/// Decisions that are both counted and observed, as counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    spawn_refusals: u64,
    no_spawn_point: u64,
    completed: u64,
    settle_timeouts: u64,
    superseded: u64,
    failed: u64,
    logins_refused_full: u64,
}

impl Tally {
    fn counted(c: &Counters) -> Tally {
        Tally {
            spawn_refusals: c.spawn_refusals,
            no_spawn_point: c.spawn_point_retries,
            completed: c.transitions_completed,
            settle_timeouts: c.settle_timeouts,
            superseded: c.transitions_superseded,
            failed: c.transitions_failed,
            logins_refused_full: c.logins_refused_full,
        }
    }

    fn add(&mut self, observation: Observation) {
        match observation {
            Observation::SpawnRefused { cause: SpawnRefusal::LevelNotReady } => {
                self.spawn_refusals += 1
            }
            Observation::SpawnRefused { cause: SpawnRefusal::NoSpawnPoint } => {
                self.no_spawn_point += 1
            }
            Observation::TransitionEnded { outcome, .. } => match outcome {
                TransitionOutcome::Completed => self.completed += 1,
                TransitionOutcome::SettleTimeout => self.settle_timeouts += 1,
                TransitionOutcome::Superseded => self.superseded += 1,
                TransitionOutcome::Failed => self.failed += 1,
            },
            Observation::LoginRefused { reason: LoginRefusal::ServerFull } => {
                self.logins_refused_full += 1
            }
            _ => {}
        }
    }

    fn minus(&self, before: &Tally) -> Tally {
        Tally {
            spawn_refusals: self.spawn_refusals - before.spawn_refusals,
            no_spawn_point: self.no_spawn_point - before.no_spawn_point,
            completed: self.completed - before.completed,
            settle_timeouts: self.settle_timeouts - before.settle_timeouts,
            superseded: self.superseded - before.superseded,
            failed: self.failed - before.failed,
            logins_refused_full: self.logins_refused_full - before.logins_refused_full,
        }
    }
}

impl Model {
    fn new(setup: &Setup) -> Model {
        let now = Instant::now();
        let game = Game::new(setup.rules(), Arc::new(setup.world()), now);
        let mut model = Model {
            game,
            now,
            connections: Vec::new(),
            streams: Vec::new(),
            streamed_loads: Vec::new(),
            loads: Vec::new(),
            tickets: Vec::new(),
            session_load: false,
            pawns: BTreeMap::new(),
            streamed: None,
            node_load: None,
            rooms_load: None,
            transitions: Vec::new(),
            joins: Vec::new(),
            possessed: Vec::new(),
            latest: BTreeMap::new(),
            open: BTreeMap::new(),
            counted: Tally::default(),
            unavailable: false,
            peers: Default::default(),
            finds: Vec::new(),
            handoffs: Vec::new(),
            handovers: Vec::new(),
        };
        model.after_step();
        model
    }

    fn input(&mut self, input: Input) {
        if let Input::Streamed { load } = &input
            && let Some((current, node)) = &self.node_load
            && current == load
        {
            // The node is streamed from this input on, before any output of the step.
            self.streamed = node.clone();
            self.node_load = None;
            self.streamed_loads.push(*load);
        }
        if let Input::Streamed { load } = &input
            && self.rooms_load == Some(*load)
        {
            self.rooms_load = None;
        }
        self.game.handle(self.now, input);
        self.after_step();
    }

    fn advance_to(&mut self, end: Instant) {
        while let Some(at) = self.game.poll_timeout().filter(|&at| at <= end) {
            self.now = self.now.max(at);
            self.game.handle_timeout(self.now);
            self.after_step();
        }
        self.now = self.now.max(end);
    }

    /// Follows the step's outputs, then checks the invariants.
    fn after_step(&mut self) {
        while let Some(out) = self.game.poll_output() {
            self.follow(out);
        }
        // The shell drains observations into metrics after each step.
        let mut observed = Tally::default();
        while let Some(observation) = self.game.poll_observation() {
            observed.add(observation);
        }
        let counted = Tally::counted(self.game.counters());
        assert_eq!(
            counted.minus(&self.counted),
            observed,
            "this step's counters (left) and observations (right) disagree"
        );
        self.counted = counted;
        self.check();
    }

    fn follow(&mut self, out: Output) {
        match out {
            Output::Stream(req) => {
                if req.part == StreamPart::Levels {
                    // A node load: the current level is unloaded from here on.
                    self.streamed = None;
                    self.node_load = Some((req.load, None));
                    self.rooms_load = None;
                } else {
                    // Only a dungeon's rooms register no spawn points.
                    self.rooms_load = Some(req.load);
                }
                self.streams.push(req);
            }
            Output::LoadPlayer { player, ticket } => {
                self.loads.push((player, ticket));
                self.tickets.push(ticket);
            }
            Output::LoadSession => self.session_load = true,
            Output::Close { connection, .. } => {
                self.open.remove(&connection);
            }
            Output::Send { connection, message } => self.sent(connection, &message),
            Output::Broadcast { message } => {
                let open: Vec<ConnectionId> = self.open.keys().copied().collect();
                for connection in open {
                    self.sent(connection, &message);
                }
                self.broadcast(message);
            }
            Output::SavePlayer(_) | Output::SavePlayers(_) | Output::SaveSession { .. } => {}
            // The core tells a server only what that server asked, or what the directory
            // named it for.
            Output::Peer { to, .. } => {
                assert!(self.peers.contains(&to), "told {to}, which never spoke nor was named");
            }
            Output::FindDestination { transition, .. } => self.finds.push(transition),
            Output::SaveHandoff { save, ticket } => {
                assert!(save.handoff.is_some(), "a handoff save without its state");
                self.handoffs.push((save.player, ticket, save.version));
            }
            Output::Handover { save, ticket, .. } => {
                self.handovers.push((save.player, ticket, save.version));
            }
            // A client is sent on only while it is connected, with its travel's id.
            Output::TravelTo { connection, transition, .. } => {
                assert!(self.open.contains_key(&connection), "TravelTo to a closed connection");
                self.latest.entry(connection).or_default().transition = Some(transition);
                self.transitions.push(transition);
            }
            // The world is given up only once every client was told to close.
            Output::WorldUnavailable { .. } => {
                assert!(self.open.is_empty(), "clients left open: {:?}", self.open.keys());
                self.unavailable = true;
            }
        }
    }

    /// Records the ids a connection is told of.
    fn sent(&mut self, connection: ConnectionId, message: &ServerMessage) {
        let latest = self.latest.entry(connection).or_default();
        match message {
            ServerMessage::Welcome { player_id, .. } => {
                self.open.insert(connection, player_id.clone());
            }
            ServerMessage::ShowTransition { transition_id, .. } => {
                latest.transition = Some(*transition_id);
                self.transitions.push(*transition_id);
            }
            ServerMessage::ShowJoin { join_id, .. } => {
                latest.join = Some(*join_id);
                self.joins.push(*join_id);
            }
            ServerMessage::Possessed { pawn_id } => {
                latest.pawn = Some(*pawn_id);
                self.possessed.push(*pawn_id);
            }
            _ => {}
        }
    }

    /// What every client sees: pawns appearing, moving, dying and going.
    fn broadcast(&mut self, message: ServerMessage) {
        match message {
            ServerMessage::ShowTransition { target_node, .. } => {
                if let Some((_, node @ None)) = &mut self.node_load {
                    *node = Some(target_node);
                }
            }
            ServerMessage::PawnSpawned(view) => {
                assert_eq!(
                    Some(&view.node),
                    self.streamed.as_ref(),
                    "pawn {:?} of {} spawned on a node that is not streamed",
                    view.pawn_id,
                    view.owner
                );
                assert_eq!(
                    self.rooms_load, None,
                    "pawn {:?} spawned before the rooms",
                    view.pawn_id
                );
                // A relaunch whose kept player state holds `State.Dead` spawns a dead pawn.
                let pawn = PawnModel { owner: view.owner, node: view.node, alive: view.alive };
                let old = self.pawns.insert(view.pawn_id, pawn);
                assert!(old.is_none(), "pawn id {:?} reused", view.pawn_id);
            }
            ServerMessage::PawnsTeleported { node, pawn_ids } => {
                assert_eq!(
                    Some(&node),
                    self.streamed.as_ref(),
                    "pawns {pawn_ids:?} teleported to a node that is not streamed"
                );
                assert_eq!(self.rooms_load, None, "pawns {pawn_ids:?} teleported before the rooms");
                for id in pawn_ids.iter() {
                    let pawn = self.pawns.get_mut(&id).expect("a teleported pawn exists");
                    pawn.node = node.clone();
                }
            }
            ServerMessage::PawnDied { pawn_id } => {
                self.pawns.get_mut(&pawn_id).expect("a pawn that died exists").alive = false;
            }
            ServerMessage::PawnDestroyed { pawn_id } => {
                assert!(self.pawns.remove(&pawn_id).is_some(), "{pawn_id:?} destroyed twice");
            }
            _ => {}
        }
    }

    /// The invariants, after every step.
    fn check(&self) {
        let snapshot = self.game.snapshot();
        assert_eq!(snapshot.streamed_node, self.streamed, "the streamed node, told and kept");
        let mut live: BTreeMap<&PlayerId, usize> = BTreeMap::new();
        for pawn in self.pawns.values().filter(|p| p.alive) {
            *live.entry(&pawn.owner).or_default() += 1;
        }
        for (player, count) in &live {
            assert!(*count <= 1, "{player} has {count} live pawns");
        }
        for player in &snapshot.players {
            let owned = self.pawns.values().filter(|p| p.owner == player.player).count();
            assert_eq!(player.owned_pawns, owned, "pawns of {} as replicated", player.player);
            if let Some(id) = player.pawn {
                let pawn = self.pawns.get(&id).expect("a possessed pawn was replicated");
                assert_eq!(pawn.owner, player.player, "{id:?} possessed by another player");
            }
        }
        if snapshot.transition_id.is_none() {
            for (id, pawn) in self.pawns.iter().filter(|(_, p)| p.alive) {
                assert_eq!(
                    Some(&pawn.node),
                    self.streamed.as_ref(),
                    "{id:?} of {} stands on a node that is not streamed; pending {:?}; players {:?}",
                    pawn.owner,
                    snapshot.pending_spawns,
                    snapshot.players
                );
            }
        }
    }

    fn id<T: Copy>(latest: Option<T>, all: &[T], id: &Id, raw: fn(u64) -> T) -> Option<T> {
        match *id {
            Id::Latest => latest,
            Id::Older(k) if !all.is_empty() => Some(pick(all, k)),
            Id::Older(_) => None,
            Id::Raw(n) => Some(raw(n)),
        }
    }

    fn message(&self, connection: ConnectionId, msg: &Msg) -> Option<ClientMessage> {
        let Told { transition, join, pawn } =
            self.latest.get(&connection).copied().unwrap_or_default();
        Some(match msg {
            Msg::Hello(version) => {
                ClientMessage::Hello { protocol_version: *version, token: "t".into() }
            }
            Msg::TransitionReady(id) => ClientMessage::TransitionReady {
                transition_id: Self::id(transition, &self.transitions, id, TransitionId)?,
            },
            Msg::PossessionAcknowledged(id) => ClientMessage::PossessionAcknowledged {
                pawn_id: Self::id(pawn, &self.possessed, id, PawnId)?,
            },
            Msg::RestartRequest => ClientMessage::RestartRequest,
            Msg::Leave => ClientMessage::Leave,
            Msg::JoinReady(id) => {
                ClientMessage::JoinReady { join_id: Self::id(join, &self.joins, id, JoinId)? }
            }
            Msg::TransitionShown(id) => ClientMessage::TransitionShown {
                transition_id: Self::id(transition, &self.transitions, id, TransitionId)?,
            },
            Msg::TravelAbandoned(id) => ClientMessage::TravelAbandoned {
                transition_id: Self::id(transition, &self.transitions, id, TransitionId)?,
            },
        })
    }

    fn save(player: PlayerId, answer: &Answer) -> LoadOutcome<PlayerSave> {
        match answer {
            Answer::Missing => LoadOutcome::NotFound,
            Answer::Failed => LoadOutcome::Failed("the fuzzer's store is down".into()),
            Answer::Save { node: at, preset, equipment, version } => {
                let preset = match preset {
                    PresetChoice::ReadOnly(i) => {
                        Preset::ReadOnly { name: pick(&["Vanguard", "Scout", "Gone"], *i).into() }
                    }
                    PresetChoice::Character { scout, kits } => Preset::Character {
                        character_def: gatehouse_protocol::CharacterDef::new(match scout {
                            true => "Scout",
                            false => "Vanguard",
                        })
                        .expect("a valid character def"),
                        kits: kits.iter().map(|&k| tag(k)).collect(),
                    },
                };
                LoadOutcome::Found(PlayerSave {
                    player,
                    node: at.map(node),
                    preset,
                    inventory: vec![InventoryItem { item: "rope".into(), count: 1 }],
                    equipment: equipment.iter().map(|&k| tag(k)).collect(),
                    version: u64::from(*version),
                    handoff: None,
                    // An odd version was written by another server: the login takes it.
                    holder: (version % 2 == 1)
                        .then(|| ServerId::new(SOURCES[2]).expect("a valid server id")),
                })
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Login(i) => {
                let connection = ConnectionId(self.connections.len() as u64 + 1);
                let player = PlayerId::new(pick(&PLAYERS, *i)).expect("a valid player id");
                self.connections.push(connection);
                self.input(Input::Login { connection, player });
            }
            Op::Disconnect(k) if !self.connections.is_empty() => {
                let connection = self.connection(*k);
                let departure = Departure::lost("the fuzzer cut it");
                // Gone from the client's side: the core owes it no close.
                self.open.remove(&connection);
                self.input(Input::Disconnected { connection, departure });
            }
            Op::Send(k, msg) if !self.connections.is_empty() => {
                let connection = self.connection(*k);
                if let Some(message) = self.message(connection, msg) {
                    self.input(Input::Message { connection, message });
                }
            }
            Op::Everyone(msg) => {
                let open: Vec<ConnectionId> = self.open.keys().copied().collect();
                for connection in open {
                    if let Some(message) = self.message(connection, msg) {
                        self.input(Input::Message { connection, message });
                    }
                }
            }
            Op::AnswerLoads => {
                while !self.loads.is_empty() {
                    self.apply(&Op::AnswerLoad(0, Answer::Missing));
                }
            }
            Op::Stream(k) if !self.streams.is_empty() => {
                let req = self.streams.remove(usize::from(*k) % self.streams.len());
                self.input(Input::Streamed { load: req.load });
            }
            Op::StreamRaw(n) => self.input(Input::Streamed { load: LoadId(u64::from(*n)) }),
            Op::Points(k) if !self.streamed_loads.is_empty() => {
                let back = usize::from(*k) % self.streamed_loads.len();
                let load = self.streamed_loads[self.streamed_loads.len() - 1 - back];
                self.input(Input::SpawnPointsRegistered { load });
            }
            Op::PointsRaw(n) => {
                self.input(Input::SpawnPointsRegistered { load: LoadId(u64::from(*n)) })
            }
            Op::AnswerLoad(k, answer) if !self.loads.is_empty() => {
                let (player, ticket) = self.loads.remove(usize::from(*k) % self.loads.len());
                let outcome = Self::save(player.clone(), answer);
                self.input(Input::PlayerLoaded { player, ticket, outcome });
            }
            Op::AnswerLoadRaw(i, k, answer) => {
                let player = PlayerId::new(pick(&PLAYERS, *i)).expect("a valid player id");
                let ticket = match self.tickets.is_empty() {
                    true => u64::from(*k),
                    false => pick(&self.tickets, *k),
                };
                let outcome = Self::save(player.clone(), answer);
                self.input(Input::PlayerLoaded { player, ticket, outcome });
            }
            Op::AnswerSession(at, failed) => {
                self.session_load = false;
                let outcome = match (at, failed) {
                    (_, true) => LoadOutcome::Failed("the fuzzer's store is down".into()),
                    (None, false) => LoadOutcome::NotFound,
                    (Some(i), false) => LoadOutcome::Found(SessionSave {
                        session: "fuzz".into(),
                        node: node(*i),
                        version: u64::from(*i),
                    }),
                };
                self.input(Input::SessionLoaded { outcome });
            }
            Op::Travel(i) => self.input(Input::Travel { node: node(*i) }),
            Op::Peer { source, travel, message } => {
                let from = ServerId::new(pick(&SOURCES, *source)).expect("a valid server id");
                let trn = TransitionId(u64::from(*travel % 4));
                let player = |i: &u8| PlayerId::new(pick(&PLAYERS, *i)).expect("a valid player id");
                let message = match message {
                    PeerOp::Reserve { node: n, players } => PeerMessage::ReserveSeats {
                        trn,
                        node: node(*n),
                        players: players.iter().map(player).collect(),
                    },
                    PeerOp::Confirm { player: p, version, generation } => {
                        PeerMessage::SeatConfirmed {
                            trn,
                            player: player(p),
                            version: u64::from(*version),
                            generation: u32::from(*generation),
                        }
                    }
                    PeerOp::Release { players } => PeerMessage::ReleaseSeats {
                        trn,
                        players: players.iter().map(player).collect(),
                    },
                    PeerOp::Granted { hold_ms } => PeerMessage::SeatsGranted {
                        trn: self.travel(trn),
                        hold_ms: u32::from(*hold_ms),
                    },
                    PeerOp::Refused => PeerMessage::SeatsRefused {
                        trn: self.travel(trn),
                        reason: gatehouse_protocol::fleet::SeatRefusal::Full,
                    },
                    PeerOp::Placed { player: p } => {
                        PeerMessage::Placed { trn: self.travel(trn), player: player(p) }
                    }
                    PeerOp::Lost { player: p } => PeerMessage::SeatLost {
                        trn: self.travel(trn),
                        player: player(p),
                        reason: gatehouse_protocol::fleet::SeatLoss::HoldExpired,
                    },
                    PeerOp::Taken { player: p, version } => PeerMessage::PlayerTaken {
                        player: player(p),
                        version: u64::from(*version),
                    },
                };
                self.peers.insert(from.clone());
                self.input(Input::Peer { from, message });
            }
            Op::Directory(answer) if !self.finds.is_empty() => {
                let transition = self.finds.remove(0);
                let server = answer
                    .map(|i| ServerId::new(pick(&SOURCES[2..], i)).expect("a valid server id"));
                self.peers.extend(server.clone());
                self.input(Input::DestinationFound { transition, server });
            }
            Op::AnswerHandoff(k, acknowledged) if !self.handoffs.is_empty() => {
                let (player, ticket, version) =
                    self.handoffs.remove(usize::from(*k) % self.handoffs.len());
                let version = acknowledged.then_some(version + 1);
                self.input(Input::HandoffSaved { player, ticket, version });
            }
            Op::AnswerHandover(k, outcome) if !self.handovers.is_empty() => {
                let (player, ticket, version) =
                    self.handovers.remove(usize::from(*k) % self.handovers.len());
                let outcome = match outcome {
                    0 => HandoverOutcome::Won { version: version + 1 },
                    1 => HandoverOutcome::Lost,
                    _ => HandoverOutcome::Failed,
                };
                self.input(Input::HandoverDecided { player, ticket, outcome });
            }
            Op::PeerLost(i) => {
                let server = ServerId::new(pick(&SOURCES, *i)).expect("a valid server id");
                self.input(Input::PeerLost { server });
            }
            Op::SaveConflicted { player, found } => {
                let player = PlayerId::new(pick(&PLAYERS, *player)).expect("a valid player id");
                let found = found.map(u64::from);
                self.input(Input::PlayerSaveConflicted { player, found });
            }
            Op::Traveller { player, source, travel, version, generation } => {
                let connection = ConnectionId(self.connections.len() as u64 + 1);
                let player = PlayerId::new(pick(&PLAYERS, *player)).expect("a valid player id");
                let source =
                    ServerId::new(pick(&SOURCES[..2], *source)).expect("a valid server id");
                let seat = TicketedSeat {
                    source,
                    travel: TransitionId(u64::from(*travel % 4)),
                    version: u64::from(*version),
                    generation: u32::from(*generation % 3),
                };
                self.connections.push(connection);
                self.input(Input::TravellerLogin { connection, player, seat });
            }
            Op::Advance(ms) => self.advance_to(self.now + Duration::from_millis(u64::from(*ms))),
            Op::Wake => {
                if let Some(at) = self.game.poll_timeout() {
                    self.advance_to(at);
                }
            }
            Op::SpuriousWake => {
                self.game.handle_timeout(self.now);
                self.after_step();
            }
            // An operation on an empty list does nothing.
            _ => {}
        }
    }

    /// A travel id a destination's answer names: mostly the newest transition's (this
    /// server's travel), else the fuzzed one.
    fn travel(&self, fuzzed: TransitionId) -> TransitionId {
        match (fuzzed.0, self.transitions.last()) {
            (0 | 1, Some(newest)) => *newest,
            _ => fuzzed,
        }
    }

    /// The `k`th connection ever made (there is one).
    fn connection(&self, k: u8) -> ConnectionId {
        self.connections[usize::from(k) % self.connections.len()]
    }

    /// Leaves the world to settle: answers every load, finishes every stream, has every open
    /// connection report ready and acknowledge, and lets time pass. Every transition must then
    /// end; with a travel route, which starts a new one after each end, one must end; unless the
    /// world was declared unavailable, after which none may run.
    fn settle(&mut self, route: bool) {
        let ended = |game: &Game| {
            let c = game.counters();
            c.transitions_completed + c.settle_timeouts
        };
        let before = ended(&self.game);
        for _ in 0..40 {
            if self.unavailable {
                // Given up: no transition runs, and none starts again.
                assert_eq!(self.game.transition_id(), None, "a transition in an unavailable world");
                return;
            }
            let done = match route {
                true => ended(&self.game) > before,
                false => self.game.transition_id().is_none(),
            };
            if done {
                return;
            }
            if self.session_load {
                self.apply(&Op::AnswerSession(None, false));
            }
            self.apply(&Op::AnswerLoads);
            // A travel to another server ends: no destination, its links lost, every save
            // and recall answered.
            while !self.finds.is_empty() {
                self.apply(&Op::Directory(None));
            }
            for i in 2..SOURCES.len() as u8 {
                self.apply(&Op::PeerLost(i));
            }
            while !self.handoffs.is_empty() {
                self.apply(&Op::AnswerHandoff(0, false));
            }
            while !self.handovers.is_empty() {
                self.apply(&Op::AnswerHandover(0, 0));
            }
            while !self.streams.is_empty() {
                self.apply(&Op::Stream(0));
                self.apply(&Op::Points(0));
            }
            self.apply(&Op::Everyone(Msg::TransitionReady(Id::Latest)));
            self.apply(&Op::Everyone(Msg::JoinReady(Id::Latest)));
            self.apply(&Op::Everyone(Msg::PossessionAcknowledged(Id::Latest)));
            self.apply(&Op::Advance(5_000));
        }
        if self.unavailable {
            assert_eq!(self.game.transition_id(), None, "a transition in an unavailable world");
            return;
        }
        match route {
            true => assert!(ended(&self.game) > before, "no route transition ends"),
            false => assert_eq!(self.game.transition_id(), None, "every transition ends"),
        }
    }
}

fuzz_target!(|case: Case| {
    let mut model = Model::new(&case.setup);
    for op in &case.ops {
        model.apply(op);
    }
    model.settle(case.setup.route.is_some());
});

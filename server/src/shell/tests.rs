//! Game-task tests over in-memory channels: a recording fake core or the real [`Game`], an
//! in-memory save backend, paused time. Connections are their send queues, with the doorbell
//! the network driver would hear.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse_protocol::{
    CloseCode, NodeId, PlayerId, RejectReason, ReplicatedChange, ServerMessage,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::carry::{Carrier, Effects, replication_interval_at};
use super::{
    Core, GameHandle, ShellEvent, carry_outputs, feed_connections, feed_peer_events, run_game,
};
use crate::config::{AuthConfig, GameConfig, NetworkConfig, parse_world};
use crate::fleet::{FleetLink, Standalone};
use crate::game::{ConnectionId, Game, GameSnapshot, Input, Output};
use crate::net::{self, ConnectionEvent};
use crate::store::{
    LoadOutcome, PlayerSave, SaveBackend, SessionSave, StoreError, StoreHandle, StoreSettings,
    StoreWorker,
};

/// Two plain nodes with no jitter, so a run on paused time is the same every time (the test
/// worlds' one home is `tests/worlds/`).
const WORLD: &str = include_str!("../../../tests/worlds/quick.toml");

/// The carriers' replication interval, as in the default configuration.
const REPLICATION_INTERVAL: Duration = Duration::from_millis(50);

const SETTINGS: StoreSettings = StoreSettings {
    load_timeout: Duration::from_secs(5),
    save_retry: Duration::from_millis(100),
    save_attempts: 3,
};

fn node(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

/// Saves kept in memory: every player is new, sessions are kept.
#[derive(Default)]
struct Memory {
    sessions: Mutex<HashMap<String, SessionSave>>,
}

impl SaveBackend for Arc<Memory> {
    async fn load_player(&self, _player: &PlayerId) -> Result<Option<PlayerSave>, StoreError> {
        Ok(None)
    }
    async fn save_players(
        &self,
        saves: &[PlayerSave],
    ) -> Result<Vec<Result<u64, StoreError>>, StoreError> {
        Ok(saves.iter().map(|save| Ok(save.version + 1)).collect())
    }
    async fn load_session(&self, session: &str) -> Result<Option<SessionSave>, StoreError> {
        Ok(self.sessions.lock().unwrap().get(session).cloned())
    }
    async fn save_session(&self, save: &SessionSave) -> Result<u64, StoreError> {
        let version = save.version + 1;
        let stored = SessionSave { version, ..save.clone() };
        self.sessions.lock().unwrap().insert(save.session.clone(), stored);
        Ok(version)
    }
}

/// A store handle whose worker has stopped: every submit fails.
async fn stopped_store(events: mpsc::Sender<ShellEvent>) -> StoreHandle {
    let memory = Arc::new(Memory::default());
    let (handle, task) = StoreWorker::spawn(memory, SETTINGS, events, ShellEvent::Store);
    task.abort();
    let _ = task.await;
    handle
}

fn effects(events: mpsc::Sender<ShellEvent>, store: StoreHandle) -> Effects {
    effects_every(events, store, REPLICATION_INTERVAL)
}

fn effects_every(
    events: mpsc::Sender<ShellEvent>,
    store: StoreHandle,
    replication_interval: Duration,
) -> Effects {
    let map = parse_world(std::path::Path::new("shell-test-world.toml"), WORLD).unwrap();
    Effects {
        events,
        world: super::WorldSlot(Box::new(super::world::SimulatedWorld::new(Arc::new(map)))),
        store,
        session: "test-world".into(),
        max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
        metrics: crate::metrics::Metrics::new(),
        probes: std::sync::Arc::default(),
        replication_interval,
        replication_writes_per_s: 0,
        links: None,
        travels: None,
    }
}

/// A core that plays back queued outputs, reacts to inputs from a script, and fails the test
/// if it is fed mid-drain: after `poll_output` gave an output and before it gave `None`.
struct FakeCore {
    queued: VecDeque<Output>,
    react: fn(&Input) -> Vec<Output>,
    draining: bool,
    polled: Vec<Output>,
    fed: Vec<Input>,
    /// How many outputs were still queued when each input was fed.
    queued_at_feed: Vec<usize>,
}

impl FakeCore {
    fn new(queued: Vec<Output>, react: fn(&Input) -> Vec<Output>) -> Self {
        FakeCore {
            queued: queued.into(),
            react,
            draining: false,
            polled: Vec::new(),
            fed: Vec::new(),
            queued_at_feed: Vec::new(),
        }
    }
}

impl Core for FakeCore {
    fn handle(&mut self, _now: std::time::Instant, input: Input) {
        assert!(
            !self.draining,
            "fed {input:?} mid-drain, {} outputs still queued",
            self.queued.len()
        );
        self.queued_at_feed.push(self.queued.len());
        self.queued.extend((self.react)(&input));
        self.fed.push(input);
    }
    fn poll_output(&mut self) -> Option<Output> {
        let output = self.queued.pop_front();
        self.draining = output.is_some();
        self.polled.extend(output.clone());
        output
    }
}

fn a_message() -> ServerMessage {
    ServerMessage::Rejected { reason: RejectReason::ServerFull, detail: "filler".into() }
}

/// A carrier over an in-memory store (its worker runs on the test's runtime).
fn memory_carrier() -> Carrier {
    memory_carrier_every(REPLICATION_INTERVAL)
}

/// The same, replicating every `interval`.
fn memory_carrier_every(interval: Duration) -> Carrier {
    memory_carrier_limited(interval, gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN)
}

/// The same, with frames of at most `max_frame_len` bytes.
fn memory_carrier_limited(interval: Duration, max_frame_len: usize) -> Carrier {
    let (events, _own) = mpsc::channel(8);
    let memory = Arc::new(Memory::default());
    let (store, _worker) = StoreWorker::spawn(memory, SETTINGS, events.clone(), ShellEvent::Store);
    let effects = Effects { max_frame_len, ..effects_every(events, store, interval) };
    Carrier::new(effects)
}

/// What a connection's send queue rings, as the network driver would hear it.
type Rings = mpsc::UnboundedReceiver<net::QueueKey>;

/// A memory-store carrier with one logged-in connection, its writer queue, and the doorbell's
/// rings.
fn one_peer() -> (Carrier, ConnectionId, net::SendQueueRx, Rings) {
    one_peer_every(REPLICATION_INTERVAL)
}

/// The same, replicating every `interval`.
fn one_peer_every(interval: Duration) -> (Carrier, ConnectionId, net::SendQueueRx, Rings) {
    let mut carrier = memory_carrier_every(interval);
    let connection = ConnectionId(1);
    let (tx, rx, rings) = net::test_queue(16, connection);
    carrier.add_peer(connection, tx);
    (carrier, connection, rx, rings)
}

/// Every frame's message in the writes queued on `rx`, in order.
fn written_frames(rx: &mut net::SendQueueRx) -> Vec<ServerMessage> {
    let mut decoder = gatehouse_protocol::FrameDecoder::new(1 << 16);
    while let Some(net::Outbound::Frames { bytes, .. }) = rx.try_recv() {
        decoder.extend(&bytes);
    }
    let mut out = Vec::new();
    while let Some(message) = decoder.next_message::<ServerMessage>().unwrap() {
        out.push(message);
    }
    out
}

/// The messages `message` stands for: a `Replicated` batch's changes, each as its own message.
fn expand(message: ServerMessage) -> Vec<ServerMessage> {
    match message {
        ServerMessage::Replicated { changes } => changes.into_iter().map(Into::into).collect(),
        other => vec![other],
    }
}

/// The messages `message` stands for: a batch's changes and a snapshot's entries, each as its
/// own message.
fn expand_all(message: ServerMessage) -> Vec<ServerMessage> {
    match message {
        ServerMessage::WorldSnapshot(snapshot) => snapshot.messages().collect(),
        other => expand(other),
    }
}

/// Every message the writes queued on `rx` stand for, batches expanded, in order.
fn written(rx: &mut net::SendQueueRx) -> Vec<ServerMessage> {
    written_frames(rx).into_iter().flat_map(expand).collect()
}

/// Inputs the game task makes up while carrying outputs are fed after the drain, never into it
/// (docs/architecture.md, "The game task"); what they produce is carried in the same wake.
#[tokio::test]
async fn loads_the_store_cannot_take_are_answered_failed_after_the_drain() {
    let (events, _own) = mpsc::channel(8);
    let store = stopped_store(events.clone()).await;
    let mut carrier = Carrier::new(effects(events, store));
    let player = PlayerId::new("p1").unwrap();
    let session_save = Output::SaveSession { node: node("harbor"), version: 0 };
    let mut core = FakeCore::new(
        vec![
            Output::LoadSession,
            Output::LoadPlayer { player: player.clone(), ticket: 7 },
            session_save.clone(),
        ],
        |input| match input {
            Input::SessionLoaded { .. } => vec![Output::Broadcast { message: a_message() }],
            _ => Vec::new(),
        },
    );

    carry_outputs(&mut core, &mut carrier, &mut Vec::new());

    assert!(
        matches!(
            core.fed.as_slice(),
            [
                Input::SessionLoaded { outcome: LoadOutcome::Failed(_) },
                Input::PlayerLoaded { ticket: 7, outcome: LoadOutcome::Failed(_), .. },
            ]
        ),
        "both loads answered Failed, in output order: {:?}",
        core.fed
    );
    assert_eq!(
        core.polled,
        vec![
            Output::LoadSession,
            Output::LoadPlayer { player, ticket: 7 },
            session_save,
            Output::Broadcast { message: a_message() },
        ],
        "the reaction to the made-up input is carried after the first drain"
    );
    assert!(core.queued.is_empty(), "nothing is left queued in the core");
}

/// A client whose send queue overflows loses its connection (`SlowConsumer`), and the core
/// hears it disconnected after the drain, so it never waits for that client. One drain's write
/// larger than the cap is taken while the writer has nothing queued; the next drain, with that
/// write still not taken, overflows.
#[tokio::test]
async fn a_slow_consumer_is_closed_and_reported_disconnected_after_the_drain() {
    let mut carrier = memory_carrier();
    let connection = ConnectionId(1);
    // Room for one frame, and nobody reading it.
    let (outbound, mut writer, _rings) = net::test_queue(1, connection);
    carrier.add_peer(connection, outbound);
    let send = Output::Send { connection, message: a_message() };
    let mut first = FakeCore::new(vec![send.clone(), send.clone(), send.clone()], |_| Vec::new());
    carry_outputs(&mut first, &mut carrier, &mut Vec::new());
    assert!(first.fed.is_empty(), "a write over the cap, into an empty queue: {:?}", first.fed);
    assert_eq!(writer.take_turn().close_now, None, "no close while the write fits");
    let mut core = FakeCore::new(vec![send], |_| Vec::new());

    carry_outputs(&mut core, &mut carrier, &mut Vec::new());

    assert!(
        matches!(core.fed.as_slice(), [Input::Disconnected { connection: c, departure }]
            if *c == connection && departure.code == Some(CloseCode::SlowConsumer)),
        "the core hears the slow consumer disconnected once: {:?}",
        core.fed
    );
    assert_eq!(carrier.peer_count(), 0, "nothing more goes to the slow consumer");
    assert_eq!(
        writer.take_turn().close_now,
        Some(CloseCode::SlowConsumer),
        "the driver is asked to close it at once with SlowConsumer"
    );
}

/// The real game task, on paused time, fed over its own queue only.
struct Running {
    handle: GameHandle,
    store: StoreHandle,
    memory: Arc<Memory>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<super::GameEnd>,
    /// The connection-event queue, held open as the listener does.
    net: mpsc::Sender<ConnectionEvent>,
    /// The metrics the game task records in.
    metrics: crate::metrics::Metrics,
}

fn start_game_task() -> Running {
    start_game_task_pinging(None)
}

/// [`start_game_task`], with the orchestrator's Health pinged every `health_every`: a timer of
/// the game task's own that fires whatever the core does.
fn start_game_task_pinging(health_every: Option<Duration>) -> Running {
    let world = parse_world(std::path::Path::new("shell-test-world.toml"), WORLD).unwrap();
    let network = NetworkConfig { max_players: 8, ..NetworkConfig::default() };
    let rules = crate::config::game_rules(
        &GameConfig::default(),
        &AuthConfig::default(),
        &network,
        &crate::config::FleetConfig::default(),
    );
    let game = Game::new(rules, Arc::new(world), Instant::now().into_std());
    let (events_tx, events) = mpsc::channel(64);
    let memory = Arc::new(Memory::default());
    let (store, _worker) =
        StoreWorker::spawn(memory.clone(), SETTINGS, events_tx.clone(), ShellEvent::Store);
    let (net_tx, from_net) = mpsc::channel(64);
    let shutdown = CancellationToken::new();
    let effects = effects(events_tx.clone(), store.clone());
    let metrics = effects.metrics.clone();
    let policy = crate::fleet::FleetPolicy { health_every, ..standalone_policy() };
    let fleet = FleetLink::new(Arc::new(Standalone), policy, tokio::time::Instant::now());
    let task = tokio::spawn(run_game(game, from_net, events, effects, fleet, shutdown.clone()));
    Running {
        handle: GameHandle { events: events_tx },
        store,
        memory,
        shutdown,
        task,
        net: net_tx,
        metrics,
    }
}

/// Snapshots until `done` holds, letting simulated time run between them (at most 10 s).
async fn until(
    handle: &GameHandle,
    what: &str,
    done: impl Fn(&GameSnapshot) -> bool,
) -> GameSnapshot {
    for _ in 0..1000 {
        let snapshot = handle.snapshot().await.expect("the game task runs");
        if done(&snapshot) {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 10 s of simulated time");
}

/// An operator travel reaches the core through the handle, the simulated streamer reports
/// back on the game task's own queue, and the drain at shutdown saves the session where the
/// world stands.
#[tokio::test(start_paused = true)]
async fn a_travel_through_the_handle_streams_and_the_drain_saves_the_session() {
    let running = start_game_task();
    let handle = running.handle.clone();
    until(&handle, "the boot travel", |s| {
        s.phase == "None" && s.streamed_node == Some(node("harbor"))
    })
    .await;

    assert!(handle.travel(node("forest")).await, "the game task takes the travel");
    let snapshot = handle.snapshot().await.unwrap();
    assert_eq!(snapshot.transition_target, Some(node("forest")), "the travel started at once");
    until(&handle, "the travel to forest", |s| {
        s.phase == "None" && s.streamed_node == Some(node("forest"))
    })
    .await;

    running.shutdown.cancel();
    running.task.await.unwrap();
    assert!(handle.snapshot().await.is_none(), "the game task has stopped");
    assert_eq!(running.store.drain(Duration::from_secs(5)).await, 0, "every save written");
    let saved = running.memory.sessions.lock().unwrap().get("test-world").cloned();
    assert_eq!(saved.map(|s| s.node), Some(node("forest")));
}

/// docs/operations.md, "Metrics": a wake for one of the game task's timers (here the Health
/// ping's, every 100 ms through the 1 s boot) is observed in the lag histogram, on paused time
/// exactly on time.
#[tokio::test(start_paused = true)]
async fn game_loop_lag_is_observed() {
    let running = start_game_task_pinging(Some(Duration::from_millis(100)));
    until(&running.handle, "the boot travel", |s| {
        s.phase == "None" && s.streamed_node == Some(node("harbor"))
    })
    .await;
    let text = running.metrics.encode().unwrap();
    let count = text
        .lines()
        .find_map(|l| l.strip_prefix("gatehouse_game_loop_lag_seconds_count "))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no lag count:\n{text}"));
    assert!(count >= 1, "a timer woke the game task:\n{text}");
    // Paused time wakes every timer at its deadline: each lag is under the first bucket.
    let first = format!("gatehouse_game_loop_lag_seconds_bucket{{le=\"0.0001\"}} {count}");
    assert!(text.contains(&first), "{first}:\n{text}");
    running.shutdown.cancel();
    running.task.await.unwrap();
}

/// docs/operations.md, "Metrics": the game task's sample for `/metrics` names the transition
/// phase and the node streamed, from the core's own view.
#[tokio::test(start_paused = true)]
async fn the_sample_names_the_transition_phase_and_the_world_node() {
    let running = start_game_task();
    let handle = running.handle.clone();
    until(&handle, "the boot travel", |s| {
        s.phase == "None" && s.streamed_node == Some(node("harbor"))
    })
    .await;
    let sample = handle.sample().await.unwrap();
    assert_eq!((sample.phase, sample.node), ("None", Some(node("harbor"))));
    assert!(handle.travel(node("forest")).await);
    let sample = handle.sample().await.unwrap();
    let snapshot = handle.snapshot().await.unwrap();
    assert_eq!(sample.phase, snapshot.phase, "the sample's phase is the snapshot's");
    assert_ne!(sample.phase, "None", "the travel started at once");
    running.metrics.set_core_sample(sample.clone());
    let text = running.metrics.encode().unwrap();
    let line = format!("gatehouse_transition_phase{{phase=\"{}\"}} 1", sample.phase);
    assert!(text.contains(&line), "{line}:\n{text}");
    running.shutdown.cancel();
    running.task.await.unwrap();
}

/// docs/spec/sessions.md S2: nothing before `Welcome`. A connection registered (its login arrived)
/// while a broadcast of an earlier input is still queued, as in one batch of inputs or a
/// relaunch's replacement, gets `Welcome` first, then only what was broadcast after it.
#[tokio::test]
async fn a_new_connection_gets_welcome_before_any_broadcast() {
    let mut carrier = memory_carrier();
    let (old, new) = (ConnectionId(1), ConnectionId(2));
    let player = PlayerId::new("p1").unwrap();
    let welcome = ServerMessage::Welcome {
        player_id: player.clone(),
        current_node: None,
        max_frame_len: 65_536,
    };
    let (old_tx, mut old_rx, _old_rings) = net::test_queue(16, old);
    carrier.add_peer(old, old_tx);
    let mut before =
        FakeCore::new(vec![Output::Send { connection: old, message: welcome.clone() }], |_| {
            Vec::new()
        });
    carry_outputs(&mut before, &mut carrier, &mut Vec::new());
    // The batch: an earlier input's broadcast is queued, then the new connection registers.
    let (new_tx, mut new_rx, _new_rings) = net::test_queue(16, new);
    carrier.add_peer(new, new_tx);
    // One broadcast written at the drain's end, one that waits for the replication deadline.
    let earlier = ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(4) };
    let later = ServerMessage::PlayerStateUpdated(gatehouse_protocol::PlayerStateView {
        player_id: player,
        team: None,
        character_def: None,
    });
    let mut core = FakeCore::new(
        vec![
            Output::Broadcast { message: earlier.clone() },
            Output::Send { connection: new, message: welcome.clone() },
            Output::Broadcast { message: later.clone() },
        ],
        |_| Vec::new(),
    );

    carry_outputs(&mut core, &mut carrier, &mut Vec::new());
    // The replicated state waits for the replication deadline.
    carrier.flush(Instant::now() + REPLICATION_INTERVAL);

    // The newcomer is owed the whole interval's changes (its world is the last interval's:
    // empty here), the earlier death included: Welcome first all the same.
    assert_eq!(
        written(&mut new_rx),
        vec![welcome.clone(), earlier.clone(), later.clone()],
        "Welcome first"
    );
    assert_eq!(written(&mut old_rx), vec![welcome, earlier, later], "the older one gets both");
}

/// The frames one drain carries for a connection go to its writer as one write, in output order
/// (sends and broadcasts alike), counted as that many frames; replicated changes it is owed
/// before one of them are a write of their own between them, from the buffer every connection
/// owed them shares (docs/protocol.md 4.4).
#[tokio::test]
async fn a_drains_frames_for_one_connection_are_one_write_around_the_shared_changes() {
    let (mut carrier, connection, mut rx, _loopback) = one_peer();
    let player = PlayerId::new("p1").unwrap();
    let welcome = ServerMessage::Welcome {
        player_id: player.clone(),
        current_node: None,
        max_frame_len: 65_536,
    };
    let left = ServerMessage::PlayerLeft { player_id: player };
    let mut core = FakeCore::new(
        vec![
            Output::Send { connection, message: welcome.clone() },
            Output::Send { connection, message: a_message() },
            Output::Broadcast { message: left.clone() },
            Output::Send { connection, message: a_message() },
            Output::Send { connection, message: a_message() },
        ],
        |_| Vec::new(),
    );
    carry_outputs(&mut core, &mut carrier, &mut Vec::new());
    let mut writes = Vec::new();
    while let Some(net::Outbound::Frames { bytes, frames }) = rx.try_recv() {
        writes.push((bytes, frames));
    }
    let counts: Vec<usize> = writes.iter().map(|(_, frames)| *frames).collect();
    assert_eq!(counts, [2, 1, 2], "the Welcome and a message; the change; two messages");
    let (tx, mut again, _rings) = net::test_queue(16, ConnectionId(9));
    for (bytes, frames) in writes {
        tx.try_send_frames(bytes, frames).unwrap();
    }
    let messages = written(&mut again);
    assert_eq!(messages, vec![welcome, a_message(), left, a_message(), a_message()]);
}

/// The drain's last step: every connection gets what was carried for it, then the writer's
/// close with `ShuttingDown` (so its last frames go out before the close).
#[tokio::test]
async fn close_all_flushes_each_connection_then_closes_it() {
    let (mut carrier, connection, mut rx, _loopback) = one_peer();
    let mut made_up = Vec::new();
    carrier.carry(Output::Send { connection, message: a_message() }, &mut made_up);
    carrier.close_all();
    assert!(matches!(rx.try_recv(), Some(net::Outbound::Frames { frames: 1, .. })));
    assert!(matches!(rx.try_recv(), Some(net::Outbound::Close(CloseCode::ShuttingDown))));
    assert_eq!(carrier.peer_count(), 0);
}

/// A batch of connection events is fed one at a time, each input's outputs
/// taken into the carrier before the next is fed, so the core's queue never holds a whole
/// batch's outputs (a login replicates the whole world: a batch of logins held would be O(N²)).
/// Here each of 50 messages makes 20 outputs; no input is fed with any output still queued, and
/// every output reaches the carrier in order.
#[tokio::test]
async fn a_batch_of_inputs_is_carried_input_by_input_not_held_in_the_core() {
    let mut carrier = memory_carrier();
    let mut fleet =
        FleetLink::new(Arc::new(Standalone), standalone_policy(), tokio::time::Instant::now());
    let mut core = FakeCore::new(Vec::new(), |input| {
        let Input::Message { connection, .. } = input else { return Vec::new() };
        (0..20).map(|_| Output::Send { connection: *connection, message: a_message() }).collect()
    });
    let events = (0..50).map(|i| ConnectionEvent::Message {
        connection: ConnectionId(i),
        message: gatehouse_protocol::ClientMessage::RestartRequest,
    });
    let mut made_up = Vec::new();

    feed_connections(
        &mut core,
        &mut carrier,
        &mut fleet,
        std::time::Instant::now(),
        events,
        &mut made_up,
    );

    assert_eq!(core.fed.len(), 50);
    assert!(
        core.queued_at_feed.iter().all(|&queued| queued == 0),
        "an input was fed with earlier outputs still queued: {:?}",
        core.queued_at_feed
    );
    assert_eq!(core.polled.len(), 50 * 20, "every output taken");
    assert!(made_up.is_empty());
}

fn a_player_state(name: &str) -> ServerMessage {
    ServerMessage::PlayerStateUpdated(gatehouse_protocol::PlayerStateView {
        player_id: PlayerId::new(name).unwrap(),
        team: None,
        character_def: None,
    })
}

/// A memory-store carrier with one welcomed connection (its `Welcome` taken off
/// the queue), replicating every `interval`.
fn one_welcomed_peer(interval: Duration) -> (Carrier, ConnectionId, net::SendQueueRx, Rings) {
    let (mut carrier, connection, mut rx, kept) = one_peer_every(interval);
    let welcome = ServerMessage::Welcome {
        player_id: PlayerId::new("p1").unwrap(),
        current_node: None,
        max_frame_len: 65_536,
    };
    carrier.carry(Output::Send { connection, message: welcome }, &mut Vec::new());
    carrier.flush(Instant::now());
    assert_eq!(written(&mut rx).len(), 1, "the Welcome");
    (carrier, connection, rx, kept)
}

/// [`one_welcomed_peer`], with `p2`'s state replicated and sent (its batch joined the world a
/// newcomer is greeted with); and when the change was carried.
fn a_world_of_one_change_sent() -> (Carrier, ConnectionId, net::SendQueueRx, Rings, Instant) {
    let (mut carrier, connection, rx, kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let start = Instant::now();
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.flush(start);
    carrier.flush(start + REPLICATION_INTERVAL);
    (carrier, connection, rx, kept, start)
}

/// Broadcasts of replicated state carried in several drains (a burst of logins) wait for the
/// replication deadline, set by the first of them, then go to the writer as one `Replicated`
/// frame, in order; not a moment before the deadline (docs/protocol.md 4.4).
#[tokio::test]
async fn replicated_state_waits_for_the_replication_deadline_then_goes_as_one_frame() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let start = Instant::now();
    let health =
        ServerMessage::HealthChanged { player_id: PlayerId::new("p2").unwrap(), health: 7 };
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.flush(start);
    assert_eq!(carrier.poll_timeout(), Some(start + REPLICATION_INTERVAL));
    carrier.carry(Output::Broadcast { message: health.clone() }, &mut Vec::new());
    carrier.flush(start + Duration::from_millis(30));
    assert_eq!(carrier.poll_timeout(), Some(start + REPLICATION_INTERVAL), "set by the first");
    assert!(rx.try_recv().is_none(), "nothing written before the deadline");

    carrier.flush(start + REPLICATION_INTERVAL - Duration::from_millis(1));
    assert!(rx.try_recv().is_none(), "nor a millisecond before it");

    carrier.flush(start + REPLICATION_INTERVAL);
    let Some(net::Outbound::Frames { bytes, frames: 1 }) = rx.try_recv() else {
        panic!("one write of one frame expected at the deadline")
    };
    let (tx, mut again, _rings) = net::test_queue(16, ConnectionId(9));
    tx.try_send_frames(bytes, 1).unwrap();
    let changes = vec![
        ReplicatedChange::from_message(a_player_state("p2")).unwrap(),
        ReplicatedChange::from_message(health).unwrap(),
    ];
    assert_eq!(written_frames(&mut again), vec![ServerMessage::Replicated { changes }]);
    assert_eq!(carrier.poll_timeout(), None, "nothing waits any more");
}

/// Any other frame for the connection takes the replicated state waiting before it along, in
/// order, at the end of its drain: the connection sees the frames it would see without the
/// wait. The deadline then finds nothing left to write.
#[tokio::test]
async fn an_urgent_frame_takes_the_waiting_replicated_state_along_in_order() {
    let (mut carrier, connection, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let start = Instant::now();
    let left = ServerMessage::PlayerLeft { player_id: PlayerId::new("p2").unwrap() };
    carrier.carry(Output::Broadcast { message: left.clone() }, &mut Vec::new());
    carrier.flush(start);
    assert!(rx.try_recv().is_none());

    carrier.carry(Output::Send { connection, message: a_message() }, &mut Vec::new());
    carrier.flush(start + Duration::from_millis(1));
    assert_eq!(written(&mut rx), vec![left, a_message()]);

    carrier.flush(start + REPLICATION_INTERVAL);
    assert!(rx.try_recv().is_none(), "no second write of what it was given");
    assert_eq!(carrier.poll_timeout(), None);
}

/// Transition phases are never held: a `ShowTransition` broadcast is written at the end of its
/// drain, with the replicated state carried before it.
#[tokio::test]
async fn a_transition_phase_is_written_at_the_end_of_its_drain() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let show = ServerMessage::ShowTransition {
        transition_id: gatehouse_protocol::TransitionId(3),
        target_node: node("b"),
        levels: Vec::new(),
        rooms: Vec::new(),
    };
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.carry(Output::Broadcast { message: show.clone() }, &mut Vec::new());
    carrier.flush(Instant::now());
    assert_eq!(written(&mut rx), vec![a_player_state("p2"), show]);
}

/// Replicated state carried after a connection's urgent frame is not taken along by it: it
/// waits for the deadline, so the connection sees it after that frame, as it was made.
#[tokio::test]
async fn replicated_state_made_after_an_urgent_frame_waits_for_the_deadline() {
    let (mut carrier, connection, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let start = Instant::now();
    for _ in 0..2 {
        carrier.carry(Output::Send { connection, message: a_message() }, &mut Vec::new());
    }
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.flush(start);
    assert_eq!(written(&mut rx), vec![a_message(), a_message()]);
    carrier.flush(start + REPLICATION_INTERVAL);
    assert_eq!(written(&mut rx), vec![a_player_state("p2")]);
}

/// After a deadline has sent the batch, the next replicated state waits for a new deadline of
/// its own, and is written at it: nothing waits for ever. However many changes wait, each
/// connection gets one frame per deadline.
#[tokio::test]
async fn every_deadline_is_followed_by_a_fresh_one_for_later_replicated_state() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let start = Instant::now();
    for name in ["p2", "p3", "p4"] {
        carrier.carry(Output::Broadcast { message: a_player_state(name) }, &mut Vec::new());
    }
    carrier.flush(start);
    assert_eq!(carrier.waiting_changes(), 3);
    carrier.flush(start + REPLICATION_INTERVAL);
    assert_eq!(written_frames(&mut rx).len(), 1, "one frame for three changes");
    assert_eq!(carrier.waiting_changes(), 0);

    let second = start + Duration::from_millis(80);
    carrier.carry(Output::Broadcast { message: a_player_state("p5") }, &mut Vec::new());
    carrier.flush(second);
    assert_eq!(carrier.poll_timeout(), Some(second + REPLICATION_INTERVAL));
    carrier.flush(second + REPLICATION_INTERVAL);
    assert_eq!(written(&mut rx), vec![a_player_state("p5")]);
}

/// The replication interval is the configured one until the writes it makes (one per
/// connection per interval) pass the write budget, then stretches to keep within it, at most a
/// second; a zero interval or budget is kept (docs/protocol.md 4.4).
#[test]
fn the_replication_interval_stretches_with_the_players_past_the_write_budget() {
    let ms = Duration::from_millis;
    assert_eq!(replication_interval_at(ms(50), 20_000, 1), ms(50));
    assert_eq!(replication_interval_at(ms(50), 20_000, 1_000), ms(50));
    assert_eq!(replication_interval_at(ms(50), 20_000, 2_000), ms(100));
    assert_eq!(replication_interval_at(ms(50), 20_000, 4_000), ms(200));
    assert_eq!(replication_interval_at(ms(50), 20_000, 65_536), ms(1_000));
    assert_eq!(replication_interval_at(ms(50), 1, usize::MAX), ms(1_000), "capped, no panic");
    assert_eq!(replication_interval_at(ms(300), 20_000, 4_000), ms(300));
    assert_eq!(replication_interval_at(Duration::ZERO, 20_000, 4_000), Duration::ZERO);
    assert_eq!(replication_interval_at(ms(50), 0, 4_000), ms(50));
}

/// The default budget, which config/server.toml states, stretches the default interval past
/// 500 players: 100 ms at 1,000, 200 ms at 2,000, 400 ms at 4,000 (docs/protocol.md 4.4).
#[test]
fn the_default_write_budget_stretches_the_interval_past_500_players() {
    let ms = Duration::from_millis;
    let defaults = NetworkConfig::default();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml");
    let shipped = crate::config::ServerConfig::load(&path).unwrap().network;
    assert_eq!(shipped.replication_interval, defaults.replication_interval);
    assert_eq!(shipped.replication_writes_per_s, defaults.replication_writes_per_s);
    let at = |players| {
        replication_interval_at(
            defaults.replication_interval,
            defaults.replication_writes_per_s,
            players,
        )
    };
    assert_eq!([at(500), at(1_000), at(2_000), at(4_000)], [ms(50), ms(100), ms(200), ms(400)]);
}

/// A carrier with more connections than its write budget allows at the configured interval
/// sets its replication deadline the stretched interval away, and writes the batch there.
#[tokio::test]
async fn a_crowded_server_waits_the_stretched_replication_interval() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    // One connection and 4 writes a second: a 250 ms interval.
    carrier.set_replication_writes_per_s(4);
    let start = Instant::now();
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.flush(start);
    let stretched = Duration::from_millis(250);
    assert_eq!(carrier.poll_timeout(), Some(start + stretched));
    carrier.flush(start + REPLICATION_INTERVAL);
    assert_eq!(written(&mut rx), vec![], "not at the configured interval");
    carrier.flush(start + stretched);
    assert_eq!(written(&mut rx), vec![a_player_state("p2")]);
}

/// With `replication_interval_ms = 0` nothing waits: replicated state is written at the end of
/// its drain and no deadline is set.
#[tokio::test]
async fn a_zero_replication_interval_writes_replicated_state_at_its_drain() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(Duration::ZERO);
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.flush(Instant::now());
    assert_eq!(written(&mut rx), vec![a_player_state("p2")]);
    assert_eq!(carrier.poll_timeout(), None);
}

/// The game task wakes at the replication deadline by itself: the second player's state,
/// broadcast to the first with nothing urgent after it (each is in a join of its own, answered
/// by nobody), still reaches the first client's writer. Real time (the QUIC loopback), every
/// wait bounded.
#[tokio::test]
async fn the_game_task_writes_waiting_replicated_state_at_its_deadline() {
    let running = start_game_task();
    let handle = running.handle.clone();
    until(&handle, "the boot travel", |s| s.phase == "None" && s.streamed_node.is_some()).await;
    let mut queues = Vec::new();
    for (i, name) in ["p1", "p2"].into_iter().enumerate() {
        let player = PlayerId::new(name).unwrap();
        let connection = ConnectionId(i as u64 + 1);
        let (outbound, rx, rings) = net::test_queue(1024, connection);
        let span = tracing::Span::none();
        running
            .net
            .send(ConnectionEvent::Login { connection, player, ticket: None, outbound, span })
            .await
            .unwrap();
        until(&handle, "the login", |s| s.players.len() == i + 1).await;
        queues.push((rx, rings));
    }
    let (mut first, mut first_rings) = queues.swap_remove(0);
    let mut decoder = gatehouse_protocol::FrameDecoder::new(1 << 16);
    let second = PlayerId::new("p2").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            while let Some(frame) = decoder.next_message::<ServerMessage>().unwrap() {
                for message in expand(frame) {
                    if matches!(&message, ServerMessage::PlayerStateUpdated(v) if v.player_id == second)
                    {
                        return;
                    }
                }
            }
            match first.try_recv() {
                Some(net::Outbound::Frames { bytes, .. }) => decoder.extend(&bytes),
                Some(other) => panic!("the first client's queue closed: {other:?}"),
                // As the driver does: wait for the doorbell, start a turn, then take what waits
                // (a write after the turn starts rings again).
                None => {
                    assert!(first_rings.recv().await.is_some(), "the doorbell is gone");
                    first.take_turn();
                }
            }
        }
    })
    .await;
    assert!(seen.is_ok(), "the second player's state never reached the first client");
    running.shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), running.task).await;
}

/// Two welcomed connections on one carrier, replicating every `interval`.
fn two_welcomed_peers(
    interval: Duration,
) -> (Carrier, [(ConnectionId, net::SendQueueRx, Rings); 2]) {
    let mut carrier = memory_carrier_every(interval);
    let peers = [ConnectionId(1), ConnectionId(2)].map(|connection| {
        let (tx, mut rx, rings) = net::test_queue(16, connection);
        carrier.add_peer(connection, tx);
        carrier.carry(Output::Send { connection, message: welcome("p1") }, &mut Vec::new());
        carrier.flush(Instant::now());
        assert_eq!(written(&mut rx).len(), 1, "the Welcome");
        (connection, rx, rings)
    });
    (carrier, peers)
}

fn welcome(player: &str) -> ServerMessage {
    ServerMessage::Welcome {
        player_id: PlayerId::new(player).unwrap(),
        current_node: None,
        max_frame_len: 65_536,
    }
}

/// The bytes of the one write queued on `rx`.
fn one_write(rx: &mut net::SendQueueRx) -> bytes::Bytes {
    let Some(net::Outbound::Frames { bytes, .. }) = rx.try_recv() else { panic!("no write") };
    assert!(rx.try_recv().is_none(), "more than one write");
    bytes
}

/// At the deadline every connection owed the whole batch is sent the same frame: encoded once,
/// one allocation shared by every writer, not one copy per client (docs/protocol.md 4.4).
#[tokio::test]
async fn one_encoding_of_a_batch_is_shared_by_every_connection() {
    let (mut carrier, [(_, mut first, _r1), (_, mut second, _r2)]) =
        two_welcomed_peers(REPLICATION_INTERVAL);
    let start = Instant::now();
    carrier.carry(Output::Broadcast { message: a_player_state("p3") }, &mut Vec::new());
    carrier.flush(start);
    carrier.flush(start + REPLICATION_INTERVAL);
    let (a, b) = (one_write(&mut first), one_write(&mut second));
    assert_eq!(a.as_ptr(), b.as_ptr(), "one buffer for both");
    assert_eq!(a.len(), b.len());
}

/// A connection welcomed in the middle of an interval is greeted with the world as of the last
/// interval's end, then owed every change of this one, made before its `Welcome` or after
/// (docs/protocol.md 4.5): together, the world as it stands. The older connection gets the
/// changes once.
#[tokio::test]
async fn a_connection_welcomed_mid_interval_gets_the_last_intervals_world_then_this_ones_changes() {
    let mut carrier = memory_carrier();
    let (old, new) = (ConnectionId(1), ConnectionId(2));
    let (old_tx, mut old_rx, _r1) = net::test_queue(16, old);
    carrier.add_peer(old, old_tx);
    carrier.carry(Output::Send { connection: old, message: welcome("p1") }, &mut Vec::new());
    let start = Instant::now();
    carrier.carry(Output::Broadcast { message: a_player_state("earlier") }, &mut Vec::new());
    carrier.flush(start);
    carrier.flush(start + REPLICATION_INTERVAL);
    let (new_tx, mut new_rx, _r2) = net::test_queue(16, new);
    carrier.add_peer(new, new_tx);
    let second = start + REPLICATION_INTERVAL + Duration::from_millis(5);
    carrier.carry(Output::Broadcast { message: a_player_state("before") }, &mut Vec::new());
    carrier.carry(Output::Send { connection: new, message: welcome("p2") }, &mut Vec::new());
    carrier.carry(Output::Broadcast { message: a_player_state("after") }, &mut Vec::new());
    carrier.flush(second);
    carrier.flush(second + REPLICATION_INTERVAL);
    let frames = written_frames(&mut new_rx);
    assert!(matches!(&frames[1], ServerMessage::WorldSnapshot(s) if s.player_count() == 1));
    assert_eq!(
        frames.into_iter().flat_map(expand_all).collect::<Vec<_>>(),
        vec![
            welcome("p2"),
            a_player_state("earlier"),
            a_player_state("before"),
            a_player_state("after")
        ]
    );
    assert_eq!(
        written(&mut old_rx),
        vec![
            welcome("p1"),
            a_player_state("earlier"),
            a_player_state("before"),
            a_player_state("after")
        ]
    );
}

/// Everything the core broadcast reaches a newcomer's world, whatever its kind: player states
/// with their tags and health, pawns with their deaths and teleports, and nothing of what was
/// destroyed or left since; greeted as `WorldSnapshot`s (docs/protocol.md 4.5).
#[tokio::test]
async fn a_newcomer_is_greeted_with_every_replicated_change_applied() {
    let (mut carrier, _, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    let pid = |name: &str| PlayerId::new(name).unwrap();
    let pawn = |id: u64, owner: &str| {
        ServerMessage::PawnSpawned(gatehouse_protocol::PawnView {
            pawn_id: gatehouse_protocol::PawnId(id),
            owner: pid(owner),
            character_def: gatehouse_protocol::CharacterDef::new("Vanguard").unwrap(),
            node: node("a"),
            alive: true,
        })
    };
    let tags = vec![gatehouse_tags::catalog::STATE_DEAD];
    let broadcasts = [
        a_player_state("p2"),
        a_player_state("p3"),
        a_player_state("gone"),
        ServerMessage::AbilityTagsChanged { player_id: pid("p2"), tags: tags.clone() },
        ServerMessage::HealthChanged { player_id: pid("p2"), health: 0 },
        pawn(1, "p2"),
        pawn(2, "p3"),
        pawn(3, "gone"),
        ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(1) },
        ServerMessage::PawnsTeleported {
            node: node("b"),
            pawn_ids: gatehouse_protocol::PawnIdRuns::from_ids([gatehouse_protocol::PawnId(2)]),
        },
        ServerMessage::PawnDestroyed { pawn_id: gatehouse_protocol::PawnId(3) },
        ServerMessage::PlayerLeft { player_id: pid("gone") },
    ];
    let start = Instant::now();
    for message in broadcasts.clone() {
        carrier.carry(Output::Broadcast { message }, &mut Vec::new());
    }
    carrier.flush(start);
    carrier.flush(start + REPLICATION_INTERVAL);
    assert_eq!(written(&mut rx), broadcasts, "the older client heard each change once, in order");

    let newcomer = ConnectionId(7);
    let (tx, mut new_rx, _rings) = net::test_queue(16, newcomer);
    carrier.add_peer(newcomer, tx);
    carrier.carry(Output::Send { connection: newcomer, message: welcome("p9") }, &mut Vec::new());
    carrier.flush(start + REPLICATION_INTERVAL);
    let frames = written_frames(&mut new_rx);
    assert_eq!(frames.len(), 2, "the Welcome and one snapshot: {frames:?}");
    let greeting: Vec<ServerMessage> = frames.into_iter().skip(1).flat_map(expand_all).collect();
    let mut moved = pawn(2, "p3");
    if let ServerMessage::PawnSpawned(view) = &mut moved {
        view.node = node("b");
    }
    let mut dead = pawn(1, "p2");
    if let ServerMessage::PawnSpawned(view) = &mut dead {
        view.alive = false;
    }
    assert_eq!(
        greeting,
        vec![
            a_player_state("p2"),
            ServerMessage::AbilityTagsChanged { player_id: pid("p2"), tags },
            ServerMessage::HealthChanged { player_id: pid("p2"), health: 0 },
            a_player_state("p3"),
            dead,
            ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(1) },
            moved,
        ]
    );
}

/// The newcomers of one interval share one encoding of the world: built once, one buffer for
/// all of them, not one per login (docs/protocol.md 4.5).
#[tokio::test]
async fn the_newcomers_of_an_interval_share_one_encoding_of_the_world() {
    let (mut carrier, _, _rx, _kept, _) = a_world_of_one_change_sent();
    let mut greeted = Vec::new();
    for i in 0..2 {
        let connection = ConnectionId(10 + i);
        let (tx, mut rx, _rings) = net::test_queue(16, connection);
        carrier.add_peer(connection, tx);
        carrier.carry(Output::Send { connection, message: welcome("p9") }, &mut Vec::new());
        let _welcome = rx.try_recv();
        let Some(net::Outbound::Frames { bytes, frames: 1 }) = rx.try_recv() else {
            panic!("the world as one write of its own")
        };
        greeted.push(bytes);
    }
    assert_eq!(greeted[0].as_ptr(), greeted[1].as_ptr(), "one buffer for both newcomers");
}

/// A world larger than a frame is cut into several snapshots, each within the frame limit, that
/// name every player and pawn once; a newcomer's greeting is a few frames, not one per player.
#[tokio::test]
async fn a_large_world_greets_a_newcomer_in_a_few_frames_within_the_limit() {
    let mut carrier = memory_carrier_limited(REPLICATION_INTERVAL, 8_192);
    let start = Instant::now();
    for i in 0..600u64 {
        let owner = PlayerId::new(format!("p{i:03}")).unwrap();
        let state = gatehouse_protocol::PlayerStateView {
            player_id: owner.clone(),
            team: Some(gatehouse_protocol::TeamId(1)),
            character_def: Some(gatehouse_protocol::CharacterDef::new("Vanguard").unwrap()),
        };
        let pawn = gatehouse_protocol::PawnView {
            pawn_id: gatehouse_protocol::PawnId(i + 1),
            owner,
            character_def: gatehouse_protocol::CharacterDef::new("Vanguard").unwrap(),
            node: node("a"),
            alive: true,
        };
        for message in [ServerMessage::PlayerStateUpdated(state), ServerMessage::PawnSpawned(pawn)]
        {
            carrier.carry(Output::Broadcast { message }, &mut Vec::new());
        }
    }
    carrier.flush(start);
    carrier.flush(start + REPLICATION_INTERVAL);
    let newcomer = ConnectionId(7);
    let (tx, mut rx, _rings) = net::test_queue(16, newcomer);
    carrier.add_peer(newcomer, tx);
    carrier.carry(Output::Send { connection: newcomer, message: welcome("p9") }, &mut Vec::new());
    let mut decoder = gatehouse_protocol::FrameDecoder::new(8_192);
    while let Some(net::Outbound::Frames { bytes, .. }) = rx.try_recv() {
        decoder.extend(&bytes);
    }
    let mut snapshots = Vec::new();
    while let Some(message) = decoder.next_message::<ServerMessage>().unwrap() {
        if let ServerMessage::WorldSnapshot(snapshot) = message {
            snapshots.push(snapshot);
        }
    }
    assert!((2..=4).contains(&snapshots.len()), "{} snapshots", snapshots.len());
    let players: usize = snapshots.iter().map(|s| s.player_count()).sum();
    let pawns: usize = snapshots.iter().map(|s| s.pawn_count()).sum();
    assert_eq!((players, pawns), (600, 600));
}

/// An urgent broadcast (a death, a phase) takes each connection's owed changes along first,
/// then the deadline sends only what came after it: every connection sees the order the
/// server made.
#[tokio::test]
async fn an_urgent_broadcast_takes_the_owed_changes_along_for_every_connection() {
    let (mut carrier, [(_, mut first, _r1), (_, mut second, _r2)]) =
        two_welcomed_peers(REPLICATION_INTERVAL);
    let start = Instant::now();
    let died = ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(4) };
    carrier.carry(Output::Broadcast { message: a_player_state("p3") }, &mut Vec::new());
    carrier.carry(Output::Broadcast { message: died.clone() }, &mut Vec::new());
    carrier.carry(Output::Broadcast { message: a_player_state("p4") }, &mut Vec::new());
    carrier.flush(start);
    for rx in [&mut first, &mut second] {
        assert_eq!(written(rx), vec![a_player_state("p3"), died.clone()]);
    }
    carrier.flush(start + REPLICATION_INTERVAL);
    for rx in [&mut first, &mut second] {
        assert_eq!(written(rx), vec![a_player_state("p4")]);
    }
}

/// However many deaths one drain makes (a hazard's step), each connection is given them at the
/// drain's end in one write, not one per death: writes do not grow with the deaths.
#[tokio::test]
async fn the_deaths_of_one_drain_reach_each_connection_in_one_write() {
    let (mut carrier, [(_, mut first, _r1), (_, mut second, _r2)]) =
        two_welcomed_peers(REPLICATION_INTERVAL);
    let deaths: Vec<ServerMessage> = (1..=50)
        .map(|id| ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(id) })
        .collect();
    for message in deaths.clone() {
        carrier.carry(Output::Broadcast { message }, &mut Vec::new());
    }
    carrier.flush(Instant::now());
    for rx in [&mut first, &mut second] {
        let Some(net::Outbound::Frames { bytes, frames: 1 }) = rx.try_recv() else {
            panic!("one write of one frame")
        };
        assert!(rx.try_recv().is_none(), "and only one");
        let (tx, mut again, _rings) = net::test_queue(16, ConnectionId(9));
        tx.try_send_frames(bytes, 1).unwrap();
        assert_eq!(written(&mut again), deaths);
    }
}

/// A connection that stopped reading, whose queue cannot take the replicated changes it is
/// owed, is a slow consumer: closed with `SlowConsumer` and reported, whether the changes went
/// at the replication deadline or at the end of a drain that made a death.
#[tokio::test]
async fn a_connection_that_stopped_reading_is_closed_when_its_owed_changes_do_not_fit() {
    let died = ServerMessage::PawnDied { pawn_id: gatehouse_protocol::PawnId(4) };
    for (what, change, wait) in [
        ("at the deadline", a_player_state("p2"), REPLICATION_INTERVAL),
        ("a death", died, Duration::ZERO),
    ] {
        let mut carrier = memory_carrier();
        let connection = ConnectionId(1);
        // Room for one write, taken by the Welcome, and nobody reading.
        let (outbound, mut writer, _rings) = net::test_queue(1, connection);
        carrier.add_peer(connection, outbound);
        carrier.carry(Output::Send { connection, message: welcome("p1") }, &mut Vec::new());
        let start = Instant::now();
        carrier.flush(start);
        carrier.carry(Output::Broadcast { message: change }, &mut Vec::new());
        carrier.flush(start);
        carrier.flush(start + wait);
        let mut made_up = Vec::new();
        carrier.close_slow_consumers(&mut made_up);
        assert!(
            matches!(made_up.as_slice(), [Input::Disconnected { connection: c, departure }]
                if *c == connection && departure.code == Some(CloseCode::SlowConsumer)),
            "{what}: {made_up:?}"
        );
        assert_eq!(writer.take_turn().close_now, Some(CloseCode::SlowConsumer), "{what}");
    }
}

/// A newcomer greeted with the world through a queue with room is no slow consumer; and a
/// connection refused before any `Welcome` is greeted with nothing, nor sent the changes.
#[tokio::test]
async fn only_a_welcome_greets_and_a_greeting_that_fits_closes_nothing() {
    let (mut carrier, _, _rx, _kept, start) = a_world_of_one_change_sent();
    let (newcomer, refused) = (ConnectionId(7), ConnectionId(8));
    let (tx, mut new_rx, _r1) = net::test_queue(16, newcomer);
    carrier.add_peer(newcomer, tx);
    let (tx, mut refused_rx, _r2) = net::test_queue(16, refused);
    carrier.add_peer(refused, tx);
    carrier.carry(Output::Send { connection: newcomer, message: welcome("p9") }, &mut Vec::new());
    carrier.carry(Output::Send { connection: refused, message: a_message() }, &mut Vec::new());
    carrier.carry(Output::Broadcast { message: a_player_state("p3") }, &mut Vec::new());
    carrier.flush(start + REPLICATION_INTERVAL);
    carrier.flush(start + 2 * REPLICATION_INTERVAL);
    let mut made_up = Vec::new();
    carrier.close_slow_consumers(&mut made_up);
    assert!(made_up.is_empty(), "{made_up:?}");
    let greeted: Vec<_> = written_frames(&mut new_rx).into_iter().flat_map(expand_all).collect();
    assert_eq!(greeted, vec![welcome("p9"), a_player_state("p2"), a_player_state("p3")]);
    assert_eq!(written(&mut refused_rx), vec![a_message()], "no world, no changes");
}

/// A connection the core closes gets the changes made before the close first, then the close.
#[tokio::test]
async fn a_closed_connection_gets_the_changes_made_before_its_close() {
    let (mut carrier, connection, mut rx, _kept) = one_welcomed_peer(REPLICATION_INTERVAL);
    carrier.carry(Output::Broadcast { message: a_player_state("p2") }, &mut Vec::new());
    carrier.carry(Output::Close { connection, code: CloseCode::Leave }, &mut Vec::new());
    let mut messages = Vec::new();
    let mut decoder = gatehouse_protocol::FrameDecoder::new(1 << 16);
    let mut closed = false;
    while let Some(item) = rx.try_recv() {
        match item {
            net::Outbound::Frames { bytes, .. } => decoder.extend(&bytes),
            net::Outbound::Close(CloseCode::Leave) => closed = true,
            other => panic!("{other:?}"),
        }
    }
    while let Some(frame) = decoder.next_message::<ServerMessage>().unwrap() {
        messages.extend(expand(frame));
    }
    assert_eq!(messages, vec![a_player_state("p2")]);
    assert!(closed);
}

/// A world that records what the carrier tells it.
#[derive(Clone, Default)]
struct RecordingWorld(Arc<Mutex<Vec<String>>>);

impl super::world::World for RecordingWorld {
    fn stream(&mut self, request: crate::game::StreamRequest, _: super::world::WorldReports) {
        self.0.lock().unwrap().push(format!("stream {}", request.what));
    }
    fn pawn_destroyed(&mut self, pawn: gatehouse_protocol::PawnId) {
        self.0.lock().unwrap().push(format!("destroyed {}", pawn.0));
    }
}

/// The carrier hands the core's streaming requests to the game's world, and tells it of the
/// pawns a broadcast changes (docs/embedding.md).
#[tokio::test]
async fn the_carrier_hands_streaming_and_pawn_changes_to_the_world() {
    let (events, _own) = mpsc::channel(8);
    let memory = Arc::new(Memory::default());
    let (store, _worker) = StoreWorker::spawn(memory, SETTINGS, events.clone(), ShellEvent::Store);
    let told = RecordingWorld::default();
    let mut effects = effects(events, store);
    effects.world = super::WorldSlot(Box::new(told.clone()));
    let mut carrier = Carrier::new(effects);
    let request = crate::game::StreamRequest {
        load: crate::game::LoadId(3),
        node: node("harbor"),
        part: crate::game::StreamPart::Levels,
        levels: Vec::new(),
        what: "node harbor".into(),
    };
    let mut made_up = Vec::new();
    carrier.carry(Output::Stream(request), &mut made_up);
    let destroyed = ServerMessage::PawnDestroyed { pawn_id: gatehouse_protocol::PawnId(8) };
    carrier.carry(Output::Broadcast { message: destroyed }, &mut made_up);
    assert_eq!(*told.0.lock().unwrap(), ["stream node harbor", "destroyed 8"]);
    assert!(made_up.is_empty());
}

/// The fleet policy of a server run by hand: no pings, nothing done when empty.
fn standalone_policy() -> crate::fleet::FleetPolicy {
    crate::fleet::FleetPolicy::from_config(&crate::config::FleetConfig {
        when_empty: crate::config::WhenEmpty::Stay,
        ..crate::config::FleetConfig::default()
    })
}

/// The loss of a peer link this server dialled is the core's `PeerLost`: its travels there ride
/// on it (docs/spec/travel.md V7). The loss of a link another server opened to this one is not:
/// that server's travels here keep their seats' holds (V16), and this server's own travels to it
/// ride on the link this server dialled, which a newer link of the other's must not fail.
#[tokio::test]
async fn only_the_loss_of_a_link_this_server_dialled_reaches_the_core() {
    use crate::fleet::PeerEvent;
    use gatehouse_protocol::ServerId;
    use gatehouse_protocol::fleet::PeerRole;
    let (events, _rx) = mpsc::channel(16);
    let store = stopped_store(events.clone()).await;
    let mut carrier = Carrier::new(effects(events, store));
    let mut core = FakeCore::new(Vec::new(), |_| Vec::new());
    let server = ServerId::new("isle-1").unwrap();
    let lost = |role| PeerEvent::Lost { server: server.clone(), role, why: "closed".into() };
    let now = std::time::Instant::now();
    let mut made_up = Vec::new();
    feed_peer_events(&mut core, &mut carrier, now, Some(lost(PeerRole::Destination)), &mut made_up);
    assert!(core.fed.is_empty(), "an accepted link's end: {:?}", core.fed);
    feed_peer_events(&mut core, &mut carrier, now, Some(lost(PeerRole::Source)), &mut made_up);
    assert!(
        matches!(core.fed.as_slice(), [Input::PeerLost { server: lost }] if *lost == server),
        "{:?}",
        core.fed
    );
}

/// docs/spec/travel.md V17: the core hears of each player save the store refused as a
/// conflict, with the version it found (another server took the player); a save written or
/// given up is not fed.
#[test]
fn a_player_save_conflict_reaches_the_core_and_nothing_else_does() {
    use crate::store::SaveOutcome;
    let player = PlayerId::new("a").unwrap();
    let conflict = SaveOutcome::Conflict { expected: 3, found: Some(4) };
    let fed = super::save_conflicted(player.clone(), &conflict);
    assert!(
        matches!(fed, Some(Input::PlayerSaveConflicted { ref player, found: Some(4) }) if player.as_str() == "a"),
        "{fed:?}"
    );
    let saved = SaveOutcome::Saved { version: 4, attempts: 1 };
    assert!(super::save_conflicted(player.clone(), &saved).is_none());
    let failed = SaveOutcome::Failed { attempts: 3, reason: "down".into() };
    assert!(super::save_conflicted(player, &failed).is_none());
}

//! The game task: the one task that owns the [`Game`] (one writer: docs/architecture.md).
//!
//! | file | owns |
//! |---|---|
//! | `mod` | the wake loop, the drain, the game task's own events, [`GameHandle`] |
//! | `carry` | carrying outputs out: frames to the connection writers (a broadcast encoded once), closes (forced after 2 s), loads and saves to the store worker |
//! | `world` | the [`World`](world::World) trait a game supplies, its reports back, and the default [`SimulatedWorld`](world::SimulatedWorld) |
//!
//! Data flows one way, net → game → outputs. In: the connection events of `net` on one
//! queue, and on the game task's own queue ([`ShellEvent`]) streaming completions, store
//! replies, operator travels and snapshot requests. Out: frames down each logged-in
//! connection's queue, streaming tasks, store requests. It never touches a socket itself
//! except to close a connection at once.
//!
//! Per wake (quinn's `ConnectionDriver` habit):
//! 1. feed the inputs that arrived: connection events, then the game task's own;
//! 2. wake the core with `handle_timeout` if its one timer is due (also when inputs keep
//!    arriving: a busy queue never starves the timer), and the carrier if its replication
//!    deadline is (the deferred frames join this wake's flush);
//! 3. drain: carry every output out; inputs made up while carrying (a load the store worker
//!    could not take, a slow consumer's disconnect) are queued, fed after the drain and drained
//!    in turn until neither is left, so the core is never fed mid-drain;
//! 4. record the core's observations in the metrics, and mark the boot transition's end for
//!    `/ready` (docs/operations.md, "Admin endpoint");
//! 5. re-arm the one timer from `poll_timeout` and the replication deadline, and wait.
//!
//! A wake at or after the earliest deadline it slept towards records how late it came, past
//! that deadline, in `gatehouse_game_loop_lag_seconds` (docs/operations.md, "Metrics"): a loop
//! busy draining or a runtime short of threads shows there before the players notice.
//!
//! Beside the core, the [`FleetLink`] hears of logins and departures, and has a timer of its
//! own: the orchestrator's Health ping, sent from this loop (so a stalled loop stops the pings)
//! and due whatever the core is doing, long loads included; after each drain it tells Ready
//! once the boot transition has ended (docs/operations.md, "Under Agones").
//!
//! In a fleet, the peer links to other servers ([`PeerLinks`], in the carrier) are a third
//! source of inputs: the driver's reports of links other servers open go to them with the
//! connection events, and their [`PeerEvent`]s wake the loop; a peer's message is the core's
//! `Input::Peer`, and the core's `Output::Peer` goes back over the link (docs/spec/travel.md
//! V14).

mod carry;
mod mirror;
mod travel;
pub mod world;

#[cfg(test)]
mod tests;

use gatehouse_protocol::fleet::PeerRole;
use gatehouse_protocol::{NodeId, PlayerId};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fleet::{FleetLink, FleetStep, PeerEvent, PeerLinks};
use crate::game::{Game, GameSnapshot, HandoverOutcome, Input, Output, TicketedSeat};
use crate::metrics::{CoreSample, Metrics};
use crate::net::ConnectionEvent;
use crate::probes::Probes;
use crate::store::{self, SaveOutcome, StoreReply};

use carry::Carrier;
pub(crate) use carry::{Effects, WorldSlot};
pub(crate) use travel::Travels;

/// Events taken from each queue per wake, at most.
const BATCH: usize = 256;

/// What reaches the game task on its own queue (connection events have theirs).
#[derive(Debug)]
pub(crate) enum ShellEvent {
    /// An input for the core from beside the network: the world's reports (levels streamed,
    /// spawn points registered).
    Core(Input),
    /// An operator asked for a travel.
    Travel {
        /// The destination.
        node: NodeId,
    },
    /// Someone wants a snapshot of the game.
    Snapshot(oneshot::Sender<GameSnapshot>),
    /// `/health` asks whether the game loop answers.
    Ping(oneshot::Sender<()>),
    /// `/metrics` wants the core's gauges and counters.
    Sample(oneshot::Sender<CoreSample>),
    /// The store worker answered.
    Store(StoreReply),
    /// The fleet directory answered a travel's question (docs/spec/travel.md V12).
    DestinationFound {
        /// The travel.
        transition: gatehouse_protocol::TransitionId,
        /// The server to ask, if any.
        candidate: Option<crate::fleet::Candidate>,
    },
}

/// Runs the game until `shutdown`; then the game drains (saves every player and the session),
/// its outputs are carried, every connection is closed with `ShuttingDown` and `fleet` hears
/// that every player left. The caller waits for the store, and tells the orchestrator Shutdown.
pub(crate) async fn run_game(
    mut game: Game,
    mut net: mpsc::Receiver<ConnectionEvent>,
    mut events: mpsc::Receiver<ShellEvent>,
    effects: Effects,
    mut fleet: FleetLink,
    shutdown: CancellationToken,
) -> GameEnd {
    let (metrics, probes) = (effects.metrics.clone(), effects.probes.clone());
    let mut carrier = Carrier::new(effects);
    let (mut from_net, mut from_own) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
    let mut net_open = true;
    let mut made_up = Vec::new();
    // The core may have work queued from its construction (the session load, the boot travel).
    carry_outputs(&mut game, &mut carrier, &mut made_up);
    record(&mut game, &metrics, &probes);
    loop {
        let deadline = game.poll_timeout().map(Instant::from_std);
        let health_due = fleet.poll_timeout();
        let replication_due = carrier.poll_timeout();
        let mut timer_fired = false;
        let mut from_peer = None;
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            received = net.recv_many(&mut from_net, BATCH), if net_open => {
                // The network driver is gone: only the own queue is left.
                net_open = received > 0;
            }
            received = events.recv_many(&mut from_own, BATCH) => {
                // Never while the carrier holds its sender (for streaming); kept for safety.
                if received == 0 {
                    break;
                }
            }
            event = next_peer_event(carrier.links()) => from_peer = Some(event),
            _ = sleep_until(deadline) => timer_fired = true,
            _ = sleep_until(health_due) => {}
            _ = sleep_until(replication_due) => {}
        }
        // How late this wake is for the earliest deadline it slept towards, once that has
        // passed (woken by the timer itself, or by an input at or after it: either way the
        // timer is served now).
        let woke = Instant::now();
        if let Some(due) = [deadline, health_due, replication_due].into_iter().flatten().min()
            && due <= woke
        {
            metrics.game().observe_loop_lag(woke - due);
        }
        // Whatever else has arrived: neither queue waits behind the other.
        take_ready(&mut net, &mut from_net);
        take_ready(&mut events, &mut from_own);
        let now = Instant::now().into_std();
        feed_connections(
            &mut game,
            &mut carrier,
            &mut fleet,
            now,
            from_net.drain(..),
            &mut made_up,
        );
        for event in from_own.drain(..) {
            feed(&mut game, &mut carrier, now, event);
        }
        feed_peer_events(&mut game, &mut carrier, now, from_peer, &mut made_up);
        if timer_fired || game.poll_timeout().is_some_and(|at| at <= now) {
            game.handle_timeout(now);
        }
        // Replicated changes go out with this wake's flush once due (checked on every wake).
        carry_outputs(&mut game, &mut carrier, &mut made_up);
        record(&mut game, &metrics, &probes);
        if carrier.world_unavailable().is_some() {
            // Its clients' closes are queued behind what they were sent; the drain follows.
            break;
        }
        // Checked on every wake, like the core's timer: a busy queue never starves the pings.
        // An empty server told to shut down drains as if asked (docs/operations.md,
        // "Allocation").
        fleet.handle_step(game.transition_id().is_some());
        if fleet.handle_timeout(Instant::now()) == FleetStep::Drain {
            break;
        }
    }
    game.drain();
    carry_outputs(&mut game, &mut carrier, &mut made_up);
    record(&mut game, &metrics, &probes);
    tracing::info!(players = carrier.peer_count(), "shutting down: closing every connection");
    carrier.close_all();
    fleet.handle_drain();
    match carrier.world_unavailable() {
        Some(detail) => GameEnd::WorldUnavailable(detail.to_owned()),
        None => GameEnd::Stopped,
    }
}

/// How the game task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GameEnd {
    /// Asked to stop (the shutdown token), or its queues closed.
    Stopped,
    /// The core declared the world unavailable (`Output::WorldUnavailable`), with what failed.
    WorldUnavailable(String),
}

/// Records what the core observed since the last wake, and marks the boot transition's end the
/// first time no transition is in flight (for `/metrics` and `/ready`: docs/operations.md).
fn record(game: &mut Game, metrics: &Metrics, probes: &Probes) {
    while let Some(observation) = game.poll_observation() {
        metrics.game().observe(observation);
    }
    if !probes.booted() && game.transition_id().is_none() {
        probes.mark_booted();
    }
}

/// The core's gauges and counters, for `/metrics`.
pub(crate) fn sample(game: &Game) -> CoreSample {
    CoreSample {
        players: game.player_count(),
        placed_players: game.placed_player_count(),
        pending_spawns: game.pending_spawn_count(),
        loads_in_flight: game.load_count(),
        counters: game.counters().clone(),
        phase: game.phase_name(),
        node: game.streamed_node().cloned(),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Moves what is queued now into `into`, up to [`BATCH`] in all.
fn take_ready<T>(queue: &mut mpsc::Receiver<T>, into: &mut Vec<T>) {
    while into.len() < BATCH {
        match queue.try_recv() {
            Ok(event) => into.push(event),
            Err(_) => return,
        }
    }
}

/// Feeds a batch of connection events to the core, taking each one's outputs into the carrier
/// (encoded into its connections' frames, written at the flush) before the next: the core's
/// queue holds one input's outputs at most, never a whole batch's. A login replicates the whole
/// world to its newcomer (O(N) messages), so a batch of logins held as outputs would be O(N²)
/// in memory, and the queue keeps the capacity it grew to.
fn feed_connections(
    core: &mut impl Core,
    carrier: &mut Carrier,
    fleet: &mut FleetLink,
    now: std::time::Instant,
    events: impl Iterator<Item = ConnectionEvent>,
    made_up: &mut Vec<Input>,
) {
    for event in events {
        feed_connection(core, carrier, fleet, now, event);
        take_outputs(core, carrier, made_up);
    }
}

fn feed_connection(
    game: &mut impl Core,
    carrier: &mut Carrier,
    fleet: &mut FleetLink,
    now: std::time::Instant,
    event: ConnectionEvent,
) {
    match event {
        ConnectionEvent::Login { connection, player, ticket, outbound, span } => {
            carrier.add_peer(connection, outbound);
            fleet.handle_login(connection, &player, Instant::from_std(now));
            // A travel ticket's login is a traveller's: the core checks the seat it names
            // (docs/spec/travel.md V9).
            let input = match ticket {
                None => Input::Login { connection, player },
                Some(claims) => {
                    let seat = TicketedSeat {
                        source: claims.src,
                        travel: claims.trn,
                        version: claims.ver,
                        generation: claims.generation,
                    };
                    Input::TravellerLogin { connection, player, seat }
                }
            };
            // In the connection's span: the login's log line carries the client's address.
            span.in_scope(|| game.handle(now, input));
        }
        ConnectionEvent::Message { connection, message } => {
            game.handle(now, Input::Message { connection, message });
        }
        ConnectionEvent::Disconnected { connection, departure } => {
            carrier.remove_peer(connection);
            fleet.handle_disconnected(connection, Instant::from_std(now));
            game.handle(now, Input::Disconnected { connection, departure });
        }
        // Another server's link: the peer links' (their Welcome goes out with this wake's
        // flush of the driver's queue); never the core's as a login.
        ConnectionEvent::Peer(event) => carrier.handle_peer_connection(event),
    }
}

/// The next event of the peer links; never, for a server in no fleet.
async fn next_peer_event(links: Option<&mut PeerLinks>) -> PeerEvent {
    match links {
        Some(links) => links.next().await,
        None => std::future::pending().await,
    }
}

/// Feeds `first` and the peer links' other events ready now (up to [`BATCH`]) to the core,
/// taking each one's outputs into the carrier before the next: a peer's message is the core's
/// `Input::Peer`. The links log their ups and losses; the travel that will hear them is to be
/// written (docs/spec/travel.md V7, V12).
fn feed_peer_events(
    game: &mut impl Core,
    carrier: &mut Carrier,
    now: std::time::Instant,
    first: Option<PeerEvent>,
    made_up: &mut Vec<Input>,
) {
    let Some(first) = first else { return };
    let mut event = Some(first);
    for _ in 0..BATCH {
        let Some(taken) = event.take() else { return };
        match taken {
            PeerEvent::Message { from, message } => {
                game.handle(now, Input::Peer { from, message });
                take_outputs(game, carrier, made_up);
            }
            // A destination's link that ends takes its unplaced travellers back (V7): a link
            // this server dialled, which carries its travels there. The end of a link another
            // server opened says nothing of this server's travels to it (its seats here keep
            // their holds, V16).
            PeerEvent::Lost { server, role: PeerRole::Source, .. } => {
                game.handle(now, Input::PeerLost { server });
                take_outputs(game, carrier, made_up);
            }
            PeerEvent::Lost { role: PeerRole::Destination, .. } => {}
            PeerEvent::Linked { server, certificate_sha256, .. } => {
                if let Some(travels) = carrier.travels() {
                    travels.linked(&server, certificate_sha256);
                }
            }
            // The core bounds its own questions (fleet.peer_timeout_ms, docs/spec/travel.md
            // V12); a link's accepted end is logged by the links.
            PeerEvent::Unanswered { .. } | PeerEvent::Accepted { .. } => {}
        }
        event = carrier.links().and_then(|links| links.poll_event(Instant::now()));
    }
}

fn feed(game: &mut Game, carrier: &mut Carrier, now: std::time::Instant, event: ShellEvent) {
    match event {
        ShellEvent::Core(input) => game.handle(now, input),
        ShellEvent::Travel { node } => {
            // Only an operator asks this way (the admin endpoint); route travels are the core's.
            tracing::info!(%node, "operator travel requested");
            game.handle(now, Input::Travel { node });
        }
        ShellEvent::Snapshot(reply) => {
            let _ = reply.send(game.snapshot());
        }
        ShellEvent::Ping(reply) => {
            let _ = reply.send(());
        }
        ShellEvent::Sample(reply) => {
            let _ = reply.send(sample(game));
        }
        ShellEvent::Store(reply) => match reply {
            StoreReply::PlayerLoaded { player, ticket, outcome } => {
                game.handle(now, Input::PlayerLoaded { player, ticket, outcome });
            }
            StoreReply::SessionLoaded { outcome, .. } => {
                game.handle(now, Input::SessionLoaded { outcome });
            }
            StoreReply::HandoffSaved { player, ticket, outcome } => {
                let version = match outcome {
                    SaveOutcome::Saved { version, .. } => Some(version),
                    SaveOutcome::Conflict { .. } | SaveOutcome::Failed { .. } => None,
                };
                game.handle(now, Input::HandoffSaved { player, ticket, version });
            }
            StoreReply::HandoverDecided { player, ticket, outcome } => {
                let outcome = match outcome {
                    store::HandoverOutcome::Won { version } => HandoverOutcome::Won { version },
                    store::HandoverOutcome::Lost { .. } => HandoverOutcome::Lost,
                    store::HandoverOutcome::Failed { .. } => HandoverOutcome::Failed,
                };
                game.handle(now, Input::HandoverDecided { player, ticket, outcome });
            }
            // The worker logs saves and their failures; the core does not wait for them, but
            // hears of each conflict: another server took the player (docs/spec/travel.md V17).
            StoreReply::PlayerSaved { player, outcome } => {
                if let Some(input) = save_conflicted(player, &outcome) {
                    game.handle(now, input);
                }
            }
            StoreReply::PlayersSaved { outcomes } => {
                for (player, outcome) in outcomes {
                    if let Some(input) = save_conflicted(player, &outcome) {
                        game.handle(now, input);
                    }
                }
            }
            StoreReply::SessionSaved { .. } => {}
        },
        ShellEvent::DestinationFound { transition, candidate } => {
            let input = match carrier.travels() {
                Some(travels) => travels.found(transition, candidate),
                None => Input::DestinationFound { transition, server: None },
            };
            game.handle(now, input);
        }
    }
}

/// The core's input for a player save's `outcome`: a conflict is
/// [`Input::PlayerSaveConflicted`] (docs/spec/travel.md V17); a save written or given up, none.
fn save_conflicted(player: PlayerId, outcome: &SaveOutcome) -> Option<Input> {
    match outcome {
        SaveOutcome::Conflict { found, .. } => {
            Some(Input::PlayerSaveConflicted { player, found: *found })
        }
        SaveOutcome::Saved { .. } | SaveOutcome::Failed { .. } => None,
    }
}

/// The two halves of the core that a drain touches: [`Game`] in the server, a recording fake
/// in the tests.
trait Core {
    /// As [`Game::handle`].
    fn handle(&mut self, now: std::time::Instant, input: Input);
    /// As [`Game::poll_output`].
    fn poll_output(&mut self) -> Option<Output>;
}

impl Core for Game {
    fn handle(&mut self, now: std::time::Instant, input: Input) {
        Game::handle(self, now, input);
    }
    fn poll_output(&mut self) -> Option<Output> {
        Game::poll_output(self)
    }
}

/// Takes every output the core has queued into the carrier (each connection's frames, not yet
/// written), queueing in `made_up` the inputs the core must hear because of them.
fn take_outputs(core: &mut impl Core, carrier: &mut Carrier, made_up: &mut Vec<Input>) {
    while let Some(output) = core.poll_output() {
        carrier.carry(output, made_up);
    }
}

/// Carries every output out, until the core has none left and nothing was made up (`made_up`
/// may hold inputs already, from outputs taken earlier in the wake):
/// 1. carry each output until `poll_output` is empty, queueing the inputs made up on the way,
///    then flush each connection's frames as one write;
/// 2. close the slow consumers found, queueing their `Disconnected`;
/// 3. stop if the queue is empty; else feed it to the core (now between drains) and go to 1,
///    since those inputs make more outputs (a pawn destroyed, a transition ended).
fn carry_outputs(core: &mut impl Core, carrier: &mut Carrier, made_up: &mut Vec<Input>) {
    loop {
        take_outputs(core, carrier, made_up);
        carrier.flush(Instant::now());
        carrier.close_slow_consumers(made_up);
        if made_up.is_empty() {
            return;
        }
        let now = Instant::now().into_std();
        for input in made_up.drain(..) {
            core.handle(now, input);
        }
    }
}

/// A handle for asking the game task things from outside (admin endpoint, tests).
#[derive(Debug, Clone)]
pub struct GameHandle {
    pub(crate) events: mpsc::Sender<ShellEvent>,
}

impl GameHandle {
    /// A snapshot of the game, or `None` if the game task has stopped.
    pub async fn snapshot(&self) -> Option<GameSnapshot> {
        let (tx, rx) = oneshot::channel();
        self.events.send(ShellEvent::Snapshot(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Whether the game task answers: its loop is running (it may take a while to answer if
    /// the loop is busy; bound the wait). What `/health` asks (docs/operations.md).
    pub async fn ping(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.events.send(ShellEvent::Ping(tx)).await.is_err() {
            return false;
        }
        rx.await.is_ok()
    }

    /// The core's gauges and counters for `/metrics`, or `None` if the game task has stopped.
    /// (docs/operations.md, "Metrics").
    pub async fn sample(&self) -> Option<CoreSample> {
        let (tx, rx) = oneshot::channel();
        self.events.send(ShellEvent::Sample(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Asks for a travel to `node`. Returns false if the game task has stopped.
    pub async fn travel(&self, node: NodeId) -> bool {
        self.events.send(ShellEvent::Travel { node }).await.is_ok()
    }
}

//! The game shell: the one task that owns the [`Game`].
//!
//! Per wake it does four things (quinn's `ConnectionDriver` habit): feed the inputs that
//! arrived, drain the outputs, re-arm its one timer from `poll_timeout`, and carry messages
//! out to the connection writers. Broadcasts are encoded once and shared by every writer.
//!
//! It also plays the engine's level streamer: a streaming request from the core becomes a
//! sleeping task that reports completion (and spawn-point registration) back as inputs. Loads
//! and saves go to the store worker, whose replies come back as inputs.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_protocol::{ClientMessage, CloseCode, NodeId, PlayerId, ServerMessage};
use rand::RngExt as _;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::game::{ConnectionId, Game, GameSnapshot, Input, Output, StreamRequest};
use crate::net::{Outbound, connection};
use crate::store::{LoadOutcome, SessionSave, StoreHandle, StoreReply, StoreRequest};

/// How long a close waits for the frames queued before it, before it is forced.
const FORCED_CLOSE_AFTER: Duration = Duration::from_secs(2);

/// What reaches the game task.
#[derive(Debug)]
pub(crate) enum ShellEvent {
    /// A connection authenticated; `outbound` is its writer's queue.
    Login {
        connection: ConnectionId,
        player: PlayerId,
        outbound: mpsc::Sender<Outbound>,
        quic: quinn::Connection,
    },
    /// A logged-in connection sent a message.
    Message { connection: ConnectionId, message: ClientMessage },
    /// A connection ended.
    Disconnected { connection: ConnectionId },
    /// Simulated streaming finished, or spawn points registered.
    Core(Input),
    /// An operator asked for a travel.
    Travel { node: NodeId },
    /// Someone wants a snapshot of the game.
    Snapshot(oneshot::Sender<GameSnapshot>),
    /// The store worker answered.
    Store(StoreReply),
}

/// A logged-in connection as the game task sees it.
struct Peer {
    outbound: mpsc::Sender<Outbound>,
    quic: quinn::Connection,
}

/// Where the game task sends what it cannot do itself.
pub(crate) struct Effects {
    /// Its own event queue, for simulated streaming completions.
    pub(crate) events: mpsc::Sender<ShellEvent>,
    /// The store worker.
    pub(crate) store: StoreHandle,
    /// This world's session save name.
    pub(crate) session: String,
    /// Largest frame body, bytes.
    pub(crate) max_frame_len: usize,
}

/// Runs the game until `shutdown`; then saves every player and the session (the drain) and
/// closes every connection with `ShuttingDown`. The caller waits for the store.
pub(crate) async fn run_game(
    mut game: Game,
    mut events: mpsc::Receiver<ShellEvent>,
    effects: Effects,
    shutdown: CancellationToken,
) {
    let mut peers: HashMap<ConnectionId, Peer> = HashMap::new();
    let mut batch = Vec::with_capacity(64);
    // The core may have work queued from its construction (the session load, the boot travel).
    carry_outputs(&mut game, &mut peers, &effects);
    loop {
        let deadline = game.poll_timeout().map(Instant::from_std);
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            received = events.recv_many(&mut batch, 256) => {
                if received == 0 {
                    break;
                }
                let now = Instant::now().into_std();
                for event in batch.drain(..) {
                    feed(&mut game, &mut peers, now, event);
                }
            }
            _ = sleep_until(deadline) => {
                game.handle_timeout(Instant::now().into_std());
            }
        }
        carry_outputs(&mut game, &mut peers, &effects);
    }
    game.drain();
    carry_outputs(&mut game, &mut peers, &effects);
    tracing::info!(players = peers.len(), "shutting down: closing every connection");
    for peer in peers.values() {
        if peer.outbound.try_send(Outbound::Close(CloseCode::ShuttingDown)).is_err() {
            connection::close(
                &peer.quic,
                CloseCode::ShuttingDown,
                CloseCode::ShuttingDown.reason(),
            );
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn feed(
    game: &mut Game,
    peers: &mut HashMap<ConnectionId, Peer>,
    now: std::time::Instant,
    event: ShellEvent,
) {
    match event {
        ShellEvent::Login { connection, player, outbound, quic } => {
            peers.insert(connection, Peer { outbound, quic });
            game.handle(now, Input::Login { connection, player });
        }
        ShellEvent::Message { connection, message } => {
            game.handle(now, Input::Message { connection, message });
        }
        ShellEvent::Disconnected { connection } => {
            peers.remove(&connection);
            game.handle(now, Input::Disconnected { connection });
        }
        ShellEvent::Core(input) => game.handle(now, input),
        ShellEvent::Travel { node } => game.handle(now, Input::Travel { node }),
        ShellEvent::Snapshot(reply) => {
            let _ = reply.send(game.snapshot());
        }
        ShellEvent::Store(reply) => match reply {
            StoreReply::PlayerLoaded { player, ticket, outcome } => {
                game.handle(now, Input::PlayerLoaded { player, ticket, outcome });
            }
            StoreReply::SessionLoaded { outcome, .. } => {
                game.handle(now, Input::SessionLoaded { outcome });
            }
            // The worker logs saves and their failures; the core does not wait for them.
            StoreReply::PlayerSaved { .. } | StoreReply::SessionSaved { .. } => {}
        },
    }
}

/// Carries every output out, until the core has none left: dropping a slow consumer makes
/// the core produce more (its pawn destroyed, a transition ended), which go out in this wake.
fn carry_outputs(game: &mut Game, peers: &mut HashMap<ConnectionId, Peer>, effects: &Effects) {
    loop {
        let slow = carry_once(game, peers, effects);
        if slow.is_empty() {
            return;
        }
        // A client that cannot keep up loses its connection, not everyone's throughput.
        for connection in slow {
            if let Some(peer) = peers.remove(&connection) {
                tracing::warn!(
                    connection = connection.0,
                    "send queue full; closing a slow consumer"
                );
                connection::close(
                    &peer.quic,
                    CloseCode::SlowConsumer,
                    CloseCode::SlowConsumer.reason(),
                );
                game.handle(Instant::now().into_std(), Input::Disconnected { connection });
            }
        }
    }
}

/// Carries the outputs queued now; returns the connections whose send queue overflowed.
fn carry_once(
    game: &mut Game,
    peers: &mut HashMap<ConnectionId, Peer>,
    effects: &Effects,
) -> Vec<ConnectionId> {
    let max_frame_len = effects.max_frame_len;
    let mut slow = Vec::new();
    while let Some(output) = game.poll_output() {
        match output {
            Output::Send { connection, message } => {
                if let (Some(peer), Some(frame)) =
                    (peers.get(&connection), encode(&message, max_frame_len))
                {
                    if !enqueue(peer, frame) {
                        slow.push(connection);
                    }
                }
            }
            Output::Broadcast { message } => {
                if let Some(frame) = encode(&message, max_frame_len) {
                    for (connection, peer) in peers.iter() {
                        if !enqueue(peer, frame.clone()) {
                            slow.push(*connection);
                        }
                    }
                }
            }
            Output::Close { connection, code } => {
                if let Some(peer) = peers.remove(&connection) {
                    if peer.outbound.try_send(Outbound::Close(code)).is_err() {
                        connection::close(&peer.quic, code, code.reason());
                    } else {
                        // The writer flushes what came before the close, unless the peer stopped
                        // reading (it grants no flow-control credit): then the close is forced.
                        let quic = peer.quic.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(FORCED_CLOSE_AFTER).await;
                            connection::close(&quic, code, code.reason());
                        });
                    }
                }
            }
            Output::Stream(request) => simulate_streaming(request, effects.events.clone()),
            Output::LoadPlayer { player, ticket } => {
                let request = StoreRequest::LoadPlayer { player: player.clone(), ticket };
                if let Err(e) = effects.store.submit(request) {
                    // Never leave the core waiting: a load that cannot be asked for failed.
                    let outcome = LoadOutcome::Failed(e.to_string());
                    let input = Input::PlayerLoaded { player, ticket, outcome };
                    game.handle(Instant::now().into_std(), input);
                }
            }
            Output::LoadSession => {
                let request = StoreRequest::LoadSession(effects.session.clone());
                if let Err(e) = effects.store.submit(request) {
                    let outcome = LoadOutcome::Failed(e.to_string());
                    game.handle(Instant::now().into_std(), Input::SessionLoaded { outcome });
                }
            }
            Output::SavePlayer(save) => {
                let player = save.player.clone();
                if let Err(e) = effects.store.submit(StoreRequest::SavePlayer(save)) {
                    tracing::error!(%player, error = %e, "save not submitted: the store worker is gone");
                }
            }
            Output::SaveSession { node, version } => {
                let save = SessionSave { session: effects.session.clone(), node, version };
                if let Err(e) = effects.store.submit(StoreRequest::SaveSession(save)) {
                    tracing::error!(error = %e, "session save not submitted: the store worker is gone");
                }
            }
        }
    }
    slow.sort_unstable();
    slow.dedup();
    slow
}

/// Queues a frame; false when the queue is full (a slow consumer). A closed queue means the
/// connection is already going away; its disconnect event is on its way.
fn enqueue(peer: &Peer, frame: Bytes) -> bool {
    !matches!(
        peer.outbound.try_send(Outbound::Frame(frame)),
        Err(mpsc::error::TrySendError::Full(_))
    )
}

fn encode(message: &ServerMessage, max_frame_len: usize) -> Option<Bytes> {
    match gatehouse_protocol::encode_frame(message, max_frame_len) {
        Ok(frame) => Some(Bytes::from(frame)),
        Err(e) => {
            // Our own message did not fit a frame: a bug, reported loudly, never a crash.
            tracing::error!(error = %e, ?message, "server message does not encode");
            None
        }
    }
}

/// Plays the engine's level streamer for one request.
fn simulate_streaming(request: StreamRequest, events: mpsc::Sender<ShellEvent>) {
    let jitter_ms = request.jitter.as_millis() as u64;
    let extra = if jitter_ms > 0 { rand::rng().random_range(0..=jitter_ms) } else { 0 };
    let duration = request.duration + Duration::from_millis(extra);
    tracing::debug!(load = ?request.load, what = %request.what, ?duration, "streaming");
    tokio::spawn(async move {
        tokio::time::sleep(duration).await;
        if events.send(ShellEvent::Core(Input::Streamed { load: request.load })).await.is_err() {
            return;
        }
        if let Some(after) = request.spawn_points_after {
            tokio::time::sleep(after).await;
            let _ = events
                .send(ShellEvent::Core(Input::SpawnPointsRegistered { load: request.load }))
                .await;
        }
    });
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

    /// Asks for a travel to `node`. Returns false if the game task has stopped.
    pub async fn travel(&self, node: NodeId) -> bool {
        self.events.send(ShellEvent::Travel { node }).await.is_ok()
    }
}

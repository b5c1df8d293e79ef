//! Carrying the core's outputs out: frames to the connection writers, streaming requests and
//! what happened to pawns to the [`World`], loads and saves to the store worker.
//!
//! The [`Carrier`] holds the logged-in connections and never the core, so it cannot feed the
//! core while the core is being drained: an input it has to make up (a load that could not be
//! submitted, a slow consumer's disconnect) goes into the caller's queue, fed after the drain.
//!
//! Frames are not handed to a writer one by one: each connection's frames of one drain are
//! appended to its pending write and flushed as one write at the end of the drain
//! ([`Carrier::flush`]); a broadcast is encoded once and appended to every
//! welcomed connection's.
//!
//! Replicated player and pawn state is not urgent (docs/protocol.md §4.4): a connection whose
//! pending write holds only such broadcasts ([`deferrable`]) is flushed at the replication
//! deadline, at most `network.replication_interval_ms` after the first of them, instead of at the
//! end of the drain. While a thousand players log in at 200 a second, every client then gets
//! about 20 writes a second of roster changes instead of one per login. Any other frame for that
//! connection flushes its whole pending write at the drain's end, so every connection still
//! receives exactly the frames it would have, in the same order; only their timing changes.
//!
//! Nothing before `Welcome`: a connection is registered when its login reaches the game task,
//! before the core handled it, and outputs are carried only after a whole batch of inputs, so a
//! broadcast the core made earlier (in the batch, or for the departure of the older connection
//! a relaunch replaces) is still queued when the new connection appears. A broadcast therefore
//! goes only to the connections whose `Welcome` was carried before it, in output order: exactly
//! the connections the core had logged in when it broadcast.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gatehouse_protocol::{CloseCode, ServerMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ShellEvent;
use super::world::{self, World, WorldReports};
use crate::game::{ConnectionId, Departure, Input, Output};
use crate::metrics::Metrics;
use crate::net::{QueueError, SendQueue};
use crate::probes::Probes;
use crate::store::{LoadOutcome, SessionSave, StoreHandle, StoreRequest};

/// Where the game task sends what it cannot do itself.
#[derive(Debug)]
pub(crate) struct Effects {
    /// Its own event queue, for the world's reports.
    pub(crate) events: mpsc::Sender<ShellEvent>,
    /// The game's world: it streams, and hears of every pawn spawned, moved or destroyed.
    pub(crate) world: WorldSlot,
    /// The store worker.
    pub(crate) store: StoreHandle,
    /// This world's session save name.
    pub(crate) session: String,
    /// Largest frame body, bytes.
    pub(crate) max_frame_len: usize,
    /// The server's metrics: the game task records the core's observations, the carrier the
    /// closes it makes (docs/operations.md, "Metrics").
    pub(crate) metrics: Metrics,
    /// What `/ready` reads: the game task marks the boot transition's end (docs/operations.md).
    pub(crate) probes: Arc<Probes>,
    /// `network.replication_interval_ms`: how long a [`deferrable`] broadcast may wait for the
    /// next write to its connection; zero writes every frame at the end of its drain.
    pub(crate) replication_interval: Duration,
}

/// The game's [`World`], boxed (a game supplies its own type).
pub(crate) struct WorldSlot(pub(crate) Box<dyn World>);

impl std::fmt::Debug for WorldSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("World")
    }
}

/// A logged-in connection as the game task sees it.
struct Peer {
    /// Its writer's queue, through which it is closed too.
    outbound: SendQueue,
    /// Its `Welcome` was carried: broadcasts reach it from then on.
    welcomed: bool,
    /// The frames carried for it since the last flush, back to back.
    pending: BytesMut,
    /// How many frames `pending` holds.
    pending_frames: usize,
    /// `pending` holds a frame that is not [`deferrable`]: it is listed for the drain's flush.
    urgent: bool,
    /// It is listed for the replication deadline's flush.
    deferred: bool,
}

/// Which flush list a frame appended to a [`Peer`] puts it on, if it is not on it yet.
enum Listing {
    /// Already listed where this frame needs it.
    Listed,
    /// The flush at the end of the drain.
    Drain,
    /// The flush at the replication deadline.
    Deadline,
}

impl Listing {
    /// Puts `connection` on the list it names: `drain` or `deadline`.
    fn record(
        self,
        connection: ConnectionId,
        drain: &mut Vec<ConnectionId>,
        deadline: &mut Vec<ConnectionId>,
    ) {
        match self {
            Listing::Listed => {}
            Listing::Drain => drain.push(connection),
            Listing::Deadline => deadline.push(connection),
        }
    }
}

impl Peer {
    fn new(outbound: SendQueue) -> Self {
        Peer {
            outbound,
            welcomed: false,
            pending: BytesMut::new(),
            pending_frames: 0,
            urgent: false,
            deferred: false,
        }
    }

    /// Appends `frame`, which may wait for the replication deadline unless `urgent`; says which
    /// list the connection must join.
    fn append(&mut self, frame: &[u8], urgent: bool) -> Listing {
        self.pending.extend_from_slice(frame);
        self.pending_frames += 1;
        if urgent && !self.urgent {
            self.urgent = true;
            Listing::Drain
        } else if !urgent && !self.urgent && !self.deferred {
            self.deferred = true;
            Listing::Deadline
        } else {
            Listing::Listed
        }
    }

    /// Hands the pending frames to the writer as one write; false when its queue is full (a
    /// slow consumer). A fresh buffer replaces the pending one, so an idle connection holds
    /// none, and a write that grew past its length by more than a quarter is copied to its
    /// exact size: quinn keeps it until the peer acknowledges it.
    fn flush(&mut self) -> bool {
        self.urgent = false;
        if self.pending_frames == 0 {
            return true;
        }
        let pending = std::mem::take(&mut self.pending);
        let bytes = if pending.capacity() - pending.len() > pending.len() / 4 {
            Bytes::copy_from_slice(&pending)
        } else {
            pending.freeze()
        };
        let frames = std::mem::take(&mut self.pending_frames);
        !matches!(self.outbound.try_send_frames(bytes, frames), Err(QueueError::Full))
    }
}

/// Carries outputs out; owns the logged-in connections' queues.
pub(super) struct Carrier {
    peers: HashMap<ConnectionId, Peer>,
    effects: Effects,
    /// Connections with urgent frames carried since the last [`Carrier::flush`]: the flush
    /// visits only these, not every connection.
    pending: Vec<ConnectionId>,
    /// Connections holding [`deferrable`] frames only, when they were listed: flushed at
    /// `deferred_due`, or with the drain's if an urgent frame joins them first.
    deferred: Vec<ConnectionId>,
    /// When `deferred` is flushed: the replication interval after the first of its frames.
    deferred_due: Option<Instant>,
    /// Connections whose send queue overflowed since the last [`Carrier::close_slow_consumers`].
    slow: Vec<ConnectionId>,
    /// What the core said when it declared the world unavailable: the game task stops.
    world_unavailable: Option<String>,
}

impl Carrier {
    /// A carrier with no connections.
    pub(super) fn new(effects: Effects) -> Self {
        Carrier {
            peers: HashMap::new(),
            effects,
            pending: Vec::new(),
            deferred: Vec::new(),
            deferred_due: None,
            slow: Vec::new(),
            world_unavailable: None,
        }
    }

    /// Why the world is unavailable, once the core said so: the game task stops.
    pub(super) fn world_unavailable(&self) -> Option<&str> {
        self.world_unavailable.as_deref()
    }

    /// When [`Carrier::handle_timeout`] is next due: the replication deadline, if any frame waits
    /// for it.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.deferred_due
    }

    /// How many connections are listed for the replication deadline.
    #[cfg(test)]
    pub(super) fn deferred_connections(&self) -> usize {
        self.deferred.len()
    }

    /// At the replication deadline, the connections holding deferred frames join the next
    /// [`Carrier::flush`].
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if self.deferred_due.is_none_or(|due| due > now) {
            return;
        }
        self.deferred_due = None;
        for connection in self.deferred.drain(..) {
            let Some(peer) = self.peers.get_mut(&connection) else { continue };
            peer.deferred = false;
            // Flushed since with an urgent frame (and listed for the drain): nothing waits.
            if peer.pending_frames > 0 && !peer.urgent {
                peer.urgent = true;
                self.pending.push(connection);
            }
        }
    }

    /// Logged-in connections.
    pub(super) fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// A connection logged in: its messages go to `outbound` from now on.
    pub(super) fn add_peer(&mut self, connection: ConnectionId, outbound: SendQueue) {
        self.peers.insert(connection, Peer::new(outbound));
    }

    /// A connection ended: nothing more goes to it.
    pub(super) fn remove_peer(&mut self, connection: ConnectionId) {
        self.peers.remove(&connection);
    }

    /// Carries one output. An input the core must hear because of it goes to `made_up`: a
    /// load the store worker could not take is answered `Failed` (never leave the core waiting).
    pub(super) fn carry(&mut self, output: Output, made_up: &mut Vec<Input>) {
        let max_frame_len = self.effects.max_frame_len;
        match output {
            Output::Send { connection, message } => {
                let welcome = matches!(message, ServerMessage::Welcome { .. });
                if let (Some(peer), Some(frame)) =
                    (self.peers.get_mut(&connection), encode(&message, max_frame_len))
                {
                    peer.welcomed |= welcome;
                    let listing = peer.append(&frame, true);
                    listing.record(connection, &mut self.pending, &mut self.deferred);
                }
            }
            Output::Broadcast { message } => {
                world::observe(self.effects.world.0.as_mut(), &message);
                let urgent = self.effects.replication_interval.is_zero() || !deferrable(&message);
                // Encoded once; only to welcomed connections.
                if let Some(frame) = encode(&message, max_frame_len) {
                    for (connection, peer) in self.peers.iter_mut().filter(|(_, p)| p.welcomed) {
                        let listing = peer.append(&frame, urgent);
                        listing.record(*connection, &mut self.pending, &mut self.deferred);
                    }
                }
            }
            Output::Close { connection, code } => {
                if let Some(mut peer) = self.peers.remove(&connection) {
                    // What was carried for it before the close goes first.
                    let _ = peer.flush();
                    close_after_queued(&peer, code);
                }
            }
            Output::Stream(request) => {
                let reports = WorldReports::new(self.effects.events.clone());
                self.effects.world.0.stream(request, reports);
            }
            Output::LoadPlayer { player, ticket } => {
                let request = StoreRequest::LoadPlayer { player: player.clone(), ticket };
                if let Err(e) = self.effects.store.submit(request) {
                    let outcome = LoadOutcome::Failed(e.to_string());
                    made_up.push(Input::PlayerLoaded { player, ticket, outcome });
                }
            }
            Output::LoadSession => {
                let request = StoreRequest::LoadSession(self.effects.session.clone());
                if let Err(e) = self.effects.store.submit(request) {
                    let outcome = LoadOutcome::Failed(e.to_string());
                    made_up.push(Input::SessionLoaded { outcome });
                }
            }
            Output::SavePlayer(save) => {
                let player = save.player.clone();
                if let Err(e) = self.effects.store.submit(StoreRequest::SavePlayer(save)) {
                    tracing::error!(%player, error = %e, "save not submitted: the store worker is gone");
                }
            }
            Output::SavePlayers(saves) => {
                let players = saves.len();
                if let Err(e) = self.effects.store.submit(StoreRequest::SavePlayers(saves)) {
                    tracing::error!(players, error = %e, "saves not submitted: the store worker is gone");
                }
            }
            Output::WorldUnavailable { detail } => self.world_unavailable = Some(detail),
            Output::SaveSession { node, version } => {
                let save = SessionSave { session: self.effects.session.clone(), node, version };
                if let Err(e) = self.effects.store.submit(StoreRequest::SaveSession(save)) {
                    tracing::error!(error = %e, "session save not submitted: the store worker is gone");
                }
            }
        }
    }

    /// Hands every connection's frames carried since the last flush to its writer, one write
    /// each, except where only [`deferrable`] frames wait: those wait for the replication
    /// deadline, set here to `now` plus the interval if none is set. A connection whose queue is
    /// full is a slow consumer.
    pub(super) fn flush(&mut self, now: Instant) {
        for connection in self.pending.drain(..) {
            // Gone since (closed or disconnected): nothing to flush.
            let Some(peer) = self.peers.get_mut(&connection) else { continue };
            if !peer.flush() {
                self.slow.push(connection);
            }
        }
        if !self.deferred.is_empty() && self.deferred_due.is_none() {
            self.deferred_due = Some(now + self.effects.replication_interval);
        }
    }

    /// Closes every connection whose send queue overflowed since the last call, and makes up
    /// its `Disconnected` for the core: a client that cannot keep up loses its connection, not
    /// everyone's throughput. A connection the core closed meanwhile is already gone.
    pub(super) fn close_slow_consumers(&mut self, made_up: &mut Vec<Input>) {
        self.slow.sort_unstable();
        self.slow.dedup();
        for connection in self.slow.drain(..) {
            if let Some(peer) = self.peers.remove(&connection) {
                tracing::warn!(
                    connection = connection.0,
                    "send queue full; closing a slow consumer"
                );
                let code = CloseCode::SlowConsumer;
                peer.outbound.close_now(code);
                made_up
                    .push(Input::Disconnected { connection, departure: Departure::closed(code) });
            }
        }
    }

    /// Closes every connection with `ShuttingDown`, after what is queued for it.
    pub(super) fn close_all(&mut self) {
        for (_, mut peer) in self.peers.drain() {
            let code = CloseCode::ShuttingDown;
            if !peer.flush() || peer.outbound.try_close(code).is_err() {
                peer.outbound.close_now(code);
            }
        }
    }
}

/// Asks the writer to close after the frames queued before (the driver forces the close if the
/// peer stopped reading and they never go); closes at once if the queue cannot take the request.
fn close_after_queued(peer: &Peer, code: CloseCode) {
    if peer.outbound.try_close(code).is_err() {
        peer.outbound.close_now(code);
    }
}

/// Whether a broadcast may wait for the replication deadline: the replicated state of players
/// and pawns, which no client waits on to make progress (docs/protocol.md §4.4). Transition and
/// join phases, deaths and everything sent to one connection go out at the end of the drain.
fn deferrable(message: &ServerMessage) -> bool {
    matches!(
        message,
        ServerMessage::PlayerStateUpdated(_)
            | ServerMessage::PlayerLeft { .. }
            | ServerMessage::AbilityTagsChanged { .. }
            | ServerMessage::HealthChanged { .. }
            | ServerMessage::PawnSpawned(_)
            | ServerMessage::PawnDestroyed { .. }
    )
}

fn encode(message: &ServerMessage, max_frame_len: usize) -> Option<Bytes> {
    match gatehouse_protocol::encode_frame(message, max_frame_len) {
        Ok(frame) => Some(Bytes::from(frame)),
        Err(e) => {
            // Our own message did not fit a frame: a bug, reported loudly, never a crash.
            tracing::error!(error = %e, message = %message.name(), "server message does not encode");
            None
        }
    }
}

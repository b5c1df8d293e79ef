//! Carrying the core's outputs out: frames to the connection writers, streaming requests and
//! what happened to pawns to the [`World`], loads and saves to the store worker, messages to
//! other servers over their peer links ([`PeerLinks`]).
//!
//! The [`Carrier`] holds the logged-in connections and never the core, so it cannot feed the
//! core while the core is being drained: an input it has to make up (a load that could not be
//! submitted, a slow consumer's disconnect) goes into the caller's queue, fed after the drain.
//!
//! Frames are not handed to a writer one by one: each connection's frames of one drain are
//! appended to its pending write and flushed as one write at the end of the drain
//! ([`Carrier::flush`]); a broadcast is encoded once and appended to every welcomed
//! connection's.
//!
//! Replicated player and pawn state is not urgent (docs/protocol.md 4.4): those broadcasts
//! ([`ReplicatedChange`]) go into one [`ReplicationBatch`], each encoded once, and at the
//! replication deadline (at most the replication interval after the first of them:
//! `network.replication_interval_ms`, stretched on a crowded server by
//! [`replication_interval_at`]) every welcomed connection is sent the batch as one
//! `Replicated` frame, the same bytes for all of them. While 4,000 players log in at 400 a
//! second, every client then gets one frame of roster changes about 2.5 times a second (the
//! default interval stretched to 400 ms), whatever the number of changes, and the server keeps
//! one copy of it, not one per client.
//!
//! Order is kept per connection: a connection is owed the changes of the batch from the first
//! it has not been given (`Peer::given`), and any other frame for it takes what it is owed
//! along first. A death or a teleport, which clients wait on, goes into the batch too, and at
//! the end of its drain every connection is given what it is owed, one write for any number of
//! them. A newcomer is greeted after its `Welcome`
//! with the world as of the last batch sent ([`WorldMirror`], built once per interval for all
//! the newcomers of it) and owed the whole batch in flight: together, the world as it stands
//! (docs/protocol.md 4.5).
//!
//! Nothing before `Welcome`: a connection is registered when its login reaches the game task,
//! before the core handled it, and outputs are carried only after a whole batch of inputs, so a
//! broadcast the core made earlier (in the batch, or for the departure of the older connection
//! a relaunch replaces) is still queued when the new connection appears. A phase therefore goes
//! only to the connections whose `Welcome` was carried before it, in output order: exactly the
//! connections the core had logged in when it broadcast; a replicated change made before a
//! `Welcome` reaches that newcomer after it, as part of the world it is greeted with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gatehouse_protocol::codec::{Frames, ReplicationBatch};
use gatehouse_protocol::fleet::PeerRole;
use gatehouse_protocol::{CloseCode, ReplicatedChange, ServerMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ShellEvent;
use super::mirror::{SharedFrames, WorldMirror};
use super::travel::{Sending, Travels};
use super::world::{self, World, WorldReports};
use crate::config::MAX_REPLICATION_INTERVAL;
use crate::fleet::{PeerLinks, PeerSendError};
use crate::game::{ConnectionId, Departure, HandoverOutcome, Input, Output};
use crate::metrics::Metrics;
use crate::net::{PeerConnectionEvent, QueueError, SendQueue};
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
    /// `network.replication_interval_ms`: how long a replicated change may wait for the
    /// next write to its connection; zero writes every frame at the end of its drain.
    pub(crate) replication_interval: Duration,
    /// `network.replication_writes_per_s`: the replication writes per second the interval
    /// stretches to stay within at many players ([`replication_interval_at`]); 0 never
    /// stretches it.
    pub(crate) replication_writes_per_s: u32,
    /// The peer links to the fleet's other servers (docs/spec/travel.md V14); `None` for a
    /// server that is in no fleet (`fleet.directory = "none"`), which offers none.
    pub(crate) links: Option<PeerLinks>,
    /// The directory, the ticket key and the candidates travels found
    /// (docs/spec/travel.md); `None` for a server in no fleet, whose travels find no server.
    pub(crate) travels: Option<Travels>,
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
    /// It is listed for the drain's flush.
    listed: bool,
    /// The changes of the carrier's batch it has been given: it is owed the rest.
    given: usize,
    /// A write found its queue full since the last flush: it is a slow consumer.
    overflowed: bool,
}

impl Peer {
    fn new(outbound: SendQueue) -> Self {
        Peer {
            outbound,
            welcomed: false,
            pending: BytesMut::new(),
            pending_frames: 0,
            listed: false,
            given: 0,
            overflowed: false,
        }
    }

    /// Appends `count` whole frames; true when the connection must be listed for the drain's
    /// flush (it was not yet).
    fn append(&mut self, frames: &[u8], count: usize) -> bool {
        self.pending.extend_from_slice(frames);
        self.pending_frames += count;
        !std::mem::replace(&mut self.listed, true)
    }

    /// Writes the changes of the batch it is owed, if welcomed: what it must get before any
    /// frame carried for it now. They are written from the buffer every connection owed the
    /// same changes shares (after what is pending, to keep the order), never copied into its
    /// own: at the end of a transition that spawned every pawn, a copy per connection would be
    /// O(N²) bytes. True when the connection must be listed for the flush (to report a full
    /// queue).
    fn catch_up(&mut self, batch: &mut FramesFrom<'_>) -> bool {
        if !self.welcomed || self.given >= batch.len() {
            return false;
        }
        let first = std::mem::replace(&mut self.given, batch.len());
        let Some(frames) = batch.from(first) else { return false };
        if !self.write_shared(&frames) {
            self.overflowed = true;
        }
        self.overflowed && !std::mem::replace(&mut self.listed, true)
    }

    /// Writes what is pending, then `shared` (frames other connections are written too, kept
    /// once in memory); false when its queue is full.
    fn write_shared(&mut self, shared: &SharedFrames) -> bool {
        self.flush() && self.write(shared.bytes.clone(), shared.count)
    }

    /// Hands the pending frames to the writer as one write; false when its queue is full (a
    /// slow consumer). A fresh buffer replaces the pending one, so an idle connection holds
    /// none, and a write that grew past its length by more than a quarter is copied to its
    /// exact size: quinn keeps it until the peer acknowledges it.
    fn flush(&mut self) -> bool {
        self.listed = false;
        if std::mem::take(&mut self.overflowed) {
            return false;
        }
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
        self.write(bytes, frames)
    }

    /// Hands `frames` frames in `bytes` to the writer; false when its queue is full.
    fn write(&self, bytes: Bytes, frames: usize) -> bool {
        !matches!(self.outbound.try_send_frames(bytes, frames), Err(QueueError::Full))
    }
}

/// The `Replicated` frames of a batch from any change on, each encoded once however many
/// connections are owed it (the catch-ups of an urgent broadcast, the deadline's sends).
struct FramesFrom<'a> {
    batch: &'a ReplicationBatch,
    /// One past the last change given.
    end: usize,
    max_frame_len: usize,
    made: HashMap<usize, Option<SharedFrames>>,
}

impl<'a> FramesFrom<'a> {
    /// Every change of `batch`.
    fn new(batch: &'a ReplicationBatch, max_frame_len: usize) -> Self {
        Self::until(batch, batch.len(), max_frame_len)
    }

    /// The changes of `batch` before index `end`.
    fn until(batch: &'a ReplicationBatch, end: usize, max_frame_len: usize) -> Self {
        FramesFrom { batch, end, max_frame_len, made: HashMap::new() }
    }

    /// One past the last change given: what a connection has had once given them.
    fn len(&self) -> usize {
        self.end
    }

    /// The frames of the changes from `first` to the end.
    fn from(&mut self, first: usize) -> Option<SharedFrames> {
        let (batch, end, max_frame_len) = (self.batch, self.end, self.max_frame_len);
        let made = self.made.entry(first).or_insert_with(|| {
            let frames = batch_frames(batch, first, end, max_frame_len)?;
            Some(SharedFrames { bytes: Bytes::from(frames.bytes), count: frames.count })
        });
        made.clone()
    }
}

/// Carries outputs out; owns the logged-in connections' queues.
pub(super) struct Carrier {
    peers: HashMap<ConnectionId, Peer>,
    effects: Effects,
    /// Connections with frames carried since the last [`Carrier::flush`]: the flush visits only
    /// these, not every connection.
    pending: Vec<ConnectionId>,
    /// The replicated changes not yet sent to everyone, encoded.
    batch: ReplicationBatch,
    /// The same changes, applied to `mirror` once sent.
    changes: Vec<ReplicatedChange>,
    /// The world as of the last batch sent: what a newcomer is greeted with, before the batch.
    mirror: WorldMirror,
    /// When `batch` is sent: the replication interval after the drain that began it.
    batch_due: Option<Instant>,
    /// A change clients wait on joined the batch this drain: at the drain's flush every
    /// connection is given what it is owed up to the last such change (in one write however
    /// many came); the changes after it wait for the deadline as usual.
    owed_now: Option<usize>,
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
            batch: ReplicationBatch::default(),
            changes: Vec::new(),
            mirror: WorldMirror::default(),
            batch_due: None,
            owed_now: None,
            slow: Vec::new(),
            world_unavailable: None,
        }
    }

    /// Why the world is unavailable, once the core said so: the game task stops.
    pub(super) fn world_unavailable(&self) -> Option<&str> {
        self.world_unavailable.as_deref()
    }

    /// When the replicated changes waiting are due: the flush at or after it sends them.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.batch_due
    }

    /// How many replicated changes wait for the replication deadline.
    #[cfg(test)]
    pub(super) fn waiting_changes(&self) -> usize {
        self.batch.len()
    }

    /// Sets `network.replication_writes_per_s`, as a test's config would.
    #[cfg(test)]
    pub(super) fn set_replication_writes_per_s(&mut self, writes_per_s: u32) {
        self.effects.replication_writes_per_s = writes_per_s;
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
            Output::Send { connection, message } => self.send(connection, &message),
            Output::Broadcast { message } => {
                world::observe(self.effects.world.0.as_mut(), &message);
                match ReplicatedChange::from_message(message) {
                    Ok(change) => self.replicate(change),
                    Err(message) => self.broadcast_now(&message),
                }
            }
            Output::Close { connection, code } => {
                if let Some(mut peer) = self.peers.remove(&connection) {
                    // What was carried for it before the close goes first.
                    peer.catch_up(&mut FramesFrom::new(&self.batch, max_frame_len));
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
            Output::Peer { to, message } => {
                // To a server a travel of this one found, over the link this server dials; to
                // any other, back over the link it opened (docs/spec/travel.md V14).
                let name = message.name();
                let Some(links) = &mut self.effects.links else {
                    tracing::warn!(server = %to, message = name,
                        "no peer link to carry a message to another server: not in a fleet");
                    return;
                };
                let travels = self.effects.travels.as_ref();
                let candidate = travels.and_then(|t| t.candidate(&to));
                let sent = match (candidate, message.sender()) {
                    (Some(candidate), Some(PeerRole::Source)) => links.send(candidate, message),
                    (_, Some(_)) => links.reply(&to, message),
                    // Either way (`PlayerTaken`, V17): the link it opened here, else the link this
                    // server dials to it as a travel found it or the directory puts
                    // it. A directory that cannot name a server by its id (Agones) leaves the
                    // older server to learn at its next save (its conflict).
                    (_, None) => match links.reply(&to, message.clone()) {
                        Err(PeerSendError::NoLink(_)) => {
                            match travels.and_then(|t| t.locate(&to)) {
                                Some(found) => links.send(&found, message),
                                None => Err(PeerSendError::NoLink(to.clone())),
                            }
                        }
                        other => other,
                    },
                };
                if let Err(e) = sent {
                    // The core's own bounds (a candidate's silence, the link's loss) take it
                    // from here.
                    tracing::warn!(server = %to, message = name, error = %e,
                        "a message to another server not sent");
                }
            }
            Output::FindDestination { transition, node, seats, asked } => {
                match &self.effects.travels {
                    Some(travels) => travels.find(transition, node, seats, asked.len()),
                    // In no fleet: no server hosts the node (the start refuses a remote node
                    // then; an operator's travel to one can still ask).
                    None => made_up.push(Input::DestinationFound { transition, server: None }),
                }
            }
            Output::SaveHandoff { save, ticket } => {
                let player = save.player.clone();
                if let Err(e) =
                    self.effects.store.submit(StoreRequest::SaveHandoff { save, ticket })
                {
                    tracing::error!(%player, error = %e, "handoff save not submitted: the store worker is gone");
                    made_up.push(Input::HandoffSaved { player, ticket, version: None });
                }
            }
            Output::Handover { side, save, ticket } => {
                let player = save.player.clone();
                if let Err(e) = self.effects.store.submit(StoreRequest::Handover { save, ticket }) {
                    tracing::error!(%player, side = side.as_str(), error = %e,
                        "claim, recall or take not submitted: the store worker is gone");
                    let outcome = HandoverOutcome::Failed;
                    made_up.push(Input::HandoverDecided { player, ticket, outcome });
                }
            }
            Output::TravelTo {
                connection,
                player,
                transition,
                node,
                server,
                version,
                generation,
                valid,
            } => {
                let sending = Sending {
                    player,
                    transition,
                    node,
                    server: server.clone(),
                    version,
                    generation,
                    valid,
                };
                match self.effects.travels.as_ref().and_then(|t| t.travel_to(sending)) {
                    Some(message) => self.send(connection, &message),
                    // The core names only servers this one found: its seat passes its hold
                    // unredeemed, and the player is recalled (docs/spec/travel.md V16).
                    None => tracing::warn!(connection = connection.0, %server,
                        "no TravelTo sent: its destination is no server a travel found"),
                }
            }
        }
    }

    /// Hands every connection's frames carried since the last flush to its writer, one write
    /// each, with the changes it is owed when one a client waits on came; then, once the
    /// replication deadline has come (at once with a zero interval), the
    /// waiting replicated changes to every welcomed connection. The deadline is set here, to
    /// `now` plus the interval, when changes wait and none is set. A connection whose queue is
    /// full is a slow consumer.
    pub(super) fn flush(&mut self, now: Instant) {
        if let Some(end) = self.owed_now.take() {
            // After the frames each connection was carried before the change, which its pending
            // write holds; a frame carried after it took the change along already.
            let mut frames = FramesFrom::until(&self.batch, end, self.effects.max_frame_len);
            for (connection, peer) in &mut self.peers {
                if peer.catch_up(&mut frames) {
                    self.pending.push(*connection);
                }
            }
        }
        for connection in self.pending.drain(..) {
            // Gone since (closed or disconnected): nothing to flush.
            let Some(peer) = self.peers.get_mut(&connection) else { continue };
            if !peer.flush() {
                self.slow.push(connection);
            }
        }
        if self.batch.is_empty() {
            return;
        }
        let effects = &self.effects;
        let players = self.peers.len();
        let due = *self.batch_due.get_or_insert_with(|| {
            now + replication_interval_at(
                effects.replication_interval,
                effects.replication_writes_per_s,
                players,
            )
        });
        if due <= now {
            self.send_batch();
        }
    }

    /// Sends every welcomed connection the replicated changes it is owed, the same frames,
    /// encoded once, to every connection owed the same ones; then the changes join the mirror.
    fn send_batch(&mut self) {
        let mut frames = FramesFrom::new(&self.batch, self.effects.max_frame_len);
        for (connection, peer) in &mut self.peers {
            let first = std::mem::take(&mut peer.given);
            if !peer.welcomed || first >= frames.len() {
                continue;
            }
            if let Some(shared) = frames.from(first)
                && !peer.write_shared(&shared)
            {
                self.slow.push(*connection);
            }
        }
        self.batch.clear();
        self.batch_due = None;
        for change in self.changes.drain(..) {
            self.mirror.apply(&change);
        }
    }

    /// Carries one message for one connection, after the changes it is owed. A `Welcome` is
    /// followed by the world as of the last batch (docs/protocol.md 4.5); the connection is then
    /// owed every change of the batch in flight.
    fn send(&mut self, connection: ConnectionId, message: &ServerMessage) {
        let max_frame_len = self.effects.max_frame_len;
        let Some(peer) = self.peers.get_mut(&connection) else { return };
        let Some(frame) = encode(message, max_frame_len) else { return };
        let mut list = peer.catch_up(&mut FramesFrom::new(&self.batch, max_frame_len));
        list |= peer.append(&frame, 1);
        if matches!(message, ServerMessage::Welcome { .. }) && !peer.welcomed {
            peer.welcomed = true;
            peer.given = 0;
            let world = self.mirror.frames(max_frame_len);
            if world.count > 0 && !peer.write_shared(&world) {
                self.slow.push(connection);
            }
        }
        if list {
            self.pending.push(connection);
        }
    }

    /// Queues a replicated change: for the replication deadline, or, for a change a client
    /// waits on (a death, a teleport), for the end of this drain.
    fn replicate(&mut self, change: ReplicatedChange) {
        if let Err(e) = self.batch.push(&change) {
            // Our own message did not encode: a bug, reported loudly, never a crash.
            tracing::error!(error = %e, "replicated change does not encode");
            return;
        }
        if change.is_urgent() {
            self.owed_now = Some(self.batch.len());
        }
        self.changes.push(change);
    }

    /// Appends `message` for every welcomed connection, after the changes each is owed.
    fn broadcast_now(&mut self, message: &ServerMessage) {
        let max_frame_len = self.effects.max_frame_len;
        let Some(frame) = encode(message, max_frame_len) else { return };
        let mut frames = FramesFrom::new(&self.batch, max_frame_len);
        for (connection, peer) in self.peers.iter_mut().filter(|(_, p)| p.welcomed) {
            let mut list = peer.catch_up(&mut frames);
            list |= peer.append(&frame, 1);
            if list {
                self.pending.push(*connection);
            }
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

    /// The peer links, in a fleet.
    pub(super) fn links(&mut self) -> Option<&mut PeerLinks> {
        self.effects.links.as_mut()
    }

    /// What the game task needs to move players to other servers, in a fleet.
    pub(super) fn travels(&mut self) -> Option<&mut Travels> {
        self.effects.travels.as_mut()
    }

    /// What the network driver reports of a link another server opened, to the peer links; a
    /// server in no fleet never offered one, and closes one that comes anyway.
    pub(super) fn handle_peer_connection(&mut self, event: PeerConnectionEvent) {
        match (&mut self.effects.links, event) {
            (Some(links), event) => links.handle_connection(event),
            (None, PeerConnectionEvent::Opened { outbound, .. }) => {
                outbound.close_now(CloseCode::ProtocolViolation);
            }
            (None, PeerConnectionEvent::Message { .. } | PeerConnectionEvent::Gone { .. }) => {}
        }
    }

    /// Closes every peer link with `ShuttingDown`, and every connection after what is queued
    /// for it.
    pub(super) fn close_all(&mut self) {
        if let Some(links) = &mut self.effects.links {
            links.close_all();
        }
        let mut frames = FramesFrom::new(&self.batch, self.effects.max_frame_len);
        for (_, mut peer) in self.peers.drain() {
            let code = CloseCode::ShuttingDown;
            peer.catch_up(&mut frames);
            if !peer.flush() || peer.outbound.try_close(code).is_err() {
                peer.outbound.close_now(code);
            }
        }
    }
}

/// The replication interval with `players` logged-in connections (docs/protocol.md 4.4), each
/// counted from its login, before its `Welcome` too: `configured`,
/// stretched to `players / writes_per_s` seconds where that is longer, at most a second. Each
/// interval's end writes to every connection, so a fixed interval makes the writes per second
/// grow with the players; past `writes_per_s` they would crowd out the logins and phases
/// sharing the network thread (docs/performance.md). A zero `configured` (nothing waits) or
/// `writes_per_s` (no stretch) is kept as it is.
pub(crate) fn replication_interval_at(
    configured: Duration,
    writes_per_s: u32,
    players: usize,
) -> Duration {
    if configured.is_zero() || writes_per_s == 0 {
        return configured;
    }
    // Capped before it becomes a `Duration`, which no count of players could overflow then.
    let seconds =
        (players as f64 / f64::from(writes_per_s)).min(MAX_REPLICATION_INTERVAL.as_secs_f64());
    configured.max(Duration::from_secs_f64(seconds))
}

/// Asks the writer to close after the frames queued before (the driver forces the close if the
/// peer stopped reading and they never go); closes at once if the queue cannot take the request.
fn close_after_queued(peer: &Peer, code: CloseCode) {
    if peer.outbound.try_close(code).is_err() {
        peer.outbound.close_now(code);
    }
}

/// The `Replicated` frames of `batch` from change `first` to `end`; `None`, reported loudly, if
/// a change alone does not fit a frame (a bug: none comes near the smallest limit).
fn batch_frames(
    batch: &ReplicationBatch,
    first: usize,
    end: usize,
    max_frame_len: usize,
) -> Option<Frames> {
    match batch.frames_until(first, end, max_frame_len) {
        Ok(frames) => Some(frames),
        Err(e) => {
            tracing::error!(error = %e, "replicated changes do not encode");
            None
        }
    }
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

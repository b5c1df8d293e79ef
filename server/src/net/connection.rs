//! One QUIC connection in the driver, from its handshake to its close.
//!
//! 1. The handshake, bounded by the handshake timeout counted from accept.
//! 2. The client's bidirectional stream and its `Hello`, by the hello deadline counted from the
//!    handshake's end (separate budgets: a handshake slowed by loss does not eat the `Hello`'s);
//!    the protocol version and the session token are checked, and a refusal is answered with
//!    `Rejected` and a close code.
//! 3. Logged in: the game task hears of it with a [`SendQueue`] for this connection's frames,
//!    then every decoded message, then the disconnect ([`ConnectionEvent`]s, in that order);
//!    the frames it queues are written to the stream as fast as the client takes them.
//! 4. A close the game asks for writes `Closing` with its code after what was queued, finishes
//!    the stream and closes once the client has it (bounded); one asked for at once closes
//!    at once.
//!
//! Nothing here waits or reads the monotonic clock: the driver calls in with `now` when a
//! datagram, a timer or the game's doorbell concerns this connection, and asks for the next
//! deadline (a session token's expiry alone is checked against the system clock, as its `exp`
//! is wall-clock time). A frame that does not decode closes this connection only, with
//! `ProtocolViolation` and the decoder's message as the close reason.
//!
//! The game hears a logged-in connection's `Login`, then every message the client sent, then
//! one `Disconnected`, however the connection ends: a client that closes it, times out or stops
//! reading has what it sent before handed over first.
//!
//! How a connection ends is one state, [`Ending`] (open, closing, the client stopped reading,
//! lost with its departure unread, ended); every close at once goes through
//! [`Connection::end_as`] with its cause ([`Exit`]).
//!
//! A connection whose handshake agreed on the peer link's ALPN ([`Speaks::Peer`]: another
//! server of the fleet, docs/spec/travel.md V14) takes the same budgets (the handshake's, then
//! the first message's by the hello deadline, its pending slot until the game task takes it),
//! but never the `Hello` path: its first message goes up with the connection's TLS exporter
//! value as [`PeerConnectionEvent::Opened`], whatever it is (the fleet's peer module checks it,
//! with a key this module never holds), and nothing more is read until the game task's first
//! write, its `Welcome`. It spends no message budget (a peer proved the fleet key; the game's
//! queue holds it back), and its closes write no `Closing` frame (a peer reads `PeerMessage`s).

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use gatehouse_protocol::ServerId;
use gatehouse_protocol::fleet::{PEER_ALPN, PEER_EXPORTER_LABEL, PEER_EXPORTER_LEN, PeerMessage};
use gatehouse_protocol::ticket::{TicketCheck, TicketClaims};
use gatehouse_protocol::token::{TokenCheck, TokenError, TokenKind};
use gatehouse_protocol::{
    ClientMessage, CloseCode, FrameDecoder, PROTOCOL_VERSION, RejectReason, ServerMessage,
};
use quinn_proto::{ConnectionError, Dir, Event, ReadError, StreamEvent, StreamId, VarInt};

use super::admission::PendingSlot;
use super::event::{
    ConnectionEvent, Doorbell, Outbound, PeerConnectionEvent, QueueKey, SendQueueRx, send_queue,
};
use super::metrics::QUIC_SAMPLE_EVERY;
use super::network::Marks;
use super::{CloseSide, NetMetrics, QuicSample};
use crate::fields::PeerText;
use crate::game::{ConnectionId, Departure};
use crate::rate::{Bucket, Rate};

/// Largest chunk read from the stream at once, bytes.
const READ_CHUNK: usize = 16 * 1024;

/// How long a closing connection waits for the peer to acknowledge the last frames.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// How long a close the game queued may wait behind the frames queued before it: a client
/// that stopped reading grants no flow-control credit, and is then closed without them.
const FORCED_CLOSE_AFTER: Duration = Duration::from_secs(2);

/// Bound on the `Closing` frame's body, bytes: a code and a short reason.
const CLOSING_FRAME_LEN: usize = 1024;

/// What every connection needs from the server's configuration; shared.
#[derive(Debug)]
pub(super) struct Settings {
    /// Checks the tokens of `Hello`s: session tokens, and in a fleet travel tickets.
    pub(super) tokens: HelloCheck,
    /// `network.max_frame_len`, bytes.
    pub(super) max_frame_len: usize,
    /// The bound, from accept, on the QUIC handshake.
    pub(super) handshake_timeout: Duration,
    /// The bound, from the handshake's end, on the stream and the `Hello`.
    pub(super) hello_timeout: Duration,
    /// `network.send_queue_frames`: the cap of each logged-in connection's [`super::SendQueue`].
    pub(super) send_queue_frames: usize,
    /// `network.message_burst` and `message_rate_per_s`: what a logged-in client may send.
    pub(super) message_budget: Rate,
    /// Closes and refused logins, counted for `/metrics`.
    pub(super) metrics: NetMetrics,
}

/// The events bound for the game task that its queue has not taken yet. Connections stop
/// reading while it is full, so a flood of messages waits in the QUIC flow-control window of
/// the client that sent it, not in memory. A login waits here with its pending slot, so the
/// pending caps bound the logins the game has not taken.
#[derive(Debug)]
pub(super) struct Outbox {
    events: VecDeque<(ConnectionEvent, Option<PendingSlot>)>,
    cap: usize,
}

impl Outbox {
    /// An outbox that holds at most about `cap` events (at least 1).
    pub(super) fn new(cap: usize) -> Outbox {
        Outbox { events: VecDeque::new(), cap: cap.max(1) }
    }

    /// Whether a connection may read another message into it.
    pub(super) fn has_room(&self) -> bool {
        self.events.len() < self.cap
    }

    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Queues `event` (past the cap too: a disconnect must never be lost).
    pub(super) fn push(&mut self, event: ConnectionEvent) {
        self.events.push_back((event, None));
    }

    /// Queues a login with the pending slot it holds until the game's queue takes it (past the
    /// cap too: a `Hello` that came in time must not time out waiting for room).
    pub(super) fn push_login(&mut self, event: ConnectionEvent, slot: PendingSlot) {
        // Logged in: no longer a pending connection a newcomer may evict, though its slot
        // still counts until the game takes the login.
        slot.unbind();
        self.events.push_back((event, Some(slot)));
    }

    /// The oldest event, to send; a login's slot is freed.
    pub(super) fn pop(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front().map(|(event, _slot)| event)
    }
}

/// What a call into a connection may use beside the connection itself.
pub(super) struct Context<'a> {
    /// The driver's clock reading for this call.
    pub(super) now: Instant,
    /// The server's settings.
    pub(super) settings: &'a Settings,
    /// Where events for the game go.
    pub(super) outbox: &'a mut Outbox,
    /// The doorbell a logged-in connection's queue rings.
    pub(super) doorbell: &'a Doorbell,
    /// The server is draining: no login is accepted.
    pub(super) draining: bool,
}

/// Where a connection is in its login. The handshake and the `Hello` each have a deadline,
/// held by their own phase: the others have none.
#[derive(Debug)]
enum Login {
    /// The QUIC handshake is under way, due by `by` (the handshake timeout from accept).
    Handshaking { slot: PendingSlot, by: Instant },
    /// Waiting for the stream and the `Hello`, due by `by` (the hello timeout from the
    /// handshake's end); the slot is held (dropping it frees it).
    AwaitingHello { slot: PendingSlot, by: Instant },
    /// The `Hello` was refused: `Rejected` is on its way and the connection closes after it.
    Refused,
    /// The game knows the player. `queue` is the writer's end of its send queue until the
    /// writer is gone; `reported` once the game heard the disconnect.
    LoggedIn { queue: Option<SendQueueRx>, reported: bool },
}

impl Login {
    /// When the handshake or the `Hello` is due, while one is awaited.
    fn deadline(&self) -> Option<Instant> {
        match self {
            Login::Handshaking { by, .. } | Login::AwaitingHello { by, .. } => Some(*by),
            Login::Refused | Login::LoggedIn { .. } => None,
        }
    }
}

/// How a connection ends: the one state that says whether it is open, on its way out, or over.
/// Each way out is a transition of it, made in one place each: [`Ending::set_stage`] and
/// [`Ending::force_by`] start a close and move it along (in `write`, `take_turn` and
/// `on_hello`), [`Connection::writer_gone`] goes to `Stopped`, [`Connection::end_as`] to `Lost`
/// or `Ended`, and [`Connection::report`] from `Lost` to `Ended`.
///
/// ```text
/// Open ─┬─ a close queued, a Hello refused ─> Closing ─ acknowledged, or at `by` ─> Ended
///       ├─ the client stopped reading ──────> Stopped ─ what it sent is read ────> Ended
///       └─ lost while logged in ────────────> Lost ──── what it sent is read ────> Ended
/// ```
///
/// A close not yet taken from the game's queue gives way to `Stopped`; one taken is carried
/// out at once when the client stops reading. Any state but `Lost` and `Ended` may also end at
/// once: a close the game asks for now, a bad frame, the message budget, eviction, shutdown,
/// a loss.
#[derive(Debug)]
enum Ending {
    /// Open: no close under way.
    Open,
    /// A close the server carries out behind what it is writing.
    Closing(Close),
    /// The client stopped reading the stream (STOP_SENDING, or a write refused for another
    /// reason than flow control): nothing more reaches it, and the connection closes with
    /// `ProtocolViolation` once what the client sent before is read
    /// ([`Connection::end_if_done`]). A close begun after it (a `Hello` read in the same step,
    /// then refused, or logged in and closed by the game) is kept, and carried out if it gets
    /// there first.
    Stopped(Option<Close>),
    /// Lost (the client closed it, or it timed out) while logged in: nothing more is sent or
    /// counted; the game hears this departure once what the client sent before is read
    /// ([`Connection::read`]).
    Lost(Departure),
    /// Closed by either side, or lost and reported: it only waits for QUIC to drain.
    Ended,
}

/// A close the server carries out behind what it is writing: how far it has come, and when it
/// is carried out whatever is still unwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Close {
    stage: Stage,
    /// Closed at this point whatever is still being written: [`FORCED_CLOSE_AFTER`] from the
    /// game's ring, or [`CLOSE_FLUSH`] from a refusal or the stream's finish. `None` for a close
    /// taken from the queue before its ring was.
    by: Option<Instant>,
}

/// How far a close has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The game queued a close, or dropped its queue, behind frames not yet written: forced at
    /// the close's `by` if the client does not take them.
    Queued,
    /// `Closing` goes out once what is being written is.
    Write(CloseCode),
    /// `Closing` is being written; the stream finishes after it.
    Finish(CloseCode),
    /// The stream is finished: the connection closes once the peer has every byte, or at the
    /// close's `by`.
    Flushing(CloseCode),
}

impl Stage {
    /// The close code, once the close is taken from the queue.
    fn code(self) -> Option<CloseCode> {
        match self {
            Stage::Queued => None,
            Stage::Write(code) | Stage::Finish(code) | Stage::Flushing(code) => Some(code),
        }
    }
}

impl Ending {
    /// Whether it is closed (by either side) or lost: nothing more is written or counted.
    fn is_over(&self) -> bool {
        matches!(self, Ending::Lost(_) | Ending::Ended)
    }

    /// The close under way, if one is.
    fn close(&self) -> Option<Close> {
        match self {
            Ending::Closing(close) | Ending::Stopped(Some(close)) => Some(*close),
            Ending::Open | Ending::Stopped(None) | Ending::Lost(_) | Ending::Ended => None,
        }
    }

    /// The stage of the close under way, if one is.
    fn stage(&self) -> Option<Stage> {
        self.close().map(|close| close.stage)
    }

    /// The code of the close under way, once it is taken from the queue.
    fn code(&self) -> Option<CloseCode> {
        self.stage().and_then(Stage::code)
    }

    /// The close under way, to change; one is begun (with no deadline) if none is. Nothing
    /// for a connection that is over.
    fn close_or_begin(&mut self, stage: Stage) -> Option<&mut Close> {
        if let Ending::Open = self {
            *self = Ending::Closing(Close { stage, by: None });
        }
        match self {
            Ending::Stopped(close) => Some(close.get_or_insert(Close { stage, by: None })),
            Ending::Closing(close) => Some(close),
            Ending::Open | Ending::Lost(_) | Ending::Ended => None,
        }
    }

    /// The close under way reaches `stage` (begun there if none was).
    fn set_stage(&mut self, stage: Stage) {
        if let Some(close) = self.close_or_begin(stage) {
            close.stage = stage;
        }
    }

    /// The close under way is carried out by `at` at the latest; a close the game queued is
    /// begun if none was.
    fn force_by(&mut self, at: Instant) {
        if let Some(close) = self.close_or_begin(Stage::Queued) {
            close.by = Some(close.by.map_or(at, |by| by.min(at)));
        }
    }

    /// The departure a lost connection still owes the game, taken: it is over then.
    fn take_departure(&mut self) -> Option<Departure> {
        match std::mem::replace(self, Ending::Ended) {
            Ending::Lost(departure) => Some(departure),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// How a connection ends at once: the cause given to [`Connection::end_as`].
#[derive(Debug)]
enum Exit<'a> {
    /// The server closes it with one of its codes and a reason (cut to fit a packet), counted
    /// in `gatehouse_connection_closes_total`.
    Close(CloseCode, &'a str),
    /// The endpoint is shutting: closed with `code` and its reason, uncounted (the connections
    /// the game closed are closed already).
    Shut(CloseCode),
    /// Closed as an abandoned QUIC connection is (code 0, no reason), uncounted; the game hears
    /// nothing (it never heard of the connection, or heard its end).
    Abandon,
    /// QUIC lost it: the client closed it, or it timed out. Counted by its reason.
    Lost(ConnectionError),
}

impl Exit<'_> {
    /// A close with `code` and the code's own reason.
    fn code(code: CloseCode) -> Exit<'static> {
        Exit::Close(code, code.reason())
    }
}

/// Reading the client's stream: what is buffered, and whether more may come.
#[derive(Debug)]
struct Reader {
    decoder: FrameDecoder,
    /// Reading stopped because the game's queue was full; the driver resumes it.
    paused: bool,
    /// The client finished its stream (or reset it): nothing more to read.
    done: bool,
    /// The stream may hold bytes not read yet: it opened, or a frame for it came
    /// (`StreamEvent::Readable`), since the last read that found none. A connection is driven
    /// for its timers and writes far more often than its client sends, and a read costs quinn
    /// a lookup and a re-insertion of the stream's state.
    readable: bool,
}

/// Which protocol a connection speaks, from the ALPN its handshake agreed on.
#[derive(Debug)]
enum Speaks {
    /// `gatehouse/1`: a player's client (and every connection until its handshake ends).
    Client,
    /// `gatehouse-fleet/1`: another server's peer link (boxed: a client's connection holds a
    /// pointer's worth of it, not the link's bytes).
    Peer(Box<PeerLink>),
}

/// What a peer link's connection keeps beside a client's.
#[derive(Debug)]
struct PeerLink {
    /// The connection's TLS exporter value, which the proofs sign.
    exporter: [u8; PEER_EXPORTER_LEN],
    /// The name the dialler asked for (SNI), taken when the first message goes up.
    server_name: Option<String>,
    /// The game task's first write (its `Welcome`) was taken: reading goes on.
    welcomed: bool,
}

/// One connection, owned by the driver. The QUIC state machine is boxed with it: 6 KiB that a
/// map of connections should not move around as it grows.
#[derive(Debug)]
pub(super) struct Connection {
    /// The QUIC state machine.
    pub(super) quic: quinn_proto::Connection,
    /// The driver's slot and the game's id for it ([`QueueKey::connection`]).
    key: QueueKey,
    /// `connection` with its id and the client's address: every log line of this connection.
    span: tracing::Span,
    login: Login,
    /// What it speaks: a client's protocol, or another server's peer link.
    speaks: Speaks,
    /// The client's bidirectional stream, once it opened it.
    stream: Option<StreamId>,
    reader: Reader,
    /// The messages it may still send ([`Settings::message_budget`]).
    budget: Bucket,
    /// Taken from the queue and not yet all accepted by the stream, in order (see [`batch`]).
    writing: Vec<Bytes>,
    ending: Ending,
    /// quinn's path statistics as last recorded in the metrics, and when they are next due
    /// ([`Connection::sample_quic`]).
    quic_recorded: QuicSample,
    quic_sample_due: Instant,
    /// The driver's bookkeeping; nothing here reads or writes it.
    pub(super) marks: Marks,
}

impl Connection {
    /// A connection just accepted at `now` from `remote`, holding a pending slot, known to the
    /// driver as `slot` and to the game as `id`.
    pub(super) fn new(
        quic: quinn_proto::Connection,
        id: ConnectionId,
        slot: usize,
        pending: PendingSlot,
        now: Instant,
        settings: &Settings,
    ) -> Connection {
        let span =
            tracing::info_span!("connection", connection = id.0, remote = %quic.remote_address());
        Connection {
            quic,
            key: QueueKey { slot, connection: id },
            span,
            login: Login::Handshaking { slot: pending, by: now + settings.handshake_timeout },
            speaks: Speaks::Client,
            stream: None,
            reader: Reader {
                decoder: FrameDecoder::new(settings.max_frame_len),
                paused: false,
                done: false,
                readable: false,
            },
            budget: Bucket::full(now),
            writing: Vec::new(),
            ending: Ending::Open,
            quic_recorded: QuicSample::default(),
            quic_sample_due: now,
            marks: Marks::default(),
        }
    }

    /// The game's id for it.
    pub(super) fn id(&self) -> ConnectionId {
        self.key.connection
    }

    /// Whether it is closed (by either side) or lost: it only waits to drain, and to hand the
    /// game what a lost client sent ([`Connection::is_done`]).
    pub(super) fn is_ended(&self) -> bool {
        self.ending.is_over()
    }

    /// Whether the driver may forget it once QUIC has drained it: nothing is left for the game.
    pub(super) fn is_done(&self) -> bool {
        matches!(self.ending, Ending::Ended)
    }

    /// Whether it is still logging in: in its handshake, or waiting for its `Hello`.
    pub(super) fn is_logging_in(&self) -> bool {
        matches!(self.login, Login::Handshaking { .. } | Login::AwaitingHello { .. })
    }

    /// Whether reading waits for room in the game's queue.
    pub(super) fn is_read_paused(&self) -> bool {
        self.reader.paused
    }

    /// Whether a chunk is still being written (the stream would not take all of it).
    #[cfg(test)]
    pub(super) fn is_writing(&self) -> bool {
        !self.writing.is_empty()
    }

    /// The earliest of the QUIC timers and this connection's own deadlines (the handshake's or
    /// the `Hello`'s, a close's).
    pub(super) fn next_timeout(&mut self) -> Option<Instant> {
        let close_by = self.ending.close().and_then(|close| close.by);
        [self.quic.poll_timeout(), self.login.deadline(), close_by].into_iter().flatten().min()
    }

    /// Runs what is due at `ctx.now`: the QUIC timers, the login deadline, a close that waited
    /// long enough.
    pub(super) fn handle_timeout(&mut self, ctx: &mut Context<'_>) {
        let now = ctx.now;
        let _entered = self.span.clone().entered();
        if self.quic.poll_timeout().is_some_and(|at| at <= now) {
            self.quic.handle_timeout(now);
        }
        if self.login.deadline().is_some_and(|at| at <= now) {
            match self.login {
                Login::Handshaking { .. } => {
                    tracing::debug!("handshake not finished within the handshake timeout");
                    self.end_as(ctx, Exit::Abandon);
                }
                Login::AwaitingHello { .. } => {
                    let reason = "no Hello within the hello timeout";
                    tracing::debug!("{reason}: closing");
                    self.end_as(ctx, Exit::Close(CloseCode::HelloTimeout, reason));
                }
                Login::Refused | Login::LoggedIn { .. } => {}
            }
        }
        if let Some(close) = self.ending.close()
            && close.by.is_some_and(|at| at <= now)
        {
            match close.stage.code() {
                Some(code) => self.end_as(ctx, Exit::code(code)),
                // Forced before the close itself was taken from the queue, or the game dropped
                // the queue and what it queued last is still not written.
                None => match self.queued_close_code() {
                    Some(code) => self.end_as(ctx, Exit::code(code)),
                    None => self.close_dropped(ctx),
                },
            }
        }
        self.step(ctx);
    }

    /// Takes what QUIC has for the application (the handshake's end, the stream, a loss), then
    /// reads and writes what can be, then ends the connection if nothing more will come of it
    /// ([`Connection::end_if_done`]).
    pub(super) fn step(&mut self, ctx: &mut Context<'_>) {
        let _entered = self.span.clone().entered();
        while let Some(event) = self.quic.poll() {
            self.on_event(ctx, event);
        }
        self.sample_quic(ctx);
        let awaited_welcome = self.awaits_welcome();
        self.read(ctx);
        self.write(ctx);
        if awaited_welcome && !self.awaits_welcome() {
            // The peer link's Welcome was taken just now: what its dialler sent since is read.
            self.read(ctx);
        }
        self.end_if_done(ctx);
    }

    /// Whether this is a peer link whose first message went up and whose `Welcome` the game
    /// task has not written yet: nothing more is read from it meanwhile.
    fn awaits_welcome(&self) -> bool {
        matches!(&self.speaks, Speaks::Peer(link) if !link.welcomed)
            && matches!(self.login, Login::LoggedIn { .. })
    }

    /// Who is at the other end, for the words of a departure.
    fn counterpart(&self) -> &'static str {
        match self.speaks {
            Speaks::Client => "client",
            Speaks::Peer(_) => "peer",
        }
    }

    /// The doorbell rang: takes the game's changes (a close at once, a queued close, its end
    /// gone) and writes what it queued.
    pub(super) fn take_turn(&mut self, ctx: &mut Context<'_>) {
        let _entered = self.span.clone().entered();
        let Login::LoggedIn { queue: Some(queue), .. } = &mut self.login else {
            return;
        };
        let turn = queue.take_turn();
        if let Some(code) = turn.close_now {
            self.end_as(ctx, Exit::code(code));
            return;
        }
        // A client that does not read holds a queued close, or what the game queued before it
        // dropped its end, no longer than this.
        if turn.close_queued || turn.sender_gone {
            self.ending.force_by(ctx.now + FORCED_CLOSE_AFTER);
        }
        self.step(ctx);
    }

    /// The server started draining: a connection that has not logged in (still in its
    /// handshake, or waiting for its `Hello`) closes now with `ShuttingDown`, so none holds the
    /// drain; the game closes the logged-in ones.
    pub(super) fn drain(&mut self, ctx: &mut Context<'_>) {
        let _entered = self.span.clone().entered();
        if let Login::Handshaking { .. } | Login::AwaitingHello { .. } = self.login {
            self.end_as(ctx, Exit::code(CloseCode::ShuttingDown));
        }
    }

    /// The endpoint is closing: closes with `code` whatever the connection is doing, uncounted
    /// (the connections the game closed are closed already).
    pub(super) fn shut(&mut self, ctx: &mut Context<'_>, code: CloseCode) {
        self.end_as(ctx, Exit::Shut(code));
    }

    /// Records quinn's path statistics in the metrics (docs/operations.md, "Metrics"): once the
    /// handshake is over and while the connection is open, at most every [`QUIC_SAMPLE_EVERY`]
    /// (the first time at the first step after the handshake): the round-trip time observed, the
    /// packet counts added since the last record. O(1), and a comparison when not due.
    fn sample_quic(&mut self, ctx: &Context<'_>) {
        if ctx.now < self.quic_sample_due || self.ending.is_over() {
            return;
        }
        if !matches!(self.login, Login::AwaitingHello { .. } | Login::LoggedIn { .. }) {
            return;
        }
        self.quic_sample_due = ctx.now + QUIC_SAMPLE_EVERY;
        let now = QuicSample::of(&self.quic.stats());
        ctx.settings.metrics.record_quic(&self.quic_recorded, &now, true);
        self.quic_recorded = now;
    }

    /// The driver forgets the connection: the packet counts since the last record are added
    /// (the round-trip time is not observed again), so every packet it sent is counted.
    pub(super) fn record_quic_end(&mut self, metrics: &NetMetrics) {
        let now = QuicSample::of(&self.quic.stats());
        metrics.record_quic(&self.quic_recorded, &now, false);
        self.quic_recorded = now;
    }

    /// Reading had paused for room in the game's queue; there is room again.
    pub(super) fn resume_reading(&mut self, ctx: &mut Context<'_>) {
        self.reader.paused = false;
        self.step(ctx);
    }

    fn on_event(&mut self, ctx: &mut Context<'_>, event: Event) {
        match event {
            Event::Connected => {
                // A draining server accepts no connection, and closed those in their handshake.
                if let Login::Handshaking { slot, .. } =
                    std::mem::replace(&mut self.login, Login::Refused)
                {
                    let by = ctx.now + ctx.settings.hello_timeout;
                    self.login = Login::AwaitingHello { slot, by };
                    self.learn_protocol(ctx);
                }
            }
            Event::ConnectionLost { reason } => self.end_as(ctx, Exit::Lost(reason)),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                while let Some(id) = self.quic.streams().accept(Dir::Bi) {
                    // One bidirectional stream is allowed (the transport parameters).
                    self.stream.get_or_insert(id);
                    self.reader.readable = true;
                }
            }
            Event::Stream(StreamEvent::Readable { id }) if Some(id) == self.stream => {
                self.reader.readable = true;
            }
            Event::Stream(StreamEvent::Finished { id }) if Some(id) == self.stream => {
                // Every byte written, `Closing` last, is acknowledged.
                if let Some(Stage::Flushing(code)) = self.ending.stage() {
                    self.end_as(ctx, Exit::code(code));
                }
            }
            Event::Stream(StreamEvent::Stopped { id, .. }) if Some(id) == self.stream => {
                self.writer_gone(ctx);
            }
            // Writable: `step` writes after the events in any case.
            Event::Stream(_)
            | Event::HandshakeDataReady
            | Event::DatagramReceived
            | Event::DatagramsUnblocked => {}
        }
    }

    /// At the handshake's end: a connection that agreed on the peer link's ALPN speaks it from
    /// now on, with the connection's TLS exporter value kept for the proofs. One whose exporter
    /// cannot be read (never with TLS 1.3) is dropped.
    fn learn_protocol(&mut self, ctx: &mut Context<'_>) {
        let Some(data) =
            self.quic.crypto_session().handshake_data().and_then(|data| {
                data.downcast::<quinn_proto::crypto::rustls::HandshakeData>().ok()
            })
        else {
            return;
        };
        if data.protocol.as_deref() != Some(PEER_ALPN) {
            return;
        }
        let mut exporter = [0; PEER_EXPORTER_LEN];
        let exported = self.quic.crypto_session().export_keying_material(
            &mut exporter,
            PEER_EXPORTER_LABEL.as_bytes(),
            &[],
        );
        if let Err(e) = exported {
            tracing::debug!(error = ?e, "no TLS exporter value for a peer link: dropping it");
            self.end_as(ctx, Exit::Abandon);
            return;
        }
        tracing::debug!("a peer link: another server of the fleet dialled");
        let server_name = data.server_name;
        self.speaks = Speaks::Peer(Box::new(PeerLink { exporter, server_name, welcomed: false }));
    }

    /// Whether what the stream holds still goes to the game: the connection is open, or lost
    /// with its departure still to report.
    fn reads(&self) -> bool {
        !matches!(self.ending, Ending::Ended) && !matches!(self.login, Login::Refused)
    }

    /// Decodes what the stream holds, reading more while the game's queue has room (a logged-in
    /// client's; a `Hello` is read whatever the queue holds). A lost connection's departure is
    /// reported once nothing is left to read.
    fn read(&mut self, ctx: &mut Context<'_>) {
        let Some(id) = self.stream else { return };
        while self.reads() {
            let logged_in = matches!(self.login, Login::LoggedIn { .. });
            if self.awaits_welcome() {
                // Nothing more is read before the Welcome; a link lost meanwhile has nothing
                // more to hand up.
                if let Some(departure) = self.ending.take_departure() {
                    self.report(ctx, departure);
                }
                return;
            }
            if logged_in && !ctx.outbox.has_room() {
                self.reader.paused = true;
                return;
            }
            let decoded = match self.speaks {
                Speaks::Client => self
                    .reader
                    .decoder
                    .next_message::<ClientMessage>()
                    .map(|message| message.map(Incoming::Client)),
                Speaks::Peer(_) => self
                    .reader
                    .decoder
                    .next_message::<PeerMessage>()
                    .map(|message| message.map(Incoming::Peer)),
            };
            match decoded {
                Ok(Some(Incoming::Client(message))) => {
                    self.on_message(ctx, message);
                    continue;
                }
                Ok(Some(Incoming::Peer(message))) => {
                    self.on_peer_message(ctx, message);
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    self.protocol_violation(ctx, &e.to_string());
                    return;
                }
            }
            if self.reader.done {
                self.stream_ended(ctx);
                return;
            }
            if !self.read_chunks(id) {
                // Everything the client sent is read.
                if let Some(departure) = self.ending.take_departure() {
                    self.report(ctx, departure);
                }
                return;
            }
        }
    }

    /// Moves every chunk the stream has into the decoder; false when none came (or none can
    /// have come since the last read found none: [`Reader::readable`]).
    fn read_chunks(&mut self, id: StreamId) -> bool {
        if !std::mem::take(&mut self.reader.readable) {
            return false;
        }
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            self.reader.done = true;
            return true;
        };
        let mut got = false;
        loop {
            match chunks.next(READ_CHUNK) {
                Ok(Some(chunk)) => {
                    self.reader.decoder.extend(&chunk.bytes);
                    got = true;
                }
                Ok(None) | Err(ReadError::Reset(_)) => {
                    self.reader.done = true;
                    got = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
            }
        }
        // Flow-control credit for what was read goes out with the driver's next transmit.
        let _ = chunks.finalize();
        got
    }

    fn on_message(&mut self, ctx: &mut Context<'_>, message: ClientMessage) {
        match &self.login {
            Login::LoggedIn { .. } => {
                // Every message counts, those the game will ignore too: each costs it a step.
                if self.budget.take(ctx.now, ctx.settings.message_budget).is_err() {
                    self.over_budget(ctx);
                    return;
                }
                ctx.outbox.push(ConnectionEvent::Message { connection: self.id(), message })
            }
            Login::AwaitingHello { .. } => self.on_hello(ctx, message),
            Login::Handshaking { .. } | Login::Refused => {}
        }
    }

    /// A peer link's message: its first goes up with the link's exporter value (the game task
    /// checks it), the later ones as they come. A draining server refuses a new link.
    fn on_peer_message(&mut self, ctx: &mut Context<'_>, message: PeerMessage) {
        match &self.login {
            Login::LoggedIn { .. } => {
                let connection = self.id();
                let event = PeerConnectionEvent::Message { connection, message };
                ctx.outbox.push(ConnectionEvent::Peer(event));
            }
            Login::AwaitingHello { .. } if ctx.draining => {
                tracing::debug!("a peer link while draining: closing");
                self.end_as(ctx, Exit::code(CloseCode::ShuttingDown));
            }
            Login::AwaitingHello { .. } => {
                let Speaks::Peer(link) = &mut self.speaks else { return };
                let (exporter, server_name) = (link.exporter, link.server_name.take());
                tracing::debug!(message = message.name(), "a peer link's first message");
                let (outbound, queue) =
                    send_queue(ctx.settings.send_queue_frames, ctx.doorbell.clone(), self.key);
                let login = Login::LoggedIn { queue: Some(queue), reported: false };
                let event = PeerConnectionEvent::Opened {
                    connection: self.id(),
                    exporter,
                    server_name,
                    first: message,
                    outbound,
                    span: self.span.clone(),
                };
                // The slot goes with it until the game task takes it (the pending caps).
                let Login::AwaitingHello { slot, .. } = std::mem::replace(&mut self.login, login)
                else {
                    return;
                };
                ctx.outbox.push_login(ConnectionEvent::Peer(event), slot);
            }
            Login::Handshaking { .. } | Login::Refused => {}
        }
    }

    /// A `Hello` while one is awaited: logged in (the game hears it), or refused with
    /// `Rejected` and a close after it, bounded by [`CLOSE_FLUSH`].
    fn on_hello(&mut self, ctx: &mut Context<'_>, hello: ClientMessage) {
        let checked = check_hello(&ctx.settings.tokens, hello).and_then(|admitted| {
            if ctx.draining {
                Err(Refusal {
                    reason: RejectReason::ShuttingDown,
                    code: CloseCode::ShuttingDown,
                    detail: "the server is shutting down".into(),
                    // The ticket held: the server, not the ticket, refuses it.
                    ticket: false,
                })
            } else {
                Ok(admitted)
            }
        });
        match checked {
            Ok((player, ticket)) => {
                tracing::debug!(%player, "hello accepted");
                let (outbound, queue) =
                    send_queue(ctx.settings.send_queue_frames, ctx.doorbell.clone(), self.key);
                let login = Login::LoggedIn { queue: Some(queue), reported: false };
                let event = ConnectionEvent::Login {
                    connection: self.id(),
                    player,
                    ticket: ticket.map(Box::new),
                    outbound,
                    span: self.span.clone(),
                };
                // The slot goes with the login: the player cap bounds it once the game takes it.
                let Login::AwaitingHello { slot, .. } = std::mem::replace(&mut self.login, login)
                else {
                    unreachable!("a Hello is read only while one is awaited (on_message)");
                };
                ctx.outbox.push_login(event, slot);
            }
            Err(refusal) => {
                let name = refusal.count(&ctx.settings.metrics);
                tracing::info!(reason = %name, detail = %PeerText(&refusal.detail), "hello refused");
                let rejected =
                    ServerMessage::Rejected { reason: refusal.reason, detail: refusal.detail };
                self.login = Login::Refused;
                self.writing =
                    gatehouse_protocol::encode_frame(&rejected, ctx.settings.max_frame_len)
                        .ok()
                        .map(Bytes::from)
                        .into_iter()
                        .collect();
                self.ending.set_stage(Stage::Write(refusal.code));
                self.ending.force_by(ctx.now + CLOSE_FLUSH);
            }
        }
    }

    /// The client finished (or reset) its stream: between frames a lost connection, inside
    /// one a protocol violation.
    fn stream_ended(&mut self, ctx: &mut Context<'_>) {
        if let Err(e) = self.reader.decoder.finish() {
            self.protocol_violation(ctx, &e.to_string());
            return;
        }
        match self.login {
            Login::LoggedIn { reported: false, .. } => {
                let who = self.counterpart();
                let departure = self.ending.take_departure().unwrap_or_else(|| {
                    Departure::lost(format!("the {who} finished its stream without Leave"))
                });
                self.report(ctx, departure);
            }
            Login::AwaitingHello { .. } => {
                tracing::debug!("closed by the client before its Hello");
                self.end_as(ctx, Exit::Abandon);
            }
            Login::Handshaking { .. } | Login::Refused | Login::LoggedIn { .. } => {}
        }
    }

    /// A logged-in client sent more than its message budget: closed with `Abuse`; the game
    /// hears the departure after what it sent within the budget.
    fn over_budget(&mut self, ctx: &mut Context<'_>) {
        let rate = ctx.settings.message_budget;
        let reason = format!(
            "more than {} messages in a row, then one per {} µs (network.message_burst, \
             network.message_rate_per_s)",
            rate.burst,
            rate.interval.as_micros()
        );
        tracing::info!(%reason, "message budget spent; closing this connection");
        self.report(ctx, Departure::closed_because(CloseCode::Abuse, reason.clone()));
        self.end_as(ctx, Exit::Close(CloseCode::Abuse, &reason));
    }

    /// Evicted from a full pending table for a newcomer (docs/security.md, "The front door"):
    /// a connection that has not logged in yet is closed with `ServerFull`; one that logged in
    /// meanwhile holds no slot and stays.
    pub(super) fn evict(&mut self, ctx: &mut Context<'_>) {
        if matches!(self.login, Login::Handshaking { .. } | Login::AwaitingHello { .. }) {
            tracing::debug!("evicted from the full pending table for a newer connection");
            let reason = "evicted: too many connections have not logged in";
            self.end_as(ctx, Exit::Close(CloseCode::ServerFull, reason));
        }
    }

    /// A frame that does not decode, or a client that stopped reading: closed with
    /// `ProtocolViolation` and `error` as the reason, the game hearing it as the departure; a
    /// lost client's last bytes change nothing (its own departure is reported).
    fn protocol_violation(&mut self, ctx: &mut Context<'_>, error: &str) {
        if let Some(departure) = self.ending.take_departure() {
            // The client had left already: its last bytes change nothing.
            tracing::debug!(%error, "a bad frame after the client left");
            self.report(ctx, departure);
            return;
        }
        match self.login {
            Login::LoggedIn { .. } => {
                tracing::info!(%error, "protocol violation; closing this connection")
            }
            _ => tracing::debug!(%error, "a bad frame before the Hello: closing"),
        }
        let departure = Departure::closed_because(CloseCode::ProtocolViolation, error);
        self.report(ctx, departure);
        self.end_as(ctx, Exit::Close(CloseCode::ProtocolViolation, error));
    }

    /// Writes what is being written, then what the game queued, then a close's `Closing`,
    /// as far as the stream takes it; the rest waits for the stream to be writable.
    fn write(&mut self, ctx: &mut Context<'_>) {
        let Some(id) = self.stream else { return };
        while !self.ending.is_over() {
            if !self.writing.is_empty() {
                // quinn keeps each chunk as it is (no copy) and advances a partly written one.
                match self.quic.send_stream(id).write_chunks(&mut self.writing) {
                    Ok(written) => {
                        self.writing.drain(..written.chunks);
                        if self.writing.is_empty() {
                            continue;
                        }
                        return;
                    }
                    Err(quinn_proto::WriteError::Blocked) => return,
                    Err(_) => {
                        self.writer_gone(ctx);
                        return;
                    }
                }
            }
            match self.ending.stage() {
                Some(Stage::Write(code)) if matches!(self.speaks, Speaks::Peer(_)) => {
                    // A peer reads PeerMessages: the close code alone says it.
                    self.ending.set_stage(Stage::Finish(code));
                    continue;
                }
                Some(Stage::Write(code)) => {
                    let closing =
                        ServerMessage::Closing { code: code.code(), reason: code.reason().into() };
                    self.writing = gatehouse_protocol::encode_frame(&closing, CLOSING_FRAME_LEN)
                        .ok()
                        .map(Bytes::from)
                        .into_iter()
                        .collect();
                    self.ending.set_stage(Stage::Finish(code));
                    continue;
                }
                Some(Stage::Finish(code)) => {
                    if self.quic.send_stream(id).finish().is_err() {
                        self.end_as(ctx, Exit::code(code));
                        return;
                    }
                    self.ending.set_stage(Stage::Flushing(code));
                    self.ending.force_by(ctx.now + CLOSE_FLUSH);
                    return;
                }
                Some(Stage::Flushing(_)) => return,
                Some(Stage::Queued) | None => {}
            }
            let Login::LoggedIn { queue: Some(queue), .. } = &mut self.login else { return };
            match queue.try_recv() {
                Some(Outbound::Frames { bytes, .. }) => {
                    if let Speaks::Peer(link) = &mut self.speaks {
                        link.welcomed = true;
                    }
                    let (chunks, close_with) = batch(bytes, queue);
                    self.writing = chunks;
                    if let Some(code) = close_with {
                        self.ending.set_stage(Stage::Write(code));
                    }
                }
                Some(Outbound::Close(code)) => self.ending.set_stage(Stage::Write(code)),
                None => return,
            }
        }
    }

    /// The stream can take nothing more (the client stopped it): the game's writes are refused
    /// from now on; a close under way closes at once, and otherwise the connection is
    /// [`Ending::Stopped`], closed as soon as what the client sent before is read
    /// ([`Connection::end_if_done`]), not at a forced close's deadline: with nothing left to
    /// write, none is needed.
    fn writer_gone(&mut self, ctx: &mut Context<'_>) {
        self.writing.clear();
        if let Login::LoggedIn { queue, .. } = &mut self.login {
            *queue = None;
        }
        match self.ending.code() {
            Some(code) => self.end_as(ctx, Exit::code(code)),
            None if !self.ending.is_over() => self.ending = Ending::Stopped(None),
            None => {}
        }
    }

    /// Whether the game heard this connection's disconnect.
    fn is_reported(&self) -> bool {
        matches!(self.login, Login::LoggedIn { reported: true, .. })
    }

    /// The code of a close waiting in the game's queue, if one does.
    fn queued_close_code(&mut self) -> Option<CloseCode> {
        let Login::LoggedIn { queue: Some(queue), .. } = &mut self.login else { return None };
        std::iter::from_fn(|| queue.try_recv()).find_map(|item| match item {
            Outbound::Close(code) => Some(code),
            Outbound::Frames { .. } => None,
        })
    }

    /// The end of a step: ends a connection nothing more will come of. One whose client
    /// stopped reading closes once what it sent before went up (unless reading waits for room
    /// in the game's queue); a logged-in one whose queue the game dropped closes once what it
    /// queued is written ([`Connection::close_dropped`]).
    fn end_if_done(&mut self, ctx: &mut Context<'_>) {
        if let Ending::Stopped(_) = self.ending
            && !self.reader.paused
        {
            self.protocol_violation(ctx, "the client stopped reading the stream");
        }
        if self.ending.is_over() || self.ending.code().is_some() || !self.writing.is_empty() {
            return;
        }
        let Login::LoggedIn { queue: Some(queue), .. } = &mut self.login else { return };
        if queue.is_finished() {
            // A close asked for at once just before the game let go (a slow consumer, a
            // refused peer link) is carried out with its code, even ahead of its ring.
            match queue.take_turn().close_now {
                Some(code) => self.end_as(ctx, Exit::code(code)),
                None => self.close_dropped(ctx),
            }
        }
    }

    /// The game dropped this connection's queue without a close. If it heard the disconnect,
    /// the connection closes as an unused QUIC connection does (code 0, uncounted). If not, the
    /// game task stopped (a login still in its channel, or the task ended): nobody will write
    /// to it again, so it closes with `ShuttingDown`.
    fn close_dropped(&mut self, ctx: &mut Context<'_>) {
        if self.is_reported() {
            self.end_as(ctx, Exit::Abandon);
        } else {
            tracing::debug!("the game task dropped the connection without a close");
            self.end_as(ctx, Exit::code(CloseCode::ShuttingDown));
        }
    }

    /// Ends the connection now, as `exit` says: the one way into [`Ending::Lost`] and
    /// [`Ending::Ended`]. Nothing for one that is over already. The game hears the disconnect
    /// if it has not (a lost client's once what it sent before is read); the pending slot and
    /// the writer's queue go, nothing is left to write, no deadline of ours is kept.
    fn end_as(&mut self, ctx: &mut Context<'_>, exit: Exit<'_>) {
        if self.ending.is_over() {
            return;
        }
        let departure = match exit {
            Exit::Close(code, reason) => {
                ctx.settings.metrics.count_close(code, CloseSide::Server);
                self.quic.close(ctx.now, VarInt::from_u32(code.code()), reason_bytes(reason));
                Some(Departure::lost("closed by the server"))
            }
            Exit::Shut(code) => {
                let reason = reason_bytes(code.reason());
                self.quic.close(ctx.now, VarInt::from_u32(code.code()), reason);
                Some(Departure::lost("closed by the server"))
            }
            Exit::Abandon => {
                self.quic.close(ctx.now, VarInt::from_u32(0), Bytes::new());
                None
            }
            Exit::Lost(reason) => {
                count_reason(&ctx.settings.metrics, &reason);
                let departure = departure_of(&reason, self.counterpart());
                if let Login::LoggedIn { reported: false, .. } = self.login {
                    // Reported once what the client sent before is read (`read`).
                    self.wind_up();
                    self.ending = Ending::Lost(departure);
                    return;
                }
                Some(departure)
            }
        };
        if let Some(departure) = departure {
            self.report(ctx, departure);
        }
        self.wind_up();
    }

    /// Nothing is left to do but drain: the pending slot and the writer's queue go, nothing is
    /// left to write or read, no deadline of ours is kept.
    fn wind_up(&mut self) {
        self.ending = Ending::Ended;
        self.writing.clear();
        self.reader.paused = false;
        self.login = match std::mem::replace(&mut self.login, Login::Refused) {
            Login::LoggedIn { reported, .. } => Login::LoggedIn { queue: None, reported },
            // Dropping the slot frees it.
            Login::Handshaking { .. } | Login::AwaitingHello { .. } | Login::Refused => {
                Login::Refused
            }
        };
    }

    /// Tells the game a logged-in connection ended, once; a lost one's departure is then no
    /// longer owed (this one replaces it).
    fn report(&mut self, ctx: &mut Context<'_>, departure: Departure) {
        if let Ending::Lost(_) = self.ending {
            self.ending = Ending::Ended;
        }
        if let Login::LoggedIn { reported: reported @ false, .. } = &mut self.login {
            *reported = true;
            let connection = self.key.connection;
            let event = match self.speaks {
                Speaks::Client => ConnectionEvent::Disconnected { connection, departure },
                Speaks::Peer(_) => {
                    ConnectionEvent::Peer(PeerConnectionEvent::Gone { connection, departure })
                }
            };
            ctx.outbox.push(event);
        }
    }
}

/// `reason`, cut to what fits a close frame in one packet.
fn reason_bytes(reason: &str) -> Bytes {
    Bytes::copy_from_slice(&reason.as_bytes()[..reason.len().min(200)])
}

/// Most bytes [`batch`] takes from the queue at once.
const BATCH_BYTES: usize = 64 * 1024;

/// A write at least this long is handed to quinn as it is, never copied into a joined chunk:
/// the carrier writes the same frames to many connections from one buffer (a newcomer's world,
/// a replication interval's batch; docs/protocol.md 4.4, 4.5), and a copy per connection would
/// cost memory per client.
const SHARED_BYTES: usize = 4 * 1024;

/// `first` followed by the writes already waiting in `queue`, in order, as chunks for quinn:
/// runs of short writes joined into one chunk, allocated at its exact size (QUIC keeps it until
/// the peer acknowledges it), and each write of [`SHARED_BYTES`] or more on its own, uncopied.
/// It stops at about [`BATCH_BYTES`] taken, or at a close, which it returns.
fn batch(first: Bytes, queue: &mut SendQueueRx) -> (Vec<Bytes>, Option<CloseCode>) {
    let mut chunks = Vec::new();
    let mut joining: Vec<Bytes> = Vec::new();
    let mut len = first.len();
    let mut close_with = None;
    let mut next = Some(first);
    while let Some(bytes) = next.take() {
        if bytes.len() >= SHARED_BYTES {
            chunks.extend(join(&mut joining));
            chunks.push(bytes);
        } else {
            joining.push(bytes);
        }
        if len >= BATCH_BYTES {
            break;
        }
        match queue.try_recv() {
            Some(Outbound::Frames { bytes, .. }) => {
                len += bytes.len();
                next = Some(bytes);
            }
            Some(Outbound::Close(code)) => close_with = Some(code),
            None => {}
        }
    }
    chunks.extend(join(&mut joining));
    (chunks, close_with)
}

/// The short writes of `joining` as one chunk (a lone one as it is), emptying it.
fn join(joining: &mut Vec<Bytes>) -> Option<Bytes> {
    match joining.len() {
        0 => None,
        1 => joining.pop(),
        _ => {
            let len = joining.iter().map(Bytes::len).sum();
            let mut joined = BytesMut::with_capacity(len);
            for bytes in joining.drain(..) {
                joined.extend_from_slice(&bytes);
            }
            Some(joined.freeze())
        }
    }
}

/// What a `Hello`'s token is checked with (docs/protocol.md 4, "Session tokens";
/// docs/spec/travel.md V8): a session token with `auth.token_key`; a travel ticket, told apart by
/// its `typ` and only in a fleet, with the fleet's key, and good only at this server.
#[derive(Debug, Clone)]
pub struct HelloCheck {
    /// Session tokens.
    pub tokens: TokenCheck,
    /// Travel tickets, and this server's id in the fleet; `None` for a server in no fleet,
    /// which refuses every ticket.
    pub tickets: Option<(TicketCheck, ServerId)>,
}

impl From<TokenCheck> for HelloCheck {
    /// Session tokens only: a server in no fleet.
    fn from(tokens: TokenCheck) -> Self {
        HelloCheck { tokens, tickets: None }
    }
}

/// Who a `Hello` logs in: the player, and the seat its ticket names if it came with one.
type Admitted = (gatehouse_protocol::PlayerId, Option<TicketClaims>);

/// Why a `Hello` was refused.
struct Refusal {
    reason: RejectReason,
    code: CloseCode,
    detail: String,
    /// Whether its token was a travel ticket: the refusal then counts in
    /// `gatehouse_tickets_refused_total` too (docs/operations.md, "Metrics").
    ticket: bool,
}

impl Refusal {
    /// Counts the refusal in `metrics`: in `gatehouse_logins_refused_total` by its reason, and
    /// a ticket's in `gatehouse_tickets_refused_total` as well. Returns the reason's label.
    fn count(&self, metrics: &NetMetrics) -> &'static str {
        let name = reject_reason_name(self.reason);
        metrics.count_login_refused(name);
        if self.ticket {
            metrics.count_ticket_refused();
        }
        name
    }
}

fn check_hello(check: &HelloCheck, message: ClientMessage) -> Result<Admitted, Refusal> {
    let ClientMessage::Hello { protocol_version, token } = message else {
        return Err(Refusal {
            reason: RejectReason::HelloExpected,
            code: CloseCode::ProtocolViolation,
            detail: "the first message must be Hello".into(),
            ticket: false,
        });
    };
    if protocol_version != PROTOCOL_VERSION {
        return Err(Refusal {
            reason: RejectReason::UnsupportedVersion,
            code: CloseCode::Rejected,
            detail: format!(
                "protocol version {protocol_version} is not supported; this server speaks {PROTOCOL_VERSION}"
            ),
            ticket: false,
        });
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let refused = |ticket: bool| {
        move |e: TokenError| Refusal {
            reason: e.reject_reason(),
            code: CloseCode::Rejected,
            detail: e.to_string(),
            ticket,
        }
    };
    match TokenKind::of(&token) {
        TokenKind::Session => {
            check.tokens.verify(&token, now).map(|c| (c.uid, None)).map_err(refused(false))
        }
        TokenKind::Ticket => {
            let Some((tickets, server)) = &check.tickets else {
                return Err(Refusal {
                    reason: RejectReason::MalformedToken,
                    code: CloseCode::Rejected,
                    detail: "a travel ticket, and this server is in no fleet".into(),
                    ticket: true,
                });
            };
            let claims = tickets.verify(&token, now).map_err(refused(true))?;
            if claims.dst != *server {
                // Good at another server only (docs/spec/travel.md V9).
                return Err(Refusal {
                    reason: RejectReason::TicketStale,
                    code: CloseCode::Rejected,
                    detail: format!(
                        "a travel ticket for server {}, and this is {server}",
                        claims.dst
                    ),
                    ticket: true,
                });
            }
            Ok((claims.uid.clone(), Some(claims)))
        }
    }
}

/// A refusal's label value in `gatehouse_logins_refused_total`.
fn reject_reason_name(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::UnsupportedVersion => "unsupported_version",
        RejectReason::MissingToken => "missing_token",
        RejectReason::MalformedToken => "malformed_token",
        RejectReason::BadSignature => "bad_signature",
        RejectReason::Expired => "expired",
        RejectReason::ServerFull => "server_full",
        RejectReason::ShuttingDown => "shutting_down",
        RejectReason::HelloExpected => "hello_expected",
        RejectReason::TokenLifetime => "token_lifetime",
        RejectReason::TooManyLogins => "too_many_logins",
        RejectReason::TicketUsed => "ticket_used",
        RejectReason::TicketStale => "ticket_stale",
    }
}

/// A message decoded from the stream, in the protocol the connection speaks.
enum Incoming {
    Client(ClientMessage),
    Peer(PeerMessage),
}

/// Why a logged-in connection that was lost ended, from QUIC's reason; `who` is at the other end
/// ("client", or "peer" for a peer link).
fn departure_of(reason: &ConnectionError, who: &str) -> Departure {
    use ConnectionError as E;
    match reason {
        E::ApplicationClosed(close) => {
            // The client wrote these words: escaped and cut before they reach a log line.
            let words = PeerText::of_bytes(&close.reason);
            match CloseCode::from_code(close.error_code.into_inner()) {
                Some(code) => {
                    Departure::closed_because(code, format!("closed by the {who}: {words}"))
                }
                None => Departure::lost(format!(
                    "closed by the {who} with unknown code {}: {words}",
                    close.error_code
                )),
            }
        }
        E::TimedOut if who == "client" => {
            Departure::lost("idle timeout: nothing from the client within network.idle_timeout_ms")
        }
        E::TimedOut => Departure::lost(format!(
            "idle timeout: nothing from the {who} within the idle timeout it asked for \
             (fleet.peer_idle_timeout_ms, at most network.idle_timeout_ms)"
        )),
        E::LocallyClosed => Departure::lost("closed by the server"),
        E::Reset => Departure::lost(format!("reset by the {who}")),
        E::ConnectionClosed(close) => {
            let close = PeerText(&close.to_string()).to_string();
            Departure::lost(format!("QUIC transport error from the {who}: {close}"))
        }
        other => Departure::lost(format!("connection failed: {other}")),
    }
}

/// Counts a close the client made, or a timeout; the server's own closes are counted by
/// [`Connection::end_as`].
fn count_reason(metrics: &NetMetrics, reason: &ConnectionError) {
    match reason {
        ConnectionError::LocallyClosed => {}
        ConnectionError::ApplicationClosed(close) => {
            match CloseCode::from_code(close.error_code.into_inner()) {
                Some(code) => metrics.count_close(code, CloseSide::Client),
                None => metrics.count_close_named("other", CloseSide::Client),
            }
        }
        ConnectionError::TimedOut => metrics.count_close_named("timed_out", CloseSide::Client),
        _ => metrics.count_close_named("other", CloseSide::Client),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::admission::Admission;
    use crate::net::event::{QueueError, SendQueue, test_queue};

    fn write(tx: &SendQueue, byte: u8, len: usize) {
        tx.try_send_frames(Bytes::from(vec![byte; len]), 1).unwrap();
    }

    fn queue(cap: usize) -> (SendQueue, SendQueueRx) {
        let (tx, rx, _heard) = test_queue(cap, ConnectionId(1));
        (tx, rx)
    }

    /// The chunks of a batch, back to back.
    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.concat()
    }

    /// Short writes waiting behind the first are joined into one chunk, in order; a lone write
    /// goes out as it is.
    #[test]
    fn waiting_frames_are_joined_into_one_chunk_in_order() {
        let (tx, mut rx) = queue(16);
        let (chunks, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((joined(&chunks), chunks.len(), close), (b"a".to_vec(), 1, None));
        for (byte, len) in [(b'b', 2), (b'c', 3)] {
            write(&tx, byte, len);
        }
        let (chunks, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((joined(&chunks), chunks.len(), close), (b"abbccc".to_vec(), 1, None));
    }

    /// A long write (the world or a batch the carrier writes to many connections from one
    /// buffer) is handed on as it is, never copied; the short ones around it are joined, and
    /// the order holds.
    #[test]
    fn a_long_write_is_handed_on_uncopied_between_joined_short_ones() {
        let (tx, mut rx) = queue(16);
        let shared = Bytes::from(vec![b's'; SHARED_BYTES]);
        tx.try_send_frames(shared.clone(), 1).unwrap();
        write(&tx, b'b', 1);
        write(&tx, b'c', 1);
        let (chunks, _) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].as_ptr(), shared.as_ptr(), "the shared buffer itself");
        assert_eq!((&chunks[0][..], &chunks[2][..]), (&b"a"[..], &b"bc"[..]));
    }

    /// A close ends the batch: the frames before it are written, then the close is carried out;
    /// nothing queued after it is taken.
    #[test]
    fn a_close_ends_the_batch_after_the_frames_before_it() {
        let (tx, mut rx) = queue(16);
        write(&tx, b'b', 1);
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        write(&tx, b'z', 1);
        let (chunks, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((joined(&chunks), close), (b"ab".to_vec(), Some(CloseCode::ReadyTimeout)));
        assert!(
            matches!(rx.try_recv(), Some(Outbound::Frames { .. })),
            "the write after the close stays"
        );
    }

    /// A batch stops growing at about `BATCH_BYTES`: the rest waits for the next chunk.
    #[test]
    fn a_batch_stops_at_its_byte_budget() {
        let (tx, mut rx) = queue(128);
        for _ in 0..100 {
            write(&tx, b'x', 1024);
        }
        let (chunks, _) = batch(Bytes::from(vec![b'x'; 1024]), &mut rx);
        let len = joined(&chunks).len();
        assert!((BATCH_BYTES..BATCH_BYTES + 1024).contains(&len), "{len}");
        assert_eq!(len % 1024, 0, "whole frames only");
        let mut left = 0;
        while rx.try_recv().is_some() {
            left += 1;
        }
        assert_eq!(left, 100 - (len / 1024 - 1));
    }

    /// The queue's cap counts frames, however they are joined into writes: frames the writer
    /// has not taken yet count against it, frames it took do not; a write larger than the cap
    /// is taken when the writer has taken everything before it.
    #[test]
    fn the_send_queue_is_bounded_by_frames_not_writes() {
        let (tx, mut rx) = queue(5);
        tx.try_send_frames(Bytes::from_static(b"abc"), 3).unwrap();
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"def"), 3), Err(QueueError::Full));
        tx.try_send_frames(Bytes::from_static(b"de"), 2).unwrap();
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"f"), 1), Err(QueueError::Full));
        assert!(rx.try_recv().is_some(), "the writer takes the first write");
        tx.try_send_frames(Bytes::from_static(b"fgh"), 3).unwrap();
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"i"), 1), Err(QueueError::Full));
        while rx.try_recv().is_some() {}
        tx.try_send_frames(Bytes::from_static(b"jklmnop"), 7).unwrap();
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"q"), 1), Err(QueueError::Full));
        let (tx, rx) = queue(5);
        drop(rx);
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"r"), 1), Err(QueueError::Closed));
        tx.try_close(CloseCode::ShuttingDown).unwrap_err();
    }

    /// The outbox takes events past its cap (a disconnect is never lost) but says when it has
    /// no room for more reading; events leave in order.
    #[test]
    fn the_outbox_stops_reading_at_its_cap_and_keeps_every_event() {
        let mut outbox = Outbox::new(2);
        let event = |n| ConnectionEvent::Disconnected {
            connection: ConnectionId(n),
            departure: Departure::lost("test"),
        };
        assert!(outbox.has_room() && outbox.is_empty());
        outbox.push(event(1));
        assert!(!outbox.is_empty(), "an event waits");
        outbox.push(event(2));
        assert!(!outbox.has_room());
        outbox.push(event(3));
        let order: Vec<u64> = std::iter::from_fn(|| outbox.pop())
            .map(|e| match e {
                ConnectionEvent::Disconnected { connection, .. } => connection.0,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, [1, 2, 3]);
    }

    /// A fleet server's `Hello` check: session tokens under one key, tickets under the fleet's,
    /// good at `here` only.
    fn fleet_check(here: &str) -> HelloCheck {
        use gatehouse_protocol::ticket::TicketLimits;
        use gatehouse_protocol::token::{TokenKey, TokenLimits};
        let tokens = TokenCheck { key: TokenKey::new("session key"), limits: TokenLimits::DEFAULT };
        let limits = TicketLimits { max_lifetime_s: 30, clock_skew_s: 60 };
        let tickets = TicketCheck { key: TokenKey::new("fleet key"), limits };
        HelloCheck { tokens, tickets: Some((tickets, ServerId::new(here).unwrap())) }
    }

    /// A `Hello` with a ticket naming `dst`, signed with `key`.
    fn ticket_hello(key: &str, dst: &str) -> ClientMessage {
        use gatehouse_protocol::ticket::mint_ticket;
        use gatehouse_protocol::token::TokenKey;
        use gatehouse_protocol::{NodeId, PlayerId, TransitionId};
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let claims = TicketClaims {
            uid: PlayerId::new("p1").unwrap(),
            iat: now,
            exp: now + 20,
            src: ServerId::new("hub-1").unwrap(),
            dst: ServerId::new(dst).unwrap(),
            trn: TransitionId(3),
            node: NodeId::new("isle").unwrap(),
            ver: 4,
            generation: 1,
        };
        let token = mint_ticket(&TokenKey::new(key), &claims);
        ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token }
    }

    /// `gatehouse_tickets_refused_total` and `gatehouse_logins_refused_total{reason}` as
    /// `metrics` encodes them.
    fn refusals(metrics: &crate::metrics::Metrics, reason: &str) -> (String, String) {
        let text = metrics.encode().unwrap();
        let line = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
                .unwrap_or_default()
        };
        let reason = format!("gatehouse_logins_refused_total{{reason=\"{reason}\"}} ");
        (line("gatehouse_tickets_refused_total "), line(&reason))
    }

    /// docs/operations.md, "Metrics": a ticket refused at the `Hello` (another server's, one
    /// that fails its signature, one at a server in no fleet) counts in
    /// `gatehouse_tickets_refused_total`, beside the tickets the core refuses, as well as in
    /// `gatehouse_logins_refused_total`; a refused session token counts in the latter only.
    #[test]
    fn a_ticket_refused_at_the_hello_counts_in_tickets_refused() {
        let metrics = crate::metrics::Metrics::new();
        let mut sample = crate::metrics::CoreSample::default();
        sample.counters.tickets_refused = 2;
        metrics.set_core_sample(sample);
        let check = fleet_check("isle-1");
        let count = |hello| match check_hello(&check, hello) {
            Err(refusal) => refusal.count(metrics.net()),
            Ok(admitted) => panic!("admitted: {admitted:?}"),
        };
        assert_eq!(count(ticket_hello("fleet key", "cove-1")), "ticket_stale");
        assert_eq!(refusals(&metrics, "ticket_stale"), ("3".into(), "1".into()));
        assert_eq!(count(ticket_hello("another key", "isle-1")), "bad_signature");
        assert_eq!(refusals(&metrics, "bad_signature"), ("4".into(), "1".into()));
        let no_fleet = HelloCheck { tickets: None, ..fleet_check("isle-1") };
        let refused = check_hello(&no_fleet, ticket_hello("fleet key", "isle-1")).err();
        assert_eq!(refused.map(|r| r.count(metrics.net())), Some("malformed_token"));
        assert_eq!(refusals(&metrics, "malformed_token"), ("5".into(), "1".into()));
        let session = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            token: "not a token".into(),
        };
        assert_eq!(count(session), "malformed_token");
        assert_eq!(refusals(&metrics, "malformed_token"), ("5".into(), "2".into()), "no ticket");
        assert!(check_hello(&check, ticket_hello("fleet key", "isle-1")).is_ok(), "its own");
    }

    /// A login in the outbox holds its pending slot until it leaves for the game's queue.
    #[test]
    fn a_login_holds_its_pending_slot_until_it_leaves_the_outbox() {
        let ip = std::net::IpAddr::from([127, 0, 0, 1]);
        let mut admission =
            Admission::with_caps(1, 1, crate::metrics::Metrics::new().net().clone());
        let mut outbox = Outbox::new(2);
        let slot = admission.admits(ip).unwrap();
        let (outbound, _queue, _heard) = test_queue(4, ConnectionId(1));
        let player = gatehouse_protocol::PlayerId::new("p1").unwrap();
        outbox.push_login(
            ConnectionEvent::Login {
                connection: ConnectionId(1),
                player,
                ticket: None,
                outbound,
                span: tracing::Span::none(),
            },
            slot,
        );
        assert!(admission.admits(ip).is_none(), "the login still holds the one slot");
        assert!(matches!(outbox.pop(), Some(ConnectionEvent::Login { .. })));
        assert!(admission.admits(ip).is_some(), "freed as it left");
    }
}

//! The network driver: one task that owns the UDP socket, the QUIC endpoint and every
//! connection, on the network's own thread (quinn-proto driven directly, as quinn's own driver
//! tasks would, but one task for all of them).
//!
//! Why not quinn's async layer: it gives every connection a task, a mutex, a channel of
//! endpoint events (two 6.5 KiB blocks for the connection's life), a send buffer as large as its
//! largest send, and the game's reader and writer tasks on top; 37 KiB per idle connection at
//! 1,000 clients, where the QUIC state machine and its TLS session are 17 (docs/performance.md).
//! Here a connection is its state machine and what [`Connection`] keeps, one send buffer serves
//! every connection, and a connection is driven only when a datagram, a timer or the game's
//! doorbell concerns it.
//!
//! Each wake, whatever woke it:
//! 1. take the game's doorbell rings (a connection's queue has frames, a close, or its end);
//! 2. read the socket, a bounded number of batches: each datagram goes to its connection, or
//!    is a new connection for admission ([`Network::admit`]);
//! 3. run every timer that is due;
//! 4. drive every connection listed by 1-3: endpoint events, application events, reads into
//!    the game's queue, writes from it, then its datagrams out, then its timer re-armed; a
//!    drained connection is forgotten; the socket is read again (as in 2), and the rings
//!    taken (as in 1), after every [`DRIVES_PER_RECEIVE`] connections, so a pass over
//!    thousands never leaves them waiting; connections still logging in (their handshake,
//!    their `Hello`, their `Welcome` not yet out) are driven first, and again after each such
//!    read ([`Listed`]);
//! 5. hand the game the events its queue has room for (connections stop reading while it is
//!    full, and are resumed here once it has room), and publish how many connections are open.
//!
//! Work a wake leaves (a connection past its transmits per pass, readers resumed) wakes the
//! driver again at once; nothing waits for an unrelated datagram.
//!
//! A new connection from an address not yet proven gets a stateless retry (no state kept), so
//! spoofed packets cannot take pending slots; then it needs a pending slot (per server and per
//! address), or it is refused. When the server starts draining, a connection that has not
//! logged in closes with `ShuttingDown` and a `Hello` still to come is refused; logged-in
//! connections are closed by the game task, through their queues.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_protocol::CloseCode;
use quinn_proto::{ConnectionHandle, DatagramEvent, EndpointEvent, Incoming};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::NetMetrics;
use super::admission::{Admission, AdmissionRules, Admitted};
use super::connection::{Connection, Context, HelloCheck, Outbox, Settings};
use super::event::{ConnectionEvent, Doorbell, QueueKey};
use super::socket::{Datagram, UdpSocket};
use super::{DriverThread, NetError, endpoint};
use crate::config::NetworkConfig;
use crate::game::ConnectionId;

/// Socket batches read per wake, at most: the rest waits for the next wake, after the
/// connections that the first batches concern have answered.
const RECV_BATCHES_PER_WAKE: usize = 16;

/// Transmits one connection sends per pass, at most; one with more is listed again, behind
/// the others.
const TRANSMITS_PER_PASS: usize = 8;

/// Connections a pass drives between two reads of the socket. A pass that drives every
/// connection (a replication interval's end at thousands of players) takes long enough for the
/// socket's receive buffer to overflow if nobody reads it meanwhile; a datagram dropped there is
/// a handshake or a report delayed by a retransmission timeout.
const DRIVES_PER_RECEIVE: usize = 64;

/// Doorbell rings taken per wake, at most.
const RINGS_PER_WAKE: usize = 4096;

/// A network ready to start: the socket is bound and the endpoint configured.
#[derive(Debug)]
pub(crate) struct Network {
    driver: Driver,
    local_addr: SocketAddr,
}

/// A started network: the driver runs on the network thread until [`RunningNetwork::shut`].
#[derive(Debug)]
pub(crate) struct RunningNetwork {
    local_addr: SocketAddr,
    /// Dropping it (or sending on it) tells the driver to close what is left and stop.
    shut: Option<tokio::sync::oneshot::Sender<CloseCode>>,
    /// How many connections are open (not closed by either side, not lost).
    open: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

/// What the driver needs of its socket: the UDP socket, or a test's in-memory wire.
pub(super) trait Wire {
    /// Appends the datagrams that arrived to `out`.
    ///
    /// # Errors
    /// `WouldBlock` when none waits; any other error is the socket's.
    fn recv(&mut self, out: &mut Vec<Datagram>) -> io::Result<()>;

    /// Sends `contents` as `transmit` says (its segments, its ECN).
    ///
    /// # Errors
    /// `WouldBlock` when the socket's send queue is full; any other error is the socket's.
    fn send(&self, transmit: &quinn_proto::Transmit, contents: &[u8]) -> io::Result<()>;

    /// Most segments one transmit may carry.
    fn max_segments(&self) -> usize;
}

impl Wire for UdpSocket {
    fn recv(&mut self, out: &mut Vec<Datagram>) -> io::Result<()> {
        UdpSocket::recv(self, out)
    }

    fn send(&self, transmit: &quinn_proto::Transmit, contents: &[u8]) -> io::Result<()> {
        UdpSocket::send(self, transmit, contents)
    }

    fn max_segments(&self) -> usize {
        UdpSocket::max_segments(self)
    }
}

/// What every call into a connection uses beside the connection and the clock.
#[derive(Debug)]
struct Common {
    settings: Settings,
    outbox: Outbox,
    doorbell: Doorbell,
    /// The server is draining: no login is accepted.
    draining: bool,
}

impl Common {
    /// The context of a call into a connection at `now`.
    fn at(&mut self, now: Instant) -> Context<'_> {
        Context {
            now,
            settings: &self.settings,
            outbox: &mut self.outbox,
            doorbell: &self.doorbell,
            draining: self.draining,
        }
    }
}

/// Everything the driver task owns; `W` is its socket.
struct Driver<W = UdpSocket> {
    endpoint: quinn_proto::Endpoint,
    socket: W,
    common: Common,
    admission: Admission,
    /// By the endpoint's connection handle.
    connections: HashMap<usize, Box<Connection>>,
    /// `(deadline, handle)` of every connection's next wake.
    timers: BTreeSet<(Instant, usize)>,
    /// Connections to drive in this wake's pass, each once.
    listed: Listed,
    /// Connections whose reading waits for room in the game's queue, in the order they paused
    /// (each once: [`Marks::awaiting_room`]). A handle reused since by a new connection
    /// gets a resume it did not need, which only reads what it has.
    paused: Vec<usize>,
    /// Connections not ended ([`Marks::counted_open`]), published on `open`.
    open_count: usize,
    /// The game task's queue of connection events.
    events: mpsc::Sender<ConnectionEvent>,
    rings: mpsc::UnboundedReceiver<QueueKey>,
    next_id: u64,
    shutting: bool,
    /// The connections' datagrams on their way out.
    sending: Sending,
    /// Datagrams read in this wake.
    received: Vec<Datagram>,
    /// Where stateless answers (retries, refusals, version negotiation) are built.
    response_buffer: Vec<u8>,
    open: watch::Sender<usize>,
}

/// The driver's bookkeeping of one connection, kept with it so that one lookup serves the
/// connection and its place in the driver's lists. Only the driver reads or writes it.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// The wake it holds in the driver's timer set.
    armed: Option<Instant>,
    /// Listed for the driver's next pass (events to take, datagrams to send).
    listed: bool,
    /// Listed among the connections logging in, driven before the others
    /// ([`Listed::urgent`]).
    urgent: bool,
    /// Where the game's first write (its `Welcome`) is: while it goes out, the connection is
    /// still logging in.
    first_write: FirstWrite,
    /// Counted in the driver's open connections (until it ends).
    counted_open: bool,
    /// On the driver's list of connections waiting for room to read.
    awaiting_room: bool,
}

/// Where a connection's first write from the game (its `Welcome`) is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum FirstWrite {
    /// Not rung yet.
    #[default]
    Awaited,
    /// Taken from the game's queue, not yet driven out.
    Going,
    /// Out (as far as QUIC sends it at once); every later write waits its turn.
    Out,
}

/// The connections a pass drives: those logging in first, then the rest in the order listed.
///
/// A pass at a replication deadline drives every connection, thousands of them; a handshake
/// or a `Welcome` behind them would wait a whole pass at each of its round trips. A connection
/// still in its handshake, waiting for its `Hello`, or with its `Welcome` not yet sent is
/// driven first, and again each time the pass reads the socket ([`DRIVES_PER_RECEIVE`]).
#[derive(Debug, Default)]
struct Listed {
    /// Connections logging in ([`Marks::urgent`]).
    urgent: Vec<usize>,
    /// The others ([`Marks::listed`]).
    rest: Vec<usize>,
}

impl Listed {
    fn is_empty(&self) -> bool {
        self.urgent.is_empty() && self.rest.is_empty()
    }
}

/// What every connection's datagrams go out through, beside the socket.
#[derive(Debug, Default)]
struct Sending {
    /// The one buffer every connection's datagrams are built in.
    buffer: Vec<u8>,
    /// A transmit the socket would not take yet, with its bytes and its connection's handle.
    blocked: Option<(quinn_proto::Transmit, Vec<u8>, usize)>,
    errors: SendErrors,
}

/// Whether a connection goes on the list again after its turn in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Nothing left for this pass.
    Done,
    /// Datagrams left (the pass's limit, or a full socket).
    Again,
}

impl<W> std::fmt::Debug for Driver<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

/// What woke the driver.
enum Wake {
    Drain,
    Shut(CloseCode),
    Room,
    Writable,
    Readable,
    Rings,
    Timer,
    /// Work was left for the next wake (a pass's limit, readers resumed).
    Again,
}

impl Network {
    /// Prepares the network on `socket` (bound with [`super::bind_socket`]): the endpoint with
    /// `server_config`, connections under `network` (caps, timeouts, frame limit, send queues)
    /// authenticated with `tokens`, reporting to `events` and counting closes, refusals and
    /// pending connections in `metrics`. The socket is registered with `thread`'s runtime.
    ///
    /// # Errors
    /// [`NetError::Bind`] when the socket cannot be registered or its address read.
    pub(crate) fn new(
        socket: std::net::UdpSocket,
        server_config: quinn_proto::ServerConfig,
        network: &NetworkConfig,
        tokens: HelloCheck,
        events: mpsc::Sender<ConnectionEvent>,
        metrics: NetMetrics,
        thread: &DriverThread,
    ) -> Result<Network, NetError> {
        let addr = network.bind;
        let socket = {
            let _entered = thread.handle().enter();
            UdpSocket::new(socket, network.gso_segments)
                .map_err(|source| NetError::Bind { addr, source })?
        };
        let local_addr = socket.local_addr().map_err(|source| NetError::Bind { addr, source })?;
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(endpoint::endpoint_config()),
            Some(Arc::new(server_config)),
            !socket.may_fragment(),
            None,
        );
        let admission = Admission::new(AdmissionRules::of(network), metrics.clone());
        let settings = Settings {
            tokens,
            max_frame_len: network.max_frame_len,
            handshake_timeout: network.handshake_timeout,
            hello_timeout: network.hello_timeout,
            send_queue_frames: network.send_queue_frames,
            message_budget: network.message_budget(),
            metrics,
        };
        let driver = Driver::new(endpoint, socket, settings, admission, events);
        Ok(Network { driver, local_addr })
    }

    /// The bound UDP address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Starts the driver on `thread`. It accepts until `shutdown` is cancelled; then closes
    /// every connection that has not logged in and refuses later `Hello`s (the game closes the
    /// others).
    pub(crate) fn start(
        self,
        thread: &DriverThread,
        shutdown: CancellationToken,
    ) -> RunningNetwork {
        let Network { driver, local_addr } = self;
        let open = driver.open.subscribe();
        let (shut, shut_rx) = tokio::sync::oneshot::channel();
        let task = thread.handle().spawn(driver.run(shutdown, shut_rx));
        RunningNetwork { local_addr, shut: Some(shut), open, task }
    }
}

impl RunningNetwork {
    /// The bound UDP address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits up to `timeout` until every connection has closed (each delivered its close or
    /// gave up); false if some are still open.
    pub(crate) async fn wait_closed(&mut self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.open.wait_for(|open| *open == 0)).await.is_ok()
    }

    /// Closes every connection still open with `code`, waits up to `timeout` until the peers
    /// know (every connection drained), and stops the driver. A lost client's last messages,
    /// waiting for room in the game's queue, hold the driver only while the game task lives:
    /// call it once the game task has ended.
    pub(crate) async fn shut(mut self, code: CloseCode, timeout: Duration) {
        if let Some(shut) = self.shut.take() {
            let _ = shut.send(code);
        }
        if tokio::time::timeout(timeout, &mut self.task).await.is_err() {
            tracing::warn!("connections still draining after the drain timeout; stopping");
            self.task.abort();
        }
    }
}

impl<W: Wire> Driver<W> {
    /// A driver of no connections yet on `socket`, reporting to `events`.
    fn new(
        endpoint: quinn_proto::Endpoint,
        socket: W,
        settings: Settings,
        admission: Admission,
        events: mpsc::Sender<ConnectionEvent>,
    ) -> Driver<W> {
        let (doorbell, rings) = Doorbell::new();
        let outbox = Outbox::new(events.max_capacity());
        Driver {
            endpoint,
            socket,
            common: Common { settings, outbox, doorbell, draining: false },
            admission,
            connections: HashMap::new(),
            timers: BTreeSet::new(),
            listed: Listed::default(),
            paused: Vec::new(),
            open_count: 0,
            events,
            rings,
            next_id: 1,
            shutting: false,
            sending: Sending::default(),
            received: Vec::new(),
            response_buffer: Vec::new(),
            open: watch::Sender::new(0),
        }
    }

    /// One wake's work at `now`, whatever woke the driver (the module's steps 1-5); `rings`
    /// holds the doorbell rings the wake brought.
    fn turn(&mut self, now: Instant, rings: &mut Vec<QueueKey>) {
        // 1.
        self.take_rings(now, rings);
        // 2.
        self.receive(now);
        // 3.
        self.expire(now);
        // 4.
        self.pass(now);
        // 5.
        self.hand_over(now);
        let open = self.open_count;
        self.open.send_if_modified(|was| std::mem::replace(was, open) != open);
    }

    /// Whether the last turn left work that no event will announce: connections listed again
    /// after their pass's limit, or readers [`Driver::hand_over`] resumed (unless the socket
    /// is full: its writability wakes the driver). Readers still paused need no wake of their
    /// own: they wait for the game's queue to take the outbox's events, which is a wake.
    fn has_work_left(&self) -> bool {
        !self.listed.is_empty() && self.sending.blocked.is_none()
    }
}

impl Driver<UdpSocket> {
    async fn run(
        mut self,
        shutdown: CancellationToken,
        mut shut: tokio::sync::oneshot::Receiver<CloseCode>,
    ) {
        let mut rings = Vec::new();
        loop {
            let next_timer = self.timers.first().map(|(at, _)| *at);
            let wake = tokio::select! {
                _ = shutdown.cancelled(), if !self.common.draining => Wake::Drain,
                code = &mut shut, if !self.shutting => {
                    Wake::Shut(code.unwrap_or(CloseCode::ShuttingDown))
                }
                // The permit is dropped at once: the driver is the queue's one sender, so the
                // send after it finds the room (or the game task is gone: nothing to wait for).
                _ = self.events.reserve(), if !self.common.outbox.is_empty() => Wake::Room,
                _ = self.socket.writable(), if self.sending.blocked.is_some() => Wake::Writable,
                _ = self.socket.readable() => Wake::Readable,
                _ = self.rings.recv_many(&mut rings, RINGS_PER_WAKE) => Wake::Rings,
                () = sleep_until(next_timer), if next_timer.is_some() => Wake::Timer,
                () = std::future::ready(()), if self.has_work_left() => Wake::Again,
            };
            let now = Instant::now();
            match wake {
                Wake::Drain => self.start_draining(now),
                Wake::Shut(code) => self.shut_all(now, code),
                Wake::Room
                | Wake::Writable
                | Wake::Readable
                | Wake::Timer
                | Wake::Rings
                | Wake::Again => {}
            }
            self.turn(now, &mut rings);
            if self.shutting && self.connections.is_empty() {
                break;
            }
        }
    }
}

impl<W: Wire> Driver<W> {
    /// Lists `handle` for this wake's pass: among the urgent ones while it logs in.
    fn list(listed: &mut Listed, connection: &mut Connection, handle: usize) {
        let logging_in = connection.is_logging_in();
        let marks = &mut connection.marks;
        if logging_in || marks.first_write == FirstWrite::Going {
            if !marks.urgent {
                marks.urgent = true;
                listed.urgent.push(handle);
            }
        } else if !marks.listed {
            marks.listed = true;
            listed.rest.push(handle);
        }
    }

    fn take_rings(&mut self, now: Instant, rings: &mut Vec<QueueKey>) {
        while rings.len() < RINGS_PER_WAKE {
            match self.rings.try_recv() {
                Ok(key) => rings.push(key),
                Err(_) => break,
            }
        }
        let Driver { connections, common, listed, .. } = self;
        for key in rings.drain(..) {
            let Some(connection) = connections.get_mut(&key.slot) else { continue };
            // A ring for a connection that has gone, its slot since reused, is not this one's.
            if connection.id() != key.connection {
                continue;
            }
            if connection.marks.first_write == FirstWrite::Awaited {
                connection.marks.first_write = FirstWrite::Going;
            }
            connection.take_turn(&mut common.at(now));
            Self::list(listed, connection, key.slot);
        }
    }

    fn receive(&mut self, now: Instant) {
        for _ in 0..RECV_BATCHES_PER_WAKE {
            match self.socket.recv(&mut self.received) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    // An ICMP error for an earlier send and the like: nothing lost here.
                    tracing::debug!(error = %e, "UDP receive failed");
                    break;
                }
            }
            // Taken out for the loop and put back, so its room serves every batch.
            let mut datagrams = std::mem::take(&mut self.received);
            for datagram in datagrams.drain(..) {
                self.handle_datagram(now, datagram);
            }
            self.received = datagrams;
        }
    }

    fn handle_datagram(&mut self, now: Instant, datagram: Datagram) {
        let Datagram { remote, local_ip, ecn, data } = datagram;
        self.response_buffer.clear();
        let event =
            self.endpoint.handle(now, remote, local_ip, ecn, data, &mut self.response_buffer);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(connection) = self.connections.get_mut(&handle.0) {
                    connection.quic.handle_event(event);
                    Self::list(&mut self.listed, connection, handle.0);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.admit(now, incoming),
            Some(DatagramEvent::Response(transmit)) => self.send_response(now, &transmit),
            None => {}
        }
    }

    /// A new connection: a stateless retry for an address not yet proven, a refusal while
    /// draining or past the pending caps, else accepted with a pending slot and a new id.
    fn admit(&mut self, now: Instant, incoming: Incoming) {
        self.response_buffer.clear();
        if self.common.draining {
            let transmit = self.endpoint.refuse(incoming, &mut self.response_buffer);
            self.send_response(now, &transmit);
            return;
        }
        // Prove the address first (a stateless retry) so spoofed packets cannot take slots.
        if !incoming.remote_address_validated() {
            match self.endpoint.retry(incoming, &mut self.response_buffer) {
                Ok(transmit) => self.send_response(now, &transmit),
                Err(e) => self.endpoint.ignore(e.into_incoming()),
            }
            return;
        }
        let (slot, evicted) = match self.admission.admit(incoming.remote_address().ip(), now) {
            Admitted::Slot(slot) => (slot, None),
            Admitted::Evicting(slot, handle) => (slot, Some(handle)),
            Admitted::Refused => {
                let transmit = self.endpoint.refuse(incoming, &mut self.response_buffer);
                self.send_response(now, &transmit);
                return;
            }
        };
        if let Some(handle) = evicted {
            let Driver { connections, common, listed, .. } = self;
            if let Some(victim) = connections.get_mut(&handle) {
                victim.evict(&mut common.at(now));
                Self::list(listed, victim, handle);
            }
        }
        match self.endpoint.accept(incoming, now, &mut self.response_buffer, None) {
            Ok((handle, quic)) => {
                let id = ConnectionId(self.next_id);
                self.next_id += 1;
                slot.bind(handle.0);
                let mut connection =
                    Box::new(Connection::new(quic, id, handle.0, slot, now, &self.common.settings));
                Self::list(&mut self.listed, &mut connection, handle.0);
                connection.marks.counted_open = true;
                self.open_count += 1;
                self.connections.insert(handle.0, connection);
            }
            Err(e) => {
                tracing::debug!(error = %e.cause, "handshake failed");
                if let Some(transmit) = e.response {
                    self.send_response(now, &transmit);
                }
            }
        }
    }

    /// Sends a stateless answer built in `response_buffer`; one the socket cannot take now is
    /// dropped (the peer sends again).
    fn send_response(&mut self, now: Instant, transmit: &quinn_proto::Transmit) {
        let contents = &self.response_buffer[..transmit.size.min(self.response_buffer.len())];
        if let Err(e) = self.socket.send(transmit, contents)
            && e.kind() != io::ErrorKind::WouldBlock
        {
            self.sending.errors.note(now, &e);
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(at, handle)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Driver { connections, common, listed, .. } = self;
            let Some(connection) = connections.get_mut(&handle) else { continue };
            connection.marks.armed = None;
            connection.handle_timeout(&mut common.at(now));
            Self::list(listed, connection, handle);
        }
    }

    /// Drives every listed connection once, in the order listed ([`Driver::drive`]), after the
    /// transmit the socket refused last time; while the socket still refuses it, nobody is
    /// driven. A connection left with work is listed again, behind the others.
    fn pass(&mut self, now: Instant) {
        if !self.sending.send_blocked(now, &self.socket) {
            return;
        }
        let mut again = Vec::new();
        self.drive_urgent(now, &mut again);
        let mut listed = std::mem::take(&mut self.listed.rest);
        for (driven, handle) in listed.drain(..).enumerate() {
            if driven > 0 && driven % DRIVES_PER_RECEIVE == 0 {
                // What a datagram or a ring lists now is driven in this pass if logging in or
                // still ahead in it, else in the next.
                self.take_rings(now, &mut Vec::new());
                self.receive(now);
                self.drive_urgent(now, &mut again);
            }
            if self.drive(now, handle) == Next::Again {
                again.push(handle);
            }
        }
        self.list_again(again, listed);
    }

    /// Drives the connections listed as logging in, each once; one left with work goes on the
    /// rest's list (`again`).
    fn drive_urgent(&mut self, now: Instant, again: &mut Vec<usize>) {
        let mut urgent = std::mem::take(&mut self.listed.urgent);
        for handle in urgent.drain(..) {
            if self.drive(now, handle) == Next::Again {
                again.push(handle);
            }
        }
        if self.listed.urgent.is_empty() {
            self.listed.urgent = urgent;
        }
    }

    /// One listed connection's turn in the pass: endpoint events both ways, its step, its
    /// datagrams out, its marks (counted out once ended, listed among the paused readers), then
    /// forgotten once QUIC drained it, or its timer re-armed. `Again` when it has datagrams
    /// left, or was not driven because the socket is full; a connection gone since it was
    /// listed is passed over.
    fn drive(&mut self, now: Instant, handle: usize) -> Next {
        let Driver {
            connections,
            endpoint,
            common,
            socket,
            sending,
            timers,
            paused,
            open_count,
            ..
        } = self;
        let Some(connection) = connections.get_mut(&handle) else { return Next::Done };
        if sending.blocked.is_some() {
            // Driven once the socket takes datagrams again.
            return Next::Again;
        }
        connection.marks.listed = false;
        connection.marks.urgent = false;
        exchange_endpoint_events(endpoint, connection, handle);
        connection.step(&mut common.at(now));
        exchange_endpoint_events(endpoint, connection, handle);
        let next = sending.transmit(now, socket, connection, handle);
        if next == Next::Done && connection.marks.first_write == FirstWrite::Going {
            connection.marks.first_write = FirstWrite::Out;
        }
        exchange_endpoint_events(endpoint, connection, handle);
        update_marks(connection, handle, open_count, paused);
        // A lost client's last messages may still wait for room in the game's queue. (Done
        // means ended: it was counted out of the open connections just now.)
        if connection.quic.is_drained() && connection.is_done() {
            connection.record_quic_end(&common.settings.metrics);
            disarm(timers, connection, handle);
            connections.remove(&handle);
            // Only now may the endpoint reuse the handle.
            endpoint.handle_event(ConnectionHandle(handle), EndpointEvent::drained());
        } else {
            rearm(timers, connection, handle);
        }
        next
    }

    /// Lists the connections of `again` that are still there for the next pass; `room` is the
    /// pass's emptied list, kept for its capacity when nothing is listed.
    fn list_again(&mut self, again: Vec<usize>, room: Vec<usize>) {
        for handle in again {
            if let Some(connection) = self.connections.get_mut(&handle) {
                connection.marks.listed = true;
                self.listed.rest.push(handle);
            }
        }
        if self.listed.rest.is_empty() {
            self.listed.rest = room;
        }
    }

    /// Hands the game every event its queue has room for, then resumes the connections that
    /// paused reading while the outbox has room. They are listed: the next pass sends their
    /// flow-control credit, and the next wake hands over what they read
    /// ([`Driver::has_work_left`]). An event for a game task that is gone (the server is
    /// stopping) is dropped: nobody to tell.
    fn hand_over(&mut self, now: Instant) {
        while !self.common.outbox.is_empty() {
            let permit = match self.events.try_reserve() {
                Ok(permit) => Some(permit),
                Err(mpsc::error::TrySendError::Full(())) => break,
                Err(mpsc::error::TrySendError::Closed(())) => None,
            };
            if let (Some(event), Some(permit)) = (self.common.outbox.pop(), permit) {
                permit.send(event);
            }
        }
        let Driver { connections, common, listed, paused, .. } = self;
        let mut resumed = 0;
        for &handle in paused.iter() {
            if !common.outbox.has_room() {
                break;
            }
            resumed += 1;
            // Gone since (drained): nothing to resume.
            let Some(connection) = connections.get_mut(&handle) else { continue };
            connection.marks.awaiting_room = false;
            connection.resume_reading(&mut common.at(now));
            Self::list(listed, connection, handle);
        }
        paused.drain(..resumed);
    }

    fn start_draining(&mut self, now: Instant) {
        self.common.draining = true;
        let Driver { connections, common, listed, .. } = self;
        for (handle, connection) in connections.iter_mut() {
            connection.drain(&mut common.at(now));
            Self::list(listed, connection, *handle);
        }
    }

    fn shut_all(&mut self, now: Instant, code: CloseCode) {
        self.common.draining = true;
        self.shutting = true;
        let Driver { connections, common, listed, .. } = self;
        for (handle, connection) in connections.iter_mut() {
            connection.shut(&mut common.at(now), code);
            Self::list(listed, connection, *handle);
        }
    }
}

/// Passes the connection's endpoint events to the endpoint, and the endpoint's answers back;
/// all but the last one (drained), which [`Driver::drive`] passes when it forgets the
/// connection.
fn exchange_endpoint_events(
    endpoint: &mut quinn_proto::Endpoint,
    connection: &mut Connection,
    handle: usize,
) {
    while let Some(event) = connection.quic.poll_endpoint_events() {
        if event.is_drained() {
            continue;
        }
        if let Some(answer) = endpoint.handle_event(ConnectionHandle(handle), event) {
            connection.quic.handle_event(answer);
        }
    }
}

impl Sending {
    /// Sends the transmit `socket` would not take last time; false while it still will not
    /// (the transmit is kept).
    fn send_blocked<W: Wire>(&mut self, now: Instant, socket: &W) -> bool {
        let Some((transmit, bytes, handle)) = self.blocked.take() else { return true };
        match socket.send(&transmit, &bytes) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.blocked = Some((transmit, bytes, handle));
                return false;
            }
            Err(e) => self.errors.note(now, &e),
            Ok(()) => {}
        }
        true
    }

    /// Sends `connection`'s datagrams through `socket`, at most [`TRANSMITS_PER_PASS`]; a
    /// failed send is counted and lost (QUIC sends it again). `Again` when it may have more:
    /// the limit was reached, or the socket was full (the transmit it refused is kept, and
    /// goes first in the next pass).
    fn transmit<W: Wire>(
        &mut self,
        now: Instant,
        socket: &W,
        connection: &mut Connection,
        handle: usize,
    ) -> Next {
        for _ in 0..TRANSMITS_PER_PASS {
            self.buffer.clear();
            let segments = socket.max_segments();
            let Some(transmit) = connection.quic.poll_transmit(now, segments, &mut self.buffer)
            else {
                return Next::Done;
            };
            let contents = &self.buffer[..transmit.size.min(self.buffer.len())];
            match socket.send(&transmit, contents) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = Some((transmit, std::mem::take(&mut self.buffer), handle));
                    // It may have more to send once the blocked transmit is out.
                    return Next::Again;
                }
                Err(e) => self.errors.note(now, &e),
            }
        }
        Next::Again
    }
}

/// After a connection's turn: counts it out of `open_count` once it ended, and puts it on
/// `paused` once its reading waits for room in the game's queue (each once).
fn update_marks(
    connection: &mut Connection,
    handle: usize,
    open_count: &mut usize,
    paused: &mut Vec<usize>,
) {
    if connection.is_ended() && connection.marks.counted_open {
        connection.marks.counted_open = false;
        *open_count -= 1;
    }
    if connection.is_read_paused() && !connection.marks.awaiting_room {
        connection.marks.awaiting_room = true;
        paused.push(handle);
    }
}

/// Takes `connection`'s wake out of `timers`.
fn disarm(timers: &mut BTreeSet<(Instant, usize)>, connection: &mut Connection, handle: usize) {
    if let Some(at) = connection.marks.armed.take() {
        timers.remove(&(at, handle));
    }
}

/// Moves `connection`'s wake in `timers` to its next timeout, if that changed.
fn rearm(timers: &mut BTreeSet<(Instant, usize)>, connection: &mut Connection, handle: usize) {
    let next = connection.next_timeout();
    if next != connection.marks.armed {
        disarm(timers, connection, handle);
        if let Some(at) = next {
            timers.insert((at, handle));
        }
        connection.marks.armed = next;
    }
}

/// UDP sends that failed since the last warning, and when it was.
#[derive(Debug, Default)]
struct SendErrors {
    count: u64,
    warned: Option<Instant>,
}

impl SendErrors {
    /// Counts a failed send at `now` (the datagram is lost; QUIC sends it again), warning at
    /// most every 10 s with how many there were.
    fn note(&mut self, now: Instant, e: &io::Error) {
        self.count += 1;
        if self.warned.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(10)) {
            tracing::warn!(error = %e, failed = self.count, "UDP sends failed since the last warning");
            self.count = 0;
            self.warned = Some(now);
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(any(test, feature = "fuzzing"))]
// The fuzz target uses part of what the tests use.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod harness;
#[cfg(test)]
mod tests;

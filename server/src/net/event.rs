//! What crosses between the network driver and the game task.
//!
//! Up: the driver reports each connection's [`ConnectionEvent`]s, in the order they happened on
//! that connection, on the channel whose sender it was given. Down: the game task answers a
//! logged-in connection through the [`SendQueue`] that came with its login: one write per game
//! step at most, holding every frame that step made for the connection (fewer writes and
//! datagrams), and bounded by frames, so a client that does not read is found as early as
//! before. A queue that has something new rings the driver's [`Doorbell`] once, with its
//! connection's key; the driver takes what waits on its next turn.
//!
//! A connection that negotiated the peer link's ALPN (another server of the fleet,
//! docs/spec/travel.md V14) is reported apart, as [`ConnectionEvent::Peer`]: it never logs in
//! as a player. The driver hands up its first message with the connection's TLS exporter value
//! and reads nothing more from it until the game task's first write (its `Welcome`); the fleet's
//! peer module checks the proof, with a key the driver never holds.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use gatehouse_protocol::fleet::{PEER_EXPORTER_LEN, PeerMessage};
use gatehouse_protocol::ticket::TicketClaims;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId};
use tokio::sync::mpsc;

use crate::game::{ConnectionId, Departure};

/// What the driver reports to the game task.
#[derive(Debug)]
pub(crate) enum ConnectionEvent {
    /// The connection authenticated as `player`; `outbound` is its writer's queue (bounded:
    /// a full queue marks a slow consumer), through which it is closed too.
    Login {
        /// The connection.
        connection: ConnectionId,
        /// The player id from the session token or the travel ticket.
        player: PlayerId,
        /// The ticket's claims, when the `Hello` carried a travel ticket this server checked
        /// (docs/spec/travel.md V8): the core checks the seat it names (V9).
        ticket: Option<Box<TicketClaims>>,
        /// The writer's queue, in order.
        outbound: SendQueue,
        /// The connection's span (its id and the client's address): the game handles the login
        /// in it, so the login's log line says where the client is (docs/operations.md, "Logs").
        span: tracing::Span,
    },
    /// A logged-in connection sent a message.
    Message {
        /// The connection.
        connection: ConnectionId,
        /// The decoded message.
        message: ClientMessage,
    },
    /// A logged-in connection ended (the peer left, the connection closed or a frame did not
    /// decode).
    Disconnected {
        /// The connection.
        connection: ConnectionId,
        /// Why it ended.
        departure: Departure,
    },
    /// A connection on the peer link's ALPN: another server of the fleet, not a player.
    Peer(PeerConnectionEvent),
}

/// What the driver reports of a peer link another server opened (docs/spec/travel.md V14), in
/// the order it happened on that connection: `Opened`, then its messages, then `Gone`.
#[derive(Debug)]
pub(crate) enum PeerConnectionEvent {
    /// The first message came (the game task checks it is a `Hello` whose proof holds). Nothing
    /// more is read until the game task's first write to `outbound`, its `Welcome`; a close
    /// through `outbound` refuses the link.
    Opened {
        /// The connection.
        connection: ConnectionId,
        /// The connection's TLS exporter value (label `PEER_EXPORTER_LABEL`, no context), which
        /// the proofs of both sides sign.
        exporter: [u8; PEER_EXPORTER_LEN],
        /// The name the dialler asked for in TLS (SNI), if it sent one (none for an address).
        server_name: Option<String>,
        /// The first message.
        first: PeerMessage,
        /// The writer's queue, in order.
        outbound: SendQueue,
        /// The connection's span (its id and the dialler's address).
        span: tracing::Span,
    },
    /// An opened peer link sent a message, after the game task's first write.
    Message {
        /// The connection.
        connection: ConnectionId,
        /// The decoded message.
        message: PeerMessage,
    },
    /// An opened peer link ended (closed by either side, silent past its idle timeout, or a
    /// frame that did not decode).
    Gone {
        /// The connection.
        connection: ConnectionId,
        /// Why it ended.
        departure: Departure,
    },
}

/// What the game task asks a connection's writer to do, in order.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// Write `frames` encoded frames, joined in `bytes`.
    Frames {
        /// The frames, back to back.
        bytes: Bytes,
        /// How many there are.
        frames: usize,
    },
    /// Finish the stream, wait for the frames before to be acknowledged, close the connection.
    Close(CloseCode),
}

/// Why a write was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// The frames queued and not yet taken by the writer would pass the cap: a slow consumer.
    Full,
    /// The writer is gone: the connection is closing and its disconnect is on its way.
    Closed,
}

impl std::fmt::Display for QueueError {
    /// Plain words for a log's `reason`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QueueError::Full => "its send queue is full",
            QueueError::Closed => "its connection is closing",
        })
    }
}

/// Which connection a doorbell ring is for: the driver's slot and the connection id, so a ring
/// for a connection that has gone is not taken for the next one in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueKey {
    /// The driver's slot for the connection.
    pub(crate) slot: usize,
    /// The connection.
    pub(crate) connection: ConnectionId,
}

/// How a send queue tells the driver it has something new.
#[derive(Debug, Clone)]
pub(crate) struct Doorbell {
    rings: mpsc::UnboundedSender<QueueKey>,
}

impl Doorbell {
    /// A doorbell and the driver's end of it.
    pub(crate) fn new() -> (Doorbell, mpsc::UnboundedReceiver<QueueKey>) {
        let (rings, heard) = mpsc::unbounded_channel();
        (Doorbell { rings }, heard)
    }

    fn ring(&self, key: QueueKey) {
        // A driver that is gone takes nothing more: the connection closes with it.
        let _ = self.rings.send(key);
    }
}

/// The game task's end of a connection's writer queue: at most `cap` frames queued and not yet
/// taken by the writer (`network.send_queue_frames`), except that a write is always taken when
/// the writer has taken everything before it (one game step's frames for a client can exceed
/// the cap, e.g. a joiner's snapshot of a full server, and a client that reads is not slow); and
/// at most `cap` writes and closes waiting. Dropping it tells the writer nothing more comes.
///
/// A deque under a mutex rather than a channel: the writer takes everything it can at each
/// turn, so the queue is empty between game steps, and an empty deque holds no memory where a
/// channel keeps its blocks for as long as the connection lives (memory per idle client).
#[derive(Debug)]
pub(crate) struct SendQueue {
    shared: Arc<Shared>,
    cap: usize,
}

/// The writer's end of a [`SendQueue`], in the driver. Dropping it makes later writes fail with
/// [`QueueError::Closed`].
#[derive(Debug)]
pub(crate) struct SendQueueRx {
    shared: Arc<Shared>,
}

/// What both ends of a send queue share.
#[derive(Debug)]
struct Shared {
    state: Mutex<QueueState>,
    doorbell: Doorbell,
    key: QueueKey,
}

#[derive(Debug, Default)]
struct QueueState {
    items: VecDeque<Outbound>,
    /// Frames in `items`.
    frames: usize,
    /// The game task dropped its end.
    sender_gone: bool,
    /// The writer dropped its end.
    writer_gone: bool,
    /// The doorbell was rung since the writer's last turn.
    rung: bool,
    /// A close was queued since the writer's last turn.
    close_queued: bool,
    /// The game task asked for the connection to close at once, with this code.
    close_now: Option<CloseCode>,
}

/// What changed since the writer's last turn, beside new items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Turn {
    /// The game task wants the connection closed at once, with this code.
    pub(crate) close_now: Option<CloseCode>,
    /// A close was queued (behind what was queued before it).
    pub(crate) close_queued: bool,
    /// The game task dropped its end: nothing more comes.
    pub(crate) sender_gone: bool,
}

/// Writes and closes a drained queue keeps room for; it frees anything larger.
const KEPT_SLOTS: usize = 4;

/// A writer queue of at most `cap_frames` frames (at least 1) for the connection `key`, which
/// rings `doorbell` when it has something new.
pub(crate) fn send_queue(
    cap_frames: usize,
    doorbell: Doorbell,
    key: QueueKey,
) -> (SendQueue, SendQueueRx) {
    let shared = Arc::new(Shared { state: Mutex::default(), doorbell, key });
    (SendQueue { shared: shared.clone(), cap: cap_frames.max(1) }, SendQueueRx { shared })
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, QueueState> {
        // The lock guards no invariant a panic could break halfway: take it even if poisoned.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rings the doorbell unless it was rung since the writer's last turn.
    fn ring(&self, state: &mut QueueState) {
        if !state.rung {
            state.rung = true;
            self.doorbell.ring(self.key);
        }
    }
}

impl SendQueue {
    /// Queues `frames` frames joined in `bytes`.
    ///
    /// # Errors
    /// [`QueueError::Full`] when they would pass the cap, [`QueueError::Closed`] when the writer
    /// is gone.
    pub(crate) fn try_send_frames(&self, bytes: Bytes, frames: usize) -> Result<(), QueueError> {
        let mut state = self.shared.state();
        self.check_room(&state)?;
        if state.frames > 0 && state.frames + frames > self.cap {
            return Err(QueueError::Full);
        }
        state.frames += frames;
        state.items.push_back(Outbound::Frames { bytes, frames });
        self.shared.ring(&mut state);
        Ok(())
    }

    /// Asks the writer to close after what is queued; the driver forces the close if that
    /// takes too long (the client stopped reading).
    ///
    /// # Errors
    /// [`QueueError::Full`] when `cap` writes and closes wait already, [`QueueError::Closed`]
    /// when the writer is gone.
    pub(crate) fn try_close(&self, code: CloseCode) -> Result<(), QueueError> {
        let mut state = self.shared.state();
        self.check_room(&state)?;
        state.items.push_back(Outbound::Close(code));
        state.close_queued = true;
        self.shared.ring(&mut state);
        Ok(())
    }

    /// Asks for the connection to be closed with `code` at once, whatever is queued (a slow
    /// consumer, a close the queue could not take). The first code asked for wins; nothing
    /// happens once the writer is gone.
    pub(crate) fn close_now(&self, code: CloseCode) {
        let mut state = self.shared.state();
        if state.writer_gone || state.close_now.is_some() {
            return;
        }
        state.close_now = Some(code);
        self.shared.ring(&mut state);
    }

    fn check_room(&self, state: &QueueState) -> Result<(), QueueError> {
        if state.writer_gone {
            Err(QueueError::Closed)
        } else if state.items.len() >= self.cap {
            Err(QueueError::Full)
        } else {
            Ok(())
        }
    }
}

impl Drop for SendQueue {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.sender_gone = true;
        self.shared.ring(&mut state);
    }
}

impl SendQueueRx {
    /// Starts the writer's turn: what changed beside new items. The next change rings again.
    pub(crate) fn take_turn(&mut self) -> Turn {
        let mut state = self.shared.state();
        state.rung = false;
        Turn {
            close_now: state.close_now,
            close_queued: std::mem::take(&mut state.close_queued),
            sender_gone: state.sender_gone,
        }
    }

    /// Whether the game task dropped its end and nothing it queued waits.
    pub(crate) fn is_finished(&self) -> bool {
        let state = self.shared.state();
        state.sender_gone && state.items.is_empty()
    }

    /// The next item if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Option<Outbound> {
        take(&mut self.shared.state())
    }
}

impl Drop for SendQueueRx {
    fn drop(&mut self) {
        // Nothing will take what waits: free it now, not when the game task drops its end.
        let waiting = {
            let mut state = self.shared.state();
            state.writer_gone = true;
            state.frames = 0;
            std::mem::take(&mut state.items)
        };
        drop(waiting);
    }
}

/// The first item waiting, uncounted; a queue it leaves empty gives back room past
/// [`KEPT_SLOTS`].
fn take(state: &mut QueueState) -> Option<Outbound> {
    let item = state.items.pop_front()?;
    if let Outbound::Frames { frames, .. } = &item {
        state.frames -= frames;
    }
    if state.items.is_empty() {
        state.items.shrink_to(KEPT_SLOTS);
    }
    Some(item)
}

/// A queue whose doorbell nobody hears, and the end that would hear it: for tests of the game
/// shell, which never run a driver.
#[cfg(test)]
pub(crate) fn test_queue(
    cap_frames: usize,
    connection: ConnectionId,
) -> (SendQueue, SendQueueRx, mpsc::UnboundedReceiver<QueueKey>) {
    let (doorbell, heard) = Doorbell::new();
    let (tx, rx) = send_queue(cap_frames, doorbell, QueueKey { slot: 0, connection });
    (tx, rx, heard)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tx: &SendQueue, byte: u8) -> Result<(), QueueError> {
        tx.try_send_frames(Bytes::from(vec![byte]), 1)
    }

    fn queue(cap: usize) -> (SendQueue, SendQueueRx, mpsc::UnboundedReceiver<QueueKey>) {
        test_queue(cap, ConnectionId(7))
    }

    fn rings(heard: &mut mpsc::UnboundedReceiver<QueueKey>) -> usize {
        let mut count = 0;
        while let Ok(key) = heard.try_recv() {
            assert_eq!(key.connection, ConnectionId(7), "a ring names its connection");
            count += 1;
        }
        count
    }

    /// A write rings the driver's doorbell once until the writer takes its turn, however many
    /// follow; after the turn the next write rings again.
    #[test]
    fn a_write_rings_the_doorbell_once_per_turn() {
        let (tx, mut rx, mut heard) = queue(8);
        assert_eq!(rings(&mut heard), 0);
        frame(&tx, b'a').unwrap();
        frame(&tx, b'b').unwrap();
        assert_eq!(rings(&mut heard), 1, "two writes before the turn: one ring");
        assert_eq!(rx.take_turn(), Turn::default());
        frame(&tx, b'c').unwrap();
        assert_eq!(rings(&mut heard), 1, "a write after the turn rings again");
        let taken: Vec<u8> = std::iter::from_fn(|| rx.try_recv())
            .map(|item| match item {
                Outbound::Frames { bytes, .. } => bytes[0],
                other => panic!("expected frames, got {other:?}"),
            })
            .collect();
        assert_eq!(taken, b"abc", "in order");
    }

    /// Dropping the game task's end rings, and the turn says nothing more comes; a queued close
    /// rings and the turn says one is queued, once.
    #[test]
    fn the_end_and_a_close_ring_and_show_in_the_turn() {
        let (tx, mut rx, mut heard) = queue(8);
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        assert_eq!(rings(&mut heard), 1);
        assert_eq!(rx.take_turn(), Turn { close_queued: true, ..Turn::default() });
        assert_eq!(rx.take_turn(), Turn::default(), "a queued close shows in one turn");
        drop(tx);
        assert_eq!(rings(&mut heard), 1);
        assert_eq!(rx.take_turn(), Turn { sender_gone: true, ..Turn::default() });
        assert!(matches!(rx.try_recv(), Some(Outbound::Close(CloseCode::ReadyTimeout))));
    }

    /// A close at once rings and shows in every turn after; the first code wins; once the
    /// writer is gone it does nothing.
    #[test]
    fn a_close_at_once_rings_and_the_first_code_wins() {
        let (tx, mut rx, mut heard) = queue(8);
        tx.close_now(CloseCode::SlowConsumer);
        tx.close_now(CloseCode::ShuttingDown);
        assert_eq!(rings(&mut heard), 1);
        let turn = rx.take_turn();
        assert_eq!(turn.close_now, Some(CloseCode::SlowConsumer));
        assert_eq!(rx.take_turn().close_now, Some(CloseCode::SlowConsumer));
        drop(rx);
        let (tx2, rx2, mut heard2) = queue(8);
        drop(rx2);
        tx2.close_now(CloseCode::SlowConsumer);
        assert_eq!(rings(&mut heard2), 0, "nobody to close");
        drop(tx);
    }

    /// The writer is finished only once the game task dropped its end and the writer took
    /// everything it queued before: a connection closes silently then, not sooner.
    #[test]
    fn the_writer_is_finished_once_the_sender_is_gone_and_nothing_waits() {
        let (tx, mut rx, _heard) = queue(8);
        assert!(!rx.is_finished(), "the game task still holds its end");
        frame(&tx, b'a').unwrap();
        drop(tx);
        assert!(!rx.is_finished(), "a frame queued before the end still waits");
        assert!(rx.try_recv().is_some());
        assert!(rx.is_finished());
    }

    /// A queue the writer drained holds no more than a few slots, however many writes waited
    /// in it (memory per idle client).
    #[test]
    fn a_drained_queue_gives_back_its_room() {
        let (tx, mut rx, _heard) = queue(64);
        for _ in 0..20 {
            // 20 frames waiting at once, within the cap of 64.
            frame(&tx, b'x').unwrap();
        }
        assert!(rx.shared.state().items.capacity() >= 20);
        while rx.try_recv().is_some() {}
        assert!(rx.shared.state().items.capacity() <= KEPT_SLOTS);
        assert_eq!(rx.shared.state().frames, 0);
    }

    /// Writes and closes waiting count against the cap too: a close is refused (and the caller
    /// closes at once) when `cap` of them wait, and taken again once the writer took one.
    #[test]
    fn a_close_is_refused_while_cap_items_wait() {
        let (tx, mut rx, _heard) = queue(2);
        frame(&tx, b'a').unwrap();
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        assert_eq!(tx.try_close(CloseCode::ReadyTimeout), Err(QueueError::Full));
        assert!(rx.try_recv().is_some());
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        drop(rx);
        assert_eq!(tx.try_close(CloseCode::ReadyTimeout), Err(QueueError::Closed));
    }

    /// What waits when the writer goes is freed then, and later writes are refused as closed
    /// (not full, even past the cap).
    #[test]
    fn a_gone_writer_frees_what_waited_and_refuses_as_closed() {
        let (tx, rx, _heard) = queue(4);
        tx.try_send_frames(Bytes::from_static(b"abc"), 3).unwrap();
        drop(rx);
        assert!(tx.shared.state().items.is_empty());
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"de"), 2), Err(QueueError::Closed));
    }
}

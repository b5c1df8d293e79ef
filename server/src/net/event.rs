//! What crosses between the connection tasks and the game task.
//!
//! Up: each connection task reports its [`ConnectionEvent`]s, in the order they happened on
//! that connection, on the channel whose sender it was given. Down: the game task answers a
//! logged-in connection through the [`SendQueue`] that came with its login: one write per game
//! step at most, holding every frame that step made for the connection (issue 12 item 1), and
//! bounded by frames, so a client that does not read is found as early as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId};
use tokio::sync::mpsc;

use crate::game::{ConnectionId, Departure};

/// What a connection task reports to the game task.
#[derive(Debug)]
pub(crate) enum ConnectionEvent {
    /// The connection authenticated as `player`; `outbound` is its writer's queue (bounded:
    /// a full queue marks a slow consumer) and `quic` the connection, for closing it at once.
    Login {
        /// The connection.
        connection: ConnectionId,
        /// The player id from the session token.
        player: PlayerId,
        /// The writer's queue, in order.
        outbound: SendQueue,
        /// The QUIC connection.
        quic: quinn::Connection,
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

/// The game task's end of a connection's writer queue: at most `cap` frames queued and not yet
/// taken by the writer (`network.send_queue_frames`), except that a write is always taken when
/// the writer has taken everything before it (one game step's frames for a client can exceed
/// the cap, e.g. a joiner's snapshot of a full server, and a client that reads is not slow).
#[derive(Debug)]
pub(crate) struct SendQueue {
    tx: mpsc::Sender<Outbound>,
    queued: Arc<AtomicUsize>,
    cap: usize,
}

/// The writer's end of a [`SendQueue`].
#[derive(Debug)]
pub(crate) struct SendQueueRx {
    rx: mpsc::Receiver<Outbound>,
    queued: Arc<AtomicUsize>,
}

/// A writer queue of at most `cap_frames` frames (at least 1).
pub(crate) fn send_queue(cap_frames: usize) -> (SendQueue, SendQueueRx) {
    let cap = cap_frames.max(1);
    let (tx, rx) = mpsc::channel(cap);
    let queued = Arc::new(AtomicUsize::new(0));
    (SendQueue { tx, queued: queued.clone(), cap }, SendQueueRx { rx, queued })
}

impl SendQueue {
    /// Queues `frames` frames joined in `bytes`.
    ///
    /// # Errors
    /// [`QueueError::Full`] when they would pass the cap, [`QueueError::Closed`] when the writer
    /// is gone.
    pub(crate) fn try_send_frames(&self, bytes: Bytes, frames: usize) -> Result<(), QueueError> {
        // Counted before it is sent, so the writer never takes more than was counted.
        let before = self.queued.fetch_add(frames, Ordering::AcqRel);
        if before > 0 && before + frames > self.cap {
            self.queued.fetch_sub(frames, Ordering::AcqRel);
            return Err(QueueError::Full);
        }
        self.tx.try_send(Outbound::Frames { bytes, frames }).map_err(|e| {
            self.queued.fetch_sub(frames, Ordering::AcqRel);
            QueueError::from(e)
        })
    }

    /// Asks the writer to close after what is queued.
    ///
    /// # Errors
    /// As [`SendQueue::try_send_frames`], for the queue's item count.
    pub(crate) fn try_close(&self, code: CloseCode) -> Result<(), QueueError> {
        self.tx.try_send(Outbound::Close(code)).map_err(QueueError::from)
    }
}

impl<T> From<mpsc::error::TrySendError<T>> for QueueError {
    fn from(error: mpsc::error::TrySendError<T>) -> Self {
        match error {
            mpsc::error::TrySendError::Full(_) => QueueError::Full,
            mpsc::error::TrySendError::Closed(_) => QueueError::Closed,
        }
    }
}

impl SendQueueRx {
    /// The next item, once there is one; `None` when the game task dropped its end.
    pub(crate) async fn recv(&mut self) -> Option<Outbound> {
        let item = self.rx.recv().await;
        self.taken(item.as_ref());
        item
    }

    /// The next item if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Option<Outbound> {
        let item = self.rx.try_recv().ok();
        self.taken(item.as_ref());
        item
    }

    fn taken(&self, item: Option<&Outbound>) {
        if let Some(Outbound::Frames { frames, .. }) = item {
            self.queued.fetch_sub(*frames, Ordering::AcqRel);
        }
    }
}

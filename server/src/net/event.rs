//! What crosses between the connection tasks and the game task.
//!
//! Up: each connection task reports its [`ConnectionEvent`]s, in the order they happened on
//! that connection, on the channel whose sender it was given. Down: the game task answers a
//! logged-in connection through the [`SendQueue`] that came with its login: one write per game
//! step at most, holding every frame that step made for the connection (issue 12 item 1), and
//! bounded by frames, so a client that does not read is found as early as before.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId};
use tokio::sync::Notify;

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
/// the cap, e.g. a joiner's snapshot of a full server, and a client that reads is not slow); and
/// at most `cap` writes and closes waiting. Dropping it tells the writer nothing more comes.
///
/// A deque under a mutex rather than a channel: the writer takes everything waiting at each
/// wake, so the queue is empty between game steps, and an empty deque holds no memory where a
/// channel keeps its blocks for as long as the connection lives (issue 12 item 7).
#[derive(Debug)]
pub(crate) struct SendQueue {
    shared: Arc<Shared>,
    cap: usize,
}

/// The writer's end of a [`SendQueue`]. Dropping it makes later writes fail with
/// [`QueueError::Closed`].
#[derive(Debug)]
pub(crate) struct SendQueueRx {
    shared: Arc<Shared>,
}

/// What both ends of a send queue share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<QueueState>,
    /// Woken on every write and close, and when the game task's end is dropped.
    changed: Notify,
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
}

/// Writes and closes a drained queue keeps room for; it frees anything larger.
const KEPT_SLOTS: usize = 4;

/// A writer queue of at most `cap_frames` frames (at least 1).
pub(crate) fn send_queue(cap_frames: usize) -> (SendQueue, SendQueueRx) {
    let shared = Arc::new(Shared::default());
    (SendQueue { shared: shared.clone(), cap: cap_frames.max(1) }, SendQueueRx { shared })
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, QueueState> {
        // The lock guards no invariant a panic could break halfway: take it even if poisoned.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
        drop(state);
        self.shared.changed.notify_one();
        Ok(())
    }

    /// Asks the writer to close after what is queued.
    ///
    /// # Errors
    /// [`QueueError::Full`] when `cap` writes and closes wait already, [`QueueError::Closed`]
    /// when the writer is gone.
    pub(crate) fn try_close(&self, code: CloseCode) -> Result<(), QueueError> {
        let mut state = self.shared.state();
        self.check_room(&state)?;
        state.items.push_back(Outbound::Close(code));
        drop(state);
        self.shared.changed.notify_one();
        Ok(())
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
        self.shared.state().sender_gone = true;
        self.shared.changed.notify_one();
    }
}

impl SendQueueRx {
    /// The next item, once there is one; `None` when the game task dropped its end and
    /// everything it queued was taken.
    pub(crate) async fn recv(&mut self) -> Option<Outbound> {
        loop {
            {
                let mut state = self.shared.state();
                if let Some(item) = take(&mut state) {
                    return Some(item);
                }
                if state.sender_gone {
                    return None;
                }
            }
            // A write between the check and here left a permit: this returns at once.
            self.shared.changed.notified().await;
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn frame(tx: &SendQueue, byte: u8) -> Result<(), QueueError> {
        tx.try_send_frames(Bytes::from(vec![byte]), 1)
    }

    /// A writer waiting on an empty queue wakes for the next write, and for the game task's
    /// end being dropped, after it has taken everything written before.
    #[tokio::test]
    async fn the_writer_wakes_for_a_write_and_ends_after_the_last_one() {
        let (tx, mut rx) = send_queue(8);
        let waiting = tokio::spawn(async move {
            let first = rx.recv().await;
            let second = rx.recv().await;
            let third = rx.recv().await;
            (first, second, third)
        });
        tokio::task::yield_now().await;
        frame(&tx, b'a').unwrap();
        frame(&tx, b'b').unwrap();
        drop(tx);
        let (first, second, third) =
            tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        let bytes = |item: Option<Outbound>| match item {
            Some(Outbound::Frames { bytes, .. }) => bytes,
            other => panic!("expected frames, got {other:?}"),
        };
        assert_eq!((&bytes(first)[..], &bytes(second)[..]), (&b"a"[..], &b"b"[..]));
        assert!(third.is_none(), "the queue ends once the game task's end is gone");
    }

    /// Issue 12 item 7: a queue the writer drained holds no more than a few slots, however
    /// many writes waited in it.
    #[test]
    fn a_drained_queue_gives_back_its_room() {
        let (tx, mut rx) = send_queue(64);
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
        let (tx, mut rx) = send_queue(2);
        frame(&tx, b'a').unwrap();
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        assert_eq!(tx.try_close(CloseCode::ReadyTimeout), Err(QueueError::Full));
        assert!(rx.try_recv().is_some());
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        drop(rx);
        assert_eq!(tx.try_close(CloseCode::ReadyTimeout), Err(QueueError::Closed));
    }

    /// The next item for a writer parked on the queue, within a bound so a lost wake fails.
    async fn parked(rx: &mut SendQueueRx) -> Option<Outbound> {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("the writer hung")
    }

    /// A writer that took every write and parked again on the empty queue wakes for the game
    /// task's end being dropped, with nothing else to wake it.
    #[tokio::test]
    async fn a_parked_writer_wakes_when_the_game_drops_its_end() {
        let (tx, mut rx) = send_queue(8);
        let writer = tokio::spawn(async move {
            let first = parked(&mut rx).await;
            let end = parked(&mut rx).await;
            (first.is_some(), end.is_none())
        });
        tokio::task::yield_now().await;
        frame(&tx, b'a').unwrap();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(tx.shared.state().items.is_empty(), "the writer took the write and parked");
        drop(tx);
        assert_eq!(writer.await.unwrap(), (true, true));
    }

    /// A writer parked on the empty queue wakes for a close alone.
    #[tokio::test]
    async fn a_parked_writer_wakes_for_a_close() {
        let (tx, mut rx) = send_queue(8);
        let writer = tokio::spawn(async move { parked(&mut rx).await });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        tx.try_close(CloseCode::ShuttingDown).unwrap();
        let item = writer.await.unwrap();
        assert!(matches!(item, Some(Outbound::Close(CloseCode::ShuttingDown))), "{item:?}");
    }

    /// What waits when the writer goes is freed then, and later writes are refused as closed
    /// (not full, even past the cap).
    #[test]
    fn a_gone_writer_frees_what_waited_and_refuses_as_closed() {
        let (tx, rx) = send_queue(4);
        tx.try_send_frames(Bytes::from_static(b"abc"), 3).unwrap();
        drop(rx);
        assert!(tx.shared.state().items.is_empty());
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"de"), 2), Err(QueueError::Closed));
    }
}

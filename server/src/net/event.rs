//! What crosses between the connection tasks and the game task.
//!
//! Up: each connection task reports its [`ConnectionEvent`]s, in the order they happened on
//! that connection, on the channel whose sender it was given. Down: the game task answers a
//! logged-in connection through the [`Outbound`] queue that came with its login.

use bytes::Bytes;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId};
use tokio::sync::mpsc;

use crate::game::ConnectionId;

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
        /// The writer's queue of frames, in order.
        outbound: mpsc::Sender<Outbound>,
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
    },
}

/// What the game task asks a connection's writer to do, in order.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// Write one encoded frame.
    Frame(Bytes),
    /// Finish the stream, wait for the frames before to be acknowledged, close the connection.
    Close(CloseCode),
}

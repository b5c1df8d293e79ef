//! One task per connection: authenticate, then read frames for the game and write frames from
//! it.
//!
//! 1. Wait for the client's bidirectional stream and `Hello` by the hello deadline the accept
//!    loop set when the handshake finished (and no longer than the server keeps running).
//! 2. Check the protocol version and the session token; refuse with `Rejected` and a close code.
//! 3. Report the login to the game task with a queue for this connection's outbound frames,
//!    then forward every decoded message until the stream or connection ends, and report the
//!    disconnect ([`ConnectionEvent`]s, in that order).
//!
//! A frame that does not decode closes this connection only, with `ProtocolViolation` and the
//! decoder's message as the close reason.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use gatehouse_protocol::token::{self, TokenKey};
use gatehouse_protocol::{
    ClientMessage, CloseCode, FrameDecoder, FrameError, PROTOCOL_VERSION, RejectReason,
    ServerMessage,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::admission::PendingSlot;
use super::event::{ConnectionEvent, Outbound, SendQueueRx, send_queue};
use crate::config::NetworkConfig;
use crate::game::{ConnectionId, Departure};
use crate::metrics::{CloseSide, NetMetrics};

/// Largest chunk read from the stream at once, bytes.
const READ_CHUNK: usize = 16 * 1024;

/// How long a closing writer waits for the peer to acknowledge the last frames.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// What every connection task needs; shared.
#[derive(Debug)]
pub(super) struct ConnectionContext {
    token_key: TokenKey,
    max_frame_len: usize,
    /// The bound, from accept, on the QUIC handshake.
    pub(super) handshake_timeout: Duration,
    /// The bound, from the handshake's end, on the stream and the `Hello`.
    pub(super) hello_timeout: Duration,
    send_queue_frames: usize,
    /// Where connection events go: the game task.
    events: mpsc::Sender<ConnectionEvent>,
    /// Cancelled when the server starts draining: a connection that has not logged in closes,
    /// a `Hello` after that is refused.
    pub(super) draining: CancellationToken,
    /// Closes, refused logins (issue 15 item 1).
    pub(super) metrics: NetMetrics,
}

impl ConnectionContext {
    /// The context for connections under `network`, authenticated with `token_key`, reporting
    /// to `events`.
    pub(super) fn new(
        token_key: TokenKey,
        network: &NetworkConfig,
        events: mpsc::Sender<ConnectionEvent>,
        metrics: NetMetrics,
    ) -> Self {
        ConnectionContext {
            metrics,
            token_key,
            max_frame_len: network.max_frame_len,
            handshake_timeout: network.handshake_timeout,
            hello_timeout: network.hello_timeout,
            send_queue_frames: network.send_queue_frames,
            events,
            draining: CancellationToken::new(),
        }
    }
}

/// Why a `Hello` was refused.
struct Refusal {
    reason: RejectReason,
    code: CloseCode,
    detail: String,
}

/// A connection whose `Hello` was accepted: its stream's halves, the decoder holding whatever
/// came after the `Hello`, and the player.
struct LoggedIn {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
    player: gatehouse_protocol::PlayerId,
}

/// Serves one accepted connection until it closes.
///
/// The login runs boxed: its futures (the hello deadline, the refusal's flush) are larger than
/// the logged-in loop's, and a task's allocation is as large as its largest state for as long
/// as the task lives (issue 12 item 7: the task went from 1.8 to 1.4 KiB per idle client).
pub(super) async fn serve_connection(
    connection: quinn::Connection,
    id: ConnectionId,
    ctx: Arc<ConnectionContext>,
    slot: PendingSlot,
    hello_deadline: tokio::time::Instant,
) {
    let Some(logged_in) = Box::pin(log_in(&connection, &ctx, hello_deadline)).await else {
        return;
    };
    // Logged in: the player cap bounds it from here, not the pending slots.
    drop(slot);
    serve_logged_in(connection, id, &ctx, logged_in).await;
}

/// Waits for the stream and the `Hello` and checks it; `None` when the connection was closed
/// instead (the deadline, a bad frame, a refusal, the drain) or the client left.
async fn log_in(
    connection: &quinn::Connection,
    ctx: &ConnectionContext,
    hello_deadline: tokio::time::Instant,
) -> Option<LoggedIn> {
    // The stream and the whole `Hello` by the deadline counted from the handshake's end.
    let handshake = async {
        let (send, mut recv) = connection.accept_bi().await.map_err(|_| ReadError::Closed)?;
        let mut decoder = FrameDecoder::new(ctx.max_frame_len);
        let hello = read_message(&mut recv, &mut decoder).await?;
        Ok::<_, ReadError>((send, recv, decoder, hello))
    };
    let handshake = tokio::select! {
        done = tokio::time::timeout_at(hello_deadline, handshake) => done,
        _ = ctx.draining.cancelled() => {
            let reason = CloseCode::ShuttingDown.reason();
            close(&ctx.metrics, connection, CloseCode::ShuttingDown, reason);
            return None;
        }
    };
    let (mut send, recv, decoder, hello) = match handshake {
        Err(_) => {
            let reason = "no Hello within the hello timeout";
            tracing::debug!("{reason}: closing");
            close(&ctx.metrics, connection, CloseCode::HelloTimeout, reason);
            return None;
        }
        Ok(Err(ReadError::Frame(e))) => {
            tracing::debug!(error = %e, "a bad frame before the Hello: closing");
            close(&ctx.metrics, connection, CloseCode::ProtocolViolation, &e.to_string());
            return None;
        }
        Ok(Err(ReadError::Closed | ReadError::Finished)) => {
            tracing::debug!("closed by the client before its Hello");
            return None;
        }
        Ok(Ok(parts)) => parts,
    };
    let checked = check_hello(&ctx.token_key, hello).and_then(|player| {
        if ctx.draining.is_cancelled() {
            Err(Refusal {
                reason: RejectReason::ShuttingDown,
                code: CloseCode::ShuttingDown,
                detail: "the server is shutting down".into(),
            })
        } else {
            Ok(player)
        }
    });
    let player = match checked {
        Ok(player) => player,
        Err(refusal) => {
            tracing::info!(reason = %reject_reason_name(refusal.reason), detail = %refusal.detail,
                "hello refused");
            ctx.metrics.count_login_refused(reject_reason_name(refusal.reason));
            let rejected =
                ServerMessage::Rejected { reason: refusal.reason, detail: refusal.detail };
            if let Ok(frame) = gatehouse_protocol::encode_frame(&rejected, ctx.max_frame_len) {
                let _ = send.write_all(&frame).await;
            }
            finish_and_close(&ctx.metrics, connection, &mut send, refusal.code).await;
            return None;
        }
    };
    tracing::debug!(%player, "hello accepted");
    Some(LoggedIn { send, recv, decoder, player })
}

/// Reports the login to the game task with a queue for this connection's outbound frames (the
/// writer task takes them), then forwards every decoded message until the stream or the
/// connection ends, and reports the disconnect.
async fn serve_logged_in(
    connection: quinn::Connection,
    id: ConnectionId,
    ctx: &ConnectionContext,
    logged_in: LoggedIn,
) {
    let LoggedIn { send, mut recv, mut decoder, player } = logged_in;

    let (outbound, queue) = send_queue(ctx.send_queue_frames);
    let writer = tokio::spawn(write_frames(ctx.metrics.clone(), connection.clone(), send, queue));
    let login =
        ConnectionEvent::Login { connection: id, player, outbound, quic: connection.clone() };
    if ctx.events.send(login).await.is_err() {
        return; // The game task is gone: the server is stopping.
    }
    let departure = loop {
        match read_message(&mut recv, &mut decoder).await {
            Ok(message) => {
                let event = ConnectionEvent::Message { connection: id, message };
                if ctx.events.send(event).await.is_err() {
                    break Departure::closed(CloseCode::ShuttingDown);
                }
            }
            Err(ReadError::Frame(e)) => {
                tracing::info!(error = %e, "protocol violation; closing this connection");
                close(&ctx.metrics, &connection, CloseCode::ProtocolViolation, &e.to_string());
                break Departure::closed_because(CloseCode::ProtocolViolation, e.to_string());
            }
            Err(ReadError::Finished) => {
                break Departure::lost("the client finished its stream without Leave");
            }
            Err(ReadError::Closed) => break departure_of(&connection),
        }
    };
    let event = ConnectionEvent::Disconnected { connection: id, departure };
    let _ = ctx.events.send(event).await;
    // The writer ends when the game task drops the queue or the connection closes.
    let _ = writer.await;
}

fn check_hello(
    key: &TokenKey,
    message: ClientMessage,
) -> Result<gatehouse_protocol::PlayerId, Refusal> {
    let ClientMessage::Hello { protocol_version, token } = message else {
        return Err(Refusal {
            reason: RejectReason::HelloExpected,
            code: CloseCode::ProtocolViolation,
            detail: "the first message must be Hello".into(),
        });
    };
    if protocol_version != PROTOCOL_VERSION {
        return Err(Refusal {
            reason: RejectReason::UnsupportedVersion,
            code: CloseCode::Rejected,
            detail: format!(
                "protocol version {protocol_version} is not supported; this server speaks {PROTOCOL_VERSION}"
            ),
        });
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    token::verify(key, &token, now).map(|claims| claims.uid).map_err(|e| Refusal {
        reason: e.reject_reason(),
        code: CloseCode::Rejected,
        detail: e.to_string(),
    })
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
    }
}

enum ReadError {
    Frame(FrameError),
    /// The client finished its stream cleanly, between frames.
    Finished,
    /// The stream or the connection failed: `departure_of` says why.
    Closed,
}

/// Why a connection that failed under a read ended, from quinn's close reason.
fn departure_of(connection: &quinn::Connection) -> Departure {
    use quinn::ConnectionError as E;
    match connection.close_reason() {
        Some(E::ApplicationClosed(close)) => {
            let words = String::from_utf8_lossy(&close.reason);
            match CloseCode::from_code(close.error_code.into_inner()) {
                Some(code) => {
                    Departure::closed_because(code, format!("closed by the client: {words}"))
                }
                None => Departure::lost(format!(
                    "closed by the client with unknown code {}: {words}",
                    close.error_code
                )),
            }
        }
        Some(E::TimedOut) => {
            Departure::lost("idle timeout: nothing from the client within network.idle_timeout_ms")
        }
        Some(E::LocallyClosed) => Departure::lost("closed by the server"),
        Some(E::Reset) => Departure::lost("reset by the client"),
        Some(E::ConnectionClosed(close)) => {
            Departure::lost(format!("QUIC transport error from the client: {close}"))
        }
        Some(other) => Departure::lost(format!("connection failed: {other}")),
        None => Departure::lost("the client's stream failed"),
    }
}

/// Reads until one whole message is decoded.
async fn read_message(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
) -> Result<ClientMessage, ReadError> {
    loop {
        if let Some(message) = decoder.next_message().map_err(ReadError::Frame)? {
            return Ok(message);
        }
        match recv.read_chunk(READ_CHUNK, true).await {
            Ok(Some(chunk)) => decoder.extend(&chunk.bytes),
            // A stream that ends inside a frame is a protocol violation, not a clean leave.
            Ok(None) => {
                return Err(decoder
                    .finish()
                    .map_or_else(ReadError::Frame, |()| ReadError::Finished));
            }
            Err(_) => return Err(ReadError::Closed),
        }
    }
}

/// Writes queued frames in order until told to close or the queue is dropped. Writes already
/// queued behind the first go out as one chunk (up to [`BATCH_BYTES`]): quinn's send buffer
/// costs per chunk, not per byte. The close runs boxed, as the login does (0.9 → 0.6 KiB per
/// idle client).
async fn write_frames(
    metrics: NetMetrics,
    connection: quinn::Connection,
    mut send: quinn::SendStream,
    mut queue: SendQueueRx,
) {
    while let Some(item) = queue.recv().await {
        let first = match item {
            Outbound::Frames { bytes, .. } => bytes,
            Outbound::Close(code) => {
                Box::pin(finish_and_close(&metrics, &connection, &mut send, code)).await;
                return;
            }
        };
        let (chunk, close_with) = batch(first, &mut queue);
        if send.write_chunk(chunk).await.is_err() {
            return;
        }
        if let Some(code) = close_with {
            Box::pin(finish_and_close(&metrics, &connection, &mut send, code)).await;
            return;
        }
    }
}

/// Most bytes joined into one chunk by [`batch`].
const BATCH_BYTES: usize = 64 * 1024;

/// `first` followed by the frames already waiting in `queue`, in order, joined into one chunk of
/// at most about [`BATCH_BYTES`] (a lone frame is passed on without a copy); and the close that
/// ended the batch, if one did. The chunk is allocated at its exact size: quinn keeps it until
/// the peer acknowledges it, and a thousand connections each holding a mostly empty 64 KiB
/// buffer is memory per idle client (issue 12 item 7).
fn batch(first: Bytes, queue: &mut SendQueueRx) -> (Bytes, Option<CloseCode>) {
    let mut frames: Vec<Bytes> = Vec::new();
    let mut len = first.len();
    let mut close_with = None;
    while len < BATCH_BYTES {
        match queue.try_recv() {
            Some(Outbound::Frames { bytes, .. }) => {
                len += bytes.len();
                frames.push(bytes);
            }
            Some(Outbound::Close(code)) => {
                close_with = Some(code);
                break;
            }
            None => break,
        }
    }
    if frames.is_empty() {
        return (first, close_with);
    }
    let mut joined = BytesMut::with_capacity(len);
    joined.extend_from_slice(&first);
    for frame in &frames {
        joined.extend_from_slice(frame);
    }
    (joined.freeze(), close_with)
}

/// Writes `Closing` with the code, finishes the stream, waits (bounded) until the peer has the
/// data, then closes. The stream is delivered reliably where the CONNECTION_CLOSE is not: on a
/// lossy path the client learns the code within the flush, not at its idle timeout (issue 13
/// item 3).
async fn finish_and_close(
    metrics: &NetMetrics,
    connection: &quinn::Connection,
    send: &mut quinn::SendStream,
    code: CloseCode,
) {
    let closing = ServerMessage::Closing { code: code.code(), reason: code.reason().to_owned() };
    // Bounded as a whole: a client that stopped reading leaves no room for the last frame.
    let _ = tokio::time::timeout(CLOSE_FLUSH, async {
        if let Ok(frame) = gatehouse_protocol::encode_frame(&closing, CLOSING_FRAME_LEN) {
            send.write_all(&frame).await.ok()?;
        }
        send.finish().ok()?;
        send.stopped().await.ok()
    })
    .await;
    close(metrics, connection, code, code.reason());
}

/// Bound on the `Closing` frame's body, bytes: a code and a short reason.
const CLOSING_FRAME_LEN: usize = 1024;

/// Closes a connection with one of our codes and a reason (truncated to fit a packet), and
/// counts it in `gatehouse_connection_closes_total` unless it was already closed (by either
/// side: a forced close after the writer's own, or a client that left first, counts once).
pub(crate) fn close(
    metrics: &NetMetrics,
    connection: &quinn::Connection,
    code: CloseCode,
    reason: &str,
) {
    if connection.close_reason().is_none() {
        metrics.count_close(code, CloseSide::Server);
    }
    let reason = &reason.as_bytes()[..reason.len().min(200)];
    connection.close(quinn::VarInt::from_u32(code.code()), reason);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::event::QueueError;

    fn write(tx: &crate::net::event::SendQueue, byte: u8, len: usize) {
        tx.try_send_frames(Bytes::from(vec![byte; len]), 1).unwrap();
    }

    /// Writes waiting behind the first are joined into one chunk, in order; a lone write goes
    /// out as it is.
    #[test]
    fn waiting_frames_are_joined_into_one_chunk_in_order() {
        let (tx, mut rx) = send_queue(16);
        let (chunk, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((&chunk[..], close), (&b"a"[..], None));
        for (byte, len) in [(b'b', 2), (b'c', 3)] {
            write(&tx, byte, len);
        }
        let (chunk, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((&chunk[..], close), (&b"abbccc"[..], None));
    }

    /// A close ends the batch: the frames before it are written, then the close is carried out;
    /// nothing queued after it is taken.
    #[test]
    fn a_close_ends_the_batch_after_the_frames_before_it() {
        let (tx, mut rx) = send_queue(16);
        write(&tx, b'b', 1);
        tx.try_close(CloseCode::ReadyTimeout).unwrap();
        write(&tx, b'z', 1);
        let (chunk, close) = batch(Bytes::from_static(b"a"), &mut rx);
        assert_eq!((&chunk[..], close), (&b"ab"[..], Some(CloseCode::ReadyTimeout)));
        assert!(
            matches!(rx.try_recv(), Some(Outbound::Frames { .. })),
            "the write after the close stays"
        );
    }

    /// A batch stops growing at about `BATCH_BYTES`: the rest waits for the next chunk.
    #[test]
    fn a_batch_stops_at_its_byte_budget() {
        let (tx, mut rx) = send_queue(64);
        for _ in 0..40 {
            write(&tx, b'x', 4096);
        }
        let (chunk, _) = batch(Bytes::from(vec![b'x'; 4096]), &mut rx);
        assert!(chunk.len() >= BATCH_BYTES && chunk.len() < BATCH_BYTES + 4096, "{}", chunk.len());
        assert_eq!(chunk.len() % 4096, 0, "whole frames only");
        let mut left = 0;
        while rx.try_recv().is_some() {
            left += 1;
        }
        assert_eq!(left, 40 - (chunk.len() / 4096 - 1));
    }

    /// The queue's cap counts frames, however they are joined into writes: frames the writer
    /// has not taken yet count against it, frames it took do not; a write larger than the cap
    /// is taken when the writer has taken everything before it.
    #[test]
    fn the_send_queue_is_bounded_by_frames_not_writes() {
        let (tx, mut rx) = send_queue(5);
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
        let (tx, rx) = send_queue(5);
        drop(rx);
        assert_eq!(tx.try_send_frames(Bytes::from_static(b"r"), 1), Err(QueueError::Closed));
        tx.try_close(CloseCode::ShuttingDown).unwrap_err();
    }
}

//! The driver's tests: against a quinn-proto client over the in-memory wire of `harness`, on
//! an explicit clock, and one through the async shell on a real socket.

use bytes::Bytes;
use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{ClientMessage, FrameDecoder, PlayerId, ServerMessage, TransitionId};
use quinn_proto::{ConnectionError, VarInt};

use super::harness::*;
use super::*;
use crate::config::{NetworkConfig, TlsConfig};
use crate::game::Departure;
use crate::metrics::Metrics;
use crate::net::admission::Admission;
use crate::net::event::{PeerConnectionEvent, SendQueue};
use crate::net::{DriverThread, tls};

impl Harness {
    /// As [`Harness::logged_in`], with a client that reads nothing and lets the server send
    /// 2,000 bytes ahead: what the game queues beyond that is stuck.
    fn logged_in_not_reading() -> (Harness, SendQueue, ConnectionId) {
        let (mut harness, outbound, connection) =
            Harness::logged_in(Setup { client_window: Some(2_000), ..Setup::default() });
        harness.client.reading = false;
        (harness, outbound, connection)
    }

    /// As [`Harness::logged_in`], with a game queue of 2 events and 12 `RestartRequest`s
    /// queued on the client's stream (not yet sent): more than the game's queue and the outbox
    /// take at once, so reading pauses.
    fn logged_in_with_restarts_queued() -> (Harness, SendQueue, ConnectionId) {
        let (mut harness, outbound, connection) =
            Harness::logged_in(Setup { events: 2, ..Setup::default() });
        for _ in 0..12 {
            harness.send(&restart());
        }
        (harness, outbound, connection)
    }

    /// Asserts that the client read one message that `first` accepts, then `Closing` with
    /// `code`, and that the connection closed with `code`.
    fn assert_closed_after(&self, first: impl Fn(&ServerMessage) -> bool, code: CloseCode) {
        let read = &self.client.read;
        assert!(
            matches!(read.as_slice(), [message, ServerMessage::Closing { code: c, .. }]
                if first(message) && *c == code.code()),
            "{read:?}"
        );
        assert_eq!(self.closed_with(), Some(u64::from(code.code())));
    }

    /// The client closes its connection with `code`.
    fn client_closes(&mut self, code: CloseCode) {
        self.client.quic.close(self.now, VarInt::from_u32(code.code()), Bytes::from("bye"));
    }

    /// Asserts that the game heard, and holds now, one `RestartRequest` from `connection`, then
    /// its disconnect with `code`.
    fn assert_heard_restart_then_left(&mut self, connection: ConnectionId, code: CloseCode) {
        let events = self.take_events();
        assert!(
            matches!(events.as_slice(),
                [message, ConnectionEvent::Disconnected { connection: c, departure }]
                if is_restart(message) && *c == connection && departure.code == Some(code)),
            "{events:?}"
        );
    }

    /// The reason the server closed the client's connection with.
    fn close_reason(&self) -> Option<String> {
        match &self.client.lost {
            Some(ConnectionError::ApplicationClosed(close)) => {
                Some(String::from_utf8_lossy(&close.reason).into_owned())
            }
            _ => None,
        }
    }

    /// `gatehouse_connection_closes_total` for `code` closed by the server.
    fn server_closes(&self, code: &str) -> u64 {
        self.metric(&format!(
            "gatehouse_connection_closes_total{{code=\"{code}\",side=\"server\"}}"
        ))
    }
}

/// A `Hello` whose token does not parse.
fn bad_hello() -> ClientMessage {
    ClientMessage::Hello {
        protocol_version: gatehouse_protocol::PROTOCOL_VERSION,
        token: "not a token".into(),
    }
}

/// One encoded `PlayerLeft` frame for `player`.
fn left(player: &str) -> Bytes {
    let message = ServerMessage::PlayerLeft { player_id: PlayerId::new(player).unwrap() };
    Bytes::from(gatehouse_protocol::encode_frame(&message, 1024).unwrap())
}

fn restart() -> ClientMessage {
    ClientMessage::RestartRequest
}

/// Asserts that `heard` holds `restarts` restart requests and ends with `connection`'s
/// disconnect as a protocol violation.
fn assert_restarts_then_a_violation(
    heard: &[ConnectionEvent],
    restarts: usize,
    connection: ConnectionId,
) {
    assert_eq!(heard.iter().filter(|e| is_restart(e)).count(), restarts, "{heard:?}");
    assert!(
        matches!(heard.last(), Some(ConnectionEvent::Disconnected { connection: c, departure })
            if *c == connection && departure.code == Some(CloseCode::ProtocolViolation)),
        "{heard:?}"
    );
}

fn is_restart(event: &ConnectionEvent) -> bool {
    matches!(event, ConnectionEvent::Message { message: ClientMessage::RestartRequest, .. })
}

/// The harness itself: a `Hello` logs in, the game hears the login, and the frames it queues
/// reach the client.
#[test]
fn a_hello_logs_in_and_what_the_game_queues_reaches_the_client() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    outbound.try_send_frames(left("p2"), 1).unwrap();
    harness.settle();
    assert!(matches!(harness.client.read.as_slice(), [ServerMessage::PlayerLeft { player_id }]
            if player_id.as_str() == "p2"));
    assert_eq!(harness.driver.open_count, 1);
    // The connection's endpoint events reach the endpoint: it issued spare connection ids.
    assert!(harness.client.quic.stats().frame_rx.new_connection_id > 0);
}

/// A client that reconnects is a new connection with a new id, beside the old one until that
/// one goes: the game never takes one for the other.
#[test]
fn a_reconnect_is_a_new_connection_with_a_new_id() {
    let (mut harness, _old_outbound, old) = Harness::logged_in(Setup::default());
    let (_outbound, new) = harness.reconnect(3);
    assert_ne!(new, old);
    assert_eq!(harness.driver.open_count, 2);
}

/// A client that stops reading the stream (STOP_SENDING) after login is closed with
/// `ProtocolViolation`, and the game hears the disconnect: it is not left open with a queue
/// that refuses every write.
#[test]
fn a_client_that_stops_reading_is_closed_and_the_game_hears_it() {
    let (mut harness, outbound, connection) = Harness::logged_in(Setup::default());
    let id = harness.client.stream.unwrap();
    harness.client.quic.recv_stream(id).stop(VarInt::from_u32(0)).unwrap();
    harness.settle();
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { connection: c, departure }]
            if *c == connection && departure.code == Some(CloseCode::ProtocolViolation)),
        "{events:?}"
    );
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ProtocolViolation.code())));
    assert_eq!(harness.close_reason().as_deref(), Some("the client stopped reading the stream"));
    assert_eq!(harness.server_closes("protocol_violation"), 1);
    assert_eq!(harness.driver.open_count, 0);
    assert_eq!(outbound.try_send_frames(left("p2"), 1), Err(crate::net::QueueError::Closed));
}

/// What the client sent before it stopped reading, in the same flight, reaches the game
/// before its disconnect.
#[test]
fn what_a_client_sent_before_it_stopped_reading_comes_before_its_disconnect() {
    let (mut harness, _outbound, _) = Harness::logged_in(Setup::default());
    harness.send(&restart());
    let id = harness.client.stream.unwrap();
    harness.client.quic.recv_stream(id).stop(VarInt::from_u32(0)).unwrap();
    harness.settle();
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [message, ConnectionEvent::Disconnected { departure, .. }]
            if is_restart(message) && departure.code == Some(CloseCode::ProtocolViolation)),
        "{events:?}"
    );
}

/// A login whose queue the game dropped without a close and without hearing a disconnect (its
/// task stopped) closes with `ShuttingDown` at once, rather than waiting for the drain timeout.
#[test]
fn a_login_the_game_dropped_without_a_close_closes_with_shutting_down() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    drop(outbound);
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ShuttingDown.code())));
    assert_eq!(harness.server_closes("shutting_down"), 1);
    assert_eq!(harness.driver.open_count, 0);
    assert!(
        harness.take_events().iter().all(|e| matches!(e, ConnectionEvent::Disconnected { .. }))
    );
}

/// A queue the game dropped after hearing the disconnect closes the connection silently once
/// its last write is out; a client that does not read holds it no longer than the forced
/// close (2 s), though it answers every keep-alive.
#[test]
fn a_dropped_queue_whose_write_is_stuck_closes_within_the_forced_close() {
    let (mut harness, outbound, _) = Harness::logged_in_not_reading();
    let big = Bytes::from(vec![0u8; 20_000]);
    outbound.try_send_frames(big, 1).unwrap();
    harness.settle();
    // The client finishes its stream without `Leave`: the game hears it and drops its end.
    let id = harness.client.stream.unwrap();
    harness.client.quic.send_stream(id).finish().unwrap();
    harness.settle();
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { departure, .. }]
            if *departure == Departure::lost("the client finished its stream without Leave")),
        "{events:?}"
    );
    drop(outbound);
    harness.run_for(Duration::from_millis(1_900));
    assert_eq!(harness.driver.open_count, 1, "the last write may still go out");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.driver.open_count, 0, "closed by the forced close");
    assert_eq!(harness.closed_with(), Some(0), "silently: the game heard it already");
}

/// Readers paused because the game's queue was full resume as the game takes events, with no
/// datagram or timer to wake the driver: every message arrives, in order, at one instant.
#[test]
fn paused_readers_resume_as_the_game_takes_events_without_another_wake() {
    let (mut harness, _outbound, _) = Harness::logged_in_with_restarts_queued();
    let heard = harness.settle_as_the_game_takes_events();
    assert_eq!(heard.len(), 12, "{heard:?}");
    assert!(heard.iter().all(is_restart));
}

/// A connection with more to send than one pass's transmits is listed again and driven on the
/// next wake at once, not when an unrelated datagram comes.
#[test]
fn a_connection_past_its_transmits_per_pass_is_driven_again_at_once() {
    let setup = Setup { server_congestion_window: Some(1 << 20), ..Setup::default() };
    let (mut harness, outbound, _) = Harness::logged_in(setup);
    outbound.try_send_frames(Bytes::from(vec![0u8; 30_000]), 1).unwrap();
    let before = harness.driver.socket.transmits.get();
    harness.driver.turn(harness.now, &mut Vec::new());
    assert_eq!(harness.driver.socket.transmits.get() - before, TRANSMITS_PER_PASS);
    assert!(harness.driver.has_work_left(), "the rest wakes the driver");
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.socket.transmits.get() - before > TRANSMITS_PER_PASS);
}

/// A pass that drives many connections reads the socket between them: a datagram that arrives
/// meanwhile waits for a few connections, not for all of them (and not in a receive buffer that
/// overflows).
#[test]
fn a_long_pass_reads_the_socket_between_the_connections_it_drives() {
    let mut harness = Harness::dialing(Setup::default());
    // Listed connections that are gone: the pass walks past them as it would drive them.
    harness.driver.listed.rest = (1_000..=1_000 + 2 * DRIVES_PER_RECEIVE).collect();
    harness.client_out();
    assert!(!harness.driver.socket.inbox.is_empty(), "the client's Initial waits in the socket");
    let before = harness.driver.socket.reads;
    harness.driver.pass(harness.now);
    assert!(harness.driver.socket.inbox.is_empty(), "the pass read the socket");
    assert_eq!(harness.driver.socket.sent.borrow().len(), 1, "and answered (a stateless retry)");
    // After the 64th connection (the datagram, then an empty socket) and the 128th (empty),
    // and nowhere else.
    assert_eq!(harness.driver.socket.reads - before, 3, "read after every 64 connections");
}

/// A connection still logging in is driven as soon as a read in the middle of a pass brings
/// its datagram, not after every connection listed ahead of it: a handshake does not wait a
/// whole pass at each of its round trips.
#[test]
fn a_connection_logging_in_is_driven_before_the_connections_listed_ahead_of_it() {
    let mut harness = Harness::accepted(Setup::default());
    assert!(harness.client_out(), "the client's end of the handshake waits in the socket");
    harness.driver.socket.sent.borrow_mut().clear();
    harness.driver.listed.rest = (1_000..1_000 + 2 * DRIVES_PER_RECEIVE).collect();
    harness.driver.pass(harness.now);
    assert!(!harness.connection().quic.is_handshaking(), "its handshake ended in this pass");
    assert!(!harness.driver.socket.sent.borrow().is_empty(), "and its answer went out");
}

/// The game's first write for a connection (its `Welcome`) is driven as soon as a read in the
/// middle of a pass brings its ring; a later write waits its turn behind the connections
/// listed ahead of it.
#[test]
fn a_connections_first_write_is_driven_before_the_connections_listed_ahead_of_it() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    harness.client_in();
    for (write, urgent) in [("the first", true), ("a later", false)] {
        harness.driver.socket.sent.borrow_mut().clear();
        outbound.try_send_frames(Bytes::from_static(&[0, 0, 0, 0]), 1).unwrap();
        harness.driver.listed.rest = (1_000..1_000 + 2 * DRIVES_PER_RECEIVE).collect();
        harness.driver.pass(harness.now);
        let sent = !harness.driver.socket.sent.borrow().is_empty();
        assert_eq!(sent, urgent, "{write} write went out in the pass it was rung in");
        harness.driver.turn(harness.now, &mut Vec::new());
    }
}

/// The connection whose transmit the full socket refused is driven again once the socket
/// takes datagrams: the transmit goes out, then the rest it has.
#[test]
fn the_connection_a_full_socket_blocked_sends_the_rest_once_writable() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    outbound.try_send_frames(Bytes::from(vec![0u8; 6_000]), 1).unwrap();
    harness.driver.socket.full.set(true);
    let before = harness.driver.socket.transmits.get();
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.sending.blocked.is_some());
    assert!(!harness.driver.has_work_left(), "the socket's writability wakes it, nothing else");
    // A wake while the socket is still full keeps the blocked transmit.
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.sending.blocked.is_some());
    assert_eq!(harness.driver.socket.transmits.get(), before);
    harness.driver.socket.full.set(false);
    // The writable branch, then whatever that turn left.
    harness.driver.turn(harness.now, &mut Vec::new());
    while harness.driver.has_work_left() {
        harness.driver.turn(harness.now, &mut Vec::new());
    }
    assert!(harness.driver.socket.transmits.get() - before >= 5, "the blocked one and the rest");
    assert!(harness.driver.sending.blocked.is_none());
}

/// A client cut off from the server is lost at the idle timeout (a QUIC timer the driver runs):
/// the game hears it once, and the connection and its timer are forgotten.
#[test]
fn a_client_cut_off_is_lost_at_the_idle_timeout_and_forgotten() {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    harness.client.cut = true;
    let idle = harness.network.idle_timeout;
    harness.run_for(idle / 2);
    assert!(harness.take_events().is_empty(), "still within the idle timeout");
    assert_eq!(harness.driver.open_count, 1);
    harness.run_for(idle);
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { connection: c, departure }]
            if *c == connection && departure.reason.starts_with("idle timeout")),
        "{events:?}"
    );
    assert_eq!(harness.driver.open_count, 0);
    assert!(harness.driver.connections.is_empty(), "forgotten once drained");
    assert!(harness.driver.timers.is_empty(), "no timer left for it");
    assert_eq!(
        harness.metric("gatehouse_connection_closes_total{code=\"timed_out\",side=\"client\"}"),
        1
    );
}

/// A queue the game dropped without hearing the disconnect (its task stopped) while a write is
/// stuck behind a client that does not read: the connection closes at the forced close, with
/// `ShuttingDown` (not silently: the game never closed it), and the disconnect is reported.
#[test]
fn a_queue_dropped_unheard_behind_a_stuck_write_closes_with_shutting_down_at_the_forced_close() {
    let (mut harness, outbound, connection) = Harness::logged_in_not_reading();
    outbound.try_send_frames(Bytes::from(vec![0u8; 20_000]), 1).unwrap();
    harness.settle();
    drop(outbound);
    harness.run_for(Duration::from_millis(1_900));
    assert_eq!(harness.driver.open_count, 1, "the write may still go out");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ShuttingDown.code())));
    assert_eq!(harness.server_closes("shutting_down"), 1);
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { connection: c, .. }]
            if *c == connection),
        "{events:?}"
    );
}

/// When the server starts draining, a connection still waiting for its `Hello` closes with
/// `ShuttingDown`; a logged-in one is left to the game, which closes it through its queue.
#[test]
fn draining_closes_a_connection_awaiting_its_hello_and_leaves_logged_in_ones_to_the_game() {
    let mut harness = Harness::new(Setup::default());
    harness.driver.start_draining(harness.now);
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ShuttingDown.code())));
    assert_eq!(harness.server_closes("shutting_down"), 1);

    let (mut harness, _outbound, _) = Harness::logged_in(Setup::default());
    harness.driver.start_draining(harness.now);
    harness.run_for(Duration::from_secs(1));
    assert_eq!(harness.closed_with(), None, "the game closes it, not the driver");
    assert_eq!(harness.driver.open_count, 1);
    assert!(harness.take_events().is_empty());
}

/// Shutting the endpoint closes every connection with the code given, whatever it was doing;
/// the game hears each disconnect, and each connection is forgotten once drained.
#[test]
fn shutting_closes_every_connection_with_its_code_and_forgets_it_once_drained() {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    let mut open = harness.driver.open.subscribe();
    assert_eq!(*open.borrow_and_update(), 1);
    harness.driver.shut_all(harness.now, CloseCode::ShuttingDown);
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(open.has_changed().unwrap(), "whoever waits for the close is told in that turn");
    assert_eq!(*open.borrow_and_update(), 0);
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ShuttingDown.code())));
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { connection: c, .. }]
            if *c == connection),
        "{events:?}"
    );
    assert_eq!(harness.driver.open_count, 0);
    harness.run_for(Duration::from_secs(1));
    assert!(harness.driver.connections.is_empty(), "forgotten once drained");
    assert!(harness.driver.timers.is_empty(), "no timer left for it");
    assert_eq!(harness.driver.endpoint.open_connections(), 0, "and by the endpoint");
}

/// A client that has not sent its `Hello` by the hello timeout, counted from the handshake's
/// end, is closed with `HelloTimeout`, and its pending slot is freed.
#[test]
fn a_client_without_a_hello_by_the_hello_timeout_is_closed_with_hello_timeout() {
    let mut harness = Harness::new(Setup::default());
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1);
    let hello = harness.network.hello_timeout;
    harness.run_for(hello - Duration::from_millis(100));
    assert_eq!(harness.closed_with(), None, "still within the hello timeout");
    // The driver wakes late, past the deadline (a busy thread): the timer still runs.
    harness.now += Duration::from_millis(200);
    harness.driver.turn(harness.now, &mut Vec::new());
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::HelloTimeout.code())));
    assert_eq!(harness.server_closes("hello_timeout"), 1);
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    assert_eq!(harness.driver.open_count, 0);
}

/// A handshake that has not ended by the handshake timeout, counted from accept, is dropped
/// (silently, as QUIC drops one) before QUIC's own idle timeout, and its pending slot is freed.
#[test]
fn a_handshake_not_done_by_the_handshake_timeout_is_dropped_and_frees_its_slot() {
    let setup = Setup { handshake_timeout: Some(Duration::from_secs(2)), ..Setup::default() };
    let mut harness = Harness::accepted_then_cut(setup);
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1);
    harness.run_for(Duration::from_millis(1_900));
    assert_eq!(harness.driver.open_count, 1, "still within the handshake timeout");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.driver.open_count, 0);
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    assert!(harness.take_events().is_empty(), "the game never heard of it");
}

/// A close the game queues goes out after what was queued before it: `Closing` with its code
/// is the stream's last frame, and the connection closes with that code as soon as the client
/// has every byte, not at the flush bound (1 s). The game drops its end at once, as it does
/// when it closes a player; that changes neither the code nor the order.
#[test]
fn a_queued_close_is_written_last_and_closes_once_the_client_has_it() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    outbound.try_send_frames(left("p2"), 1).unwrap();
    outbound.try_close(CloseCode::ReadyTimeout).unwrap();
    drop(outbound);
    harness.run_for(Duration::from_millis(200));
    harness.assert_closed_after(
        |m| matches!(m, ServerMessage::PlayerLeft { .. }),
        CloseCode::ReadyTimeout,
    );
    assert_eq!(harness.server_closes("ready_timeout"), 1);
}

/// A client that closes its connection with one of the protocol's codes: the game hears the
/// departure with that code, once, and the close is counted as the client's.
#[test]
fn a_client_that_closes_is_reported_once_with_its_code() {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    let code = CloseCode::Leave;
    harness.client_closes(code);
    harness.run_for(Duration::from_millis(500));
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { connection: c, departure }]
            if *c == connection && departure.code == Some(code)),
        "{events:?}"
    );
    assert_eq!(
        harness.metric("gatehouse_connection_closes_total{code=\"leave\",side=\"client\"}"),
        1
    );
    assert_eq!(harness.driver.open_count, 0);
    assert!(harness.driver.connections.is_empty(), "forgotten once drained");
}

/// A logged-in client that sends more than its message budget (here a flood of messages the
/// game ignores) is closed with `Abuse`: the game hears the burst, then the departure, and
/// nothing past it.
#[test]
fn a_client_past_its_message_budget_is_closed_for_abuse() {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    let budget = harness.network.message_budget();
    let flood = ClientMessage::TransitionShown { transition_id: TransitionId(9_999) };
    for _ in 0..budget.burst + 100 {
        harness.send(&flood);
    }
    let mut heard = Vec::new();
    for _ in 0..1_000 {
        harness.settle();
        heard.extend(harness.take_events());
        if matches!(heard.last(), Some(ConnectionEvent::Disconnected { .. })) {
            break;
        }
    }
    let messages = heard.iter().filter(|e| matches!(e, ConnectionEvent::Message { .. })).count();
    assert_eq!(messages, budget.burst as usize, "the burst, and nothing past it");
    assert!(
        matches!(heard.last(), Some(ConnectionEvent::Disconnected { connection: c, departure })
            if *c == connection && departure.code == Some(CloseCode::Abuse)),
        "{:?}",
        heard.last()
    );
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::Abuse.code())));
    assert_eq!(harness.server_closes("abuse"), 1);
}

/// A client that keeps within its budget's rate is never closed, however long it sends.
#[test]
fn a_client_within_its_message_rate_is_never_closed() {
    let (mut harness, _outbound, _connection) = Harness::logged_in(Setup::default());
    let budget = harness.network.message_budget();
    let flood = ClientMessage::TransitionShown { transition_id: TransitionId(9_999) };
    let mut messages = 0;
    // Three bursts' worth, each message one interval after the last.
    for _ in 0..3 * budget.burst {
        harness.send(&flood);
        harness.run_for(budget.interval);
        messages += harness
            .take_events()
            .iter()
            .filter(|e| matches!(e, ConnectionEvent::Message { .. }))
            .count();
    }
    assert_eq!(messages, 3 * budget.burst as usize);
    assert_eq!(harness.closed_with(), None);
}

/// A client's close reason is its own text: a newline in it cannot start a forged log line, nor
/// can a long one fill the log; the departure the game logs holds it escaped and cut.
#[test]
fn a_clients_close_reason_reaches_the_log_escaped_and_cut() {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    let forged = format!("bye\n2026-12-05T00:00:00Z WARN gatehouse: forged{}", "x".repeat(900));
    harness.client.quic.close(
        harness.now,
        VarInt::from_u32(CloseCode::Leave.code()),
        Bytes::from(forged),
    );
    harness.run_for(Duration::from_millis(500));
    let events = harness.take_events();
    let [ConnectionEvent::Disconnected { connection: c, departure }] = events.as_slice() else {
        panic!("one departure expected: {events:?}");
    };
    assert_eq!(*c, connection);
    assert!(!departure.reason.contains('\n'), "{}", departure.reason);
    assert!(departure.reason.contains("bye\\n2026-12-05"), "{}", departure.reason);
    assert!(departure.reason.len() < 400, "cut: {} bytes", departure.reason.len());
}

/// A client sends a `RestartRequest`, finishes its stream if `finish` says so, and closes with
/// `Leave`, all in one socket read of the server's: the game hears the request, then the
/// departure with the close's code.
fn restart_then_close(finish: bool) {
    let (mut harness, _outbound, connection) = Harness::logged_in(Setup::default());
    harness.send(&restart());
    if finish {
        let id = harness.client.stream.unwrap();
        harness.client.quic.send_stream(id).finish().unwrap();
    }
    harness.client_out();
    harness.client_closes(CloseCode::Leave);
    harness.settle();
    harness.assert_heard_restart_then_left(connection, CloseCode::Leave);
}

/// A message that arrives in the same socket read as the client's close reaches the game
/// before its disconnect.
#[test]
fn a_message_in_the_same_read_as_the_clients_close_reaches_the_game_first() {
    restart_then_close(false);
}

/// A client that finishes its stream and closes the connection in one flight departs with the
/// close's code, not as a stream finished without `Leave`; what it sent comes first.
#[test]
fn a_client_that_finishes_its_stream_and_closes_departs_with_its_close_code() {
    restart_then_close(true);
}

/// Bad bytes a client sent just before it closed: the game hears its own close, and the
/// server closes nothing (the connection is gone) and counts no violation.
#[test]
fn bad_bytes_before_a_clients_close_change_nothing_of_its_departure() {
    let (mut harness, _outbound, _) = Harness::logged_in(Setup::default());
    let id = harness.client.stream.unwrap();
    // A length prefix past any frame limit.
    harness.client.quic.send_stream(id).write(&u32::MAX.to_le_bytes()).unwrap();
    harness.client_out();
    let code = CloseCode::Leave;
    harness.client_closes(code);
    harness.settle();
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(), [ConnectionEvent::Disconnected { departure, .. }]
            if departure.code == Some(code)),
        "{events:?}"
    );
    assert_eq!(harness.server_closes("protocol_violation"), 0);
}

/// Messages the server received but had not handed over (the game's queue was full) when the
/// client closed reach the game, in order, before its disconnect; the connection is forgotten
/// only then, though QUIC drained it long before.
#[test]
fn messages_received_before_the_client_closes_reach_the_game_before_its_disconnect() {
    let (mut harness, _outbound, _) = Harness::logged_in_with_restarts_queued();
    harness.settle();
    harness.client_closes(CloseCode::Leave);
    harness.run_for(Duration::from_secs(1));
    assert_eq!(harness.driver.connections.len(), 1, "kept while messages wait");
    let heard = harness.settle_as_the_game_takes_events();
    assert_eq!(heard.iter().filter(|e| is_restart(e)).count(), 12, "{heard:?}");
    assert!(matches!(heard.last(), Some(ConnectionEvent::Disconnected { .. })), "{heard:?}");
    assert!(harness.driver.connections.is_empty(), "forgotten once everything is handed over");
    assert!(harness.driver.timers.is_empty());
}

/// A client that stops reading while its reading waits for room in the game's queue: what it
/// sent reaches the game first, then its disconnect as a protocol violation (not a close for
/// shutting down: the game did not drop its queue).
#[test]
fn a_client_that_stops_reading_while_its_reading_is_paused_is_closed_as_a_violation() {
    let (mut harness, _outbound, connection) = Harness::logged_in_with_restarts_queued();
    let id = harness.client.stream.unwrap();
    harness.client.quic.recv_stream(id).stop(VarInt::from_u32(0)).unwrap();
    let heard = harness.settle_as_the_game_takes_events();
    assert_eq!(
        harness.closed_with(),
        Some(u64::from(CloseCode::ProtocolViolation.code())),
        "{heard:?}"
    );
    assert_eq!(harness.server_closes("shutting_down"), 0);
    assert_restarts_then_a_violation(&heard, 12, connection);
}

/// A reader resumed in the middle of a frame larger than its stream window hands the game
/// nothing, yet needs its flow-control credit sent: the driver's next wake comes at once
/// (`Wake::Again`), not with an unrelated datagram.
#[test]
fn a_reader_resumed_inside_a_frame_larger_than_its_window_gets_the_rest_at_once() {
    let setup = Setup { events: 1, server_stream_window: Some(16 * 1024), ..Setup::default() };
    let (mut harness, _outbound, _) = Harness::logged_in(setup);
    harness.send(&restart());
    harness.send(&restart());
    // One restart in the game's queue, one in the outbox: reading is paused.
    harness.settle();
    let big = ClientMessage::Hello {
        protocol_version: gatehouse_protocol::PROTOCOL_VERSION,
        token: "x".repeat(40_000),
    };
    let frame = gatehouse_protocol::encode_frame(&big, harness.network.max_frame_len).unwrap();
    let mut pending = Bytes::from(frame);
    let id = harness.client.stream.unwrap();
    let mut heard = Vec::new();
    for _ in 0..20 {
        if !pending.is_empty()
            && let Ok(n) = harness.client.quic.send_stream(id).write(&pending)
        {
            pending = pending.slice(n..);
        }
        harness.settle();
        heard.extend(harness.take_events());
    }
    assert!(pending.is_empty(), "{} bytes still unsent: no credit came", pending.len());
    assert!(heard.iter().any(|e| matches!(
        e,
        ConnectionEvent::Message { message: ClientMessage::Hello { .. }, .. }
    )));
}

/// A `Hello` is read whatever the game's queue holds: a login waits in the outbox past its cap
/// (one per pending connection), rather than the client being closed for a `Hello` it sent in
/// time.
#[test]
fn a_hello_that_arrives_while_the_games_queue_is_full_logs_in() {
    let mut harness = Harness::new(Setup { events: 1, ..Setup::default() });
    // Other connections' events fill the game's queue and the outbox.
    let other = || ConnectionEvent::Disconnected {
        connection: ConnectionId(999),
        departure: Departure::lost("test"),
    };
    harness.driver.events.try_send(other()).unwrap();
    harness.driver.common.outbox.push(other());
    assert!(!harness.driver.common.outbox.has_room());
    harness.send(&hello());
    harness.run_for(harness.network.hello_timeout + Duration::from_secs(1));
    assert_eq!(harness.closed_with(), None, "not closed for a Hello it sent in time");
    let heard = harness.settle_as_the_game_takes_events();
    assert!(heard.iter().any(|e| matches!(e, ConnectionEvent::Login { .. })), "{heard:?}");
}

/// Draining closes a connection still in its handshake at once with `ShuttingDown`, so a half
/// open handshake does not hold the drain until its handshake timeout.
#[test]
fn draining_closes_a_connection_still_in_its_handshake() {
    let mut harness = Harness::accepted_then_cut(Setup::default());
    assert_eq!(harness.driver.open_count, 1);
    harness.driver.start_draining(harness.now);
    harness.settle();
    assert_eq!(harness.driver.open_count, 0);
    assert_eq!(harness.server_closes("shutting_down"), 1);
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
}

/// A `Hello` with a token the server cannot verify is answered with `Rejected`, then the
/// connection closes with `Rejected` once the client has it; the game never hears of it.
#[test]
fn a_refused_hello_is_answered_with_rejected_then_closed() {
    let mut harness = Harness::new(Setup::default());
    harness.send(&bad_hello());
    harness.run_for(Duration::from_millis(200));
    harness
        .assert_closed_after(|m| matches!(m, ServerMessage::Rejected { .. }), CloseCode::Rejected);
    assert!(harness.take_events().is_empty());
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    assert_eq!(harness.metric("gatehouse_logins_refused_total{reason=\"malformed_token\"}"), 1);
}

/// Everything the game queued that the client's flow control allows is handed to QUIC in the
/// step that takes it, batch after batch, not one batch per wake.
#[test]
fn what_the_game_queued_is_handed_to_quic_batch_after_batch_in_one_step() {
    let (mut harness, outbound, _) =
        Harness::logged_in(Setup { client_window: Some(1 << 20), ..Setup::default() });
    for _ in 0..3 {
        // Two batches: the first stops once it holds BATCH_BYTES.
        outbound.try_send_frames(Bytes::from(vec![0u8; 40_000]), 1).unwrap();
    }
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(!harness.connection().is_writing(), "every batch is in QUIC's hands");
    harness.settle();
}

/// A close the game queued behind frames a client does not read is carried out at the forced
/// close (2 s) with the code the game gave, without the frames before it; also when the close
/// is still in the queue (the frames before it fill more than one batch).
#[test]
fn a_queued_close_behind_a_client_that_does_not_read_closes_with_its_code_at_the_forced_close() {
    let (mut harness, outbound, _) = Harness::logged_in_not_reading();
    outbound.try_send_frames(Bytes::from(vec![0u8; 70_000]), 1).unwrap();
    outbound.try_send_frames(left("p2"), 1).unwrap();
    outbound.try_close(CloseCode::ReadyTimeout).unwrap();
    harness.run_for(Duration::from_millis(1_900));
    assert_eq!(harness.closed_with(), None, "the frames before it may still go out");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::ReadyTimeout.code())));
    assert_eq!(harness.server_closes("ready_timeout"), 1);
}

/// A close waits up to the flush bound (1 s) for the client to acknowledge the stream's end,
/// `Closing` last, before it closes anyway: sent sooner, its CONNECTION_CLOSE could overtake a
/// lost `Closing`. The same holds for a refused `Hello`'s `Rejected`.
#[test]
fn a_close_waits_up_to_the_flush_bound_for_the_client_to_have_the_stream() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    harness.client.cut = true;
    outbound.try_close(CloseCode::ReadyTimeout).unwrap();
    harness.run_for(Duration::from_millis(900));
    assert_eq!(harness.driver.open_count, 1, "waiting for the acknowledgement");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.driver.open_count, 0);
    assert_eq!(harness.server_closes("ready_timeout"), 1);

    let mut harness = Harness::new(Setup::default());
    harness.send(&bad_hello());
    harness.client_out();
    harness.client.cut = true;
    harness.run_for(Duration::from_millis(900));
    assert_eq!(harness.driver.open_count, 1, "waiting for the acknowledgement");
    harness.run_for(Duration::from_millis(200));
    assert_eq!(harness.driver.open_count, 0);
    assert_eq!(harness.server_closes("rejected"), 1);
}

/// Messages still unread when the server closes a connection (the game's queue was full) are
/// dropped: the disconnect is the last event the game hears of it.
#[test]
fn nothing_is_heard_after_the_server_closes_a_connection() {
    let (mut harness, outbound, connection) = Harness::logged_in_with_restarts_queued();
    harness.settle();
    outbound.close_now(CloseCode::SlowConsumer);
    let heard = harness.settle_as_the_game_takes_events();
    assert!(heard.iter().filter(|e| is_restart(e)).count() < 12, "{heard:?}");
    assert!(
        matches!(heard.last(), Some(ConnectionEvent::Disconnected { connection: c, .. })
            if *c == connection),
        "{heard:?}"
    );
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::SlowConsumer.code())));
}

/// A first packet from an address not yet proven is answered with a stateless retry and keeps
/// no state (no connection, no pending slot); the client's answer, which proves the address, is
/// accepted.
#[test]
fn an_unproven_address_gets_a_stateless_retry_before_any_state_is_kept() {
    let mut harness = Harness::dialing(Setup::default());
    assert!(harness.client_out());
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.connections.is_empty(), "no state for an unproven address");
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    assert_eq!(harness.driver.socket.sent.borrow().len(), 1, "the retry");
    harness.client_in();
    assert!(harness.client_out(), "the client answers the retry");
    harness.driver.turn(harness.now, &mut Vec::new());
    assert_eq!(harness.driver.connections.len(), 1, "accepted once proven");
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1);
}

/// A send the socket refuses for another reason than a full queue (an ICMP error for an
/// earlier datagram, say) drops that datagram, which QUIC sends again, and the driver goes on:
/// it is not held as blocked, whether it was a fresh transmit or one waiting for room.
#[test]
fn a_send_refused_for_another_reason_is_dropped_not_held() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    outbound.try_send_frames(left("p2"), 1).unwrap();
    harness.driver.socket.fail_next.set(1);
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.sending.blocked.is_none(), "a fresh transmit");

    outbound.try_send_frames(left("p3"), 1).unwrap();
    harness.driver.socket.full.set(true);
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.sending.blocked.is_some());
    harness.driver.socket.full.set(false);
    harness.driver.socket.fail_next.set(1);
    harness.driver.turn(harness.now, &mut Vec::new());
    assert!(harness.driver.sending.blocked.is_none(), "a transmit that waited for room");

    harness.run_for(Duration::from_secs(1));
    let left_players: Vec<&str> = harness
        .client
        .read
        .iter()
        .filter_map(|m| match m {
            ServerMessage::PlayerLeft { player_id } => Some(player_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(left_players, ["p2", "p3"], "QUIC sent both again");
}

/// The driver's timer branch sleeps until the first deadline, and without one never wakes (a
/// timer that returned at once would spin the driver).
#[tokio::test(start_paused = true)]
async fn the_timer_branch_sleeps_until_its_deadline_and_never_without_one() {
    let start = tokio::time::Instant::now();
    sleep_until(Some((start + Duration::from_secs(1)).into_std())).await;
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    let never = tokio::time::timeout(Duration::from_secs(3600), sleep_until(None)).await;
    assert!(never.is_err());
}

/// How long a step of the real-socket test may take before it fails, rather than hang.
const REAL_STEP: Duration = Duration::from_secs(5);

/// A quinn client of the network at `addr`, logged in: its connection and stream (its sending
/// half finishes when dropped), and the game's end of its queue from the next `Login` on
/// `events` (earlier connections' events are passed over).
async fn real_login(
    client: &quinn::Endpoint,
    addr: SocketAddr,
    events: &mut mpsc::Receiver<ConnectionEvent>,
) -> (quinn::Connection, (quinn::SendStream, quinn::RecvStream), SendQueue) {
    let connecting = client.connect(addr, "localhost").unwrap();
    let connection = tokio::time::timeout(REAL_STEP, connecting).await.unwrap().unwrap();
    let (mut send, recv) = connection.open_bi().await.unwrap();
    let frame = gatehouse_protocol::encode_frame(&hello(), 64 * 1024).unwrap();
    send.write_all(&frame).await.unwrap();
    loop {
        match tokio::time::timeout(REAL_STEP, events.recv()).await.unwrap() {
            Some(ConnectionEvent::Login { outbound, .. }) => {
                return (connection, (send, recv), outbound);
            }
            Some(ConnectionEvent::Disconnected { .. }) => {}
            other => panic!("expected a login, got {other:?}"),
        }
    }
}

/// The driver through its async shell on a real UDP socket on loopback: a quinn client logs in
/// and reads what the game queues; the network counts a connection open until its client
/// closes it; `shut` closes what is left with the code given and stops the driver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_on_a_real_socket_logs_in_counts_open_and_shuts_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let network =
        NetworkConfig { bind: "127.0.0.1:0".parse().unwrap(), ..NetworkConfig::default() };
    let identity = tls::load_identity(&TlsConfig::default(), dir.path()).unwrap();
    let server_config = endpoint::server_config(identity, &network, false).unwrap();
    let socket = crate::net::bind_socket(network.bind, network.udp_buffer_bytes).unwrap();
    let thread = DriverThread::start().unwrap();
    let (events_tx, mut events) = mpsc::channel(16);
    let metrics = Metrics::new();
    let started = Network::new(
        socket,
        server_config,
        &network,
        test_tokens().into(),
        events_tx,
        metrics.net().clone(),
        &thread,
    )
    .unwrap();
    let addr = started.local_addr();
    let mut running = started.start(&thread, CancellationToken::new());
    assert_eq!(running.local_addr(), addr);

    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let cert = dir.path().join(tls::DEV_CERT_FILE);
    client.set_default_client_config(gatehouse_client_sim::swarm::client_config(&cert).unwrap());

    // Logged in, and what the game queues arrives.
    let (first, (_send, mut recv), outbound) = real_login(&client, addr, &mut events).await;
    outbound.try_send_frames(left("p2"), 1).unwrap();
    let mut decoder = FrameDecoder::new(64 * 1024);
    let message = loop {
        if let Some(message) = decoder.next_message::<ServerMessage>().unwrap() {
            break message;
        }
        let chunk = tokio::time::timeout(REAL_STEP, recv.read_chunk(1024, true)).await;
        decoder.extend(&chunk.unwrap().unwrap().unwrap().bytes);
    };
    assert!(matches!(message, ServerMessage::PlayerLeft { .. }), "{message:?}");
    assert!(!running.wait_closed(Duration::from_millis(100)).await, "one connection open");

    // Its client closes it: none is open.
    first.close(VarInt::from_u32(CloseCode::Leave.code()), b"bye");
    assert!(running.wait_closed(REAL_STEP).await, "closed by its client");

    // Shut with a code (any: the server's drain gives ShuttingDown, which a dropped network
    // gives too): a client still connected hears it, and the driver stops.
    let (second, _stream, _outbound) = real_login(&client, addr, &mut events).await;
    let code = CloseCode::Replaced;
    tokio::time::timeout(REAL_STEP, running.shut(code, REAL_STEP)).await.unwrap();
    let reason = tokio::time::timeout(REAL_STEP, second.closed()).await.unwrap();
    assert!(
        matches!(&reason, quinn::ConnectionError::ApplicationClosed(close)
            if close.error_code == VarInt::from_u32(code.code())),
        "{reason:?}"
    );
}

/// A client that stops reading while its reading is paused, with a close the game queued still
/// waiting behind more than a batch of frames: what it sent reaches the game, then its
/// disconnect as a violation; the forced close does not cut it off as a server shutting down.
#[test]
fn a_client_that_stops_reading_while_paused_behind_a_queued_close_is_not_closed_as_shutting_down() {
    let setup = Setup { events: 2, client_window: Some(2_000), ..Setup::default() };
    let (mut harness, outbound, connection) = Harness::logged_in(setup);
    harness.client.reading = false;
    outbound.try_send_frames(Bytes::from(vec![0u8; 70_000]), 1).unwrap();
    outbound.try_send_frames(left("p2"), 1).unwrap();
    outbound.try_close(CloseCode::ReadyTimeout).unwrap();
    harness.settle();
    for _ in 0..12 {
        harness.send(&restart());
    }
    harness.settle();
    assert!(harness.connection().is_read_paused());
    let id = harness.client.stream.unwrap();
    harness.client.quic.recv_stream(id).stop(VarInt::from_u32(0)).unwrap();
    // The game is busy past the forced close.
    harness.run_for(Duration::from_millis(2_100));
    assert_eq!(harness.server_closes("shutting_down"), 0, "the game did not stop");
    let heard = harness.settle_as_the_game_takes_events();
    assert_restarts_then_a_violation(&heard, 12, connection);
}

/// Logins the game's full queue has not taken yet hold their pending slots: the pending cap
/// still bounds the connections the game has not heard of, and a slot frees once the game
/// takes the login.
#[test]
fn logins_waiting_for_the_games_queue_stay_within_the_pending_cap() {
    let mut harness = Harness::dialing(Setup { events: 1, ..Setup::default() });
    harness.driver.admission = Admission::with_caps(1, 1, harness.metrics.net().clone());
    let other = ConnectionEvent::Disconnected {
        connection: ConnectionId(999),
        departure: Departure::lost("test"),
    };
    harness.driver.events.try_send(other).unwrap();
    harness.handshake();
    harness.send(&hello());
    harness.settle();
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1, "the login waits");

    // Another client is refused while it waits.
    harness.client = Client::dial(&harness.cert, harness.setup, harness.now, &harness.network, 3);
    harness.run_for(Duration::from_millis(50));
    assert!(
        matches!(harness.client.lost, Some(ConnectionError::ConnectionClosed(_))),
        "{:?}",
        harness.client.lost
    );
    assert_eq!(harness.driver.open_count, 1);

    // The game takes the login: its slot frees, and the next client gets in.
    let heard = harness.settle_as_the_game_takes_events();
    assert!(heard.iter().any(|e| matches!(e, ConnectionEvent::Login { .. })), "{heard:?}");
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    harness.client = Client::dial(&harness.cert, harness.setup, harness.now, &harness.network, 4);
    harness.handshake();
    assert_eq!(harness.driver.open_count, 2);
}

/// Events for a game task that is gone (the server is stopping) are dropped, and do not keep
/// waking the driver.
#[test]
fn events_for_a_game_task_that_is_gone_are_dropped() {
    let (mut harness, _outbound, _) = Harness::logged_in(Setup::default());
    let (_tx, gone) = mpsc::channel(1);
    drop(std::mem::replace(&mut harness.events, gone));
    harness.send(&restart());
    harness.settle();
    assert!(harness.driver.common.outbox.is_empty());
}

/// A newcomer that finds the pending table full takes the slot of a connection that has not
/// logged in: that one is closed with `ServerFull` (counted, and counted out of the open
/// connections), and the newcomer gets in.
#[test]
fn a_full_pending_table_evicts_a_connection_still_awaiting_its_hello_for_a_newcomer() {
    let mut harness = Harness::dialing(Setup::default());
    // One pending slot in all; two per address, so the newcomer is not refused for its own.
    harness.driver.admission = Admission::with_caps(1, 2, harness.metrics.net().clone());
    harness.handshake();
    assert_eq!(harness.driver.open_count, 1);

    harness.client = Client::dial(&harness.cert, harness.setup, harness.now, &harness.network, 3);
    harness.handshake();
    assert_eq!(harness.server_closes("server_full"), 1);
    assert_eq!(harness.driver.open_count, 1, "the evicted one is out, the newcomer in");
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1);
}

/// A client that stops reading in the same wake as its hello deadline is closed once, with
/// `HelloTimeout`: the stop that QUIC reports after the close changes nothing.
#[test]
fn a_stop_reported_after_the_connection_closed_changes_nothing() {
    let mut harness = Harness::new(Setup::default());
    let hello = harness.network.hello_timeout;
    harness.run_for(hello - Duration::from_millis(100));
    let id = harness.client.stream.unwrap();
    harness.client.quic.recv_stream(id).stop(VarInt::from_u32(0)).unwrap();
    assert!(harness.client_out(), "the stop waits in the driver's socket");
    harness.now += Duration::from_millis(200);
    harness.driver.turn(harness.now, &mut Vec::new());
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::HelloTimeout.code())));
    assert_eq!(harness.server_closes("hello_timeout"), 1);
    assert_eq!(harness.server_closes("protocol_violation"), 0);
}

/// A harness whose server offers the peer link and whose client dials it: another server of
/// the fleet (docs/spec/travel.md V14).
fn peer_setup() -> Setup {
    Setup { offer_peer_link: true, dial_peer_link: true, ..Setup::default() }
}

/// A peer's `Hello` (its proof is the game task's to check, never the driver's).
fn peer_hello() -> PeerMessage {
    PeerMessage::Hello {
        version: 1,
        server: gatehouse_protocol::ServerId::new("hub-1").unwrap(),
        proof: gatehouse_protocol::fleet::PeerProof([7; 32]),
    }
}

/// A source's request, as a later message of a peer link.
fn reserve() -> PeerMessage {
    PeerMessage::ReserveSeats {
        trn: TransitionId(4),
        node: gatehouse_protocol::NodeId::new("crypt").unwrap(),
        players: vec![PlayerId::new("p1").unwrap()],
    }
}

impl Harness {
    /// Queues `messages` on the client's stream, in one write.
    fn send_peer(&mut self, messages: &[PeerMessage]) {
        let mut bytes = Vec::new();
        for message in messages {
            let frame = gatehouse_protocol::encode_frame(message, self.network.max_frame_len);
            bytes.extend(frame.unwrap());
        }
        let id = self.client.stream.unwrap();
        assert_eq!(self.client.quic.send_stream(id).write(&bytes).unwrap(), bytes.len());
    }

    /// The client's TLS exporter value for the peer link's proofs.
    fn client_exporter(&self) -> [u8; 32] {
        let mut exporter = [0; 32];
        let label = gatehouse_protocol::fleet::PEER_EXPORTER_LABEL.as_bytes();
        self.client
            .quic
            .crypto_session()
            .export_keying_material(&mut exporter, label, &[])
            .unwrap();
        exporter
    }

    /// A peer link whose first message, a `Hello`, went up: the game's end of its queue and
    /// its id.
    fn peer_opened() -> (Harness, SendQueue, ConnectionId) {
        let mut harness = Harness::new(peer_setup());
        harness.send_peer(&[peer_hello()]);
        harness.settle();
        let mut events = harness.take_events();
        match events.pop() {
            Some(ConnectionEvent::Peer(PeerConnectionEvent::Opened {
                connection,
                outbound,
                ..
            })) if events.is_empty() => (harness, outbound, connection),
            other => panic!("expected the link opened alone, got {other:?} after {events:?}"),
        }
    }
}

/// V14: a connection on the peer link's ALPN never takes a player's `Hello` path: its first
/// message goes up as the link's opening, with the connection's own TLS exporter value (the
/// one its dialler computes) and the name it dialled; what it sends after waits, unread, until
/// the game writes its `Welcome`, then comes up as the link's messages.
#[test]
fn a_peer_links_first_message_goes_up_with_its_exporter_and_nothing_more_until_its_welcome() {
    let mut harness = Harness::new(peer_setup());
    harness.send_peer(&[peer_hello(), reserve()]);
    harness.settle();
    let exporter = harness.client_exporter();
    let mut events = harness.take_events();
    let Some(ConnectionEvent::Peer(PeerConnectionEvent::Opened {
        exporter: heard,
        server_name,
        first,
        outbound,
        ..
    })) = events.pop()
    else {
        panic!("expected the link opened");
    };
    assert!(events.is_empty(), "nothing but the opening before the Welcome: {events:?}");
    assert_eq!(heard, exporter, "the connection's exporter value, as its dialler has it");
    assert_eq!((server_name.as_deref(), first), (Some("localhost"), peer_hello()));
    assert_eq!(harness.metric("gatehouse_logins_refused_total{reason=\"hello_expected\"}"), 0);
    harness.run_for(Duration::from_millis(500));
    assert!(harness.take_events().is_empty(), "the request waits for the Welcome");
    outbound.try_send_frames(Bytes::from_static(b"welcome"), 1).unwrap();
    harness.settle();
    assert!(
        matches!(harness.take_events().as_slice(),
            [ConnectionEvent::Peer(PeerConnectionEvent::Message { message, .. })]
                if *message == reserve()),
        "the request comes up after the Welcome"
    );
}

/// V14, V16: a peer link takes the client path's budgets: one that says nothing by the hello
/// timeout is closed with `HelloTimeout`, its pending slot freed, and the game hears nothing.
#[test]
fn a_peer_link_that_says_nothing_by_the_hello_timeout_is_closed() {
    let mut harness = Harness::new(peer_setup());
    assert_eq!(harness.metric("gatehouse_pending_connections"), 1);
    harness.run_for(harness.network.hello_timeout + Duration::from_millis(100));
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::HelloTimeout.code())));
    assert_eq!(harness.metric("gatehouse_pending_connections"), 0);
    assert!(harness.take_events().is_empty());
}

/// A peer link's end goes up as the link's, never as a player's departure; closed by the game,
/// it gets the close code alone, no `Closing` frame (a peer reads peer messages).
#[test]
fn a_peer_links_end_is_its_own_and_its_close_writes_no_closing_frame() {
    let (mut harness, outbound, connection) = Harness::peer_opened();
    outbound.try_close(CloseCode::Rejected).unwrap();
    harness.run_for(Duration::from_millis(500));
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::Rejected.code())));
    assert!(harness.client.read.is_empty(), "no frame: {:?}", harness.client.read);
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(),
            [ConnectionEvent::Peer(PeerConnectionEvent::Gone { connection: c, .. })]
                if *c == connection),
        "{events:?}"
    );
    let (mut harness, _outbound, _) = Harness::peer_opened();
    harness.client_closes(CloseCode::Leave);
    harness.run_for(Duration::from_millis(500));
    let events = harness.take_events();
    assert!(
        matches!(events.as_slice(),
            [ConnectionEvent::Peer(PeerConnectionEvent::Gone { departure, .. })]
                if departure.reason.starts_with("closed by the peer")),
        "{events:?}"
    );
}

/// V14: a server in no fleet offers no peer link: a dialler that offers only its ALPN fails
/// the handshake (no application protocol), and the game hears nothing; a player still logs in
/// on a server that offers it.
#[test]
fn the_peer_alpn_is_refused_unless_offered_and_players_log_in_beside_it() {
    let setup = Setup { dial_peer_link: true, ..Setup::default() };
    let mut harness = Harness::dialing(setup);
    harness.run_for(Duration::from_millis(200));
    assert!(
        matches!(&harness.client.lost, Some(ConnectionError::ConnectionClosed(close))
            if close.error_code == quinn_proto::TransportErrorCode::crypto(120)),
        "{:?}",
        harness.client.lost
    );
    assert!(harness.take_events().is_empty());
    let setup = Setup { offer_peer_link: true, ..Setup::default() };
    let (_harness, _outbound, _connection) = Harness::logged_in(setup);
}

/// A close the game asks for at once just before it drops the queue (a slow consumer, a
/// refused peer link) closes with its code even when the connection is driven before the ring
/// is taken, never as a queue dropped without a close (`ShuttingDown`).
#[test]
fn a_close_at_once_then_the_queue_dropped_closes_with_its_code_ahead_of_its_ring() {
    let (mut harness, outbound, _) = Harness::logged_in(Setup::default());
    outbound.close_now(CloseCode::SlowConsumer);
    drop(outbound);
    let handle = *harness.driver.connections.keys().next().unwrap();
    let now = harness.now;
    harness.driver.drive(now, handle);
    harness.settle();
    assert_eq!(harness.closed_with(), Some(u64::from(CloseCode::SlowConsumer.code())));
}

//! The network driver's connection state machine for fuzzing (the `fuzzing` feature): one
//! client against a real driver and its real `Connection`s over the driver tests' in-memory
//! wire, on an explicit clock, with the game's end played as the game task plays it.
//!
//! [`run`] replays a sequence of [`Step`]s (arbitrary stream bytes, framed messages, resets,
//! stop-sendings, closes, lost datagrams, cut-offs, time, a game that is slow to take events,
//! sends and closes) and checks after every step what the game task relies on:
//!
//! 1. nothing panics;
//! 2. a connection logs in at most once, its messages come only between its login and its
//!    disconnect, and it is disconnected at most once;
//! 3. the driver's open count never exceeds the connections it holds;
//!
//! and at the end, once every client has gone quiet and the game has taken every event, that
//! nothing is left behind: no connection, no pending slot, no timer, and every login heard its
//! disconnect.

// A harness: a setup that fails is a failed test or fuzz run, never a server's error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_protocol::{ClientMessage, CloseCode, PlayerId, ServerMessage};
use quinn_proto::VarInt;

use super::event::{ConnectionEvent, SendQueue};
use super::network::harness::{Harness, Held, Setup, hello};
use crate::game::ConnectionId;

/// One thing that happens to the client, on the wire or in the game.
#[derive(Debug, Clone)]
pub enum Step {
    /// The client writes these bytes on its stream: frames, parts of frames, garbage.
    Bytes(Vec<u8>),
    /// The client sends this message, framed.
    Message(ClientMessage),
    /// The client sends a `Hello` with a token the server accepts.
    Hello,
    /// The client finishes its stream.
    Finish,
    /// The client resets its stream with this code.
    Reset(u32),
    /// The client stops reading its stream (STOP_SENDING) with this code.
    StopSending(u32),
    /// The client closes its connection with this code.
    Close(u32),
    /// The client stops (`false`) or resumes (`true`) reading what the server writes.
    Reading(bool),
    /// The next this many datagrams to cross, either way, are lost.
    Lose(u8),
    /// The client is cut off from the server (`true`) or reachable again (`false`).
    Cut(bool),
    /// This many milliseconds pass (at most [`MAX_ADVANCE`]), each timer firing at its
    /// deadline; past [`MAX_TIME`] in all, time stands still.
    Advance(u16),
    /// The game takes every event its queue holds.
    GameTakes,
    /// The game queues this many `PlayerLeft` frames on the newest login's queue.
    GameSends(u8),
    /// The game closes the newest login with this code.
    GameCloses(CloseCode),
    /// A new client connects (from the same address, as a relaunch does); the old one
    /// vanishes without a word.
    Reconnect,
}

/// Longest one [`Step::Advance`]: past the longest deadline of a connection (the idle
/// timeout, 10 s).
pub const MAX_ADVANCE: Duration = Duration::from_secs(12);

/// Most time one run's steps may pass: every deadline fires several times within it, and a
/// run stays cheap (keep-alives every 3 s cost a few packets each).
pub const MAX_TIME: Duration = Duration::from_secs(60);

/// The game's queue holds this many events, at least 1.
const MAX_EVENTS: u8 = 16;

/// Quiet time at the end: past the idle timeout, the handshake and hello budgets, the forced
/// close and the drain, however the steps left the connections.
const WIND_DOWN: Duration = Duration::from_secs(60);

/// Replays `steps` against a driver whose game queue holds `events` (1 to 16) events, then
/// winds down, panicking at the first broken rule (module docs).
pub fn run(events: u8, steps: &[Step]) {
    let setup = Setup { events: usize::from(events % MAX_EVENTS) + 1, ..Setup::default() };
    let mut fuzz =
        Fuzz { harness: Harness::new(setup), game: Game::default(), seed: 3, time_left: MAX_TIME };
    for step in steps {
        fuzz.step(step);
        fuzz.harness.settle();
        fuzz.check();
    }
    fuzz.wind_down();
}

/// The harness and the game's end of it.
struct Fuzz {
    harness: Harness,
    game: Game,
    /// Seeds the next client's endpoint.
    seed: u8,
    /// What is left of [`MAX_TIME`].
    time_left: Duration,
}

/// What the game heard, per connection.
#[derive(Default)]
struct Game {
    /// Logged-in connections not yet disconnected, with their queues.
    open: BTreeMap<ConnectionId, SendQueue>,
    /// The newest login.
    newest: Option<ConnectionId>,
    /// Connections the game heard disconnect.
    gone: Vec<ConnectionId>,
}

impl Fuzz {
    fn step(&mut self, step: &Step) {
        let harness = &mut self.harness;
        let stream = harness.client.stream;
        match step {
            Step::Bytes(bytes) => {
                if let Some(id) = stream {
                    // A write the stream refuses (finished, reset, stopped) is lost; so be it.
                    let _ = harness.client.quic.send_stream(id).write(bytes);
                }
            }
            Step::Message(message) => self.send(message),
            Step::Hello => self.send(&hello()),
            Step::Finish => {
                if let Some(id) = stream {
                    let _ = harness.client.quic.send_stream(id).finish();
                }
            }
            Step::Reset(code) => {
                if let Some(id) = stream {
                    let _ = harness.client.quic.send_stream(id).reset(VarInt::from_u32(*code));
                }
            }
            Step::StopSending(code) => {
                if let Some(id) = stream {
                    let _ = harness.client.quic.recv_stream(id).stop(VarInt::from_u32(*code));
                }
            }
            Step::Close(code) => harness.client.quic.close(
                harness.now,
                VarInt::from_u32(*code),
                Bytes::from_static(b"fuzz"),
            ),
            Step::Reading(reading) => harness.client.reading = *reading,
            Step::Lose(count) => harness.client.lose_next = usize::from(*count),
            Step::Cut(cut) => harness.client.cut = *cut,
            Step::Advance(ms) => {
                let span =
                    Duration::from_millis(u64::from(*ms)).min(MAX_ADVANCE).min(self.time_left);
                self.time_left -= span;
                harness.run_for(span);
            }
            Step::GameTakes => self.take_events(),
            Step::GameSends(count) => {
                if let Some(queue) = self.game.newest.and_then(|c| self.game.open.get(&c)) {
                    let frame = left_frame();
                    for _ in 0..*count {
                        // A full queue is the slow-consumer close the game would make.
                        if queue.try_send_frames(frame.clone(), 1).is_err() {
                            queue.close_now(CloseCode::SlowConsumer);
                            break;
                        }
                    }
                }
            }
            Step::GameCloses(code) => {
                if let Some(queue) = self.game.newest.and_then(|c| self.game.open.get(&c))
                    && queue.try_close(*code).is_err()
                {
                    queue.close_now(*code);
                }
            }
            Step::Reconnect => {
                self.seed = self.seed.wrapping_add(1).max(3);
                harness.dial_again(self.seed);
            }
        }
    }

    /// Queues `message` framed on the client's stream, if it still takes writes.
    fn send(&mut self, message: &ClientMessage) {
        let harness = &mut self.harness;
        let Some(id) = harness.client.stream else { return };
        let Ok(frame) = gatehouse_protocol::encode_frame(message, harness.network.max_frame_len)
        else {
            return;
        };
        let _ = harness.client.quic.send_stream(id).write(&frame);
    }

    /// Takes every event the game's queue holds, checking rule 2 on each.
    fn take_events(&mut self) {
        for event in self.harness.take_events() {
            self.game.hear(event);
        }
    }

    /// The game takes events as fast as the driver hands them over, until none comes.
    fn keep_up(&mut self) {
        // Each round takes at least one event, and the client sent finitely many.
        for _ in 0..1_000_000 {
            self.harness.settle();
            let events = self.harness.take_events();
            if events.is_empty() {
                return;
            }
            for event in events {
                self.game.hear(event);
            }
        }
        panic!("the driver never stops handing over events");
    }

    /// Rule 3, after every step.
    fn check(&self) {
        let held = self.harness.held();
        assert!(held.open <= held.connections, "{held:?}");
    }

    /// Every client goes quiet; the game takes events until the driver holds nothing.
    fn wind_down(&mut self) {
        let harness = &mut self.harness;
        harness.client.quic.close(harness.now, VarInt::from_u32(0), Bytes::new());
        harness.client.cut = false;
        harness.client.lose_next = 0;
        let nothing = Held { connections: 0, open: 0, timers: 0 };
        let step = Duration::from_secs(1);
        let mut waited = Duration::ZERO;
        // Once the driver holds nothing, nothing more can happen: stop early.
        while waited < WIND_DOWN && (self.harness.held() != nothing || !self.game.open.is_empty()) {
            self.keep_up();
            self.harness.run_for(step);
            waited += step;
        }
        self.keep_up();
        let held = self.harness.held();
        assert_eq!(held, nothing, "left behind");
        assert_eq!(self.harness.metrics.net().pending_connections(), 0, "pending slots left");
        assert!(
            self.game.open.is_empty(),
            "logins never disconnected: {:?}",
            self.game.open.keys()
        );
    }
}

impl Game {
    /// Rule 2 for one event, then what the game task does with it.
    fn hear(&mut self, event: ConnectionEvent) {
        match event {
            ConnectionEvent::Login { connection, player, outbound, .. } => {
                assert!(
                    !self.open.contains_key(&connection) && !self.gone.contains(&connection),
                    "{connection:?} logged in twice"
                );
                assert_eq!(player.as_str(), "p1", "the token's player");
                self.open.insert(connection, outbound);
                self.newest = Some(connection);
            }
            ConnectionEvent::Message { connection, .. } => {
                assert!(
                    self.open.contains_key(&connection),
                    "a message from {connection:?}, not logged in"
                );
            }
            ConnectionEvent::Disconnected { connection, .. } => {
                // Dropping the queue is how the game lets go of a connection.
                assert!(
                    self.open.remove(&connection).is_some(),
                    "{connection:?} disconnected, not logged in"
                );
                self.gone.push(connection);
            }
            ConnectionEvent::Peer(event) => {
                panic!("the fuzz client speaks gatehouse/1 only, yet a peer link: {event:?}")
            }
        }
    }
}

/// One encoded `PlayerLeft` frame, as the game queues them.
fn left_frame() -> Bytes {
    let message = ServerMessage::PlayerLeft { player_id: PlayerId::new("p2").expect("a valid id") };
    Bytes::from(gatehouse_protocol::encode_frame(&message, 1024).expect("a small frame"))
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::TransitionId;

    use super::*;

    /// A login, a flood of ignored messages, a game slow to take events and a cut-off: the run
    /// winds down with nothing left behind (`run` panics otherwise).
    #[test]
    fn a_login_a_flood_and_a_cut_off_leave_nothing_behind() {
        let shown = ClientMessage::TransitionShown { transition_id: TransitionId(7) };
        let mut steps = vec![Step::Hello, Step::GameTakes, Step::GameSends(40)];
        steps.extend(std::iter::repeat_n(Step::Message(shown), 600));
        steps.extend([Step::Lose(3), Step::Advance(500), Step::Cut(true), Step::Advance(20_000)]);
        run(2, &steps);
    }

    /// Garbage before a `Hello`, a relaunch and a game close: nothing left behind either.
    #[test]
    fn garbage_a_relaunch_and_a_game_close_leave_nothing_behind() {
        run(
            1,
            &[
                Step::Bytes(vec![0xff; 9]),
                Step::Reconnect,
                Step::Hello,
                Step::GameTakes,
                Step::GameCloses(CloseCode::ReadyTimeout),
                Step::Reading(false),
                Step::Advance(3_000),
            ],
        );
    }

    /// The checks can fail: a message from a connection the game never heard log in breaks
    /// rule 2.
    #[test]
    #[should_panic(expected = "not logged in")]
    fn a_message_before_a_login_breaks_rule_two() {
        let mut game = Game::default();
        game.hear(ConnectionEvent::Message {
            connection: ConnectionId(1),
            message: ClientMessage::Leave,
        });
    }
}

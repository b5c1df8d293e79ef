//! Fuzz target: the network driver's connection state machine, through its in-memory wire.
//!
//! One quinn-proto client against a real driver and its real `Connection`s, on an explicit
//! clock (`gatehouse_server::net::fuzzing`): the input is a sequence of arbitrary stream bytes,
//! framed messages (a valid `Hello` among them), stream finishes, resets and stop-sendings,
//! connection closes, lost datagrams and cut-offs, time passing, a game slow to take events,
//! game sends and game closes, and relaunches. Checked after every step and at the end (the
//! module's docs): nothing panics; each connection logs in at most once, speaks only between
//! its login and its one disconnect; and once everyone has gone quiet, the driver holds no
//! connection, pending slot or timer, and every login heard its disconnect.

#![no_main]
#![forbid(unsafe_code)]

use arbitrary::Arbitrary;
use gatehouse_protocol::{ClientMessage, CloseCode, JoinId, PawnId, TransitionId};
use gatehouse_server::net::fuzzing::{Step, run};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Case {
    /// The game's queue size (1 to 16 events).
    events: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Bytes(Vec<u8>),
    Message(Msg),
    Hello,
    Finish,
    Reset(u32),
    StopSending(u32),
    Close(u32),
    Reading(bool),
    Lose(u8),
    Cut(bool),
    Advance(u16),
    GameTakes,
    GameSends(u8),
    /// A close code by its wire value (unknown values are `ProtocolViolation`).
    GameCloses(u8),
    Reconnect,
}

/// A client message with any ids and any token.
#[derive(Debug, Arbitrary)]
enum Msg {
    Hello(u32, String),
    TransitionReady(u64),
    PossessionAcknowledged(u64),
    RestartRequest,
    Leave,
    JoinReady(u64),
    TransitionShown(u64),
    TravelAbandoned(u64),
}

impl Msg {
    fn message(self) -> ClientMessage {
        match self {
            Msg::Hello(protocol_version, token) => ClientMessage::Hello { protocol_version, token },
            Msg::TransitionReady(id) => {
                ClientMessage::TransitionReady { transition_id: TransitionId(id) }
            }
            Msg::PossessionAcknowledged(id) => {
                ClientMessage::PossessionAcknowledged { pawn_id: PawnId(id) }
            }
            Msg::RestartRequest => ClientMessage::RestartRequest,
            Msg::Leave => ClientMessage::Leave,
            Msg::JoinReady(id) => ClientMessage::JoinReady { join_id: JoinId(id) },
            Msg::TransitionShown(id) => {
                ClientMessage::TransitionShown { transition_id: TransitionId(id) }
            }
            Msg::TravelAbandoned(id) => {
                ClientMessage::TravelAbandoned { transition_id: TransitionId(id) }
            }
        }
    }
}

impl Op {
    fn step(self) -> Step {
        match self {
            Op::Bytes(bytes) => Step::Bytes(bytes),
            Op::Message(message) => Step::Message(message.message()),
            Op::Hello => Step::Hello,
            Op::Finish => Step::Finish,
            Op::Reset(code) => Step::Reset(code),
            Op::StopSending(code) => Step::StopSending(code),
            Op::Close(code) => Step::Close(code),
            Op::Reading(reading) => Step::Reading(reading),
            Op::Lose(count) => Step::Lose(count),
            Op::Cut(cut) => Step::Cut(cut),
            Op::Advance(ms) => Step::Advance(ms),
            Op::GameTakes => Step::GameTakes,
            Op::GameSends(count) => Step::GameSends(count),
            Op::GameCloses(code) => Step::GameCloses(
                CloseCode::from_code(u64::from(code)).unwrap_or(CloseCode::ProtocolViolation),
            ),
            Op::Reconnect => Step::Reconnect,
        }
    }
}

fuzz_target!(|case: Case| {
    // Bounded work per input: a long sequence only repeats what a short one reaches.
    let steps: Vec<Step> = case.ops.into_iter().take(64).map(Op::step).collect();
    run(case.events, &steps);
});

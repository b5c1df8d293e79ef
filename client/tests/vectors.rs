//! The session against the protocol's test vectors (`docs/protocol-vectors.json`): every
//! server frame, decoded by the codec, is taken by a session without a panic and gives the
//! event its message stands for; and the frames the session writes for its duties are the
//! vectors' client frames, byte for byte.

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Instant;

use gatehouse_client::{Event, Load, Session, SessionConfig};
use gatehouse_protocol::{
    FrameDecoder, JoinId, NodeId, PawnId, PlayerId, ServerMessage, TransitionId, encode_frame,
};
use serde_json::Value;

fn vectors() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol-vectors.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every frame of `direction`, as (name, frame bytes).
fn frames(direction: &str) -> Vec<(String, Vec<u8>)> {
    let all = vectors();
    let frames = all["frames"].as_array().unwrap().iter();
    frames
        .filter(|f| f["direction"] == direction)
        .map(|f| (f["name"].as_str().unwrap().to_owned(), unhex(f["frame"].as_str().unwrap())))
        .collect()
}

fn decode(frame: &[u8]) -> ServerMessage {
    let mut decoder = FrameDecoder::new(65_536);
    decoder.extend(frame);
    decoder.next_message().unwrap().unwrap()
}

/// The client vector named `name`, as hex.
fn client_vector(name: &str) -> String {
    let (_, frame) = frames("client_to_server").into_iter().find(|(n, _)| n == name).unwrap();
    hex(&frame)
}

fn welcomed(t0: Instant, token: &str) -> Session {
    let mut s = Session::new(t0, SessionConfig::new(token));
    let player_id = PlayerId::new("sim-0001").unwrap();
    s.handle(t0, ServerMessage::Welcome { player_id, current_node: None, max_frame_len: 65_536 });
    s
}

/// Every server vector frame reaches the game as the event its message stands for.
#[test]
fn every_server_vector_frame_gives_its_event() {
    let server = frames("server_to_client");
    assert!(server.len() >= 24, "one frame of every server message at least");
    for (name, frame) in server {
        let t0 = Instant::now();
        let mut s = welcomed(t0, "a.b.c");
        while s.poll_event().is_some() {}
        let message = decode(&frame);
        let stands_for = stands_for(&message);
        s.handle(t0, message);
        let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
        let given = |wanted: fn(&Event) -> bool| events.iter().any(wanted);
        let world = events.iter().filter(|e| matches!(e, Event::World(_))).count();
        let ok = match name.as_str() {
            // A second `Welcome` changes nothing.
            "Welcome" => events.is_empty(),
            "Rejected" => given(|e| matches!(e, Event::Rejected { .. })),
            "FreezeCharacters" => given(|e| matches!(e, Event::TransitionStarted { .. })),
            "ShowTransition" | "ShowJoin" => given(|e| matches!(e, Event::StreamLevels { .. })),
            // An end of a load not on screen is stale: nothing.
            "EndTransition" | "EndJoin" => events.is_empty(),
            "TransitionFailed" => given(|e| matches!(e, Event::TransitionFailed { .. })),
            "Possessed" => given(|e| matches!(e, Event::Possessed { .. })),
            "Unpossessed" => given(|e| matches!(e, Event::Unpossessed { .. })),
            // The vector's tags hold `State.Dead` for the welcomed player.
            "AbilityTagsChanged" => given(|e| *e == Event::Died),
            "KitsGranted" => given(|e| matches!(e, Event::KitsGranted { .. })),
            "Error" => given(|e| matches!(e, Event::Refused { .. })),
            "Closing" => given(|e| matches!(e, Event::Closed { .. })),
            // The vector's snapshot holds the welcomed player, dead: each message it stands for
            // is a world event, and the death is the player's.
            "WorldSnapshot" => world == stands_for && given(|e| *e == Event::Died),
            "Replicated" => world == stands_for,
            // A move to another server: the screen stays up for it (docs/spec/travel.md V3).
            "TravelTo" => given(|e| matches!(e, Event::Travelling { .. })),
            _ => given(|e| matches!(e, Event::World(_))),
        };
        assert!(ok, "{name}: {events:?}");
    }
}

/// How many messages `message` stands for: those a snapshot or a batch carries, else itself.
fn stands_for(message: &ServerMessage) -> usize {
    match message {
        ServerMessage::WorldSnapshot(snapshot) => snapshot.messages().count(),
        ServerMessage::Replicated { changes } => changes.len(),
        _ => 1,
    }
}

/// The session's duties, written as frames, are the vectors' client frames.
#[test]
fn the_sessions_frames_are_the_vectors_client_frames() {
    let t0 = Instant::now();
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    let mut written = Vec::new();
    let mut write = |s: &mut Session| {
        while let Some(output) = s.poll_output() {
            let gatehouse_client::Output::Send { message, .. } = output else {
                panic!("only messages: {output:?}")
            };
            written.push(hex(&encode_frame(&message, 65_536).unwrap()));
        }
    };
    write(&mut s);
    let player_id = PlayerId::new("sim-0001").unwrap();
    let node = NodeId::new("harbor").unwrap();
    s.handle(
        t0,
        ServerMessage::Welcome {
            player_id: player_id.clone(),
            current_node: None,
            max_frame_len: 65_536,
        },
    );
    let join = ServerMessage::ShowJoin {
        join_id: JoinId(4),
        node: node.clone(),
        levels: Vec::new(),
        rooms: Vec::new(),
    };
    s.handle(t0, join);
    s.levels_streamed(Load::Join(JoinId(4))).unwrap();
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(42) });
    s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(4) });
    let show = ServerMessage::ShowTransition {
        transition_id: TransitionId(7),
        target_node: node,
        levels: Vec::new(),
        rooms: Vec::new(),
    };
    s.handle(t0, show);
    s.levels_streamed(Load::Transition(TransitionId(7))).unwrap();
    let dead = vec![gatehouse_tags::catalog::STATE_DEAD];
    s.handle(t0, ServerMessage::AbilityTagsChanged { player_id, tags: dead });
    s.request_restart().unwrap();
    s.leave(t0);
    write(&mut s);
    let names = [
        "Hello",
        "JoinReady",
        "PossessionAcknowledged",
        "TransitionShown",
        "TransitionReady",
        "RestartRequest",
        "Leave",
    ];
    let expected: Vec<String> = names.iter().map(|n| client_vector(n)).collect();
    assert_eq!(written, expected);
}

/// A move's frames are the vectors' client frames: `TransitionShown` on the source, `Hello` with
/// the ticket on the destination's link, and `TravelAbandoned` on the source once the
/// destination refused it (docs/spec/travel.md V3, V15).
#[test]
fn a_moves_frames_are_the_vectors_client_frames() {
    let t0 = Instant::now();
    let mut s = welcomed(t0, "token.of.the.source");
    while s.poll_output().is_some() {}
    // The sample's move: transition 7, ticket `a.b.c`.
    s.handle(t0, gatehouse_protocol::samples::travel_to());
    let destination = gatehouse_client::LinkId(1);
    let refused = ServerMessage::Rejected {
        reason: gatehouse_protocol::RejectReason::TicketStale,
        detail: String::new(),
    };
    s.handle_on(t0, destination, refused);
    let written: Vec<(gatehouse_client::LinkId, String)> = std::iter::from_fn(|| s.poll_output())
        .filter_map(|output| match output {
            gatehouse_client::Output::Send { link, message } => {
                Some((link, hex(&encode_frame(&message, 65_536).unwrap())))
            }
            _ => None,
        })
        .collect();
    let source = gatehouse_client::LinkId::FIRST;
    let expected = [
        (source, client_vector("TransitionShown")),
        (destination, client_vector("Hello")),
        (source, client_vector("TravelAbandoned")),
    ];
    assert_eq!(written, expected);
}

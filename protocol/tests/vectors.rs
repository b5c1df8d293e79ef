//! `docs/protocol-vectors.json`, the protocol's test vectors for clients in any language, is
//! exactly what this codec makes, and every vector in it holds both ways: each frame decodes to
//! its message and its message encodes to the frame; each invalid frame is refused.
//!
//! After a deliberate change to the wire, write the file again with
//! `GATEHOUSE_WRITE_VECTORS=1 cargo test -p gatehouse-protocol --test vectors` and review its
//! diff.

// Test code: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN;
use gatehouse_protocol::messages::MAX_ADDRESS_LEN;
use gatehouse_protocol::samples::{
    CLIENT_VARIANTS, SERVER_VARIANTS, client_messages, client_variant, server_messages,
    server_variant,
};
use gatehouse_protocol::ticket::MAX_TICKET_LEN;
use gatehouse_protocol::{
    ClientMessage, CloseCode, ErrorCode, FrameDecoder, PROTOCOL_VERSION, RejectReason,
    ServerMessage, TransitionFailure, encode_frame,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol-vectors.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// One valid frame: its message as JSON (serde's externally tagged form) and its bytes.
fn vector<M: Serialize>(direction: &str, message: &M) -> Value {
    let value = serde_json::to_value(message).unwrap();
    let name = match &value {
        Value::String(name) => name.clone(),
        Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
        _ => String::new(),
    };
    let frame = encode_frame(message, DEFAULT_MAX_FRAME_LEN).unwrap();
    json!({ "name": name, "direction": direction, "message": value, "frame": hex(&frame) })
}

/// A frame a receiver must refuse, with the rule it breaks.
fn invalid(direction: &str, rule: &str, frame: Vec<u8>) -> Value {
    json!({ "direction": direction, "rule": rule, "frame": hex(&frame) })
}

/// `body` with its length prefix.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

/// `value` as a varint, written here from the rule of docs/protocol.md 3 (not by the codec), so
/// the invalid vectors check the document as well as the code.
fn varint(value: u64) -> Vec<u8> {
    match value {
        0..=250 => vec![value as u8],
        251..=0xffff => [vec![0xfb], (value as u16).to_le_bytes().to_vec()].concat(),
        0x1_0000..=0xffff_ffff => [vec![0xfc], (value as u32).to_le_bytes().to_vec()].concat(),
        _ => [vec![0xfd], value.to_le_bytes().to_vec()].concat(),
    }
}

/// A `PawnsTeleported` body to `forest` with these raw runs (first id, count).
fn teleport_body(runs: &[(u64, u32)]) -> Vec<u8> {
    let mut body = vec![8];
    body.extend(varint(6));
    body.extend_from_slice(b"forest");
    body.extend(varint(runs.len() as u64));
    for (first, count) in runs {
        body.extend(varint(*first));
        body.extend(varint(u64::from(*count)));
    }
    body
}

/// A `Replicated` body listing `nodes` and no class, with one change: `PawnsTeleported` (change
/// variant 7) of pawn 12 to node index `node`.
fn replicated_teleport_body(nodes: &[&[u8]], node: u8) -> Vec<u8> {
    let mut body = vec![22, 0];
    body.extend(varint(nodes.len() as u64));
    for name in nodes {
        body.extend(varint(name.len() as u64));
        body.extend_from_slice(name);
    }
    body.extend([1, 7, node, 1, 12, 1]);
    body
}

/// A `Welcome` body for `player` with no current node (its option byte at [`NODE_OPTION`] from
/// the end) and a frame limit of 65,536.
fn welcome_body(player: &[u8]) -> Vec<u8> {
    let mut body = vec![0];
    body.extend(varint(player.len() as u64));
    body.extend_from_slice(player);
    body.push(0);
    body.extend(varint(65_536));
    body
}

/// Where `welcome_body`'s option byte is, counted from its end: before the frame limit's 5-byte
/// varint.
const NODE_OPTION: usize = 6;

/// An `AbilityTagsChanged` body for `p1` with one tag named `tag`.
fn tags_body(tag: &[u8]) -> Vec<u8> {
    let mut body = vec![13];
    body.extend(varint(2));
    body.extend_from_slice(b"p1");
    body.extend(varint(1));
    body.extend(varint(tag.len() as u64));
    body.extend_from_slice(tag);
    body
}

/// A `TravelTo` body (transition 7 to `crypt`, no pin, held 10 s) with an address of
/// `address_len` bytes and a ticket of `ticket_len` bytes (its server name `h`).
fn travel_to_body(address_len: usize, ticket_len: usize) -> Vec<u8> {
    let mut body = vec![23, 7];
    for text in [&b"crypt"[..], &vec![b'h'; address_len], b"h"] {
        body.extend(varint(text.len() as u64));
        body.extend_from_slice(text);
    }
    body.push(0);
    body.extend(varint(ticket_len as u64));
    body.extend(vec![b't'; ticket_len]);
    body.extend(varint(10_000));
    body
}

/// The sample `WorldSnapshot` frame with its pawn's owner index set to `owner` (the sample has
/// two players, so 2 names nobody).
fn snapshot_frame_with_owner(owner: u8) -> Vec<u8> {
    let message =
        ServerMessage::WorldSnapshot(Box::new(gatehouse_protocol::samples::world_snapshot()));
    let mut frame = encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap();
    // The pawns list: one pawn, id 9, owner 0, class 0, node 0, dead.
    let pawns = [1, 9, 0, 0, 0, 0];
    let at = frame.windows(pawns.len()).position(|w| w == pawns).expect("the sample's pawn") + 2;
    frame[at] = owner;
    frame
}

/// The sample `WorldSnapshot` frame with its one `health` entry (player 0) listed twice.
fn snapshot_frame_with_health_twice() -> Vec<u8> {
    let message =
        ServerMessage::WorldSnapshot(Box::new(gatehouse_protocol::samples::world_snapshot()));
    let mut frame = encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap();
    // The health list ends the frame: its count (1), then one entry (player 0, health 0), each
    // a one-byte varint.
    let entry = frame[frame.len() - 2..].to_vec();
    let count = frame.len() - 3;
    assert_eq!(frame[count], 1, "the sample's health list holds one entry");
    frame[count] = 2;
    frame.extend_from_slice(&entry);
    let body_len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&body_len.to_le_bytes());
    frame
}

/// The whole file, as this codec makes it.
fn generate() -> Value {
    let mut frames: Vec<Value> =
        client_messages().iter().map(|m| vector("client_to_server", m)).collect();
    frames.extend(server_messages().iter().map(|m| vector("server_to_client", m)));
    let leave = encode_frame(&ClientMessage::Leave, DEFAULT_MAX_FRAME_LEN).unwrap();
    let mut trailing = leave.clone();
    trailing[0] += 1;
    trailing.push(0);
    let invalid = vec![
        invalid(
            "client_to_server",
            "2: a length above the frame limit (65,536 by default) is refused before its body",
            ((DEFAULT_MAX_FRAME_LEN + 1) as u32).to_le_bytes().to_vec(),
        ),
        invalid("client_to_server", "2: a body must leave no bytes unread", trailing),
        invalid(
            "client_to_server",
            "3: an enum's variant index must name one of its variants",
            framed(&[7]),
        ),
        invalid(
            "server_to_client",
            "3: an option is 0 or 1, then its value",
            framed(&{
                let mut body = welcome_body(b"p1");
                let at = body.len() - NODE_OPTION;
                body[at] = 2;
                body
            }),
        ),
        invalid(
            "server_to_client",
            "3, Ids: a player id is 1-64 bytes of [A-Za-z0-9_.:-]",
            framed(&welcome_body(b"p 1")),
        ),
        invalid("server_to_client", "3, Ids: a player id is not empty", framed(&welcome_body(b""))),
        invalid(
            "server_to_client",
            "3, Ids: a gameplay tag is one the catalog declares",
            framed(&tags_body(b"State.Undeclared")),
        ),
        invalid(
            "server_to_client",
            "3, Ids: a pawn id run holds at least one id",
            framed(&teleport_body(&[(12, 0)])),
        ),
        invalid(
            "server_to_client",
            "3, Ids: pawn id runs ascend",
            framed(&teleport_body(&[(20, 1), (12, 3)])),
        ),
        invalid(
            "server_to_client",
            "3, Ids: pawn id runs do not touch (touching runs are one run)",
            framed(&teleport_body(&[(12, 3), (15, 1)])),
        ),
        invalid(
            "server_to_client",
            "3, Ids: pawn id runs do not overlap",
            framed(&teleport_body(&[(12, 3), (13, 4)])),
        ),
        invalid(
            "server_to_client",
            "3, Ids: a pawn id run ends at or before the largest id (2^64 - 1)",
            framed(&teleport_body(&[(u64::MAX, 2)])),
        ),
        invalid(
            "server_to_client",
            "3, Ids: pawn id runs name at most 65,536 ids in all",
            framed(&teleport_body(&[(1, 65_536), (70_000, 1)])),
        ),
        invalid(
            "server_to_client",
            "4.5: every index of a world snapshot names an entry of its message",
            snapshot_frame_with_owner(2),
        ),
        invalid(
            "server_to_client",
            "4.5: a world snapshot's tags and health name each player at most once, ascending",
            snapshot_frame_with_health_twice(),
        ),
        invalid(
            "server_to_client",
            "4.4: every class and node index of a Replicated change names an entry of its message",
            framed(&replicated_teleport_body(&[b"forest"], 1)),
        ),
        invalid(
            "server_to_client",
            "5: a TravelTo's address is at most 255 bytes",
            framed(&travel_to_body(MAX_ADDRESS_LEN + 1, 5)),
        ),
        invalid(
            "server_to_client",
            "5: a TravelTo's ticket is at most 1,024 bytes",
            framed(&travel_to_body(5, MAX_TICKET_LEN + 1)),
        ),
    ];
    let tags: Vec<&str> = gatehouse_tags::catalog::ALL_DECLARED.iter().map(|t| t.name()).collect();
    json!({
        "protocol_version": PROTOCOL_VERSION,
        "about": "Test vectors of the gatehouse wire protocol (docs/protocol.md). Each entry of \
                  `frames` is one frame as hex (the u32 LE length, then the body) and its \
                  message in serde's externally tagged JSON form, object keys sorted (the \
                  wire order is docs/protocol.md's). A `Replicated` message's JSON is \
                  `{\"Replicated\": {\"changes\": {\"classes\", \"nodes\", \"changes\"}}}`: its \
                  lists and its changes, which name classes and nodes by index, nested in one \
                  field. A receiver must decode the frame to the message, and \
                  a sender encode the message to the frame. Each \
                  entry of `invalid` is a frame a receiver must refuse as a protocol violation, \
                  with the rule it breaks (its section in docs/protocol.md). `tags` is the \
                  gameplay tag catalog of this version.",
        "frames": frames,
        "invalid": invalid,
        "tags": tags,
    })
}

/// Decodes one whole frame, as a receiver with the default limit would.
fn decode<M: DeserializeOwned>(frame: &[u8]) -> Result<M, String> {
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    decoder.extend(frame);
    match decoder.next_message::<M>() {
        Ok(Some(message)) => Ok(message),
        Ok(None) => Err("incomplete".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn check_frame<M: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(entry: &Value) {
    let frame = unhex(entry["frame"].as_str().unwrap());
    let expected: M = serde_json::from_value(entry["message"].clone()).unwrap();
    assert_eq!(decode::<M>(&frame).as_ref(), Ok(&expected), "{entry}");
    assert_eq!(encode_frame(&expected, DEFAULT_MAX_FRAME_LEN).unwrap(), frame, "{entry}");
}

#[test]
fn the_vectors_file_is_what_the_codec_makes() {
    let generated = serde_json::to_string_pretty(&generate()).unwrap() + "\n";
    if std::env::var_os("GATEHOUSE_WRITE_VECTORS").is_some() {
        std::fs::write(vectors_path(), &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(vectors_path()).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/protocol-vectors.json is not what the codec makes: write it again (this file's \
         docs) and review the diff"
    );
}

#[test]
fn every_frame_vector_decodes_to_its_message_and_encodes_back() {
    let file: Value =
        serde_json::from_str(include_str!("../../docs/protocol-vectors.json")).unwrap();
    for entry in file["frames"].as_array().unwrap() {
        match entry["direction"].as_str().unwrap() {
            "client_to_server" => check_frame::<ClientMessage>(entry),
            _ => check_frame::<ServerMessage>(entry),
        }
    }
}

#[test]
fn every_invalid_vector_is_refused() {
    let file: Value =
        serde_json::from_str(include_str!("../../docs/protocol-vectors.json")).unwrap();
    for entry in file["invalid"].as_array().unwrap() {
        let frame = unhex(entry["frame"].as_str().unwrap());
        let refused = match entry["direction"].as_str().unwrap() {
            "client_to_server" => decode::<ClientMessage>(&frame).is_err(),
            _ => decode::<ServerMessage>(&frame).is_err(),
        };
        assert!(refused, "accepted: {entry}");
    }
}

#[test]
fn the_vectors_cover_every_message_both_ways() {
    let file: Value =
        serde_json::from_str(include_str!("../../docs/protocol-vectors.json")).unwrap();
    let (mut client, mut server) = (BTreeSet::new(), BTreeSet::new());
    for entry in file["frames"].as_array().unwrap() {
        let frame = unhex(entry["frame"].as_str().unwrap());
        match entry["direction"].as_str().unwrap() {
            "client_to_server" => client.insert(client_variant(&decode(&frame).unwrap())),
            _ => server.insert(server_variant(&decode(&frame).unwrap())),
        };
    }
    assert_eq!(client, (0..CLIENT_VARIANTS).collect(), "client messages without a vector");
    assert_eq!(server, (0..SERVER_VARIANTS).collect(), "server messages without a vector");
}

/// The wire index of each reason, code and failure, matching every variant: one added without a
/// vector breaks the build here (as `samples::server_variant` does for messages).
fn reason_index(reason: RejectReason) -> u32 {
    match reason {
        RejectReason::UnsupportedVersion => 0,
        RejectReason::MissingToken => 1,
        RejectReason::MalformedToken => 2,
        RejectReason::BadSignature => 3,
        RejectReason::Expired => 4,
        RejectReason::ServerFull => 5,
        RejectReason::ShuttingDown => 6,
        RejectReason::HelloExpected => 7,
        RejectReason::TokenLifetime => 8,
        RejectReason::TooManyLogins => 9,
        RejectReason::TicketUsed => 10,
        RejectReason::TicketStale => 11,
    }
}

/// As [`reason_index`], for `ErrorCode`.
fn error_index(code: ErrorCode) -> u32 {
    match code {
        ErrorCode::UnexpectedMessage => 0,
        ErrorCode::UnknownTransition => 1,
        ErrorCode::UnknownPawn => 2,
        ErrorCode::RestartRejected => 3,
        ErrorCode::RateLimited => 4,
        ErrorCode::UnknownJoin => 5,
    }
}

/// As [`reason_index`], for `TransitionFailure`.
fn failure_index(failure: TransitionFailure) -> u32 {
    match failure {
        TransitionFailure::TimedOut => 0,
        TransitionFailure::DestinationUnavailable => 1,
        TransitionFailure::DestinationLost => 2,
    }
}

/// Every `RejectReason`, `ErrorCode` and `TransitionFailure` has a frame vector, at its wire
/// index, and so do the close codes of version 11 (`Closing` 11 and 12, docs/protocol.md 6).
#[test]
fn the_vectors_cover_every_reason_code_and_failure() {
    let file: Value =
        serde_json::from_str(include_str!("../../docs/protocol-vectors.json")).unwrap();
    let (mut reasons, mut errors, mut failures, mut closes) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for entry in file["frames"].as_array().unwrap() {
        if entry["direction"] != "server_to_client" {
            continue;
        }
        let frame = unhex(entry["frame"].as_str().unwrap());
        let body = &frame[4..];
        // Where the field-less variant's index lies: right after the message's, or after the
        // transition id (one byte below 251).
        let (index, at, set) = match decode::<ServerMessage>(&frame).unwrap() {
            ServerMessage::Rejected { reason, .. } => (reason_index(reason), 1, &mut reasons),
            ServerMessage::Error { code, .. } => (error_index(code), 1, &mut errors),
            ServerMessage::TransitionFailed { transition_id, reason, .. } => {
                assert!(transition_id.0 < 251, "{entry}");
                (failure_index(reason), 2, &mut failures)
            }
            ServerMessage::Closing { code, .. } => {
                closes.insert(code);
                continue;
            }
            _ => continue,
        };
        assert_eq!(u32::from(body[at]), index, "{entry}");
        set.insert(index);
    }
    assert_eq!(reasons, (0..=11).collect(), "reject reasons without a vector");
    assert_eq!(errors, (0..=5).collect(), "error codes without a vector");
    assert_eq!(failures, (0..=2).collect(), "transition failures without a vector");
    for code in [CloseCode::Travelled, CloseCode::Recalled] {
        assert!(closes.contains(&code.code()), "{code:?} without a vector");
    }
}

/// The bodies the invalid vectors are made from are valid with their rule kept, so each
/// invalid vector breaks only the rule it names.
#[test]
fn the_invalid_vectors_break_only_their_rule() {
    assert!(
        decode::<ServerMessage>(&framed(&travel_to_body(MAX_ADDRESS_LEN, MAX_TICKET_LEN))).is_ok()
    );
    assert!(decode::<ServerMessage>(&framed(&teleport_body(&[(12, 3), (20, 1)]))).is_ok());
    assert!(decode::<ServerMessage>(&framed(&teleport_body(&[(1, 65_536)]))).is_ok());
    assert!(decode::<ServerMessage>(&framed(&teleport_body(&[(u64::MAX, 1)]))).is_ok());
    assert!(decode::<ServerMessage>(&framed(&welcome_body(b"p1"))).is_ok());
    let listed = framed(&replicated_teleport_body(&[b"harbor", b"forest"], 1));
    assert!(decode::<ServerMessage>(&listed).is_ok());
    assert!(decode::<ServerMessage>(&framed(&tags_body(b"State.Dead"))).is_ok());
    assert!(decode::<ClientMessage>(&framed(&[4])).is_ok());
}

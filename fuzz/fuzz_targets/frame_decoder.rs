//! Fuzz target: the frame decoder, on the bytes a peer controls.
//!
//! The input is a frame limit, a plan of chunk sizes and a byte stream. The stream is fed to
//! `FrameDecoder` in those chunks, draining `ClientMessage`s after each, as a connection task
//! does, then `finish` is called. Checked:
//! - nothing panics;
//! - chunking changes nothing: the same stream fed in one piece yields the same messages, the
//!   same error and the same leftover;
//! - every decoded message came from one whole frame, re-encodes to a frame no longer than it
//!   (a reader accepts a varint in a longer form than needed, docs/protocol.md 3, and a writer
//!   uses the shortest), and that frame decodes to the same value;
//! - `decode_body` of the raw stream, as `ClientMessage` and as `ServerMessage` (what a client
//!   decodes), never panics and round-trips whatever it accepts.

#![no_main]
#![forbid(unsafe_code)]

use arbitrary::{Arbitrary, Unstructured};
use gatehouse_protocol::codec::{DEFAULT_MAX_FRAME_LEN, HARD_MAX_FRAME_LEN, LENGTH_PREFIX_LEN};
use gatehouse_protocol::{
    ClientMessage, FrameDecoder, FrameError, ServerMessage, decode_body, encode_frame,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What one run of the decoder produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    messages: Vec<ClientMessage>,
    /// The error that ended the stream, or what `finish` said of the leftover bytes and how
    /// many there were (after an error the rest of the stream is never fed, so they differ).
    end: Result<(Result<(), FrameError>, usize), FrameError>,
}

/// Feeds `stream` to a decoder in the chunks `plan` cuts, draining messages after each chunk.
/// Every message decoded is checked against the bytes it came from.
fn run(stream: &[u8], max_len: usize, plan: &[u16]) -> Outcome {
    let mut decoder = FrameDecoder::new(max_len);
    let mut messages = Vec::new();
    let mut error = None;
    let mut fed = 0;
    // Bytes of `stream` consumed as whole frames so far.
    let mut consumed = 0;
    let mut sizes = plan.iter().copied().map(usize::from);
    'feed: while fed < stream.len() {
        let size = sizes.next().unwrap_or(stream.len()).min(stream.len() - fed);
        decoder.extend(&stream[fed..fed + size]);
        fed += size;
        loop {
            match decoder.next_message::<ClientMessage>() {
                Ok(Some(message)) => {
                    // The frame it came from: what the decoder took since the one before.
                    let end = fed - decoder.buffered_len();
                    let original = &stream[consumed..end];
                    let prefix = original.first_chunk::<LENGTH_PREFIX_LEN>().expect("a prefix");
                    let announced = u32::from_le_bytes(*prefix) as usize;
                    assert_eq!(announced + LENGTH_PREFIX_LEN, original.len(), "one whole frame");
                    let frame = encode_frame(&message, max_len).expect("a decoded message encodes");
                    assert!(frame.len() <= original.len(), "{message:?} re-encodes longer");
                    let again = decode_body::<ClientMessage>(&frame[LENGTH_PREFIX_LEN..]);
                    assert_eq!(again.as_ref(), Ok(&message), "{message:?} does not decode back");
                    consumed = end;
                    messages.push(message);
                }
                Ok(None) => break,
                Err(e) => {
                    // After an error the stream is unusable: the connection closes.
                    error = Some(e);
                    break 'feed;
                }
            }
        }
    }
    let end = match error {
        Some(e) => Err(e),
        None => {
            let finish = decoder.finish();
            assert_eq!(finish.is_ok(), fed == consumed, "finish after {fed} fed, {consumed} used");
            assert!(decoder.buffered_len() < LENGTH_PREFIX_LEN + max_len, "a whole frame waits");
            Ok((finish, decoder.buffered_len()))
        }
    };
    Outcome { messages, end }
}

/// `decode_body` never panics, and whatever it accepts re-encodes to a body no longer than it
/// that decodes to the same message. Not always the same bytes: a reader accepts a varint in a
/// longer form than needed (docs/protocol.md 3), and a writer uses the shortest.
fn body_round_trips<M: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(body: &[u8]) {
    if let Ok(message) = decode_body::<M>(body) {
        let frame = encode_frame(&message, HARD_MAX_FRAME_LEN).expect("a decoded body encodes");
        let encoded = &frame[LENGTH_PREFIX_LEN..];
        assert!(encoded.len() <= body.len(), "{message:?} re-encodes to a longer body");
        assert_eq!(decode_body::<M>(encoded).ok(), Some(message));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    // Small limits reach `TooLong`; the default and the hard cap are what servers run with.
    let max_len = match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 => usize::from(u.int_in_range(0..=64u8).unwrap_or(0)),
        1 => usize::from(u.arbitrary::<u16>().unwrap_or(0)),
        2 => DEFAULT_MAX_FRAME_LEN,
        _ => HARD_MAX_FRAME_LEN,
    };
    let plan: Vec<u16> = Vec::arbitrary(&mut u).unwrap_or_default();
    let stream = u.take_rest();

    let chunked = run(stream, max_len, &plan);
    let whole = run(stream, max_len, &[]);
    assert_eq!(chunked, whole, "chunking changed what the stream decodes to");

    body_round_trips::<ClientMessage>(stream);
    body_round_trips::<ServerMessage>(stream);
});

//! The frame codec: the only place that knows the wire encoding.
//!
//! A frame is a `u32` little-endian body length followed by the body, one message encoded with
//! bincode 2 (serde mode, little-endian, variable-length integers; `docs/protocol.md` spells out
//! the rules). The length excludes the 4-byte prefix and may not exceed the configured maximum.
//!
//! Decoding never panics: truncated input waits for more bytes, and an oversized length, a body
//! that does not decode, or a body with trailing bytes is a [`FrameError`]. Allocation while
//! decoding is bounded by [`HARD_MAX_FRAME_LEN`], so a hostile length field inside a body cannot
//! claim more memory than a frame could hold.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::replicated::IndexError;

/// Bytes in the length prefix.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// Largest frame body any configuration may allow, in bytes (1 MiB).
pub const HARD_MAX_FRAME_LEN: usize = 1 << 20;

/// The default maximum frame body length, in bytes (64 KiB).
pub const DEFAULT_MAX_FRAME_LEN: usize = 64 * 1024;

/// The bincode configuration of the wire. Kept private: nothing outside this module encodes.
fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_variable_int_encoding()
        .with_limit::<HARD_MAX_FRAME_LEN>()
}

/// Why a frame could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix announces a body longer than the maximum.
    #[error("frame body of {len} bytes exceeds the maximum of {max} bytes")]
    TooLong {
        /// Announced (or encoded) body length, in bytes.
        len: usize,
        /// The configured maximum, in bytes.
        max: usize,
    },
    /// The body is not a valid message.
    #[error("frame body of {len} bytes does not decode: {reason}")]
    Malformed {
        /// Body length, in bytes.
        len: usize,
        /// What the decoder said.
        reason: String,
    },
    /// The body decoded but did not use every byte.
    #[error("frame body of {len} bytes holds {trailing} trailing bytes after the message")]
    TrailingBytes {
        /// Body length, in bytes.
        len: usize,
        /// Bytes left over.
        trailing: usize,
    },
    /// The message could not be encoded (a bug on the sending side).
    #[error("message does not encode: {0}")]
    Encode(String),
    /// The stream ended in the middle of a frame.
    #[error("the stream ended inside a frame, {buffered} bytes into it")]
    Truncated {
        /// Bytes of the unfinished frame that arrived.
        buffered: usize,
    },
}

/// Appends one frame holding `message` to `out`.
///
/// # Errors
/// [`FrameError::TooLong`] if the encoded body exceeds `max_len` bytes (nothing is appended);
/// [`FrameError::Encode`] if serialisation fails.
pub fn encode_frame_into<M: Serialize>(
    message: &M,
    max_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let start = out.len();
    out.extend_from_slice(&[0; LENGTH_PREFIX_LEN]);
    let written = bincode::serde::encode_into_std_write(message, out, config());
    let len = match written {
        Ok(len) => len,
        Err(e) => {
            out.truncate(start);
            return Err(FrameError::Encode(e.to_string()));
        }
    };
    if len > max_len.min(HARD_MAX_FRAME_LEN) {
        out.truncate(start);
        return Err(FrameError::TooLong { len, max: max_len });
    }
    // `len` fits: it is at most HARD_MAX_FRAME_LEN, far below u32::MAX.
    out[start..start + LENGTH_PREFIX_LEN].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

/// Encodes `message` as one frame.
///
/// # Errors
/// As [`encode_frame_into`].
pub fn encode_frame<M: Serialize>(message: &M, max_len: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    encode_frame_into(message, max_len, &mut out)?;
    Ok(out)
}

/// Decodes one frame body (without its length prefix).
///
/// # Errors
/// [`FrameError::Malformed`] when the bytes are not a message of type `M`;
/// [`FrameError::TrailingBytes`] when bytes remain after it.
pub fn decode_body<M: DeserializeOwned>(body: &[u8]) -> Result<M, FrameError> {
    let (message, used) = bincode::serde::decode_from_slice::<M, _>(body, config())
        .map_err(|e| FrameError::Malformed { len: body.len(), reason: e.to_string() })?;
    if used != body.len() {
        return Err(FrameError::TrailingBytes { len: body.len(), trailing: body.len() - used });
    }
    Ok(message)
}

/// The encoded length of `value` in the wire's encoding, bytes, without encoding it anywhere
/// (what a frame body holding it grows by). A value that cannot be encoded counts 0: the
/// encoding of the frame that holds it reports the error.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut size = bincode::enc::write::SizeWriter::default();
    match bincode::serde::encode_into_writer(value, &mut size, config()) {
        Ok(()) => size.bytes_written,
        Err(_) => 0,
    }
}

/// The changes of a `Replicated` message body that `keep` accepts, decoded in full (and
/// checked) in order; the others are only read in place ([`crate::borrowed::ChangeRef`]):
/// their player ids neither checked nor allocated, their class and node indices checked. The
/// message's two name lists are decoded and checked once. For a receiver that keeps a few
/// changes of many.
///
/// # Errors
/// [`FrameError::Malformed`] when the body is not a `Replicated` message, its name lists or a
/// change do not decode, or a change's class or node index names nothing (kept or not, as
/// docs/protocol.md 4.4 has a receiver refuse it); [`FrameError::TrailingBytes`] when bytes
/// remain after the last change.
pub fn decode_replicated_kept(
    body: &[u8],
    mut keep: impl FnMut(&crate::borrowed::ChangeRef<'_>) -> bool,
) -> Result<Vec<crate::ReplicatedChange>, FrameError> {
    let malformed = |reason: String| FrameError::Malformed { len: body.len(), reason };
    if !is_replicated(body) {
        return Err(malformed("not a Replicated message".into()));
    }
    let mut at = replicated_variant().len();
    let classes = read_at(body, &mut at, "classes")?;
    let nodes = read_at(body, &mut at, "nodes")?;
    let names = crate::replicated::Names { classes, nodes };
    let count: u64 = read_at(body, &mut at, "change count")?;
    let mut kept = Vec::new();
    for index in 0..count {
        let rest = &body[at..];
        let (change, used) = bincode::serde::borrow_decode_from_slice::<
            crate::borrowed::ChangeRef<'_>,
            _,
        >(rest, config())
        .map_err(|e| malformed(e.to_string()))?;
        // A change's place fits: `count` changes were each at least a byte of `body`.
        let place = index as usize;
        let (class, node) = change.indices();
        let (classes, nodes) = names.lens();
        class
            .map_or(Ok(()), |i| IndexError::check(place, "class", i, classes))
            .and(node.map_or(Ok(()), |i| IndexError::check(place, "node", i, nodes)))
            .map_err(|e| malformed(e.to_string()))?;
        if keep(&change) {
            let (wire, _) = bincode::serde::decode_from_slice::<crate::replicated::WireChange, _>(
                &rest[..used],
                config(),
            )
            .map_err(|e| malformed(e.to_string()))?;
            let resolved = wire.resolve(&names, place);
            kept.push(resolved.map_err(|e| malformed(e.to_string()))?);
        }
        at += used;
    }
    if at != body.len() {
        return Err(FrameError::TrailingBytes { len: body.len(), trailing: body.len() - at });
    }
    Ok(kept)
}

/// The `what` that starts at `*at` in `body`, decoded and checked; `*at` moves past it.
///
/// # Errors
/// [`FrameError::Malformed`] naming `what` when it does not decode.
fn read_at<T: DeserializeOwned>(body: &[u8], at: &mut usize, what: &str) -> Result<T, FrameError> {
    let rest = body.get(*at..).unwrap_or_default();
    let (value, used) = bincode::serde::decode_from_slice(rest, config()).map_err(|e| {
        FrameError::Malformed { len: body.len(), reason: format!("no {what}: {e}") }
    })?;
    *at += used;
    Ok(value)
}

/// Most bytes the names one `Replicated` frame lists may take (docs/protocol.md 4.4). When an
/// interval's names would pass it, [`ReplicationBatch`] numbers the names afresh from the next
/// change on, and no frame holds changes of both numberings. With the largest change a server
/// makes (a teleport of [`crate::MAX_TELEPORT_RUNS_PER_MESSAGE`] runs, about 7,200 bytes) and a
/// frame's header, this much still fits the smallest frame limit (8 KiB).
pub const MAX_NAMES_LEN: usize = 960;

/// The replicated changes of one replication interval, each encoded once as it comes, sent as
/// `ServerMessage::Replicated` frames that start at any change (docs/protocol.md 4.4).
///
/// A server appends every replicated broadcast here instead of encoding it into each client's
/// write; at the interval's end it sends everyone the same frames, and a client welcomed in the
/// middle of the interval (or sent something else meanwhile) the frames from the first change
/// it has not had.
///
/// The classes and nodes the changes name are indices into the batch's two lists, which grow
/// as changes name new ones; a frame carries the lists as they stood at its last change, so
/// every index in it names an entry, whichever change it starts at. Past [`MAX_NAMES_LEN`]
/// bytes of names the numbering starts again, so every frame's names stay within it.
#[derive(Debug, Default)]
pub struct ReplicationBatch {
    /// The changes' encodings, back to back.
    bodies: Vec<u8>,
    /// Where each change's encoding ends in `bodies`.
    ends: Vec<usize>,
    /// The names of the current numbering, each once, in the order they were first used.
    names: crate::replicated::Names,
    /// Every numbering's classes, encoded back to back.
    classes: EncodedList,
    /// Every numbering's nodes, encoded back to back.
    nodes: EncodedList,
    /// Where the current numbering's names start in `classes` and `nodes`.
    numbering: (usize, usize),
    /// The names the frame ending at each change lists.
    named: Vec<Named>,
}

/// The names a frame lists: which encodings of [`ReplicationBatch`]'s two lists, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Named {
    classes: (usize, usize),
    nodes: (usize, usize),
}

impl Named {
    /// Where its numbering starts: changes of two numberings never share a frame.
    fn numbering(&self) -> (usize, usize) {
        (self.classes.0, self.nodes.0)
    }
}

/// Names encoded one after the other.
#[derive(Debug, Default)]
struct EncodedList {
    /// The encodings, back to back.
    bytes: Vec<u8>,
    /// Where each ends in `bytes`.
    ends: Vec<usize>,
}

impl EncodedList {
    /// Appends the encodings of the `names` of a numbering that starts at its entry `from`,
    /// past the ones it holds.
    fn extend<T: Serialize>(&mut self, from: usize, names: &[T]) -> Result<(), FrameError> {
        for name in names.iter().skip(self.ends.len() - from) {
            bincode::serde::encode_into_std_write(name, &mut self.bytes, config())
                .map_err(|e| FrameError::Encode(e.to_string()))?;
            self.ends.push(self.bytes.len());
        }
        Ok(())
    }

    /// How many bytes the first `count` encodings take.
    fn len_of(&self, count: usize) -> usize {
        if count == 0 { 0 } else { self.ends[count - 1] }
    }

    /// The encodings `start..end`.
    fn slice(&self, (start, end): (usize, usize)) -> &[u8] {
        &self.bytes[self.len_of(start)..self.len_of(end)]
    }

    /// Forgets the encodings past the first `count`, and any bytes past the last encoding.
    fn truncate(&mut self, count: usize) {
        let count = count.min(self.ends.len());
        self.bytes.truncate(self.len_of(count));
        self.ends.truncate(count);
    }
}

/// Frames made by [`ReplicationBatch::frames`]: whole frames back to back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frames {
    /// The frames, each with its length prefix.
    pub bytes: Vec<u8>,
    /// How many frames `bytes` holds.
    pub count: usize,
}

impl ReplicationBatch {
    /// Appends `change`.
    ///
    /// # Errors
    /// [`FrameError::Encode`] if it does not encode, or would make the batch name more than
    /// 65,536 classes or nodes (nothing is appended).
    pub fn push(&mut self, change: &crate::ReplicatedChange) -> Result<(), FrameError> {
        let numbering = self.numbering;
        let before = (self.bodies.len(), self.names.lens());
        let encoded = (self.classes.ends.len(), self.nodes.ends.len());
        let pushed = self.push_wire(change);
        if pushed.is_err() {
            self.bodies.truncate(before.0);
            // A numbering this change started holds only its names.
            self.names.truncate(if self.numbering == numbering { before.1 } else { (0, 0) });
            self.classes.truncate(encoded.0);
            self.nodes.truncate(encoded.1);
        }
        pushed
    }

    /// [`ReplicationBatch::push`] but for undoing what a failure left half done.
    fn push_wire(&mut self, change: &crate::ReplicatedChange) -> Result<(), FrameError> {
        let named = self.named_now();
        let listed = self.classes.slice(named.classes).len() + self.nodes.slice(named.nodes).len();
        let new: usize = self.names.unknown(change).into_iter().flatten().map(encoded_len).sum();
        if listed > 0 && listed + new > MAX_NAMES_LEN {
            self.names.clear();
            self.numbering = (self.classes.ends.len(), self.nodes.ends.len());
        }
        let wire = crate::replicated::WireChange::new(change, &mut self.names)
            .map_err(|e| FrameError::Encode(e.to_string()))?;
        bincode::serde::encode_into_std_write(&wire, &mut self.bodies, config())
            .map_err(|e| FrameError::Encode(e.to_string()))?;
        self.classes.extend(self.numbering.0, &self.names.classes)?;
        self.nodes.extend(self.numbering.1, &self.names.nodes)?;
        self.ends.push(self.bodies.len());
        self.named.push(self.named_now());
        Ok(())
    }

    /// The names of the current numbering encoded so far.
    fn named_now(&self) -> Named {
        Named {
            classes: (self.numbering.0, self.classes.ends.len()),
            nodes: (self.numbering.1, self.nodes.ends.len()),
        }
    }

    /// How many changes it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds no change.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Forgets every change and name (keeping its buffers for the next interval).
    pub fn clear(&mut self) {
        self.bodies.clear();
        self.ends.clear();
        self.names.clear();
        self.classes.truncate(0);
        self.nodes.truncate(0);
        self.numbering = (0, 0);
        self.named.clear();
    }

    /// `Replicated` frames holding the changes from index `first` on, in order, as many per
    /// frame as a body of `max_len` bytes holds: one frame unless they pass the limit. None
    /// when `first` is past the last change.
    ///
    /// # Errors
    /// [`FrameError::TooLong`] when one change alone, with the names it uses, does not fit a
    /// frame (a bug on the sending side: no replicated change comes near the smallest limit,
    /// and a frame's names take at most [`MAX_NAMES_LEN`] bytes); nothing is returned then.
    pub fn frames(&self, first: usize, max_len: usize) -> Result<Frames, FrameError> {
        self.frames_until(first, self.len(), max_len)
    }

    /// As [`ReplicationBatch::frames`], for the changes from index `first` up to, not including,
    /// `end` (at most the batch's length): what a receiver is owed up to a point of the batch.
    ///
    /// # Errors
    /// As [`ReplicationBatch::frames`].
    pub fn frames_until(
        &self,
        first: usize,
        end: usize,
        max_len: usize,
    ) -> Result<Frames, FrameError> {
        let end = end.min(self.ends.len());
        let max_len = max_len.min(HARD_MAX_FRAME_LEN);
        let variant = replicated_variant();
        // The variant index, then three lengths (classes, nodes, changes): varints of at most
        // `MAX_VARINT_LEN` bytes, counted in full when fitting changes (a frame may end up a
        // few bytes short).
        let header_len = variant.len() + 3 * MAX_VARINT_LEN;
        let mut out = Frames::default();
        let mut next = first;
        while next < end {
            let from = self.start_of(next);
            let numbering = self.named[next].numbering();
            // As many changes of one numbering as fit after the header and the names they use.
            let mut last = next;
            while last < end
                && self.named[last].numbering() == numbering
                && self.ends[last] - from + header_len + self.names_len(last) <= max_len
            {
                last += 1;
            }
            if last == next {
                let len = self.ends[next] - from + header_len + self.names_len(next);
                return Err(FrameError::TooLong { len, max: max_len });
            }
            let named = self.named[last - 1];
            let (classes, nodes) =
                (self.classes.slice(named.classes), self.nodes.slice(named.nodes));
            let counts = [named.classes.1 - named.classes.0, named.nodes.1 - named.nodes.0];
            let [class_count, node_count, change_count] =
                [counts[0], counts[1], last - next].map(|n| varint(n as u64));
            let changes = &self.bodies[from..self.ends[last - 1]];
            let body_len = variant.len()
                + class_count.len()
                + classes.len()
                + node_count.len()
                + nodes.len()
                + change_count.len()
                + changes.len();
            // Fits: at most HARD_MAX_FRAME_LEN.
            out.bytes.extend_from_slice(&(body_len as u32).to_le_bytes());
            for part in [variant, &class_count, classes, &node_count, nodes, &change_count, changes]
            {
                out.bytes.extend_from_slice(part);
            }
            out.count += 1;
            next = last;
        }
        Ok(out)
    }

    /// Where change `index`'s encoding starts in `bodies`.
    fn start_of(&self, index: usize) -> usize {
        if index == 0 { 0 } else { self.ends[index - 1] }
    }

    /// How many bytes the names take that the frame ending at change `index` lists.
    fn names_len(&self, index: usize) -> usize {
        let named = self.named[index];
        self.classes.slice(named.classes).len() + self.nodes.slice(named.nodes).len()
    }
}

/// Most bytes a `u64` takes in the wire's variable-length encoding: a marker byte and 8 bytes.
const MAX_VARINT_LEN: usize = 9;

/// `value` in the wire's variable-length integer encoding (a list's length, an enum's index).
fn varint(value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_VARINT_LEN);
    // A u64 always encodes, within any size limit.
    let _ = bincode::serde::encode_into_std_write(value, &mut out, config());
    out
}

/// The variant index a body of `message`'s kind starts with: its bytes, one for every message
/// of the protocol (fewer than 251 variants).
fn variant_of(message: &crate::ServerMessage) -> Vec<u8> {
    let mut body = Vec::with_capacity(64);
    // An empty message of a kind always encodes; were it not to, the bodies of that kind would
    // not be recognised, which the codec's tests catch.
    let _ = bincode::serde::encode_into_std_write(message, &mut body, config());
    let index = bincode::serde::decode_from_slice::<u32, _>(&body, config());
    body.truncate(index.map_or(body.len(), |(_, len)| len));
    body
}

/// The variant index a `Replicated` body starts with (its name lists follow); worked
/// out once, as the receiver's hot path asks it of every frame.
fn replicated_variant() -> &'static [u8] {
    static VARIANT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    VARIANT.get_or_init(|| variant_of(&crate::ServerMessage::Replicated { changes: Vec::new() }))
}

/// Whether `body` is a `Replicated` message's, read from its variant index alone.
pub fn is_replicated(body: &[u8]) -> bool {
    body.starts_with(replicated_variant())
}

/// Whether `body` is a `WorldSnapshot` message's, read from its variant index alone.
pub fn is_world_snapshot(body: &[u8]) -> bool {
    static VARIANT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let variant =
        VARIANT.get_or_init(|| variant_of(&crate::ServerMessage::WorldSnapshot(Box::default())));
    body.starts_with(variant)
}

/// Room a drained [`FrameDecoder`] keeps for the next frames, bytes (a control channel's
/// frames are far smaller).
const KEPT_ROOM: usize = 4 * 1024;

/// Reassembles frames from a byte stream that arrives in arbitrary chunks.
///
/// Feed bytes with [`FrameDecoder::extend`], then call [`FrameDecoder::next_message`] until it
/// returns `Ok(None)`. After an error the stream is unusable: close the connection.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    read: usize,
    max_len: usize,
}

impl FrameDecoder {
    /// A decoder that refuses bodies longer than `max_len` bytes (capped at
    /// [`HARD_MAX_FRAME_LEN`]).
    pub fn new(max_len: usize) -> Self {
        Self { buf: Vec::new(), read: 0, max_len: max_len.min(HARD_MAX_FRAME_LEN) }
    }

    /// Accepts bodies up to `max_len` bytes from now on (capped at [`HARD_MAX_FRAME_LEN`]): a
    /// client takes the limit its server announces in `Welcome` (docs/protocol.md 2).
    pub fn set_max_len(&mut self, max_len: usize) {
        self.max_len = max_len.min(HARD_MAX_FRAME_LEN);
    }

    /// Appends received bytes.
    pub fn extend(&mut self, bytes: &[u8]) {
        // Compact before growing, so a long-lived connection does not grow its buffer forever.
        if self.read > 0 && self.read >= self.buf.len() / 2 {
            self.buf.drain(..self.read);
            self.read = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet consumed as frames.
    pub fn buffered_len(&self) -> usize {
        self.buf.len() - self.read
    }

    /// Call when the stream ended: a partial frame left over is an error.
    ///
    /// # Errors
    /// [`FrameError::Truncated`] if bytes of an unfinished frame are buffered.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buffered_len() {
            0 => Ok(()),
            buffered => Err(FrameError::Truncated { buffered }),
        }
    }

    /// The next complete frame's body, undecoded, or `None` if more bytes are needed (for a
    /// receiver that reads some messages in place, [`decode_replicated_kept`]; decode the rest
    /// with [`decode_body`]).
    ///
    /// # Errors
    /// [`FrameError::TooLong`] as soon as a length prefix exceeds the maximum.
    pub fn next_body(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let pending = &self.buf[self.read..];
        let Some(prefix) = pending.first_chunk::<LENGTH_PREFIX_LEN>() else {
            self.wait_for_bytes();
            return Ok(None);
        };
        let len = u32::from_le_bytes(*prefix) as usize;
        if len > self.max_len {
            return Err(FrameError::TooLong { len, max: self.max_len });
        }
        if pending.len() < LENGTH_PREFIX_LEN + len {
            self.wait_for_bytes();
            return Ok(None);
        }
        let start = self.read + LENGTH_PREFIX_LEN;
        self.read = start + len;
        Ok(Some(&self.buf[start..start + len]))
    }

    /// The next complete message, or `None` if more bytes are needed.
    ///
    /// # Errors
    /// [`FrameError::TooLong`] as soon as a length prefix exceeds the maximum (without waiting
    /// for the body), or the errors of [`decode_body`].
    pub fn next_message<M: DeserializeOwned>(&mut self) -> Result<Option<M>, FrameError> {
        match self.next_body()? {
            Some(body) => decode_body(body).map(Some),
            None => Ok(None),
        }
    }

    /// Nothing more decodes until bytes come: drops what was consumed, and gives back the room
    /// of a buffer far larger than what is left (at least [`KEPT_ROOM`] is kept), so a burst's
    /// size is not kept for the connection's life, while a large frame arriving a packet at a
    /// time keeps the room it grows into.
    fn wait_for_bytes(&mut self) {
        self.buf.drain(..self.read);
        self.read = 0;
        let needed = self.buf.len().max(KEPT_ROOM);
        if self.buf.capacity() > 4 * needed {
            self.buf.shrink_to(needed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client takes the frame limit its server announces: a body above the old limit is
    /// refused before, and accepted once the limit is raised.
    #[test]
    fn a_decoder_takes_the_announced_frame_limit() {
        let big = ServerMessage::Closing { code: 0, reason: "x".repeat(70_000) };
        let frame = encode_frame(&big, HARD_MAX_FRAME_LEN).unwrap();
        let mut refusing = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        refusing.extend(&frame);
        assert!(refusing.next_message::<ServerMessage>().is_err());
        let mut raised = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        raised.set_max_len(100_000);
        raised.extend(&frame);
        assert_eq!(raised.next_message::<ServerMessage>().unwrap(), Some(big));
    }
    use crate::messages::{ClientMessage, ServerMessage};
    use crate::samples;

    #[test]
    fn every_client_message_round_trips() {
        for m in samples::client_messages() {
            let frame = encode_frame(&m, DEFAULT_MAX_FRAME_LEN).unwrap();
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
            d.extend(&frame);
            assert_eq!(d.next_message::<ClientMessage>().unwrap(), Some(m));
            assert_eq!(d.buffered_len(), 0);
        }
    }

    #[test]
    fn every_server_message_round_trips() {
        for m in samples::server_messages() {
            let frame = encode_frame(&m, DEFAULT_MAX_FRAME_LEN).unwrap();
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
            d.extend(&frame);
            assert_eq!(d.next_message::<ServerMessage>().unwrap(), Some(m));
        }
    }

    /// Every variant has a sample, and a sample's variant index is its index on the wire.
    fn check_variants<M: Serialize + std::fmt::Debug>(
        samples: Vec<M>,
        variant: fn(&M) -> usize,
        count: usize,
    ) {
        let mut seen = vec![false; count];
        for m in samples {
            let index = variant(&m);
            seen[index] = true;
            let frame = encode_frame(&m, DEFAULT_MAX_FRAME_LEN).unwrap();
            // Every protocol enum has fewer than 251 variants: the index is one byte.
            assert_eq!(usize::from(frame[4]), index, "{m:?}");
        }
        assert!(seen.iter().all(|s| *s), "a variant has no sample: {seen:?}");
    }

    #[test]
    fn the_samples_cover_every_variant_and_the_index_is_the_wire_index() {
        check_variants(
            samples::server_messages(),
            samples::server_variant,
            samples::SERVER_VARIANTS,
        );
        check_variants(
            samples::client_messages(),
            samples::client_variant,
            samples::CLIENT_VARIANTS,
        );
    }

    #[test]
    fn frames_split_at_every_byte_reassemble() {
        let mut stream = Vec::new();
        for m in samples::server_messages() {
            encode_frame_into(&m, DEFAULT_MAX_FRAME_LEN, &mut stream).unwrap();
        }
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let mut got = Vec::new();
        for byte in &stream {
            d.extend(std::slice::from_ref(byte));
            while let Some(m) = d.next_message::<ServerMessage>().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, samples::server_messages());
    }

    #[test]
    fn a_truncated_frame_waits_for_more_bytes() {
        let frame = encode_frame(&samples::client_messages()[0], DEFAULT_MAX_FRAME_LEN).unwrap();
        for cut in 0..frame.len() {
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
            d.extend(&frame[..cut]);
            assert_eq!(d.next_message::<ClientMessage>(), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn a_frame_cut_off_by_the_end_of_the_stream_is_an_error() {
        let frame = encode_frame(&samples::client_messages()[0], DEFAULT_MAX_FRAME_LEN).unwrap();
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        d.extend(&frame[..frame.len() - 1]);
        assert_eq!(d.next_message::<ClientMessage>(), Ok(None));
        assert_eq!(d.finish(), Err(FrameError::Truncated { buffered: frame.len() - 1 }));
        d.extend(&frame[frame.len() - 1..]);
        assert!(d.next_message::<ClientMessage>().unwrap().is_some());
        assert_eq!(d.finish(), Ok(()));
    }

    /// A large frame that arrives a packet at a time grows the buffer a few times, not once per
    /// packet (each growth copies what is buffered).
    #[test]
    fn a_partial_frame_arriving_a_packet_at_a_time_keeps_its_room() {
        let big = ClientMessage::Hello { protocol_version: 1, token: "x".repeat(60_000) };
        let frame = encode_frame(&big, DEFAULT_MAX_FRAME_LEN).unwrap();
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let pieces: Vec<&[u8]> = frame.chunks(1_200).collect();
        let mut resized = 0;
        for (i, piece) in pieces.iter().enumerate() {
            let before = d.buf.capacity();
            d.extend(piece);
            let last = i == pieces.len() - 1;
            assert_eq!(d.next_message::<ClientMessage>().unwrap(), last.then(|| big.clone()));
            resized += usize::from(d.buf.capacity() != before);
        }
        assert!(resized <= 10, "resized {resized} times in {} pieces", pieces.len());
    }

    /// A burst of frames, once decoded, leaves the decoder no larger than its kept room, even
    /// with a partial frame left over: a peer cannot pin a burst's size for the connection's
    /// life. The partial frame keeps its bytes.
    #[test]
    fn a_decoded_burst_gives_back_its_room() {
        let frame = encode_frame(&ClientMessage::RestartRequest, DEFAULT_MAX_FRAME_LEN).unwrap();
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let burst: Vec<u8> = frame.iter().copied().cycle().take(frame.len() * 10_000).collect();
        d.extend(&burst);
        d.extend(&frame[..1]);
        assert!(d.buf.capacity() > KEPT_ROOM);
        let mut decoded = 0;
        while d.next_message::<ClientMessage>().unwrap().is_some() {
            decoded += 1;
        }
        assert_eq!(decoded, 10_000);
        assert_eq!(d.buffered_len(), 1, "the partial frame stays");
        assert!(d.buf.capacity() <= KEPT_ROOM, "{} bytes kept", d.buf.capacity());
        d.extend(&frame[1..]);
        assert!(d.next_message::<ClientMessage>().unwrap().is_some());
        assert_eq!(d.buffered_len(), 0);
        assert!(d.buf.capacity() <= KEPT_ROOM, "{} bytes kept", d.buf.capacity());
    }

    #[test]
    fn an_oversized_length_is_refused_before_the_body_arrives() {
        let mut d = FrameDecoder::new(100);
        d.extend(&101u32.to_le_bytes());
        assert_eq!(
            d.next_message::<ClientMessage>(),
            Err(FrameError::TooLong { len: 101, max: 100 })
        );
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        d.extend(&u32::MAX.to_le_bytes());
        assert!(matches!(d.next_message::<ClientMessage>(), Err(FrameError::TooLong { .. })));
    }

    #[test]
    fn encoding_beyond_the_maximum_is_refused_and_appends_nothing() {
        let m = ClientMessage::Hello { protocol_version: 1, token: "x".repeat(200) };
        let mut out = vec![1, 2, 3];
        let err = encode_frame_into(&m, 100, &mut out).unwrap_err();
        assert!(matches!(err, FrameError::TooLong { max: 100, .. }));
        assert_eq!(out, vec![1, 2, 3]);
    }

    #[test]
    fn garbage_bodies_are_errors() {
        // Unknown variant index.
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        d.extend(&[1, 0, 0, 0, 99]);
        assert!(matches!(d.next_message::<ClientMessage>(), Err(FrameError::Malformed { .. })));
        // A string claiming far more bytes than the body holds.
        let mut body = vec![0, 1, 0xfd]; // Hello, version 1, an 8-byte token length:
        body.extend(u64::MAX.to_le_bytes());
        assert!(matches!(decode_body::<ClientMessage>(&body), Err(FrameError::Malformed { .. })));
        // A valid message followed by trailing bytes.
        let mut frame = encode_frame(&ClientMessage::Leave, DEFAULT_MAX_FRAME_LEN).unwrap();
        frame.push(0);
        frame[0] += 1;
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        d.extend(&frame);
        assert_eq!(
            d.next_message::<ClientMessage>(),
            Err(FrameError::TrailingBytes { len: 2, trailing: 1 })
        );
        // Invalid UTF-8 in a string.
        let body = [0, 1, 2, 0xff, 0xfe]; // Hello, version 1, a 2-byte token
        assert!(decode_body::<ClientMessage>(&body).is_err());
    }

    #[test]
    fn unknown_gameplay_tags_on_the_wire_are_refused() {
        let m = ServerMessage::KitsGranted { kits: vec![gatehouse_tags::catalog::STATE_DEAD] };
        let frame = encode_frame(&m, DEFAULT_MAX_FRAME_LEN).unwrap();
        // Rewrite "State.Dead" to "State.Deaf" in place.
        let pos = frame.windows(10).position(|w| w == b"State.Dead").unwrap();
        let mut forged = frame.clone();
        forged[pos + 9] = b'f';
        let err = decode_body::<ServerMessage>(&forged[4..]).unwrap_err();
        assert!(err.to_string().contains("State.Deaf"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut d = FrameDecoder::new(256);
            d.extend(&bytes);
            while let Ok(Some(_)) = d.next_message::<ClientMessage>() {}
            let _ = decode_body::<ServerMessage>(&bytes);
        }

        #[test]
        fn a_valid_length_prefix_over_arbitrary_bodies_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
            d.extend(&(body.len() as u32).to_le_bytes());
            d.extend(&body);
            let _ = d.next_message::<ClientMessage>();
        }
    }
}

#[cfg(test)]
mod wire_examples {
    //! The byte-level examples in `docs/protocol.md`, checked.
    use super::*;
    use crate::ids::{PawnId, TransitionId};
    use crate::messages::ClientMessage;

    #[test]
    fn transition_ready_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::TransitionReady { transition_id: TransitionId(7) }, 64)
                .unwrap();
        assert_eq!(frame, [2, 0, 0, 0, 1, 7]);
    }

    #[test]
    fn transition_shown_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::TransitionShown { transition_id: TransitionId(7) }, 64)
                .unwrap();
        assert_eq!(frame, [2, 0, 0, 0, 6, 7]);
    }

    #[test]
    fn travel_abandoned_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::TravelAbandoned { transition_id: TransitionId(7) }, 64)
                .unwrap();
        assert_eq!(frame, [2, 0, 0, 0, 7, 7]);
    }

    #[test]
    fn possession_acknowledged_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::PossessionAcknowledged { pawn_id: PawnId(42) }, 64)
                .unwrap();
        assert_eq!(frame, [2, 0, 0, 0, 2, 42]);
    }

    #[test]
    fn hello_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::Hello { protocol_version: 12, token: "a.b.c".into() }, 64)
                .unwrap();
        let mut expected = vec![8, 0, 0, 0, 0, 12, 5];
        expected.extend_from_slice(b"a.b.c");
        assert_eq!(frame, expected);
    }

    #[test]
    fn pawns_teleported_encodes_its_runs_as_documented() {
        let message = crate::ServerMessage::PawnsTeleported {
            node: crate::NodeId::new("forest").unwrap(),
            pawn_ids: crate::PawnIdRuns::from_ids([12, 13, 14, 20].map(PawnId)),
        };
        let frame = encode_frame(&message, 64).unwrap();
        let mut expected = vec![13, 0, 0, 0, 8, 6];
        expected.extend_from_slice(b"forest");
        expected.extend_from_slice(&[2, 12, 3, 20, 1]);
        assert_eq!(frame, expected);
    }

    #[test]
    fn teleported_runs_that_overlap_do_not_decode() {
        let message = crate::ServerMessage::PawnsTeleported {
            node: crate::NodeId::new("forest").unwrap(),
            pawn_ids: crate::PawnIdRuns::from_ids([12, 13, 14, 20].map(PawnId)),
        };
        let mut frame = encode_frame(&message, 64).unwrap();
        // Move the second run's first id from 20 back to 13, inside the first run.
        let second = frame.len() - 2;
        frame[second] = 13;
        let err = decode_body::<crate::ServerMessage>(&frame[4..]).unwrap_err();
        assert!(err.to_string().contains("pawn id run 1 (from 13)"), "{err}");
    }

    /// A reader accepts a varint in a longer form than needed and a writer uses the shortest
    /// (docs/protocol.md 3), so a decoded body may re-encode shorter; a form wider than its
    /// field, or a reserved marker, does not decode.
    #[test]
    fn a_varint_in_a_longer_form_than_needed_is_read_and_a_wider_one_refused() {
        let seven = ClientMessage::TransitionReady { transition_id: TransitionId(7) };
        for body in
            [&[1, 0xfb, 7, 0][..], &[1, 0xfc, 7, 0, 0, 0], &[1, 0xfd, 7, 0, 0, 0, 0, 0, 0, 0]]
        {
            assert_eq!(decode_body::<ClientMessage>(body), Ok(seven.clone()), "{body:?}");
        }
        assert_eq!(encode_frame(&seven, 64).unwrap(), [2, 0, 0, 0, 1, 7]);
        // `Welcome.max_frame_len` is a u32: an 8-byte form is wider than the field.
        let welcome = [0, 1, b'p', 0, 0xfd, 0, 0, 1, 0, 0, 0, 0, 0];
        assert!(decode_body::<crate::ServerMessage>(&welcome).is_err());
        assert!(decode_body::<crate::ServerMessage>(&[0, 1, b'p', 0, 0xfc, 0, 0, 1, 0]).is_ok());
        assert!(decode_body::<ClientMessage>(&[1, 0xfe, 7]).is_err(), "a reserved marker");
    }

    #[test]
    fn join_ready_encodes_as_documented() {
        let frame =
            encode_frame(&ClientMessage::JoinReady { join_id: crate::ids::JoinId(3) }, 64).unwrap();
        assert_eq!(frame, [2, 0, 0, 0, 5, 3]);
    }

    #[test]
    fn leave_encodes_as_documented() {
        assert_eq!(encode_frame(&ClientMessage::Leave, 64).unwrap(), [1, 0, 0, 0, 4]);
    }
}

#[cfg(test)]
mod batch_tests {
    // Test code: a failed expectation is a failed test.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::{ReplicatedChange, ServerMessage, samples};

    fn decode_all(frames: &Frames) -> Vec<Vec<ReplicatedChange>> {
        let mut decoder = FrameDecoder::new(HARD_MAX_FRAME_LEN);
        decoder.extend(&frames.bytes);
        let mut out = Vec::new();
        while let Some(message) = decoder.next_message::<ServerMessage>().unwrap() {
            let ServerMessage::Replicated { changes } = message else { panic!("{message:?}") };
            out.push(changes);
        }
        assert_eq!(decoder.buffered_len(), 0);
        assert_eq!(out.len(), frames.count);
        out
    }

    fn batch() -> (ReplicationBatch, Vec<ReplicatedChange>) {
        let changes = samples::replicated_changes();
        let mut batch = ReplicationBatch::default();
        for change in &changes {
            batch.push(change).unwrap();
        }
        (batch, changes)
    }

    fn newcomer(player: &str, pawn: u64) -> [ReplicatedChange; 2] {
        use crate::{CharacterDef, NodeId, PawnId, PawnView, PlayerId, PlayerStateView, TeamId};
        let player_id = PlayerId::new(player).unwrap();
        let vanguard = CharacterDef::new("Vanguard").unwrap();
        let state = ReplicatedChange::PlayerStateUpdated(PlayerStateView {
            player_id: player_id.clone(),
            team: Some(TeamId(1)),
            character_def: Some(vanguard.clone()),
        });
        let pawn = ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(pawn),
            owner: player_id,
            character_def: vanguard,
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        });
        [state, pawn]
    }

    /// What a newcomer costs every other client in a `Replicated` batch (docs/protocol.md 4.4,
    /// 7, version 12): its player state, announced once its class is known, and its pawn, its
    /// class and node an index each into names the message lists once.
    #[test]
    fn a_newcomer_costs_every_other_client_30_bytes_once_its_names_are_listed() {
        let mut batch = ReplicationBatch::default();
        let len =
            |batch: &ReplicationBatch| batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap().bytes.len();
        let empty = 4 + 1 + 3; // Length prefix, variant, three empty lists.
        batch.extend_from(&newcomer("sim-0001", 300));
        // The names, each once: "Vanguard" (1 + 8) and "harbor" (1 + 6).
        assert_eq!(len(&batch), empty + 9 + 7 + 30);
        batch.extend_from(&newcomer("sim-0002", 301));
        // State: variant, id (1 + 8), team (option + u8), class (option + index).
        // Pawn: variant, pawn 301 (`fb` + 2), owner (1 + 8), class, node, alive.
        assert_eq!((1 + 9 + 2 + 2) + (1 + 3 + 9 + 1 + 1 + 1), 30);
        assert_eq!(len(&batch), empty + 9 + 7 + 30 + 30);
    }

    impl ReplicationBatch {
        fn extend_from(&mut self, changes: &[ReplicatedChange]) {
            for change in changes {
                self.push(change).unwrap();
            }
        }
    }

    #[test]
    fn a_batch_is_one_frame_that_decodes_to_its_changes_in_order() {
        let (batch, changes) = batch();
        let frames = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_all(&frames), vec![changes.clone()]);
        let message = ServerMessage::Replicated { changes };
        assert_eq!(frames.bytes, encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap());
    }

    #[test]
    fn a_cleared_batch_holds_nothing_and_takes_new_changes_from_the_start() {
        let (mut batch, changes) = batch();
        assert_eq!((batch.len(), batch.is_empty()), (changes.len(), false));
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap(), Frames::default());
        batch.push(&changes[1]).unwrap();
        let frames = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_all(&frames), vec![vec![changes[1].clone()]]);
        // Its names start again too: another class and node are class 0 and node 0.
        let mut newcomer = newcomer("sim-0007", 70);
        if let ReplicatedChange::PawnSpawned(view) = &mut newcomer[1] {
            view.character_def = crate::CharacterDef::new("Warden").unwrap();
            view.node = crate::NodeId::new("crypt").unwrap();
        }
        batch.clear();
        batch.extend_from(&newcomer);
        let frames = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_all(&frames), vec![newcomer.to_vec()]);
        let message = ServerMessage::Replicated { changes: newcomer.to_vec() };
        assert_eq!(frames.bytes, encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap());
    }

    #[test]
    fn a_batch_ends_at_any_change() {
        let (batch, changes) = batch();
        for end in 1..changes.len() {
            let frames = batch.frames_until(1, end, DEFAULT_MAX_FRAME_LEN).unwrap();
            let expected = if end > 1 { vec![changes[1..end].to_vec()] } else { Vec::new() };
            assert_eq!(decode_all(&frames), expected);
        }
    }

    /// A frame lists the names as the batch stood at its last change: the same bytes as the
    /// message of those changes alone when it starts at the first, and no name a later change
    /// brought.
    #[test]
    fn a_frame_lists_the_names_up_to_its_last_change() {
        let (batch, changes) = batch();
        for end in 1..=changes.len() {
            let frames = batch.frames_until(0, end, DEFAULT_MAX_FRAME_LEN).unwrap();
            let message = ServerMessage::Replicated { changes: changes[..end].to_vec() };
            assert_eq!(frames.bytes, encode_frame(&message, DEFAULT_MAX_FRAME_LEN).unwrap());
        }
    }

    /// A frame that starts after the change that brought a name still lists it, at the index
    /// its changes use: the samples' teleport names node 1, `forest`, after `harbor`.
    #[test]
    fn a_frame_from_a_later_change_lists_the_names_before_it() {
        let (batch, changes) = batch();
        let last = changes.len() - 1;
        assert!(matches!(changes[last], ReplicatedChange::PawnsTeleported { .. }));
        let frames = batch.frames(last, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_all(&frames), vec![vec![changes[last].clone()]]);
        let body = &frames.bytes[LENGTH_PREFIX_LEN..];
        // Variant, 1 class ("Vanguard"), 2 nodes ("harbor", "forest"), 1 change: node 1.
        assert_eq!(body[..4], [22, 1, 8, b'V']);
        assert_eq!(body[11..13], [2, 6]);
        assert_eq!(body[19..29], [6, b'f', b'o', b'r', b'e', b's', b't', 1, 7, 1]);
    }

    /// Past `MAX_NAMES_LEN` bytes of names, the batch numbers names afresh: every frame's names
    /// stay within it, from whichever change the frames start, however many names the interval
    /// uses, and no frame mixes two numberings.
    #[test]
    fn many_names_are_numbered_afresh_and_every_frame_fits() {
        use crate::{NodeId, PawnId, PawnIdRuns};
        let long = |i: usize| NodeId::new(format!("{i:03}{}", "n".repeat(57))).unwrap();
        let changes: Vec<_> = (0..200)
            .map(|i| ReplicatedChange::PawnsTeleported {
                node: long(i),
                pawn_ids: PawnIdRuns::from_ids([PawnId(i as u64)]),
            })
            .collect();
        let mut batch = ReplicationBatch::default();
        batch.extend_from(&changes);
        let smallest = 8 * 1024;
        for first in [0, 1, 14, 15, 150, 199] {
            let frames = batch.frames(first, smallest).unwrap();
            assert_eq!(decode_all(&frames).concat(), changes[first..]);
            assert_eq!(frames.count > 1, changes.len() - first > 15);
            let mut at = 0;
            while at < frames.bytes.len() {
                let len = u32::from_le_bytes(frames.bytes[at..at + 4].try_into().unwrap()) as usize;
                assert!(len <= smallest);
                // The names: every node the frame lists, 61 bytes each (no class).
                let body = &frames.bytes[at + 4..at + 4 + len];
                assert_eq!(body[1], 0);
                assert!(usize::from(body[2]) * 61 <= MAX_NAMES_LEN, "{} nodes", body[2]);
                at += 4 + len;
            }
        }
        // 15 names of 61 bytes fit 960, the 16th starts a numbering: a frame from the 16th
        // change lists its own names, from index 0.
        let frames = batch.frames(15, smallest).unwrap();
        assert_eq!(frames.bytes[4..7], [22, 0, 15]);
        assert_eq!(&frames.bytes[8..11], b"015");
    }

    /// A `PawnSpawned` naming a class and a node of its own, `i`-th of a run `run`: 30 and 29
    /// characters, 61 bytes of names together.
    fn spawned_with_own_names(run: char, i: usize) -> ReplicatedChange {
        use crate::{CharacterDef, NodeId, PawnId, PawnView, PlayerId};
        ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(i as u64),
            owner: PlayerId::new("sim-0001").unwrap(),
            character_def: CharacterDef::new(format!("{run}{i:02}{}", "c".repeat(27))).unwrap(),
            node: NodeId::new(format!("{run}{i:02}{}", "n".repeat(26))).unwrap(),
            alive: true,
        })
    }

    /// How many changes each frame of `frames` holds.
    fn changes_per_frame(frames: &Frames) -> Vec<usize> {
        decode_all(frames).iter().map(Vec::len).collect()
    }

    /// Names that bring an interval's to exactly `MAX_NAMES_LEN` bytes, and names it holds
    /// already, keep the numbering: one frame.
    #[test]
    fn names_up_to_the_limit_and_names_known_keep_the_numbering() {
        use crate::{NodeId, PawnId, PawnIdRuns};
        let mut changes: Vec<_> = (0..15).map(|i| spawned_with_own_names('a', i)).collect();
        // 15 × 61 = 915 bytes, and a node of 44 characters: 960.
        changes.push(ReplicatedChange::PawnsTeleported {
            node: NodeId::new("t".repeat(44)).unwrap(),
            pawn_ids: PawnIdRuns::from_ids([PawnId(1)]),
        });
        changes.push(spawned_with_own_names('a', 0));
        let mut batch = ReplicationBatch::default();
        batch.extend_from(&changes);
        let frames = batch.frames(0, 8 * 1024).unwrap();
        assert_eq!(changes_per_frame(&frames), [17]);
        assert_eq!(decode_all(&frames).concat(), changes);
    }

    /// A player state's class and a pawn's class and node are each counted: the one that
    /// takes the names past `MAX_NAMES_LEN` starts a numbering, whichever kind it is.
    #[test]
    fn the_change_whose_names_pass_the_limit_starts_a_numbering() {
        use crate::{CharacterDef, PlayerId, PlayerStateView};
        let mut changes: Vec<_> = (0..15).map(|i| spawned_with_own_names('a', i)).collect();
        // 915 bytes, and a class of 46 bytes: past 960.
        changes.push(ReplicatedChange::PlayerStateUpdated(PlayerStateView {
            player_id: PlayerId::new("sim-0002").unwrap(),
            team: None,
            character_def: Some(CharacterDef::new("s".repeat(45)).unwrap()),
        }));
        // 46 + 14 × 61 = 900 bytes, and 61 more: past 960.
        changes.extend((0..15).map(|i| spawned_with_own_names('b', i)));
        let mut batch = ReplicationBatch::default();
        batch.extend_from(&changes);
        let frames = batch.frames(0, 8 * 1024).unwrap();
        assert_eq!(changes_per_frame(&frames), [15, 15, 1]);
        assert_eq!(decode_all(&frames).concat(), changes);
        // The third frame lists its own class and node, from index 0, and no other.
        let third = batch.frames(30, 8 * 1024).unwrap();
        assert_eq!(third.bytes[4..6], [22, 1]);
        assert_eq!(&third.bytes[7..10], b"b14");
    }

    /// A change the batch cannot name (a list already holds 65,536 names) is refused, and the
    /// batch is as it was: no name of it kept, the same frames.
    #[test]
    fn a_change_the_batch_cannot_name_leaves_it_as_it_was() {
        use crate::{CharacterDef, NodeId, PawnId, PawnView, PlayerId};
        let (mut batch, changes) = batch();
        let before = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        // "harbor" and "forest", and 65,534 more.
        let more = (0..65_534).map(|i| NodeId::new(format!("n{i}")).unwrap());
        batch.names.nodes.extend(more);
        // A new class, then a new node: the class fits, the node does not.
        let spawned = ReplicatedChange::PawnSpawned(PawnView {
            pawn_id: PawnId(99),
            owner: PlayerId::new("sim-0009").unwrap(),
            character_def: CharacterDef::new("Warden").unwrap(),
            node: NodeId::new("one-more").unwrap(),
            alive: true,
        });
        let err = batch.push(&spawned).unwrap_err();
        assert_eq!(
            err,
            FrameError::Encode("a Replicated message names at most 65,536 nodes".into())
        );
        assert_eq!((batch.len(), batch.names.lens()), (changes.len(), (1, 65_536)));
        assert_eq!(batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap(), before);
    }

    /// A change naming a class or node the message does not list is refused, naming the
    /// change, by the reader that keeps it and by one that only reads it in place.
    #[test]
    fn an_index_that_names_nothing_is_refused() {
        // Variant 22, no classes, no nodes, one change: `PawnsTeleported` (7) to node 0, no
        // pawns.
        let body = [22, 0, 0, 1, 7, 0, 0];
        let err = decode_body::<ServerMessage>(&body).unwrap_err().to_string();
        assert!(err.contains("change 0's node 0 names nothing (the list holds 0)"), "{err}");
        let err = decode_replicated_kept(&body, |_| true).unwrap_err().to_string();
        assert!(err.contains("change 0's node 0 names nothing"), "{err}");
        let err = decode_replicated_kept(&body, |_| false).unwrap_err().to_string();
        assert!(err.contains("change 0's node 0 names nothing"), "{err}");
        // A player state's class, read in place.
        let state = [22, 0, 0, 1, 0, 1, b'p', 0, 1, 3];
        let err = decode_replicated_kept(&state, |_| false).unwrap_err().to_string();
        assert!(err.contains("change 0's class 3 names nothing"), "{err}");
        // A pawn's node, read in place: pawn 9 of `p`, class 0 (listed), node 1 (not).
        let spawned = [22, 1, 1, b'c', 1, 1, b'n', 1, 2, 9, 1, b'p', 0, 1, 1];
        let err = decode_replicated_kept(&spawned, |_| false).unwrap_err().to_string();
        assert!(err.contains("change 0's node 1 names nothing"), "{err}");
        // Listing the node mends it.
        let listed = [22, 0, 1, 1, b'a', 1, 7, 0, 0];
        assert!(decode_body::<ServerMessage>(&listed).is_ok());
        assert_eq!(decode_replicated_kept(&listed, |_| true).unwrap().len(), 1);
    }

    #[test]
    fn a_batch_starts_at_any_change() {
        let (batch, changes) = batch();
        for first in 0..changes.len() {
            let frames = batch.frames(first, DEFAULT_MAX_FRAME_LEN).unwrap();
            assert_eq!(decode_all(&frames), vec![changes[first..].to_vec()]);
        }
        assert_eq!(batch.frames(changes.len(), DEFAULT_MAX_FRAME_LEN).unwrap(), Frames::default());
    }

    #[test]
    fn a_batch_past_the_frame_limit_is_cut_between_changes() {
        let (batch, changes) = batch();
        let max = 120;
        let frames = batch.frames(0, max).unwrap();
        let decoded = decode_all(&frames);
        assert!(decoded.len() > 1);
        assert_eq!(decoded.concat(), changes);
        let mut decoder = FrameDecoder::new(max);
        decoder.extend(&frames.bytes);
        while decoder.next_message::<ServerMessage>().unwrap().is_some() {}
        let err = batch.frames(0, 20).unwrap_err();
        // The first change alone (variant, id 1 + 8, team 2, class 2), after the header (the
        // variant index, and room for the longest three counts) and its class ("Vanguard").
        let len = 14 + 1 + 3 * MAX_VARINT_LEN + 9;
        assert_eq!(err, FrameError::TooLong { len, max: 20 });
        // From the second change on: `PlayerLeft` (variant, id 1 + 8), and the class the first
        // one named, which the frame still lists.
        let err = batch.frames(1, 20).unwrap_err();
        let len = 10 + 1 + 3 * MAX_VARINT_LEN + 9;
        assert_eq!(err, FrameError::TooLong { len, max: 20 });
    }

    #[test]
    fn the_kept_changes_are_decoded_in_full_and_the_rest_only_read() {
        let (batch, changes) = batch();
        let frames = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        let body = &frames.bytes[LENGTH_PREFIX_LEN..];
        // Every change read in place spans the bytes its full decoding does (the borrowed
        // layout is the wire's), whatever is kept.
        let all = decode_replicated_kept(body, |_| true).unwrap();
        assert_eq!(all, changes);
        let about = decode_replicated_kept(body, |c| c.player() == Some("sim-0002")).unwrap();
        let expected: Vec<_> = changes
            .iter()
            .filter(|c| match c {
                ReplicatedChange::PlayerStateUpdated(v) => v.player_id.as_str() == "sim-0002",
                ReplicatedChange::PawnSpawned(v) => v.owner.as_str() == "sim-0002",
                ReplicatedChange::AbilityTagsChanged { player_id, .. }
                | ReplicatedChange::HealthChanged { player_id, .. }
                | ReplicatedChange::PlayerLeft { player_id } => player_id.as_str() == "sim-0002",
                _ => false,
            })
            .cloned()
            .collect();
        assert_eq!(about, expected);
        assert!(decode_replicated_kept(&body[..body.len() - 1], |_| false).is_err());
        let mut longer = body.to_vec();
        longer.extend_from_slice(&[0, 0]);
        let err = decode_replicated_kept(&longer, |_| false).unwrap_err();
        assert_eq!(err, FrameError::TrailingBytes { len: longer.len(), trailing: 2 });
        let welcome = encode_frame(&samples::server_messages()[0], DEFAULT_MAX_FRAME_LEN).unwrap();
        assert!(decode_replicated_kept(&welcome[LENGTH_PREFIX_LEN..], |_| true).is_err());
    }

    #[test]
    fn a_body_is_handed_out_whole_and_undecoded() {
        let (batch, _) = batch();
        let frames = batch.frames(0, DEFAULT_MAX_FRAME_LEN).unwrap();
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        decoder.extend(&frames.bytes[..10]);
        assert_eq!(decoder.next_body().unwrap(), None);
        decoder.extend(&frames.bytes[10..]);
        let body = decoder.next_body().unwrap().unwrap().to_vec();
        assert_eq!(body, frames.bytes[LENGTH_PREFIX_LEN..]);
        assert!(is_replicated(&body) && !is_world_snapshot(&body));
        let snapshot = ServerMessage::WorldSnapshot(Box::new(samples::world_snapshot()));
        let frame = encode_frame(&snapshot, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert!(is_world_snapshot(&frame[LENGTH_PREFIX_LEN..]));
        assert!(!is_replicated(&frame[LENGTH_PREFIX_LEN..]));
        assert_eq!(decoder.buffered_len(), 0);
    }

    #[test]
    fn encoded_len_is_what_encoding_writes() {
        for message in samples::server_messages() {
            let frame = encode_frame(&message, HARD_MAX_FRAME_LEN).unwrap();
            assert_eq!(encoded_len(&message) + LENGTH_PREFIX_LEN, frame.len());
        }
    }
}

//! The world as every client has been told it, kept by the carrier to greet a newcomer with
//! `WorldSnapshot`s (docs/protocol.md 4.5), and those frames, built once per state of it.
//!
//! The carrier applies a replication interval's changes when it sends them, so the mirror is
//! the world as of the last batch, and a newcomer gets it and then the batch in flight: one
//! build and one encoding per interval, shared by every newcomer of the interval, where the core
//! building the world for each login cost O(N) work for each of N logins.

use bytes::Bytes;
use gatehouse_protocol::ReplicatedChange;
use gatehouse_protocol::codec::encode_frame_into;

use crate::game::KnownWorld;

/// Whole frames back to back, written to several connections from one buffer (the world for
/// the newcomers of an interval, a batch for the connections owed it).
#[derive(Debug, Clone)]
pub(super) struct SharedFrames {
    /// The frames.
    pub(super) bytes: Bytes,
    /// How many.
    pub(super) count: usize,
}

/// The known world and its frames, until it changes.
#[derive(Debug, Default)]
pub(super) struct WorldMirror {
    known: KnownWorld,
    frames: Option<SharedFrames>,
}

impl WorldMirror {
    /// Applies one change, as a client does.
    pub(super) fn apply(&mut self, change: &ReplicatedChange) {
        self.frames = None;
        self.known.apply(change);
    }

    /// The frames that tell a newcomer this world, each within `max_frame_len` bytes.
    pub(super) fn frames(&mut self, max_frame_len: usize) -> SharedFrames {
        if let Some(frames) = &self.frames {
            return frames.clone();
        }
        let mut bytes = Vec::new();
        let mut count = 0;
        for message in self.known.messages(max_frame_len) {
            match encode_frame_into(&message, max_frame_len, &mut bytes) {
                Ok(()) => count += 1,
                // Our own message did not fit a frame: a bug, reported loudly, never a crash.
                Err(e) => tracing::error!(error = %e, message = %message.name(),
                    "world snapshot does not encode"),
            }
        }
        let frames = SharedFrames { bytes: Bytes::from(bytes), count };
        self.frames = Some(frames.clone());
        frames
    }
}

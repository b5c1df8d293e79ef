//! What `/ready` reads, shared by the server's start, the game task (which marks the boot
//! transition's end) and the admin endpoint (which reads it). A leaf: it imports nothing of the
//! server, so the admin endpoint and the game task both depend on it and not on each other.

use std::sync::atomic::{AtomicBool, Ordering};

/// What `/ready` reads: set by the server as it starts, and by the game task
/// when the boot transition ends. Shared; every flag only ever goes one way except the store's.
#[derive(Debug, Default)]
pub struct Probes {
    listening: AtomicBool,
    store_open: AtomicBool,
    booted: AtomicBool,
}

impl Probes {
    /// The QUIC endpoint accepts connections.
    pub fn mark_listening(&self) {
        self.listening.store(true, Ordering::Release);
    }

    /// The player store is open (`true`) or closed (`false`).
    pub fn set_store_open(&self, open: bool) {
        self.store_open.store(open, Ordering::Release);
    }

    /// The boot transition ended (the core's first transition is no longer in flight).
    pub fn mark_booted(&self) {
        self.booted.store(true, Ordering::Release);
    }

    /// Whether the boot transition ended.
    pub fn booted(&self) -> bool {
        self.booted.load(Ordering::Acquire)
    }

    /// What keeps the server from being ready, in a fixed order; empty when ready.
    pub(crate) fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.listening.load(Ordering::Acquire) {
            missing.push("not listening");
        }
        if !self.store_open.load(Ordering::Acquire) {
            missing.push("store not open");
        }
        if !self.booted() {
            missing.push("boot transition not done");
        }
        missing
    }
}

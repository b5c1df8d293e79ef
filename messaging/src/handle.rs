//! Who owns a listener record: its [`Listener`] handle, and optionally a [`Lifetime`].
//!
//! A record lives exactly as long as its handle. Dropping the handle removes the record at once
//! (not at shutdown, not on the next message: MB-07, MB-08); an owner that holds the handle as a
//! field takes its records with it when it goes away; a [`Lifetime`] (a world, a session) holds
//! many handles and removes them all when it is retired. Handles reach their router through a
//! weak reference, never through a global (MB-09), so a handle that outlives its router is
//! harmless. Handle identities are serials drawn from one process-wide counter: never reused,
//! never local to a channel, so removing by a handle can never remove another listener (MB-01).

use std::fmt;
use std::rc::Weak;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::table::ListRef;

/// The next serial to hand out. Serials start at 1 and only increase.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// A fresh serial, newer than every serial handed out before.
pub(crate) fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// The identity of one listener record: unique in the process, never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId {
    pub(crate) serial: u64,
    pub(crate) list: ListRef,
}

impl ListenerId {
    /// The serial: registration order across every router of the process.
    pub fn serial(self) -> u64 {
        self.serial
    }
}

impl fmt::Debug for ListenerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ListenerId({})", self.serial)
    }
}

impl fmt::Display for ListenerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "listener #{}", self.serial)
    }
}

/// What a handle needs from its router.
pub(crate) trait Registry {
    /// Removes the record at once; `false` if it was already gone.
    fn unlisten(&self, id: ListenerId) -> bool;
    /// Whether the record is still registered.
    fn contains(&self, id: ListenerId) -> bool;
    /// Clears the retained message of the channel at `channel` if it is still the one numbered
    /// `seq`; `false` if a later message replaced it or it was cleared.
    fn release_retained(&self, channel: usize, seq: u64) -> bool;
}

/// The owning handle of one listener record. Dropping it removes the record at once.
///
/// There is no other way to make a `Listener` than a successful registration, so a handle is
/// never born dead (MB-06).
#[must_use = "dropping a Listener removes its record at once; keep it in its owner or a Lifetime"]
pub struct Listener {
    registry: Option<Weak<dyn Registry>>,
    id: ListenerId,
}

impl Listener {
    pub(crate) fn new(registry: Weak<dyn Registry>, id: ListenerId) -> Listener {
        Listener { registry: Some(registry), id }
    }

    /// The record's identity.
    pub fn id(&self) -> ListenerId {
        self.id
    }

    /// Whether the record is still registered (false once removed in any way, or once the
    /// router is gone).
    pub fn is_live(&self) -> bool {
        self.registry.as_ref().and_then(Weak::upgrade).is_some_and(|r| r.contains(self.id))
    }

    /// Removes the record now; `false` if it was already gone.
    pub fn remove(mut self) -> bool {
        self.release()
    }

    fn release(&mut self) -> bool {
        self.registry.take().and_then(|weak| weak.upgrade()).is_some_and(|r| r.unlisten(self.id))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener").field("id", &self.id).field("live", &self.is_live()).finish()
    }
}

/// A sticky channel's retained message that a lifetime owns.
struct RetainedHold {
    registry: Weak<dyn Registry>,
    channel: usize,
    seq: u64,
}

/// A lifetime (a world, a session, a feature) that owns listener records: retiring it, or
/// dropping it, removes every record it holds at once (MB-08). It also owns the sticky messages
/// broadcast in it ([`Router::broadcast_in`](crate::Router::broadcast_in)): retiring it clears
/// each one that no later message has replaced.
#[must_use = "dropping a Lifetime retires it and removes its listeners at once"]
pub struct Lifetime {
    name: String,
    held: Vec<Listener>,
    /// When `held` reaches this many handles, the dead ones are forgotten first.
    compact_at: usize,
    retained: Vec<RetainedHold>,
}

/// The smallest number of handles at which a lifetime forgets its dead ones.
const COMPACT_AT_LEAST: usize = 4;

impl Lifetime {
    /// A lifetime named `name` (for logs), holding nothing yet.
    pub fn new(name: impl Into<String>) -> Lifetime {
        Lifetime {
            name: name.into(),
            held: Vec::new(),
            compact_at: COMPACT_AT_LEAST,
            retained: Vec::new(),
        }
    }

    /// The lifetime's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes ownership of `listener`: its record now lives until this lifetime is retired (or
    /// until it is removed in another way).
    ///
    /// Handles whose records were removed in another way are forgotten each time the number
    /// held reaches twice what was live at the previous such point (at least 4), so a long
    /// lifetime whose listeners are removed one by one keeps no pile of dead handles, and holding
    /// stays amortised constant time.
    pub fn hold(&mut self, listener: Listener) {
        if self.held.len() >= self.compact_at {
            self.held.retain(Listener::is_live);
            self.compact_at = (self.held.len() * 2).max(COMPACT_AT_LEAST);
        }
        self.held.push(listener);
    }

    /// Number of handles held, including those whose records were removed in another way since
    /// the lifetime last forgot its dead handles (see [`Lifetime::hold`]).
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Takes ownership of the retained message `seq` of the sticky channel at `channel`. A hold
    /// on the same channel of the same router is superseded by it (that message was replaced).
    pub(crate) fn hold_retained(&mut self, registry: Weak<dyn Registry>, channel: usize, seq: u64) {
        self.retained.retain(|h| !(h.channel == channel && Weak::ptr_eq(&h.registry, &registry)));
        self.retained.push(RetainedHold { registry, channel, seq });
    }

    /// Retires the lifetime: every record it holds is removed now, and every retained message
    /// it owns is cleared.
    pub fn retire(self) {}
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        // Removed in registration order; each removal is immediate.
        let removed =
            self.held.drain(..).filter_map(|mut listener| listener.release().then_some(())).count();
        let mut cleared = 0;
        for hold in self.retained.drain(..) {
            if hold.registry.upgrade().is_some_and(|r| r.release_retained(hold.channel, hold.seq)) {
                cleared += 1;
            }
        }
        tracing::debug!(
            lifetime = %self.name,
            listeners = removed,
            retained = cleared,
            "lifetime retired: its listeners removed, its retained messages cleared"
        );
    }
}

impl fmt::Debug for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lifetime")
            .field("name", &self.name)
            .field("held", &self.held.len())
            .field("retained", &self.retained.len())
            .finish()
    }
}

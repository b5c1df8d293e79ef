//! The router: its configuration, its shared state, and the public API (register, broadcast,
//! remove, inspect). Delivery itself is in [`crate::dispatch`].
//!
//! The router is single-threaded (the game thread) and needs no lock. Its methods take `&self`
//! so that a callback can reach it again through [`Delivery::router`] while a broadcast is in
//! progress; interior state sits in `RefCell`s that are only ever borrowed for a few lines and
//! never across a callback, a drop of user data, or any other user code.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::num::NonZeroUsize;
use std::rc::{Rc, Weak};

use gatehouse_tags::GameplayTag;

use crate::channel::{Channel, Listen, ListenDyn, Match};
use crate::declare::Channels;
use crate::delivery::Delivery;
use crate::error::Error;
use crate::handle::{Lifetime, Listener, ListenerId, Registry, next_serial};
use crate::layout::Layout;
use crate::payload::{DynPayload, Payload, PayloadType};
use crate::rule;
use crate::stats::{Counters, Report, Stats, bump};
use crate::table::{Api, ListRef, Record, Table};

/// Router settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterConfig {
    max_depth: NonZeroUsize,
}

impl RouterConfig {
    /// The default nesting limit: a broadcast, and up to seven re-entrant levels under it.
    pub const DEFAULT_MAX_DEPTH: NonZeroUsize = match NonZeroUsize::new(8) {
        Some(depth) => depth,
        None => NonZeroUsize::MIN,
    };

    /// Settings with at most `max_depth` nested deliveries (1: callbacks may not broadcast).
    pub const fn new(max_depth: NonZeroUsize) -> RouterConfig {
        RouterConfig { max_depth }
    }

    /// The nesting limit: a top-level broadcast is depth 1, a broadcast (or sticky replay) from
    /// inside one of its callbacks depth 2, and so on.
    pub const fn max_depth(&self) -> usize {
        self.max_depth.get()
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig::new(RouterConfig::DEFAULT_MAX_DEPTH)
    }
}

/// A sticky channel's last message, kept as the channel's declared payload type.
pub(crate) struct Retained {
    pub(crate) seq: u64,
    pub(crate) value: Rc<dyn Any>,
}

/// The router's state, shared with its handles through weak references only.
pub(crate) struct Shared<C> {
    pub(crate) layout: Layout,
    pub(crate) config: RouterConfig,
    pub(crate) table: RefCell<Table<C>>,
    /// One slot per channel, by channel index.
    pub(crate) retained: RefCell<Vec<Option<Retained>>>,
    pub(crate) retained_seq: Cell<u64>,
    pub(crate) depth: Cell<usize>,
    pub(crate) stats: Counters,
    /// Records removed so far: while unchanged, every record of a delivery's snapshot is live.
    pub(crate) removals: Cell<u64>,
}

impl<C> Registry for Shared<C> {
    fn unlisten(&self, id: ListenerId) -> bool {
        let removed = self.table.borrow_mut().remove(id.list, id.serial);
        let found = removed.is_some();
        if found {
            bump(&self.removals);
            tracing::trace!(listener = %id, "listener removed");
        }
        // Dropped here, after the borrow has ended: the callback's captures are user data and
        // may hold other handles.
        drop(removed);
        found
    }

    fn contains(&self, id: ListenerId) -> bool {
        self.table.borrow().find(id.list, id.serial).is_some()
    }

    fn release_retained(&self, channel: usize, seq: u64) -> bool {
        let released = self
            .retained
            .borrow_mut()
            .get_mut(channel)
            .and_then(|slot| slot.take_if(|kept| kept.seq == seq));
        let found = released.is_some();
        if found {
            tracing::trace!(channel = %self.layout.channels[channel].decl.tag, "retained message released");
        }
        // Dropped after the borrow: a payload is user data.
        drop(released);
        found
    }
}

/// The tag-addressed message router, for listeners that touch caller state `C`.
///
/// See the crate documentation for the contract; in short: channels declared once, two APIs
/// with one type rule, delivery synchronous in registration order, records owned by handles
/// and lifetimes, bounded re-entrancy, optional sticky channels.
pub struct Router<C> {
    pub(crate) shared: Rc<Shared<C>>,
}

impl<C: 'static> Router<C> {
    /// A router carrying the declared `channels`, and no others.
    pub fn new(config: RouterConfig, channels: Channels) -> Router<C> {
        let layout = Layout::new(channels);
        let slots = layout.slot_count();
        let channel_count = layout.channels.len();
        let walks: Vec<&[ListRef]> = layout.channels.iter().map(|c| &*c.walk).collect();
        let table = RefCell::new(Table::new(slots, &walks));
        Router {
            shared: Rc::new(Shared {
                layout,
                config,
                table,
                retained: RefCell::new((0..channel_count).map(|_| None).collect()),
                retained_seq: Cell::new(0),
                depth: Cell::new(0),
                stats: Counters::default(),
                removals: Cell::new(0),
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> RouterConfig {
        self.shared.config
    }

    /// Registers a typed listener; `callback` reads each message as `T`.
    ///
    /// The record lives as long as the returned handle. If `on` matches a sticky channel that
    /// has a retained message, `callback` receives it before this returns (with `state`). A
    /// listener registered during a delivery does not receive the message being delivered
    /// (except through that replay); it receives every later broadcast.
    ///
    /// A registration always names a callback, so no handle is ever born dead (MB-06):
    ///
    /// ```compile_fail,E0061
    /// # use gatehouse_messaging::*;
    /// # struct P; impl Payload for P { const NAME: &'static str = "P"; }
    /// # fn f(router: &Router<()>, on: Listen<P>) {
    /// let handle = router.listen(&mut (), on); // no callback: does not compile
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownPayloadType`] if `T` is not declared on this router;
    /// [`Error::UndeclaredChannel`] if the tag is not a declared channel (for
    /// [`Match::Hierarchical`]: nor an ancestor of one); [`Error::ChannelTypeConflict`] if `on`
    /// came from a `Channel<T>` that disagrees with the declaration;
    /// [`Error::ListenerNeverDelivered`] if no channel it matches could ever carry a `T`;
    /// [`Error::DepthExceeded`] if a replay would nest too deep.
    pub fn listen<T, F>(&self, state: &mut C, on: Listen<T>, callback: F) -> Result<Listener, Error>
    where
        T: Payload,
        F: Fn(&mut Delivery<'_, C>, &T) + 'static,
    {
        let Some(expected) = self.shared.layout.types.by_id(TypeId::of::<T>()) else {
            return Err(
                self.refuse_registration(Error::UnknownPayloadType { name: T::NAME.to_owned() })
            );
        };
        if on.from_channel {
            self.channel_of::<T>(on.tag).map_err(|e| self.refuse_registration(e))?;
        }
        let callback = move |delivery: &mut Delivery<'_, C>, value: &dyn Any| match value
            .downcast_ref::<T>()
        {
            Some(payload) => callback(delivery, payload),
            // The rule produced a view of the expected type; this arm cannot be reached.
            None => not_of_expected_type(delivery.listener(), T::NAME),
        };
        self.register(state, on.tag, on.matching, expected, Api::Typed, callback)
    }

    /// Registers a dynamic listener: channel and payload type named at run time. The callback
    /// reads each message as the named type, through [`DynPayload`]. Same contract and same
    /// type rule as [`Router::listen`].
    ///
    /// # Errors
    /// [`Error::Tag`] for a channel name not in `config/tags.toml`; [`Error::UnknownPayloadType`]
    /// for a payload name not declared on this router (including the empty name: there is no
    /// "any type", MB-03); otherwise as [`Router::listen`].
    pub fn listen_dyn<F>(
        &self,
        state: &mut C,
        on: ListenDyn<'_>,
        callback: F,
    ) -> Result<Listener, Error>
    where
        F: Fn(&mut Delivery<'_, C>, DynPayload<'_>) + 'static,
    {
        let tag = GameplayTag::parse(on.channel).map_err(|e| self.refuse_registration(e.into()))?;
        let Some(expected) = self.shared.layout.types.by_name(on.payload_type) else {
            return Err(self.refuse_registration(Error::UnknownPayloadType {
                name: on.payload_type.to_owned(),
            }));
        };
        let name = expected.name;
        let callback = move |delivery: &mut Delivery<'_, C>, value: &dyn Any| {
            callback(delivery, DynPayload::new(name, value))
        };
        self.register(state, tag, on.matching, expected, Api::Dynamic, callback)
    }

    /// Broadcasts `payload` on `channel` to every matching listener, synchronously, in
    /// registration order. Returns what was delivered.
    ///
    /// # Errors
    /// [`Error::UndeclaredChannel`]; [`Error::ChannelTypeConflict`] if `channel` is not the
    /// declared `Channel<T>`; [`Error::DepthExceeded`] past the configured nesting (MB-12).
    pub fn broadcast<T: Payload>(
        &self,
        state: &mut C,
        channel: Channel<T>,
        payload: &T,
    ) -> Result<Report, Error> {
        let index = self.channel_of::<T>(channel.tag()).map_err(|e| self.refuse_broadcast(e))?;
        let sent = self.shared.layout.channels[index].ty;
        self.dispatch(state, index, sent, payload, None)
    }

    /// Broadcasts as [`Router::broadcast`], in `lifetime` (a world, a session): on a sticky
    /// channel the retained copy of this message belongs to `lifetime`, and retiring it clears
    /// the copy unless a later message has replaced it. So a listener that registers in the next
    /// world is never handed a message of a world already torn down. On a plain channel this is
    /// [`Router::broadcast`].
    ///
    /// # Errors
    /// As [`Router::broadcast`].
    pub fn broadcast_in<T: Payload>(
        &self,
        state: &mut C,
        lifetime: &mut Lifetime,
        channel: Channel<T>,
        payload: &T,
    ) -> Result<Report, Error> {
        let index = self.channel_of::<T>(channel.tag()).map_err(|e| self.refuse_broadcast(e))?;
        let sent = self.shared.layout.channels[index].ty;
        self.dispatch(state, index, sent, payload, Some(lifetime))
    }

    /// Forgets the retained message of the sticky `channel`, so later listeners get no replay
    /// until the next broadcast. Returns whether there was one (always `false` on a plain
    /// channel).
    ///
    /// # Errors
    /// [`Error::UndeclaredChannel`]; [`Error::ChannelTypeConflict`] if `channel` is not the
    /// declared `Channel<T>`.
    pub fn clear_retained<T: Payload>(&self, channel: Channel<T>) -> Result<bool, Error> {
        let index = self.channel_of::<T>(channel.tag())?;
        let cleared = self.shared.retained.borrow_mut().get_mut(index).and_then(Option::take);
        let found = cleared.is_some();
        // Dropped after the borrow: a payload is user data.
        drop(cleared);
        Ok(found)
    }

    /// Broadcasts a payload of a type `S` derived from the channel's type `T` (declared on this
    /// router). Whether `S` fits `T` is decided at run time by the one type rule.
    ///
    /// # Errors
    /// As [`Router::broadcast`]; [`Error::UnknownPayloadType`] if `S` is not declared;
    /// [`Error::PayloadMismatch`] if `S` does not derive from `T`.
    pub fn broadcast_derived<T: Payload, S: Payload>(
        &self,
        state: &mut C,
        channel: Channel<T>,
        payload: &S,
    ) -> Result<Report, Error> {
        let index = self.channel_of::<T>(channel.tag()).map_err(|e| self.refuse_broadcast(e))?;
        let Some(sent) = self.shared.layout.types.index_of(TypeId::of::<S>()) else {
            return Err(
                self.refuse_broadcast(Error::UnknownPayloadType { name: S::NAME.to_owned() })
            );
        };
        self.dispatch(state, index, sent, payload, None)
    }

    /// Broadcasts a payload whose channel and type are named at run time (a scripting layer, a
    /// network decoder). Same contract and same type rule as [`Router::broadcast`].
    ///
    /// # Errors
    /// [`Error::Tag`] for a channel name not in `config/tags.toml`; [`Error::UndeclaredChannel`];
    /// [`Error::UnknownPayloadType`]; [`Error::ValueNotOfNamedType`] if `payload` is not of the
    /// named type; [`Error::PayloadMismatch`] if the named type does not fit the channel's;
    /// [`Error::DepthExceeded`].
    pub fn broadcast_dyn(
        &self,
        state: &mut C,
        channel: &str,
        payload_type: &str,
        payload: &dyn Any,
    ) -> Result<Report, Error> {
        let tag = GameplayTag::parse(channel).map_err(|e| self.refuse_broadcast(e.into()))?;
        let Some(index) = self.shared.layout.channel_index(tag) else {
            return Err(self.refuse_broadcast(Error::UndeclaredChannel { channel: tag }));
        };
        let types = &self.shared.layout.types;
        let Some(sent) = types.index_named(payload_type) else {
            return Err(
                self.refuse_broadcast(Error::UnknownPayloadType { name: payload_type.to_owned() })
            );
        };
        if payload.type_id() != types.get(sent).id {
            return Err(self
                .refuse_broadcast(Error::ValueNotOfNamedType { named: payload_type.to_owned() }));
        }
        self.dispatch(state, index, sent, payload, None)
    }

    /// Removes the record `id` at once; `false` if it is already gone or not this router's.
    /// Never removes another record: identities are never reused (MB-01).
    pub fn unlisten(&self, id: ListenerId) -> bool {
        self.shared.unlisten(id)
    }

    /// Whether `id` is registered on this router.
    pub fn is_listening(&self, id: ListenerId) -> bool {
        self.shared.contains(id)
    }

    /// Number of listener records.
    pub fn listener_count(&self) -> usize {
        self.shared.table.borrow().live()
    }

    /// Counters since the router was built.
    pub fn stats(&self) -> Stats {
        self.shared.stats.snapshot()
    }

    /// The weak reference a handle or a lifetime keeps to this router.
    pub(crate) fn registry(&self) -> Weak<dyn Registry> {
        let weak: Weak<Shared<C>> = Rc::downgrade(&self.shared);
        weak
    }

    /// The index of the channel at `tag`, which must be declared with payload `T`.
    fn channel_of<T: Payload>(&self, tag: GameplayTag) -> Result<usize, Error> {
        let layout = &self.shared.layout;
        let index = layout.channel_index(tag).ok_or(Error::UndeclaredChannel { channel: tag })?;
        let declared = &layout.channels[index].decl.ty;
        if declared.id != TypeId::of::<T>() {
            return Err(Error::ChannelTypeConflict {
                channel: tag,
                declared: declared.name,
                arrived: T::NAME,
            });
        }
        Ok(index)
    }

    /// Adds a listener record; the one path behind every registration method.
    ///
    /// 1. Find the listen point; an exact listener needs a channel declared there (MB-10).
    /// 2. Refuse a listener that no channel it matches could ever deliver to (MB-06).
    /// 3. Append it with a fresh process-wide serial: registration order (MB-01, MB-11).
    /// 4. Replay the retained messages of the sticky channels it matches (MB-13); if the replay
    ///    is refused, the handle is dropped and the record removed with it.
    fn register(
        &self,
        state: &mut C,
        tag: GameplayTag,
        matching: Match,
        expected: PayloadType,
        api: Api,
        callback: impl Fn(&mut Delivery<'_, C>, &dyn Any) + 'static,
    ) -> Result<Listener, Error> {
        let layout = &self.shared.layout;
        let point = layout
            .point(tag)
            .filter(|p| matching == Match::Hierarchical || p.channel.is_some())
            .ok_or_else(|| self.refuse_registration(Error::UndeclaredChannel { channel: tag }))?;
        let matched: &[usize] = match matching {
            Match::Exact => point.channel.as_slice(),
            Match::Hierarchical => &point.subtree,
        };
        let reachable =
            matched.iter().any(|&i| rule::related(&expected, &layout.channels[i].decl.ty));
        if !reachable {
            let carried: Vec<&str> =
                matched.iter().map(|&i| layout.channels[i].decl.ty.name).collect();
            return Err(self.refuse_registration(Error::ListenerNeverDelivered {
                channel: tag,
                expected: expected.name,
                carried: carried.join(", "),
            }));
        }
        // Every type a listener can name was declared (checked by the callers).
        let Some(type_index) = layout.types.index_of(expected.id) else {
            return Err(self.refuse_registration(Error::UnknownPayloadType {
                name: expected.name.to_owned(),
            }));
        };
        let id = ListenerId { serial: next_serial(), list: ListRef { slot: point.slot, matching } };
        self.shared.table.borrow_mut().push(Record::new(id, type_index, api, callback));
        let listener = Listener::new(self.registry(), id);
        tracing::trace!(
            listener = %id,
            channel = %tag,
            ?matching,
            expected = expected.name,
            api = api.as_str(),
            "listener registered"
        );
        self.replay(state, matched, id).map_err(|e| self.refuse_registration(e))?;
        Ok(listener)
    }

    /// Counts and logs a refused registration, and hands the error back.
    pub(crate) fn refuse_registration(&self, error: Error) -> Error {
        bump(&self.shared.stats.refused_registrations);
        tracing::warn!(%error, "listener registration refused");
        error
    }

    /// Counts and logs a refused broadcast, and hands the error back.
    pub(crate) fn refuse_broadcast(&self, error: Error) -> Error {
        bump(&self.shared.stats.refused_broadcasts);
        if matches!(error, Error::PayloadMismatch { .. }) {
            // A payload-type mismatch is an error, logged as one (docs/spec/router.md R2).
            tracing::error!(%error, "broadcast refused");
        } else {
            tracing::warn!(%error, "broadcast refused");
        }
        error
    }
}

/// Logs a payload that reached a typed listener as another type than the rule promised.
#[cold]
#[inline(never)]
fn not_of_expected_type(listener: ListenerId, expected: &'static str) {
    tracing::error!(
        listener = %listener,
        expected,
        "router invariant broken: a checked payload is not of the expected type"
    );
}

impl<C> fmt::Debug for Router<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("config", &self.shared.config)
            .field("channels", &self.shared.layout.channels.len())
            .field("listeners", &self.shared.table.borrow().live())
            .field("stats", &self.shared.stats.snapshot())
            .finish()
    }
}

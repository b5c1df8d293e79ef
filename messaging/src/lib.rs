//! gatehouse's tag-addressed message router (docs/spec/router.md).
//!
//! A publish/subscribe router where the channel is a [`GameplayTag`](gatehouse_tags::GameplayTag)
//! under the `Message` root and the message a typed payload. Publisher and listener never
//! reference each other; their whole contract is the pair (channel, payload type), and both
//! halves are declared once and checked. `docs/spec/router.md` names the ways such a bus fails
//! quietly (MB-01 …); each is designed out here and pinned by a test in `tests/failure_modes.rs`:
//!
//! | failure mode | here |
//! |---|---|
//! | MB-01 removal by a channel-local id hits another listener | [`ListenerId`]s are process-wide serials, never reused; removal finds the record by serial in its own list |
//! | MB-02 typed and scripted paths disagree on types | one rule ([`Payload::PARENT`] chain), called by both APIs; one test matrix runs both |
//! | MB-03 "no expected type" bypasses the check | every listener names a declared type; there is no "any" |
//! | MB-05 hierarchical matching unreachable from a path | every subscription constructor takes a [`Match`]; one internal registration path |
//! | MB-06 registration without callback gives a dead handle | the callback is a required argument; a listener that could never receive is refused |
//! | MB-07, MB-08 records outlive owner or world | records are owned by a [`Listener`] handle (and optionally a [`Lifetime`]); dropping removes at once |
//! | MB-09 global accessor asserts during teardown | no global: handles hold a weak reference; any teardown order is harmless |
//! | MB-10 channel strings declared at many sites | [`Channel<T>`] constants over generated tag constants, declared once on [`Channels`]; anything else refused |
//! | MB-11 swap-remove reorders | delivery in registration order; removal shifts, never swaps |
//! | MB-12 unbounded re-entrancy | nesting bounded by [`RouterConfig::max_depth`], refused with [`Error::DepthExceeded`] |
//! | MB-13 no sticky messages | [`Channels::declare_sticky`]: the last message is replayed to late listeners; it can belong to a [`Lifetime`] ([`Router::broadcast_in`]) or be cleared ([`Router::clear_retained`]) |
//!
//! # Using it
//!
//! ```
//! use gatehouse_messaging::*;
//! use gatehouse_tags::catalog::*;
//! use gatehouse_tags::GameplayTag;
//!
//! // Payload types; `PawnSpawned` derives from `Notice` by holding it (see `Payload`).
//! #[derive(Clone, Debug)]
//! struct Notice { player: u32 }
//! impl Payload for Notice { const NAME: &'static str = "Notice"; }
//! #[derive(Clone, Debug)]
//! struct PawnSpawned { notice: Notice, pawn: u64 }
//! impl Payload for PawnSpawned {
//!     const NAME: &'static str = "PawnSpawned";
//!     const PARENT: Option<Parent> = Some(Parent::of::<Self, Notice>());
//! }
//! impl Derives<Notice> for PawnSpawned {
//!     fn parent(&self) -> &Notice { &self.notice }
//! }
//!
//! // Channels: declared once, as constants over the generated tag constants.
//! const PAWN_SPAWNED: Channel<PawnSpawned> = Channel::new(MESSAGE_REPLICATION_PAWN_SPAWNED);
//! let mut channels = Channels::new();
//! channels.declare_sticky(PAWN_SPAWNED)?;
//!
//! // The caller's state that callbacks touch; here a log.
//! let router: Router<Vec<String>> = Router::new(RouterConfig::default(), channels);
//! let mut log = Vec::new();
//!
//! // Typed, exact.
//! let spawned = router.listen(&mut log, Listen::channel(PAWN_SPAWNED, Match::Exact), |d, p| {
//!     d.state().push(format!("pawn {}", p.pawn));
//! })?;
//! // Typed, hierarchical, reading the base type: hears every replication notification.
//! let family = GameplayTag::parse("Message.Replication")?;
//! let mut world = Lifetime::new("world 1");
//! world.hold(router.listen(&mut log, Listen::<Notice>::tag(family, Match::Hierarchical), |d, n| {
//!     let line = format!("{} for player {}", d.channel(), n.player);
//!     d.state().push(line);
//! })?);
//! // Dynamic: channel and payload type named at run time.
//! let _script = router.listen_dyn(
//!     &mut log,
//!     ListenDyn::new("Message.Replication", Match::Hierarchical, "Notice"),
//!     |d, payload| {
//!         let player = payload.downcast_ref::<Notice>().map(|n| n.player);
//!         d.state().push(format!("script saw player {player:?}"));
//!     },
//! )?;
//!
//! let spawned_msg = PawnSpawned { notice: Notice { player: 3 }, pawn: 9 };
//! let report = router.broadcast(&mut log, PAWN_SPAWNED, &spawned_msg)?;
//! assert_eq!(report.delivered, 3);
//! router.broadcast_dyn(&mut log, "Message.Replication.PawnSpawned", "PawnSpawned", &spawned_msg)?;
//! assert_eq!(log[..3], [
//!     "pawn 9",
//!     "Message.Replication.PawnSpawned for player 3",
//!     "script saw player Some(3)",
//! ]);
//!
//! // Retiring the world removes its listener at once; dropping a handle removes its own.
//! world.retire();
//! drop(spawned);
//! assert_eq!(router.listener_count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The delivery contract
//!
//! - **Order.** Delivery is synchronous (inside the broadcast call) and follows registration
//!   order across every listener the message reaches: exact listeners on the channel, and
//!   hierarchical listeners on it or on any ancestor tag (whole segments).
//! - **During a delivery.** The recipients are fixed when the broadcast starts. A listener
//!   removed before its turn is not called; a listener registered during the delivery does
//!   *not* receive that message, only later ones, except that on a sticky channel its
//!   registration replay hands it the current message at once (so it sees it exactly once).
//! - **Types.** One rule: a payload sent as `S` is read as `E` when `S` is `E` or declares `E`
//!   as an ancestor ([`Payload::PARENT`], [`Derives`]). A broadcast whose payload does not fit
//!   the channel's type is refused with an error; a listener whose type does not fit is skipped,
//!   logged as an error (docs/spec/router.md R2) and counted ([`Stats::mismatches`],
//!   [`Report::mismatched`]), in both APIs; a registration
//!   that no channel it matches could ever serve is refused.
//! - **Callbacks** are `Fn(&mut Delivery<'_, C>, &T)`: state lives in the caller's `C`, lent by
//!   the broadcaster ([`Delivery::state`]); the router is reachable through
//!   [`Delivery::router`] to broadcast, register or remove. They are `Fn`, not `FnMut`, because a
//!   re-entrant broadcast may reach a listener whose callback is still running; it is called
//!   again rather than skipped. Captured mutable state goes in `C` or in a `Cell`.
//! - **Sticky channels** keep their last message as the channel's declared type and replay it
//!   to each later listener, oldest channel first, through the same rule. A message broadcast
//!   with [`Router::broadcast_in`] belongs to that lifetime (a world): retiring it clears the
//!   message unless a later one replaced it, so the next world is never handed the last one's.
//!   [`Router::clear_retained`] clears it explicitly.
//! - **Cost.** A broadcast takes one snapshot (a reference count) per non-empty list it reaches;
//!   a delivery is a few loads and compares and the call (`benches/broadcast.rs` measures it
//!   against a plain call loop). Registering or removing on a list while a broadcast holds its
//!   snapshot copies that list; a removed listener's callback is dropped when the last
//!   broadcast holding it ends.
//! - **Depth.** A top-level broadcast is depth 1; each broadcast or replay from inside a
//!   callback adds one. Past [`RouterConfig::max_depth`] the nested call fails with
//!   [`Error::DepthExceeded`] (logged and counted); the outer deliveries go on.
//!
//! # Threading
//!
//! Single-threaded by design (the game thread): the router and its handles are `!Send`, and
//! nothing locks. Callbacks receive `&mut C`, the caller's state, lent by the broadcaster.

#![forbid(unsafe_code)]

mod channel;
mod declare;
mod delivery;
mod dispatch;
mod error;
mod handle;
mod layout;
mod payload;
mod router;
mod rule;
mod stats;
mod table;

pub use channel::{Channel, Listen, ListenDyn, Match};
pub use declare::Channels;
pub use delivery::Delivery;
pub use error::Error;
pub use handle::{Lifetime, Listener, ListenerId};
pub use payload::{Derives, DynPayload, Parent, Payload};
pub use router::{Router, RouterConfig};
pub use stats::{Report, Stats};

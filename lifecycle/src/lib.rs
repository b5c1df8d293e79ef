//! The client lifecycle gate registry (docs/spec/gates.md G1–G10): object-scoped readiness facts
//! and one-shot AND-gates over them.
//!
//! Producers (feature adapters) publish small facts, each a
//! [`GameplayTag`](gatehouse_tags::GameplayTag) cached on one object's scope; consumers wait for
//! an AND-set of facts and are called back once, when the last one is ready. Nothing here knows about pawns, players, UI, networking or time: objects
//! are caller-chosen [`ObjectId`]s, and which facts a feature needs is decided by the adapter
//! that registers the wait, never by the registry.
//!
//! # Model
//!
//! - A **scope** is an object's current relationship, created by [`Registry::scope`] under a
//!   **lifetime** (another object, usually a world or the game instance) and named by a
//!   [`ScopeToken`]: the object id plus a [`Generation`] that is never reused.
//! - A **fact** is ready or not on a scope: [`Registry::set_ready`] publishes or closes it.
//! - A **wait** ([`Registry::wait_for_all`]) belongs to an owner scope, has a [`RequestName`]
//!   unique per owner, and lists [`Requirement`]s (token + fact). It is delivered once, when
//!   every requirement holds, or retired without running when any scope it touches is reset.
//! - **Resetting** a scope ([`Registry::reset_scope`], [`Registry::reset_lifetime`], or
//!   re-scoping with another lifetime) drops its facts and waits and makes its tokens stale:
//!   every later operation presented with them is refused with a [`LifecycleError`], so stale
//!   asynchronous work cannot open readiness on a replacement relationship.
//!
//! # Delivery
//!
//! Facts are cached, so a wait whose requirements are already ready runs its callback during
//! registration ([`WaitStatus::Delivered`]). A callback is removed from the registry before it
//! runs and receives `&mut Registry<C>` and the caller's `&mut C`, so it may cancel, reset,
//! publish and register freely; what it causes is delivered, in order, after it returns and
//! before the outermost call returns. A queued wait is delivered only if its requirements still
//! hold when its turn comes.
//!
//! Publishing a fact examines only the waits that reference that fact on that object, through
//! an index; its cost does not grow with unrelated waits.
//!
//! ```
//! use gatehouse_lifecycle::{ObjectId, Registry, Requirement, WaitStatus};
//! use gatehouse_tags::catalog::{
//!     LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY,
//! };
//!
//! let (world, player_state, pawn) = (ObjectId::new(1), ObjectId::new(2), ObjectId::new(3));
//! let mut gates: Registry<Vec<&str>> = Registry::new();
//! let mut log = Vec::new();
//!
//! let player_scope = gates.scope(player_state, world);
//! let pawn_scope = gates.scope(pawn, world);
//! let status = gates.wait_for_all(
//!     pawn_scope,
//!     "Feature.Initialize",
//!     &[
//!         Requirement::new(player_scope, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
//!         Requirement::new(pawn_scope, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED),
//!     ],
//!     &mut log,
//!     |_gates, log| log.push("initialised"),
//! )?;
//! assert_eq!(status, WaitStatus::Pending);
//!
//! gates.set_ready(player_scope, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log)?;
//! gates.set_ready(pawn_scope, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, &mut log)?;
//! assert_eq!(log, ["initialised"]);
//! # Ok::<(), gatehouse_lifecycle::LifecycleError>(())
//! ```

#![forbid(unsafe_code)]

mod error;
mod id;
mod inspect;
mod registry;
mod scopes;
mod waiters;

#[cfg(test)]
mod model_tests;

pub use error::LifecycleError;
pub use id::{Generation, ObjectId, RequestName, Requirement, ScopeToken};
pub use inspect::{Counters, PendingWait};
pub use registry::{Registry, WaitStatus};

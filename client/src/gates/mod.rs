//! The lifecycle gates a game's code waits on, over a `gatehouse-lifecycle` registry: the
//! objects' identities in the registry ([`ids`]), the three public gates ([`PUBLIC_GATES`]) and
//! the subscriptions to them ([`Subscriptions`]).
//!
//! The replicated world ([`crate::world`]) says what exists; the game scopes those objects in
//! its registry (a world, a player state, each pawn generation, under the ids here), publishes
//! its own readiness facts on them, and opens each public gate by publishing the gate's tag on
//! its subject once the gate's requirements hold. The requirements are the game's: this module
//! fixes the names, the subjects and the subscription contract, so code that waits on a gate
//! never depends on how the game decides it (docs/client.md, "Gates").
//!
//! - `Lifecycle.Gate.Character.LocalReady`, on a pawn generation: the pawn you control is ready
//!   to be shown and driven.
//! - `Lifecycle.Gate.Character.RemoteReady`, on a pawn generation: another player's pawn is ready
//!   to be shown.
//! - `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady`, on your player state (and the
//!   world): your HUD may bind.

pub mod ids;
mod subscription;

pub use subscription::{
    GateError, GateFired, GateSubscription, PUBLIC_GATES, Subscriptions, cancel,
};

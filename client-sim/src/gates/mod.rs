//! The public gates of seed 000 and their dispatch: the character gates, the local player's
//! widget/team gate, and subscriptions to them.
//!
//! This module owns what consumers see: the gate tags as cached facts on their subjects, the
//! subscriptions ([`GateSubscription`]), and the order in which a gate's dispatch reaches them.
//! The requirements of the character gates are the character adapter's; the widget/team gate's
//! are in `local_player`.

pub(crate) mod character;
pub(crate) mod local_player;
mod subscription;

pub use local_player::LOCAL_PLAYER_GATE;
pub(crate) use local_player::LocalPlayerGate;
pub use subscription::{GateError, GateFired, GateSubscription, PUBLIC_GATES};
pub(crate) use subscription::{Subscriptions, cancel, register, register_public};

//! The public gates (docs/spec/gates.md G11–G16) and their dispatch: the character gates, the local
//! player's widget/team gate, subscriptions to them, and the pump that performs what the adapters
//! left in the outbox.
//!
//! This module owns what consumers see: the gate delegates on the router, the gate tags as cached
//! facts on their subjects, the subscriptions ([`GateSubscription`]), and the order in which a
//! gate's dispatch reaches them. The requirements of every gate are the adapters'; this layer
//! imports the adapters, the domain and the ids, and nothing of the live checks.

pub(crate) mod character;
pub(crate) mod local_player;
mod pump;

use gatehouse_messaging::Channels;

pub use character::{
    CharacterGateOpened, LOCAL_CHARACTER_INIT_GATE_OPENED, REMOTE_CHARACTER_INIT_GATE_OPENED,
};
pub use gatehouse_client::gates::{GateError, GateFired, GateSubscription, PUBLIC_GATES};
pub use local_player::{LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, LocalPlayerReady};
pub(crate) use pump::{announce, pump};

/// Declares the gate delegates' channels, once each.
///
/// # Errors
/// A [`gatehouse_messaging::Error`] if a channel were declared twice or its tag were missing from
/// the catalog.
pub fn declare_channels(
    channels: &mut Channels,
) -> Result<&mut Channels, gatehouse_messaging::Error> {
    channels
        .declare(LOCAL_CHARACTER_INIT_GATE_OPENED)?
        .declare(REMOTE_CHARACTER_INIT_GATE_OPENED)?
        .declare(LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY)
}

//! The public gates of seed 000 and their dispatch: the character gates, the local player's
//! widget/team gate, subscriptions to them, and the pump that performs what the adapters left in
//! the outbox.
//!
//! This module owns what consumers see: the gate delegates on the router, the gate tags as cached
//! facts on their subjects, the subscriptions ([`GateSubscription`]), and the order in which a
//! gate's dispatch reaches them. The requirements of every gate are the adapters'; this layer
//! imports the adapters, the domain and the ids, and nothing of the live checks.

pub(crate) mod character;
pub(crate) mod local_player;
mod pump;

use gatehouse_lifecycle::ObjectId;
use gatehouse_messaging::Channels;
use gatehouse_tags::GameplayTag;

use crate::adapters::{ClientCore, ClientState};

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

/// Subscribes `callback` to the public `gate` on `subject`, guarded by `listener`
/// ([`gatehouse_client::gates::Subscriptions::subscribe`]).
pub(crate) fn register_public(
    core: &mut ClientCore,
    listener: ObjectId,
    subject: ObjectId,
    gate: GameplayTag,
    callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
) -> Result<GateSubscription, GateError> {
    let ClientCore { registry, state, subscriptions } = core;
    subscriptions.subscribe(registry, state, listener, subject, gate, callback)
}

/// As [`register_public`], for any fact on `subject`, unchecked.
pub(crate) fn register(
    core: &mut ClientCore,
    listener: ObjectId,
    subject: ObjectId,
    fact: GameplayTag,
    callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
) -> Result<GateSubscription, GateError> {
    let ClientCore { registry, state, subscriptions } = core;
    subscriptions.subscribe_to_fact(registry, state, listener, subject, fact, callback)
}

/// Cancels a pending subscription; false if it already ran, was retired or was cancelled.
pub(crate) fn cancel(core: &mut ClientCore, subscription: &GateSubscription) -> bool {
    gatehouse_client::gates::cancel(&mut core.registry, subscription)
}

//! Public gate subscriptions (seed 000, "Blueprint API" and `RegisterForLifecycleGateNative`).
//!
//! A subscription is a guarded registry wait on one fact of one subject generation:
//! - owned by the subject's scope, so it is one-shot for that generation and retired with it
//!   (a respawned pawn needs a new subscription);
//! - guarded by the listener's scope, so it is pruned, without running, when the listener goes;
//! - requiring exactly the gate tag on exactly that subject, so a gate opened by another pawn, or
//!   a parent tag, can never trigger it;
//! - delivered during registration when the gate is already cached (replay).
//!
//! The handle names the wait (subject and request name), so cancelling it is explicit and can
//! never hit another subscription.

use gatehouse_lifecycle::{
    Generation, LifecycleError, ObjectId, RequestName, Requirement, ScopeToken, WaitStatus,
};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY, LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
};

use crate::adapters::{ClientCore, ClientState};

/// The documented public gates. Matching is exact: a parent tag is no gate.
pub const PUBLIC_GATES: [GameplayTag; 3] = [
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY,
    LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
];

/// Why a gate subscription was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The tag is not one of the public gates (exact match; a parent tag subscribes to nothing).
    #[error(
        "{0} is not a public gate: expected exactly Lifecycle.Gate.Character.LocalReady, \
         Lifecycle.Gate.Character.RemoteReady or Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady"
    )]
    NotAPublicGate(GameplayTag),
    /// The listener has no current scope: it is gone, or was never scoped.
    #[error("listener {0} has no current scope: expected a live, scoped listener")]
    ListenerGone(ObjectId),
    /// The subject has no current scope.
    #[error("subject {0} has no current scope: expected a live, scoped subject")]
    SubjectGone(ObjectId),
    /// The registry refused the wait.
    #[error(transparent)]
    Registry(#[from] LifecycleError),
}

/// A gate that fired for a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateFired {
    /// The gate (or fact) subscribed to.
    pub gate: GameplayTag,
    /// The subject generation it opened for.
    pub subject: ScopeToken,
}

/// The cancellation handle of a subscription. Dropping it does not cancel: store it only when
/// explicit early cancellation is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSubscription {
    subject: ObjectId,
    generation: Generation,
    request: RequestName,
    delivered: bool,
}

impl GateSubscription {
    /// The subject.
    pub fn subject(&self) -> ObjectId {
        self.subject
    }

    /// The subject generation it is for.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Whether the callback already ran during registration (the gate was cached).
    pub fn was_delivered_at_registration(&self) -> bool {
        self.delivered
    }
}

/// Registers a one-shot `callback` for `fact` on `subject`'s current generation, guarded by
/// `listener`. Public callers go through [`register_public`]; `fact` is not checked here.
pub(crate) fn register(
    core: &mut ClientCore,
    listener: ObjectId,
    subject: ObjectId,
    fact: GameplayTag,
    callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
) -> Result<GateSubscription, GateError> {
    let guard = core.registry.token(listener).ok_or(GateError::ListenerGone(listener))?;
    let token = core.registry.token(subject).ok_or(GateError::SubjectGone(subject))?;
    core.state.subscriptions += 1;
    let request = RequestName::from(format!("Gate.Subscription.{}", core.state.subscriptions));
    let status = core.registry.wait_for_all_guarded(
        token,
        request.clone(),
        guard,
        &[Requirement::new(token, fact)],
        &mut core.state,
        move |_, state| callback(state, GateFired { gate: fact, subject: token }),
    )?;
    Ok(GateSubscription {
        subject,
        generation: token.generation(),
        request,
        delivered: status == WaitStatus::Delivered,
    })
}

/// [`register`] for a documented public gate only.
pub(crate) fn register_public(
    core: &mut ClientCore,
    listener: ObjectId,
    subject: ObjectId,
    gate: GameplayTag,
    callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
) -> Result<GateSubscription, GateError> {
    if !PUBLIC_GATES.contains(&gate) {
        return Err(GateError::NotAPublicGate(gate));
    }
    register(core, listener, subject, gate, callback)
}

/// Cancels a pending subscription; false if it already ran, was retired or was cancelled.
pub(crate) fn cancel(core: &mut ClientCore, subscription: &GateSubscription) -> bool {
    let current = core.registry.token(subscription.subject).map(ScopeToken::generation);
    current == Some(subscription.generation)
        && core.registry.cancel(subscription.subject, subscription.request.as_str())
}

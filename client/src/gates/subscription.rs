//! Public gate subscriptions: how a game's code waits for a gate on one object.
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
    Generation, LifecycleError, ObjectId, Registry, RequestName, Requirement, ScopeToken,
    WaitStatus,
};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY, LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
};

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

/// The subscriptions a client made: it names each one's wait uniquely.
#[derive(Debug, Default)]
pub struct Subscriptions {
    made: u64,
}

impl Subscriptions {
    /// Subscribes a one-shot `callback` to the public `gate` on `subject`'s current generation
    /// in `registry`, guarded by `listener`: it runs during this call if the gate is already
    /// open (cached on the subject), and is retired without running when the subject's
    /// generation or the listener's scope goes, or when [`cancel`]led.
    ///
    /// # Errors
    /// [`GateError::NotAPublicGate`] for a tag that is not exactly one of [`PUBLIC_GATES`];
    /// [`GateError::ListenerGone`] or [`GateError::SubjectGone`] for an object with no current
    /// scope; [`GateError::Registry`] if the registry refused the wait.
    pub fn subscribe<S>(
        &mut self,
        registry: &mut Registry<S>,
        state: &mut S,
        listener: ObjectId,
        subject: ObjectId,
        gate: GameplayTag,
        callback: impl FnOnce(&mut S, GateFired) + 'static,
    ) -> Result<GateSubscription, GateError> {
        if !PUBLIC_GATES.contains(&gate) {
            return Err(GateError::NotAPublicGate(gate));
        }
        self.subscribe_to_fact(registry, state, listener, subject, gate, callback)
    }

    /// As [`Subscriptions::subscribe`], for any `fact` a game publishes on its objects (a
    /// gate of its own, or a fact such as a character's `InitGateOpened`): not checked against
    /// the public gates.
    ///
    /// # Errors
    /// As [`Subscriptions::subscribe`], except [`GateError::NotAPublicGate`].
    pub fn subscribe_to_fact<S>(
        &mut self,
        registry: &mut Registry<S>,
        state: &mut S,
        listener: ObjectId,
        subject: ObjectId,
        fact: GameplayTag,
        callback: impl FnOnce(&mut S, GateFired) + 'static,
    ) -> Result<GateSubscription, GateError> {
        let guard = registry.token(listener).ok_or(GateError::ListenerGone(listener))?;
        let token = registry.token(subject).ok_or(GateError::SubjectGone(subject))?;
        self.made += 1;
        let request = RequestName::from(format!("Gate.Subscription.{}", self.made));
        let status = registry.wait_for_all_guarded(
            token,
            request.clone(),
            guard,
            &[Requirement::new(token, fact)],
            state,
            move |_, state| callback(state, GateFired { gate: fact, subject: token }),
        )?;
        Ok(GateSubscription {
            subject,
            generation: token.generation(),
            request,
            delivered: status == WaitStatus::Delivered,
        })
    }
}

/// Cancels a pending subscription; false if it already ran, was retired or was cancelled.
pub fn cancel<S>(registry: &mut Registry<S>, subscription: &GateSubscription) -> bool {
    let current = registry.token(subscription.subject).map(ScopeToken::generation);
    current == Some(subscription.generation)
        && registry.cancel(subscription.subject, subscription.request.as_str())
}

//! Subscriptions to the public gates over a plain registry, as a game's code makes them: exact
//! gate names only, one-shot per subject generation, replayed when already open, pruned with
//! their listener, cancellable by their handle alone.

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

use gatehouse_client::gates::ids::{GAME_INSTANCE, listener_object, pawn_object};
use gatehouse_client::gates::{GateError, GateFired, Subscriptions, cancel};
use gatehouse_lifecycle::Registry;
use gatehouse_protocol::PawnId;
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{
    LIFECYCLE_GATE_CHARACTER_LOCAL_READY, LIFECYCLE_GATE_CHARACTER_REMOTE_READY,
};

/// What the callbacks saw.
type Fired = Vec<GateFired>;

/// A registry with pawn 1 and a listener scoped under the game instance.
fn scoped() -> (Registry<Fired>, Fired) {
    let mut registry = Registry::new();
    registry.scope(GAME_INSTANCE, GAME_INSTANCE);
    registry.scope(pawn_object(PawnId(1)), GAME_INSTANCE);
    registry.scope(listener_object(1), GAME_INSTANCE);
    (registry, Vec::new())
}

fn record(fired: &mut Fired, gate: GateFired) {
    fired.push(gate);
}

#[test]
fn only_an_exact_public_gate_can_be_subscribed() {
    let (mut registry, mut fired) = scoped();
    let mut subscriptions = Subscriptions::default();
    let (listener, pawn) = (listener_object(1), pawn_object(PawnId(1)));
    let parent = GameplayTag::parse("Lifecycle.Gate").unwrap();
    let refused =
        subscriptions.subscribe(&mut registry, &mut fired, listener, pawn, parent, record);
    assert_eq!(refused.unwrap_err(), GateError::NotAPublicGate(parent));
    let gone = pawn_object(PawnId(9));
    let subject = subscriptions.subscribe(
        &mut registry,
        &mut fired,
        listener,
        gone,
        LIFECYCLE_GATE_CHARACTER_LOCAL_READY,
        record,
    );
    assert_eq!(subject.unwrap_err(), GateError::SubjectGone(gone));
}

/// The gate opening on its subject runs the callback once; the same gate on another pawn, or
/// another gate on this one, runs nothing.
#[test]
fn a_subscription_runs_once_when_its_gate_opens_on_its_subject() {
    let (mut registry, mut fired) = scoped();
    registry.scope(pawn_object(PawnId(2)), GAME_INSTANCE);
    let mut subscriptions = Subscriptions::default();
    let (listener, pawn) = (listener_object(1), pawn_object(PawnId(1)));
    let gate = LIFECYCLE_GATE_CHARACTER_LOCAL_READY;
    let handle = subscriptions.subscribe(&mut registry, &mut fired, listener, pawn, gate, record);
    assert!(!handle.unwrap().was_delivered_at_registration());
    let other = registry.token(pawn_object(PawnId(2))).unwrap();
    registry.set_ready(other, gate, true, &mut fired).unwrap();
    let token = registry.token(pawn).unwrap();
    registry.set_ready(token, LIFECYCLE_GATE_CHARACTER_REMOTE_READY, true, &mut fired).unwrap();
    assert!(fired.is_empty(), "another pawn's gate, or another gate, is not this one");
    registry.set_ready(token, gate, true, &mut fired).unwrap();
    assert_eq!(fired, [GateFired { gate, subject: token }]);
    registry.clear(token, gate).unwrap();
    registry.set_ready(token, gate, true, &mut fired).unwrap();
    assert_eq!(fired.len(), 1, "one-shot");
}

/// A gate already open is delivered during the registration; a new generation of the subject
/// needs a new subscription.
#[test]
fn an_open_gate_is_replayed_at_registration_and_a_new_generation_needs_a_new_subscription() {
    let (mut registry, mut fired) = scoped();
    let mut subscriptions = Subscriptions::default();
    let (listener, pawn) = (listener_object(1), pawn_object(PawnId(1)));
    let gate = LIFECYCLE_GATE_CHARACTER_REMOTE_READY;
    let first = registry.token(pawn).unwrap();
    registry.set_ready(first, gate, true, &mut fired).unwrap();
    let handle = subscriptions.subscribe(&mut registry, &mut fired, listener, pawn, gate, record);
    assert!(handle.unwrap().was_delivered_at_registration());
    assert_eq!(fired, [GateFired { gate, subject: first }]);

    registry.reset_scope(pawn);
    let second = registry.scope(pawn, GAME_INSTANCE);
    registry.set_ready(second, gate, true, &mut fired).unwrap();
    assert_eq!(fired.len(), 1, "the old subscription went with its generation");
}

/// A listener that goes takes its pending subscriptions with it, without running them; a
/// handle cancels exactly its own subscription, once.
#[test]
fn a_subscription_goes_with_its_listener_and_cancels_by_its_handle() {
    let (mut registry, mut fired) = scoped();
    registry.scope(listener_object(2), GAME_INSTANCE);
    let mut subscriptions = Subscriptions::default();
    let pawn = pawn_object(PawnId(1));
    let gate = LIFECYCLE_GATE_CHARACTER_LOCAL_READY;
    let mut subscribe = |registry: &mut Registry<Fired>, fired: &mut Fired, listener| {
        subscriptions.subscribe(registry, fired, listener, pawn, gate, record).unwrap()
    };
    subscribe(&mut registry, &mut fired, listener_object(1));
    let kept = subscribe(&mut registry, &mut fired, listener_object(2));
    let cancelled = subscribe(&mut registry, &mut fired, listener_object(2));
    assert!(cancel(&mut registry, &cancelled));
    assert!(!cancel(&mut registry, &cancelled), "once");
    registry.reset_scope(listener_object(1));
    let token = registry.token(pawn).unwrap();
    registry.set_ready(token, gate, true, &mut fired).unwrap();
    assert_eq!(fired, [GateFired { gate, subject: token }], "only the kept one ran");
    assert!(!cancel(&mut registry, &kept), "it ran already");
}

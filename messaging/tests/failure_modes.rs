//! One test per failure mode of docs/spec/router.md (MB-01 to MB-13; there is no MB-04), each
//! showing that it cannot happen here and failing if the guard that prevents it were removed.

#![allow(clippy::unwrap_used)] // tests unwrap freely

mod common;

use std::cell::Cell;
use std::num::NonZeroUsize;
use std::rc::Rc;

use common::*;
use gatehouse_messaging::{
    Channel, Channels, Error, Lifetime, Listen, ListenDyn, Listener, ListenerId, Match, Router,
    RouterConfig,
};
use gatehouse_tags::catalog::*;

type Log = Vec<String>;

/// A typed listener at `on` that logs `name`.
fn logger<T: gatehouse_messaging::Payload>(
    router: &Router<Log>,
    log: &mut Log,
    on: Listen<T>,
    name: &'static str,
) -> Listener {
    router.listen(log, on, move |d, _| d.state().push(name.to_owned())).unwrap()
}

/// docs/spec/router.md R1 (MB-01). The failure: a stale listener was removed by a channel-local id
/// using the broadcast channel instead of the ancestor being visited, hitting whichever listener
/// held the same id there. Here ids are process-wide serials, never reused, and removal looks in
/// the record's own list, so removing one listener (during a parent walk, by a stale id, by another
/// router's id) never removes another.
#[test]
fn mb_01_removing_a_listener_never_removes_another() {
    let router: Router<Log> = router(false);
    let other: Router<Log> = router_without_listeners();
    let mut log = Log::new();
    // First in their lists: a channel-local id would be the same (0) for all three.
    let parent = router
        .listen(
            &mut log,
            Listen::<Notice>::tag(tag("Message.Test"), Match::Hierarchical),
            |d, _| {
                d.state().push("parent".into());
                // Removes itself during the parent walk of a Depth4 broadcast.
                d.unlisten_self();
            },
        )
        .unwrap();
    let _leaf = logger(&router, &mut log, Listen::channel(DEPTH4, Match::Exact), "leaf");
    let _ping = logger(&router, &mut log, Listen::channel(PING, Match::Exact), "ping");

    router.broadcast(&mut log, DEPTH4, &spawned(1)).unwrap();
    assert_eq!(log, ["parent", "leaf"]);
    assert!(!parent.is_live(), "the parent removed itself, and only itself");
    assert_eq!(router.listener_count(), 2);

    // The stale id of the removed parent removes nothing, even after new registrations.
    let stale = parent.id();
    let newcomer = logger(
        &router,
        &mut log,
        Listen::<Notice>::tag(tag("Message.Test"), Match::Hierarchical),
        "newcomer",
    );
    assert_ne!(newcomer.id(), stale);
    assert!(!router.unlisten(stale));
    drop(parent);
    // Nor does an id handed out by another router.
    let foreign = logger(&other, &mut log, Listen::channel(PING, Match::Exact), "foreign");
    assert!(!router.unlisten(foreign.id()));

    log.clear();
    router.broadcast(&mut log, DEPTH4, &spawned(2)).unwrap();
    router.broadcast(&mut log, PING, &spawned(3)).unwrap();
    assert_eq!(log, ["leaf", "newcomer", "ping", "newcomer"]);
    assert_eq!(router.listener_count(), 3);
}

fn router_without_listeners() -> Router<Log> {
    router(false)
}

/// docs/spec/router.md R2 (MB-02). The failure: the C++ path accepted derived payloads and logged
/// mismatches, the Blueprint path demanded equality and skipped silently. Here both APIs call one
/// rule: a base-type listener receives a derived payload in both, a narrower one is skipped loudly
/// (warned and counted) in both. (The full matrix is `tests/matrix.rs`.)
#[test]
fn mb_02_both_apis_apply_one_type_rule_and_report_mismatches_alike() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let test = tag("Message.Test");
    let _typed_base = router
        .listen(&mut log, Listen::<Notice>::tag(test, Match::Hierarchical), |d, n| {
            d.state().push(format!("typed base {}", n.n))
        })
        .unwrap();
    let _dyn_base = router
        .listen_dyn(
            &mut log,
            ListenDyn::new("Message.Test", Match::Hierarchical, "Notice"),
            |d, p| {
                let n = p.downcast_ref::<Notice>().unwrap().n;
                d.state().push(format!("dynamic base {n}"))
            },
        )
        .unwrap();
    let _typed_narrow = logger(
        &router,
        &mut log,
        Listen::<SpawnedLocal>::tag(MESSAGE_TEST_PING, Match::Exact),
        "typed narrow",
    );
    let _dyn_narrow = router
        .listen_dyn(
            &mut log,
            ListenDyn::new("Message.Test.Ping", Match::Exact, "SpawnedLocal"),
            |d, _| d.state().push("dynamic narrow".into()),
        )
        .unwrap();

    let (report, warnings) =
        count_warnings(|| router.broadcast(&mut log, PING, &spawned(5)).unwrap());
    assert_eq!(log, ["typed base 5", "dynamic base 5"]);
    assert_eq!((report.delivered, report.mismatched), (2, 2));
    assert_eq!(router.stats().mismatches, 2);
    assert_eq!(warnings, 2, "each mismatch is logged, in both APIs");

    // The same through the dynamic broadcast.
    log.clear();
    let (report, warnings) = count_warnings(|| {
        router.broadcast_dyn(&mut log, "Message.Test.Ping", "Spawned", &spawned(6)).unwrap()
    });
    assert_eq!(log, ["typed base 6", "dynamic base 6"]);
    assert_eq!((report.delivered, report.mismatched, warnings), (2, 2, 2));
}

/// docs/spec/router.md R3 (MB-03). The failure: a listener registered with no expected type
/// bypassed the type check entirely. Here every listener names a declared payload type: the dynamic
/// API refuses an empty or unknown name, and a value is never reinterpreted as a type it is not.
#[test]
fn mb_03_no_listener_and_no_broadcast_bypasses_the_type_check() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    for name in ["", "*", "Any", "()"] {
        let err = router
            .listen_dyn(
                &mut log,
                ListenDyn::new("Message.Test.Ping", Match::Exact, name),
                |_, _| {},
            )
            .unwrap_err();
        assert_eq!(err, Error::UnknownPayloadType { name: name.to_owned() });
    }
    assert_eq!(router.listener_count(), 0);
    assert_eq!(router.stats().refused_registrations, 4);

    // A dynamic broadcast cannot pass one type off as another.
    let _ping = logger(&router, &mut log, Listen::channel(PING, Match::Exact), "ping");
    let err = router
        .broadcast_dyn(&mut log, "Message.Test.Ping", "Spawned", &Unrelated { n: 1 })
        .unwrap_err();
    assert!(matches!(err, Error::ValueNotOfNamedType { ref named } if named == "Spawned"));
    // Nor send a declared but unfitting type on a channel.
    let err = router
        .broadcast_dyn(&mut log, "Message.Test.Ping", "Notice", &Notice { n: 1 })
        .unwrap_err();
    assert_eq!(
        err,
        Error::PayloadMismatch {
            channel: MESSAGE_TEST_PING,
            expected: "Spawned",
            arrived: "Notice"
        }
    );
    assert!(err.to_string().contains("expected Spawned"), "{err}");
    assert!(log.is_empty());
    assert_eq!(router.stats().refused_broadcasts, 2);
}

/// docs/spec/router.md R4 (MB-05). The failure: hierarchical matching existed but the registration
/// path everyone used dropped the match type, so it was never reachable. Here every way of
/// registering takes a `Match` (there is no default) and reaches the same registration path, so
/// each one can listen hierarchically.
#[test]
fn mb_05_hierarchical_matching_is_reachable_from_every_registration_path() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    for matching in [Match::Exact, Match::Hierarchical] {
        let _via_channel = logger(&router, &mut log, Listen::channel(DEPTH2, matching), "channel");
        let _via_tag = logger(
            &router,
            &mut log,
            Listen::<Notice>::tag(MESSAGE_TEST_DEPTH1_DEPTH2, matching),
            "tag",
        );
        let _via_dynamic = router
            .listen_dyn(
                &mut log,
                ListenDyn::new("Message.Test.Depth1.Depth2", matching, "Notice"),
                |d, _| d.state().push("dynamic".into()),
            )
            .unwrap();
        // Depth4 is two levels below Depth2.
        router.broadcast(&mut log, DEPTH4, &spawned(1)).unwrap();
        log.push("|".into());
    }
    assert_eq!(log, ["|", "channel", "tag", "dynamic", "|"]);
}

/// docs/spec/router.md R5 (MB-06). The failure: an options-struct registration with no callback
/// returned an invalid handle and logged nothing. Here the callback is a required argument (a
/// registration without one does not compile: see the `compile_fail` example on `Router::listen`),
/// a handle only comes from a successful registration, and a registration that could never receive
/// a message is refused with an error instead of producing a listener that never fires.
#[test]
fn mb_06_registration_never_yields_a_dead_handle() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let handle = logger(&router, &mut log, Listen::channel(PING, Match::Exact), "live");
    assert!(handle.is_live() && router.is_listening(handle.id()));
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(log, ["live"]);

    let (err, warnings) = count_warnings(|| {
        router
            .listen(&mut log, Listen::<Unrelated>::tag(MESSAGE_TEST_PING, Match::Exact), |_, _| {})
            .unwrap_err()
    });
    assert_eq!(
        err,
        Error::ListenerNeverDelivered {
            channel: MESSAGE_TEST_PING,
            expected: "Unrelated",
            carried: "Spawned".into()
        }
    );
    assert_eq!(warnings, 1, "the refusal is logged");
    // An exact listener where no channel is declared would never fire either.
    let err = router
        .listen(&mut log, Listen::<Notice>::tag(tag("Message.Test"), Match::Exact), |_, _| {})
        .unwrap_err();
    assert!(matches!(err, Error::UndeclaredChannel { .. }));
    assert_eq!(router.listener_count(), 1);
}

/// docs/spec/router.md R6 (MB-07). The failure: an async listener noticed its owner's death only
/// while handling a message, so on a quiet channel its record waited for traffic. Here an owner
/// holds its handle; when the owner goes away the record, and the callback with everything it
/// captured, is gone at once, with no message sent.
#[test]
fn mb_07_an_owner_going_away_removes_its_records_at_once() {
    struct Widget {
        _on_shown: Listener,
    }
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let captured = Rc::new(());
    let in_callback = Rc::clone(&captured);
    let widget = Widget {
        _on_shown: router
            .listen(&mut log, Listen::channel(REPLY, Match::Exact), move |_, _| {
                let _ = &in_callback;
            })
            .unwrap(),
    };
    assert_eq!((router.listener_count(), Rc::strong_count(&captured)), (1, 2));
    drop(widget);
    assert_eq!(router.listener_count(), 0, "removed without any message");
    assert_eq!(Rc::strong_count(&captured), 1, "the callback was dropped too");
    assert_eq!(router.stats().broadcasts, 0);
}

/// docs/spec/router.md R7 (MB-08). The failure: the listener map was cleared only at game-instance
/// teardown, so records from a travelled-away world persisted for the session. Here a world is a
/// `Lifetime`; retiring it removes every record it holds at once, while the router lives on.
#[test]
fn mb_08_retiring_a_world_removes_its_records_at_once() {
    let router: Router<Log> = router(true);
    let mut log = Log::new();
    let _session = logger(&router, &mut log, Listen::channel(PING, Match::Exact), "session");
    let baseline = router.listener_count();

    let mut world = Lifetime::new("world 7");
    world.hold(logger(&router, &mut log, Listen::channel(PING, Match::Exact), "w1"));
    world.hold(logger(
        &router,
        &mut log,
        Listen::<Notice>::tag(tag("Message"), Match::Hierarchical),
        "w2",
    ));
    world.hold(
        router
            .listen_dyn(
                &mut log,
                ListenDyn::new("Message.Test.Depth1.Depth2", Match::Exact, "Notice"),
                |_, _| {},
            )
            .unwrap(),
    );
    assert_eq!(router.listener_count(), baseline + 3);
    world.retire();
    assert_eq!(router.listener_count(), baseline, "removed at retirement, not at shutdown");

    // Dropping a lifetime is retiring it.
    {
        let mut world = Lifetime::new("world 8");
        world.hold(logger(&router, &mut log, Listen::channel(DEPTH4, Match::Exact), "w3"));
        assert_eq!(router.listener_count(), baseline + 1);
    }
    assert_eq!(router.listener_count(), baseline);
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(log, ["session"]);
}

/// docs/spec/router.md R8 (MB-09). The failure: a static accessor asserted on the world and the
/// subsystem, and was called from destruction paths. Here there is no global: a router is a value,
/// handles reach it weakly, and every teardown order is harmless.
#[test]
fn mb_09_there_is_no_global_accessor_and_any_teardown_order_is_harmless() {
    // Handles and lifetimes outliving their router.
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let handle = logger(&router, &mut log, Listen::channel(PING, Match::Exact), "a");
    let mut world = Lifetime::new("world");
    world.hold(logger(&router, &mut log, Listen::channel(PING, Match::Exact), "b"));
    // Callbacks holding other listeners' handles: dropped while the router itself is dropped.
    let held = logger(&router, &mut log, Listen::channel(DEPTH4, Match::Exact), "c");
    let _holder = router
        .listen(&mut log, Listen::channel(PING, Match::Exact), move |_, _| {
            let _ = &held;
        })
        .unwrap();
    drop(router);
    assert!(!handle.is_live());
    assert!(!handle.remove());
    world.retire();

    // Two routers are independent: the same tag may carry different types on each.
    let mut a = Channels::new();
    a.declare(PING).unwrap();
    let mut b = Channels::new();
    b.declare(Channel::<Unrelated>::new(MESSAGE_TEST_PING)).unwrap();
    let a: Router<Log> = Router::new(RouterConfig::default(), a);
    let b: Router<Log> = Router::new(RouterConfig::default(), b);
    let _on_a = logger(&a, &mut log, Listen::channel(PING, Match::Exact), "on a");
    assert!(b.listen(&mut log, Listen::channel(PING, Match::Exact), |_, _| {}).is_err());
    drop(a);
    b.broadcast(&mut log, Channel::<Unrelated>::new(MESSAGE_TEST_PING), &Unrelated { n: 1 })
        .unwrap();
    assert!(log.is_empty());
}

/// docs/spec/router.md R9 (MB-10). The failure: one channel string was declared independently at
/// four sites and worked only because the engine deduplicated strings. Here a channel is a catalog
/// tag bound to its payload type once; a second declaration, a conflicting `Channel<T>`, an unknown
/// name and an undeclared tag are each refused, at registration and at broadcast, naming the tag.
#[test]
fn mb_10_each_channel_is_declared_once_and_anything_else_is_refused() {
    let mut channels = Channels::new();
    channels.declare(PING).unwrap();
    let err = channels.declare(Channel::<Notice>::new(MESSAGE_TEST_PING)).unwrap_err();
    assert_eq!(
        err,
        Error::ChannelDeclaredTwice {
            channel: MESSAGE_TEST_PING,
            first: "Spawned",
            second: "Notice"
        }
    );
    assert!(err.to_string().contains("Message.Test.Ping"));
    let err = channels.declare(Channel::<Notice>::new(STATE_DEAD)).unwrap_err();
    assert!(err.to_string().contains("State.Dead"), "{err}");

    let router: Router<Log> = Router::new(RouterConfig::default(), channels);
    let mut log = Log::new();
    // A second Channel constant for the same tag with another payload type.
    let impostor = Channel::<Notice>::new(MESSAGE_TEST_PING);
    let conflict = Error::ChannelTypeConflict {
        channel: MESSAGE_TEST_PING,
        declared: "Spawned",
        arrived: "Notice",
    };
    assert_eq!(router.broadcast(&mut log, impostor, &Notice { n: 1 }).unwrap_err(), conflict);
    assert_eq!(
        router.listen(&mut log, Listen::channel(impostor, Match::Exact), |_, _| {}).unwrap_err(),
        conflict
    );
    // A name that is not in config/tags.toml.
    let unknown =
        router.broadcast_dyn(&mut log, "Message.Test.Pnig", "Spawned", &spawned(1)).unwrap_err();
    assert!(unknown.to_string().contains("Message.Test.Pnig"), "{unknown}");
    let unknown = router
        .listen_dyn(
            &mut log,
            ListenDyn::new("Message.Test.Pnig", Match::Exact, "Spawned"),
            |_, _| {},
        )
        .unwrap_err();
    assert!(matches!(unknown, Error::Tag(_)));
    // A catalog tag that is not a channel on this router.
    let undeclared = Error::UndeclaredChannel { channel: MESSAGE_TRANSITION_ENDED };
    assert_eq!(
        router
            .broadcast_dyn(&mut log, "Message.Transition.Ended", "Spawned", &spawned(1))
            .unwrap_err(),
        undeclared
    );
    assert_eq!(
        router
            .listen(
                &mut log,
                Listen::<Spawned>::tag(MESSAGE_TRANSITION_ENDED, Match::Hierarchical),
                |_, _| {}
            )
            .unwrap_err(),
        undeclared
    );
    assert!(undeclared.to_string().contains("Message.Transition.Ended"));
    assert_eq!(router.listener_count(), 0);
}

/// docs/spec/router.md R10 (MB-11). The failure: no ordering guarantee, and removal by
/// swap-with-last reordered listeners. Here delivery follows registration order across exact and
/// hierarchical listeners at every level, and removal (outside or during a delivery) keeps the
/// order of the rest.
#[test]
fn mb_11_delivery_follows_registration_order_and_removal_keeps_it() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let message = tag("Message");
    // "2" removes the listener named in `target` when it is called.
    let target: Rc<Cell<Option<ListenerId>>> = Rc::new(Cell::new(None));
    let mut handles: Vec<Option<Listener>> = Vec::new();
    let depth4 = MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4;
    // Five of them share one list (exact on Depth4), the others sit at three other levels.
    for (i, on) in [
        Listen::<Notice>::tag(depth4, Match::Exact),
        Listen::<Notice>::tag(MESSAGE_TEST_DEPTH1_DEPTH2, Match::Hierarchical),
        Listen::<Notice>::tag(depth4, Match::Exact),
        Listen::<Notice>::tag(message, Match::Hierarchical),
        Listen::<Notice>::tag(depth4, Match::Exact),
        Listen::<Notice>::tag(depth4, Match::Exact),
        Listen::<Notice>::tag(depth4, Match::Hierarchical),
        Listen::<Notice>::tag(depth4, Match::Exact),
    ]
    .into_iter()
    .enumerate()
    {
        let name = i.to_string();
        let target = Rc::clone(&target);
        let handle = router
            .listen(&mut log, on, move |d, _| {
                d.state().push(name.clone());
                if let Some(victim) = target.take() {
                    d.router().unlisten(victim);
                }
            })
            .unwrap();
        handles.push(Some(handle));
    }
    router.broadcast(&mut log, DEPTH4, &spawned(1)).unwrap();
    assert_eq!(log, ["0", "1", "2", "3", "4", "5", "6", "7"]);

    // Removing the first of the shared list and a middle one keeps the others' order.
    handles[0] = None;
    handles[4] = None;
    log.clear();
    router.broadcast(&mut log, DEPTH4, &spawned(2)).unwrap();
    assert_eq!(log, ["1", "2", "3", "5", "6", "7"]);

    // Removal during delivery: "1" removes "5", which has not been called yet.
    target.set(handles[5].as_ref().map(Listener::id));
    log.clear();
    router.broadcast(&mut log, DEPTH4, &spawned(3)).unwrap();
    assert_eq!(log, ["1", "2", "3", "6", "7"]);

    // A listener removing itself during delivery.
    let remover = router
        .listen(&mut log, Listen::<Notice>::tag(message, Match::Hierarchical), |d, _| {
            d.state().push("remover".into());
            d.unlisten_self();
        })
        .unwrap();
    log.clear();
    router.broadcast(&mut log, DEPTH4, &spawned(4)).unwrap();
    assert_eq!(log, ["1", "2", "3", "6", "7", "remover"]);
    assert!(!remover.is_live());
    log.clear();
    router.broadcast(&mut log, DEPTH4, &spawned(5)).unwrap();
    assert_eq!(log, ["1", "2", "3", "6", "7"]);
}

/// docs/spec/router.md R11 (MB-12). The failure: broadcasting from a callback was supported with no
/// recursion guard, so a cycle in the channel graph recursed without bound. Here nesting is bounded
/// by the configured depth: the delivery that would go deeper is refused with an error naming the
/// channel and the limit (logged and counted), the outer deliveries complete, and the depth is
/// restored afterwards.
#[test]
fn mb_12_reentrant_broadcasting_is_bounded_with_a_clear_error() {
    let config = RouterConfig::new(NonZeroUsize::new(4).unwrap());
    let router: Router<Vec<Result<usize, Error>>> = Router::new(config, channels(false));
    let mut results = Vec::new();
    let depth = Rc::new(Cell::new(0));
    let level = Rc::clone(&depth);
    // A cycle: every Ping broadcasts Ping again.
    let _echo = router
        .listen(&mut results, Listen::channel(PING, Match::Exact), move |d, p| {
            level.set(level.get() + 1);
            let router = d.router();
            let outcome = router.broadcast(d.state(), PING, p).map(|r| r.delivered);
            d.state().push(outcome);
            level.set(level.get() - 1);
        })
        .unwrap();
    let (outer, warnings) = count_warnings(|| router.broadcast(&mut results, PING, &spawned(1)));
    assert_eq!(outer.unwrap().delivered, 1);
    let refused = Error::DepthExceeded { channel: MESSAGE_TEST_PING, limit: 4, arrived: 5 };
    assert_eq!(results, [Err(refused.clone()), Ok(1), Ok(1), Ok(1)]);
    assert!(refused.to_string().contains("Message.Test.Ping"));
    assert!(refused.to_string().contains("at most 4"));
    assert_eq!(router.stats().depth_exceeded, 1);
    assert_eq!(warnings, 1);
    assert_eq!(depth.get(), 0);
    // The depth is back to zero: the same cycle runs again to the same bound.
    results.clear();
    router.broadcast(&mut results, PING, &spawned(2)).unwrap();
    assert_eq!(results.len(), 4);
}

/// docs/spec/router.md R12 (MB-13). The failure: no sticky or replay messages, so a late subscriber
/// could not get the last value. Here a channel declared sticky replays its last message to every
/// listener that registers later (exact or hierarchical, oldest channel first); a plain channel
/// does not.
#[test]
fn mb_13_sticky_channels_replay_the_last_message_to_late_listeners() {
    let mut channels = Channels::new();
    channels.declare_sticky(PING).unwrap().declare_sticky(DEPTH4).unwrap().declare(DEPTH2).unwrap();
    let router: Router<Log> = Router::new(RouterConfig::default(), channels);
    let mut log = Log::new();
    let record = |name: &'static str| {
        move |d: &mut gatehouse_messaging::Delivery<'_, Log>, n: &Notice| {
            let line = format!(
                "{name} {} {}{}",
                d.channel(),
                n.n,
                if d.is_replay() { " replay" } else { "" }
            );
            d.state().push(line);
        }
    };
    router.broadcast(&mut log, DEPTH4, &spawned(1)).unwrap();
    router.broadcast(&mut log, PING, &spawned(2)).unwrap();
    router.broadcast(&mut log, DEPTH4, &spawned(3)).unwrap();
    router.broadcast(&mut log, DEPTH2, &Notice { n: 4 }).unwrap();
    assert!(log.is_empty());

    let _late = router
        .listen(&mut log, Listen::<Notice>::tag(MESSAGE_TEST_PING, Match::Exact), record("exact"))
        .unwrap();
    assert_eq!(log, ["exact Message.Test.Ping 2 replay"]);
    log.clear();
    let _family = router
        .listen(
            &mut log,
            Listen::<Notice>::tag(tag("Message.Test"), Match::Hierarchical),
            record("family"),
        )
        .unwrap();
    // Oldest retained first; Depth2 is not sticky.
    assert_eq!(
        log,
        [
            "family Message.Test.Ping 2 replay",
            "family Message.Test.Depth1.Depth2.Depth3.Depth4 3 replay"
        ]
    );
    log.clear();
    let _plain =
        router.listen(&mut log, Listen::channel(DEPTH2, Match::Exact), record("plain")).unwrap();
    assert!(log.is_empty(), "a plain channel replays nothing");
    router.broadcast(&mut log, DEPTH2, &Notice { n: 5 }).unwrap();
    assert_eq!(log, ["family Message.Test.Depth1.Depth2 5", "plain Message.Test.Depth1.Depth2 5"]);
    assert_eq!(router.stats().replays, 3);
}

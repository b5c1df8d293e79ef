//! Every guard of the router pinned by a behaviour: each test here fails if the guard it names
//! were removed or inverted (`cargo mutants` finds no surviving change to it), and two latent
//! gaps are closed: a sticky message has a lifetime and can be cleared, and a payload-type
//! mismatch is logged as an error.
//!
//! Log levels are observed with `common::capture_logs`: a `tracing` subscriber of the test's own,
//! installed on the test's thread for one call, that records the level and the text of every
//! event.

#![allow(clippy::unwrap_used)] // tests unwrap freely

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::*;
use gatehouse_messaging::{Lifetime, Listen, ListenDyn, Listener, Match, Router};
use gatehouse_tags::catalog::*;
use tracing::Level;

type Log = Vec<String>;

/// A typed listener on `PING` (exact) that logs `name`.
fn on_ping(router: &Router<Log>, log: &mut Log, name: &'static str) -> Listener {
    router
        .listen(log, Listen::channel(PING, Match::Exact), move |d, _| d.state().push(name.into()))
        .unwrap()
}

/// MB-08: retiring a lifetime removes its listeners itself, at once, and says so in the log
/// (how many it removed), rather than leaving the handles to be dropped with its fields.
#[test]
fn retiring_a_lifetime_removes_its_listeners_and_logs_how_many() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let mut world = Lifetime::new("world 3");
    world.hold(on_ping(&router, &mut log, "a"));
    world.hold(on_ping(&router, &mut log, "b"));
    let gone = on_ping(&router, &mut log, "c");
    world.hold(gone);
    // One of the three is removed in another way first: it is not counted as removed again.
    let first = router.listen(&mut log, Listen::channel(PING, Match::Exact), |_, _| {}).unwrap();
    let first_id = first.id();
    world.hold(first);
    assert!(router.unlisten(first_id));
    assert_eq!(router.listener_count(), 3);

    let ((), logged) = capture_logs(|| world.retire());
    assert_eq!(router.listener_count(), 0);
    let retired: Vec<&Logged> =
        logged.iter().filter(|l| l.text.contains("lifetime retired")).collect();
    assert_eq!(retired.len(), 1, "{logged:?}");
    assert_eq!(retired[0].level, Level::DEBUG);
    assert!(retired[0].text.contains("world 3"), "{}", retired[0].text);
    assert!(retired[0].text.contains("listeners=3"), "{}", retired[0].text);
}

/// MB-08: a lifetime that holds many listeners keeps every live one registered while it grows.
#[test]
fn a_lifetime_holding_many_listeners_keeps_every_live_one() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let mut world = Lifetime::new("world");
    for _ in 0..20 {
        world.hold(on_ping(&router, &mut log, "w"));
    }
    assert_eq!((world.held_count(), router.listener_count()), (20, 20));
    let report = router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(report.delivered, 20);
}

/// A long lifetime whose listeners are removed one by one elsewhere does not accumulate their
/// dead handles: it forgets them when it would grow, and keeps the live ones.
#[test]
fn a_long_lifetime_forgets_handles_removed_elsewhere() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let mut session = Lifetime::new("session");
    session.hold(on_ping(&router, &mut log, "kept"));
    for _ in 0..100 {
        let listener = on_ping(&router, &mut log, "short");
        let id = listener.id();
        session.hold(listener);
        assert!(router.unlisten(id));
    }
    assert!(session.held_count() < 10, "dead handles piled up: {}", session.held_count());
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(log, ["kept"]);
}

/// `is_listening` follows the record: true while it is registered, false once removed in any
/// way, and false for a record of another router.
#[test]
fn is_listening_is_false_once_a_record_is_removed() {
    let other: Router<Log> = router(false);
    let router: Router<Log> = common::router(false);
    let mut log = Log::new();
    let handle = on_ping(&router, &mut log, "a");
    let id = handle.id();
    let foreign = on_ping(&other, &mut log, "b");
    assert!(router.is_listening(id));
    assert!(!router.is_listening(foreign.id()));
    assert!(handle.remove());
    assert!(!router.is_listening(id));
    let dropped = on_ping(&router, &mut log, "c");
    let dropped_id = dropped.id();
    drop(dropped);
    assert!(!router.is_listening(dropped_id));
}

/// A derived payload sent with `broadcast_derived` reaches the listeners of the channel's type
/// and of its own, and the report says so; one that does not derive is refused.
#[test]
fn broadcast_derived_reports_what_it_delivered() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let _base = on_ping(&router, &mut log, "spawned");
    let _narrow = router
        .listen(&mut log, Listen::<SpawnedLocal>::tag(MESSAGE_TEST_PING, Match::Exact), |d, p| {
            d.state().push(format!("local {}", p.spawned.notice.n))
        })
        .unwrap();
    let local = SpawnedLocal { spawned: spawned(4) };
    let report = router.broadcast_derived(&mut log, PING, &local).unwrap();
    assert_eq!((report.delivered, report.mismatched), (2, 0));
    assert_eq!(log, ["spawned", "local 4"]);
    // A plain `Spawned` on the same channel: the narrower listener is skipped, and counted.
    log.clear();
    let report = router.broadcast_derived(&mut log, PING, &spawned(5)).unwrap();
    assert_eq!((report.delivered, report.mismatched), (1, 1));
    assert_eq!(log, ["spawned"]);
}

/// The recipients are fixed when a broadcast starts: a listener registered by a callback during
/// the broadcast (the very next registration) does not receive that message, only later ones.
#[test]
fn a_listener_registered_during_a_broadcast_does_not_receive_it() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let late: Rc<RefCell<Option<Listener>>> = Rc::default();
    let slot = Rc::clone(&late);
    let _registrar = router
        .listen(&mut log, Listen::channel(PING, Match::Exact), move |d, p| {
            d.state().push(format!("registrar {}", p.notice.n));
            if slot.borrow().is_none() {
                let router = d.router();
                let made = router
                    .listen(d.state(), Listen::channel(PING, Match::Exact), |d, p| {
                        d.state().push(format!("late {}", p.notice.n))
                    })
                    .unwrap();
                *slot.borrow_mut() = Some(made);
            }
        })
        .unwrap();
    let report = router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(report.delivered, 1);
    assert_eq!(log, ["registrar 1"]);
    router.broadcast(&mut log, PING, &spawned(2)).unwrap();
    assert_eq!(log, ["registrar 1", "registrar 2", "late 2"]);
}

/// A listener removed during a broadcast by an earlier listener of another list is not called,
/// and the removal is immediate for the counts too.
#[test]
fn a_listener_removed_during_a_broadcast_by_another_list_is_not_called() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let victim: Rc<Cell<Option<gatehouse_messaging::ListenerId>>> = Rc::default();
    let target = Rc::clone(&victim);
    let _remover = router
        .listen(
            &mut log,
            Listen::<Notice>::tag(tag("Message.Test"), Match::Hierarchical),
            move |d, _| {
                d.state().push("remover".into());
                if let Some(id) = target.take() {
                    d.router().unlisten(id);
                }
            },
        )
        .unwrap();
    let exact = on_ping(&router, &mut log, "exact");
    victim.set(Some(exact.id()));
    let report = router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(log, ["remover"]);
    assert_eq!((report.delivered, router.listener_count()), (1, 1));
}

/// The statistics count exactly what happened: broadcasts accepted, callbacks run (replays
/// included), replays, mismatches, refused broadcasts and registrations, depth refusals.
#[test]
fn the_statistics_count_every_delivery_replay_mismatch_and_refusal() {
    let router: Router<Log> = router(true);
    let mut log = Log::new();
    let start = router.stats();
    assert_eq!((start.broadcasts, start.deliveries, start.replays, start.mismatches), (0, 0, 0, 0));
    let _a = on_ping(&router, &mut log, "a");
    let _b = on_ping(&router, &mut log, "b");
    let _narrow = router
        .listen(&mut log, Listen::<SpawnedLocal>::tag(MESSAGE_TEST_PING, Match::Exact), |_, _| {})
        .unwrap();
    router.broadcast(&mut log, PING, &spawned(1)).unwrap(); // 2 delivered, 1 mismatched
    router.broadcast(&mut log, PING, &spawned(2)).unwrap(); // again
    let _late = on_ping(&router, &mut log, "late"); // 1 replay
    router.broadcast(&mut log, DEPTH2, &Notice { n: 3 }).unwrap(); // nobody listens
    // Refused: an undeclared dynamic channel, and a registration that could never deliver.
    assert!(router.broadcast_dyn(&mut log, "Message.Test", "Notice", &Notice { n: 4 }).is_err());
    assert!(
        router
            .listen(&mut log, Listen::<Unrelated>::tag(MESSAGE_TEST_PING, Match::Exact), |_, _| {})
            .is_err()
    );
    let stats = router.stats();
    assert_eq!(stats.broadcasts, 3);
    assert_eq!(stats.deliveries, 5);
    assert_eq!(stats.replays, 1);
    assert_eq!(stats.mismatches, 2);
    assert_eq!(stats.refused_broadcasts, 1);
    assert_eq!(stats.refused_registrations, 1);
    assert_eq!(stats.depth_exceeded, 0);
    assert!(format!("{router:?}").contains("listeners: 4"), "{router:?}");
}

/// docs/spec/router.md R2: types unrelated: logged as an error, listener skipped, broadcast
/// continues, in both APIs (one rule, one report). The level is read from a capturing
/// subscriber: every mismatch event is at ERROR, none at WARN.
#[test]
fn a_payload_type_mismatch_is_logged_as_an_error_in_both_apis() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let _typed = router
        .listen(&mut log, Listen::<SpawnedLocal>::tag(MESSAGE_TEST_PING, Match::Exact), |_, _| {})
        .unwrap();
    let _dynamic = router
        .listen_dyn(
            &mut log,
            ListenDyn::new("Message.Test.Ping", Match::Exact, "SpawnedLocal"),
            |_, _| {},
        )
        .unwrap();
    for dynamic_broadcast in [false, true] {
        let (report, logged) = capture_logs(|| {
            if dynamic_broadcast {
                router.broadcast_dyn(&mut log, "Message.Test.Ping", "Spawned", &spawned(1)).unwrap()
            } else {
                router.broadcast(&mut log, PING, &spawned(1)).unwrap()
            }
        });
        assert_eq!(report.mismatched, 2);
        let mismatches: Vec<&Logged> =
            logged.iter().filter(|l| l.text.contains("payload type mismatch")).collect();
        assert_eq!(mismatches.len(), 2, "{logged:?}");
        assert!(mismatches.iter().all(|l| l.level == Level::ERROR), "{mismatches:?}");
        assert!(mismatches.iter().any(|l| l.text.contains("api=\"typed\"")), "{mismatches:?}");
        assert!(mismatches.iter().any(|l| l.text.contains("api=\"dynamic\"")), "{mismatches:?}");
    }
    // A broadcast refused because its payload does not fit the channel is an error too.
    let (refused, logged) = capture_logs(|| {
        router.broadcast_dyn(&mut log, "Message.Test.Ping", "Notice", &Notice { n: 2 })
    });
    assert!(refused.is_err());
    assert!(logged.iter().any(|l| l.level == Level::ERROR && l.text.contains("broadcast refused")));
}

/// No callback from a world after travelling away (docs/spec/gates.md G7) over MB-13
/// (docs/spec/router.md R12): a sticky message broadcast in a world belongs to that world. Once
/// the world retires, a listener registering in the next world is not handed it.
#[test]
fn a_sticky_message_broadcast_in_a_world_is_not_replayed_after_the_world_retires() {
    let router: Router<Log> = router(true);
    let mut log = Log::new();
    let mut world = Lifetime::new("world 1");
    router.broadcast_in(&mut log, &mut world, PING, &spawned(1)).unwrap();
    // While the world lives, late listeners get the replay.
    let during = on_ping(&router, &mut log, "during");
    assert_eq!(log, ["during"]);
    drop(during);
    world.retire();
    log.clear();
    let _next_world = on_ping(&router, &mut log, "next world");
    assert!(log.is_empty(), "a torn-down world's message was replayed: {log:?}");
    assert_eq!(router.stats().replays, 1);
}

/// Retiring a world clears only its own sticky message: one broadcast since (by the next world,
/// or with no lifetime) replaced it and stays.
#[test]
fn a_newer_sticky_message_survives_the_retirement_of_an_older_world() {
    let router: Router<Log> = router(true);
    let mut log = Log::new();
    let mut old = Lifetime::new("old world");
    let mut new = Lifetime::new("new world");
    router.broadcast_in(&mut log, &mut old, PING, &spawned(1)).unwrap();
    router.broadcast_in(&mut log, &mut new, PING, &spawned(2)).unwrap();
    old.retire();
    let seen: Rc<Cell<u32>> = Rc::default();
    let got = Rc::clone(&seen);
    let _late = router
        .listen(&mut log, Listen::channel(PING, Match::Exact), move |_, p| got.set(p.notice.n))
        .unwrap();
    assert_eq!(seen.get(), 2, "the new world's message stays");
    // A lifetime that broadcast twice holds only its latest message.
    router.broadcast_in(&mut log, &mut new, PING, &spawned(3)).unwrap();
    new.retire();
    let _after = router
        .listen(&mut log, Listen::channel(PING, Match::Exact), |d, _| d.state().push("x".into()))
        .unwrap();
    assert!(log.is_empty());
}

/// A sticky channel's retained message can be cleared: later listeners get no replay until the
/// next broadcast. Clearing a plain channel, or twice, clears nothing.
#[test]
fn clearing_a_sticky_channel_stops_its_replay() {
    let router: Router<Log> = router(true);
    let mut log = Log::new();
    assert!(!router.clear_retained(PING).unwrap(), "nothing retained yet");
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert!(router.clear_retained(PING).unwrap());
    assert!(!router.clear_retained(PING).unwrap());
    let _late = on_ping(&router, &mut log, "late");
    assert!(log.is_empty());
    assert!(!router.clear_retained(DEPTH2).unwrap(), "a plain channel retains nothing");
    router.broadcast(&mut log, PING, &spawned(2)).unwrap();
    let _later = on_ping(&router, &mut log, "later");
    assert_eq!(log, ["late", "later"]);
}

/// One list whose listeners expect different types (the channel's, its base, a narrower one)
/// is checked listener by listener: each gets the message as its own type or is skipped.
#[test]
fn one_list_of_listeners_expecting_different_types_is_checked_one_by_one() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let _spawned = on_ping(&router, &mut log, "spawned");
    let _base = router
        .listen(&mut log, Listen::<Notice>::tag(MESSAGE_TEST_PING, Match::Exact), |d, n| {
            d.state().push(format!("base {}", n.n))
        })
        .unwrap();
    let _narrow = router
        .listen(&mut log, Listen::<SpawnedLocal>::tag(MESSAGE_TEST_PING, Match::Exact), |d, _| {
            d.state().push("narrow".into())
        })
        .unwrap();
    let _again = on_ping(&router, &mut log, "spawned again");
    let report = router.broadcast(&mut log, PING, &spawned(7)).unwrap();
    assert_eq!(log, ["spawned", "base 7", "spawned again"]);
    assert_eq!((report.delivered, report.mismatched), (3, 1));
    // A list whose odd listener left still checks each one.
    drop(_narrow);
    log.clear();
    let report = router.broadcast_derived(&mut log, PING, &SpawnedLocal { spawned: spawned(8) });
    assert_eq!(report.unwrap().delivered, 3);
    assert_eq!(log, ["spawned", "base 8", "spawned again"]);

    // A list whose second listener is the first to expect another type.
    let router: Router<Log> = common::router(false);
    let mut log = Log::new();
    let _spawned = on_ping(&router, &mut log, "spawned");
    let _base = router
        .listen(&mut log, Listen::<Notice>::tag(MESSAGE_TEST_PING, Match::Exact), |d, n| {
            d.state().push(format!("base {}", n.n))
        })
        .unwrap();
    let (report, logged) = capture_logs(|| router.broadcast(&mut log, PING, &spawned(9)).unwrap());
    assert_eq!(log, ["spawned", "base 9"]);
    assert_eq!(report.delivered, 2);
    assert!(logged.iter().all(|l| l.level > Level::WARN), "{logged:?}");
}

/// A world that broadcast on several sticky channels, of several routers, clears each of its
/// messages when it retires, and its log says how many.
#[test]
fn retiring_a_world_clears_every_sticky_message_it_broadcast() {
    let mut channels = gatehouse_messaging::Channels::new();
    channels.declare_sticky(PING).unwrap().declare_sticky(DEPTH4).unwrap();
    let router: Router<Log> = Router::new(gatehouse_messaging::RouterConfig::default(), channels);
    let other: Router<Log> = common::router(true);
    let mut log = Log::new();
    let mut world = Lifetime::new("world 9");
    router.broadcast_in(&mut log, &mut world, PING, &spawned(1)).unwrap();
    router.broadcast_in(&mut log, &mut world, DEPTH4, &spawned(2)).unwrap();
    other.broadcast_in(&mut log, &mut world, PING, &spawned(3)).unwrap();
    assert_eq!(world.name(), "world 9");
    assert!(format!("{world:?}").contains("retained: 3"), "{world:?}");
    let ((), logged) = capture_logs(|| world.retire());
    assert!(logged.iter().any(|l| l.text.contains("retained=3")), "{logged:?}");
    let family = Listen::<Notice>::tag(tag("Message.Test"), Match::Hierarchical);
    let _late = router.listen(&mut log, family, |d, _| d.state().push("late".into())).unwrap();
    let _late_other = on_ping(&other, &mut log, "late other");
    assert!(log.is_empty(), "replayed after retirement: {log:?}");
}

/// Listener identities read as what they are: serials in registration order, shown as such in
/// logs and debug output.
#[test]
fn listener_identities_are_serials_in_registration_order() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let first = on_ping(&router, &mut log, "a");
    let second = on_ping(&router, &mut log, "b");
    assert!(first.id().serial() < second.id().serial());
    assert_eq!(format!("{}", first.id()), format!("listener #{}", first.id().serial()));
    assert_eq!(format!("{:?}", first.id()), format!("ListenerId({})", first.id().serial()));
    assert!(format!("{first:?}").contains("live: true"), "{first:?}");
    let id = first.id();
    drop(first);
    assert!(!router.unlisten(id));
    let mut world = Lifetime::new("w");
    world.hold(second);
    assert!(format!("{world:?}").contains("held: 1"), "{world:?}");
}

/// A lifetime forgets the handles of records removed elsewhere at fixed points (4 held, then
/// twice the live count), not on every hold, and never a live one.
#[test]
fn a_lifetime_forgets_dead_handles_when_it_doubles() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let mut world = Lifetime::new("world");
    let mut hold = |world: &mut Lifetime, name: &'static str| {
        let listener = on_ping(&router, &mut log, name);
        let id = listener.id();
        world.hold(listener);
        id
    };
    let a = hold(&mut world, "a");
    let b = hold(&mut world, "b");
    assert!(router.unlisten(a));
    hold(&mut world, "c");
    assert_eq!(world.held_count(), 3, "below 4 held, the dead handle is still counted");
    hold(&mut world, "d");
    assert_eq!(world.held_count(), 4);
    hold(&mut world, "e");
    assert_eq!(world.held_count(), 4, "at 4 held the dead one went: b, c, d, e");
    // The next point is twice the live count then (3 live: 6).
    hold(&mut world, "f");
    assert!(router.unlisten(b));
    hold(&mut world, "g");
    assert_eq!(world.held_count(), 6, "below 6 held, dead b is still counted");
    hold(&mut world, "h");
    assert_eq!(world.held_count(), 6, "at 6 held, b went: c, d, e, f, g, h");
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    assert_eq!(log, ["c", "d", "e", "f", "g", "h"]);
}

/// The router keeps the settings it was built with.
#[test]
fn a_router_reports_its_settings() {
    let config = gatehouse_messaging::RouterConfig::new(std::num::NonZeroUsize::new(3).unwrap());
    let router: Router<Log> = Router::new(config, channels(false));
    assert_eq!(router.config(), config);
    assert_eq!(router.config().max_depth(), 3);
    assert_eq!(gatehouse_messaging::RouterConfig::default().max_depth(), 8);
}

/// A listener learns the type a message was sent as, which may be a type derived from the one
/// it reads: the channel's own type on a plain broadcast, the derived type on
/// `broadcast_derived`.
#[test]
fn a_listener_is_told_the_type_the_message_was_sent_as() {
    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let _notice = router
        .listen(&mut log, Listen::channel(DEPTH2, Match::Exact), |d, _| {
            let sent = d.sent_type().to_owned();
            d.state().push(sent);
        })
        .unwrap();
    router.broadcast(&mut log, DEPTH2, &Notice { n: 1 }).unwrap();
    router.broadcast_derived(&mut log, DEPTH2, &spawned(2)).unwrap();
    assert_eq!(log, ["Notice", "Spawned"]);
}

/// What the router's public types print for a developer: each names what it describes (the
/// listen point, the declared channels and their types, a delivery's facts, a parent, a dynamic
/// payload's type), not an empty or placeholder text.
#[test]
fn debug_output_names_what_each_value_describes() {
    let listen = format!("{:?}", Listen::channel(DEPTH2, Match::Hierarchical));
    for part in ["Listen", "Message.Test.Depth1.Depth2", "Hierarchical", "Notice"] {
        assert!(listen.contains(part), "{part:?} missing from {listen}");
    }
    let channels = format!("{:?}", channels(false));
    for part in ["Message.Test.Ping", "Spawned", "Message.Test.Depth1.Depth2", "Notice"] {
        assert!(channels.contains(part), "{part:?} missing from {channels}");
    }
    assert_eq!(format!("{PING:?}"), "Channel(Message.Test.Ping carries Spawned)");
    let parent = format!("{:?}", <Spawned as gatehouse_messaging::Payload>::PARENT.unwrap());
    assert_eq!(parent, "Parent(\"Notice\")");

    let router: Router<Log> = router(false);
    let mut log = Log::new();
    let _typed = router
        .listen(&mut log, Listen::channel(PING, Match::Exact), |d, _| {
            let delivery = format!("{d:?}");
            d.state().push(delivery);
        })
        .unwrap();
    let _dynamic = router
        .listen_dyn(
            &mut log,
            ListenDyn::new("Message.Test.Ping", Match::Exact, "Spawned"),
            |d, p| {
                let payload = format!("{p:?}");
                d.state().push(payload);
            },
        )
        .unwrap();
    router.broadcast(&mut log, PING, &spawned(1)).unwrap();
    let [delivery, payload] = &log[..] else { panic!("two deliveries: {log:?}") };
    for part in ["Delivery", "Message.Test.Ping", "Spawned", "replay: false"] {
        assert!(delivery.contains(part), "{part:?} missing from {delivery}");
    }
    for part in ["DynPayload", "Spawned"] {
        assert!(payload.contains(part), "{part:?} missing from {payload}");
    }
}

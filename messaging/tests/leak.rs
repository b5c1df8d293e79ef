//! docs/spec/router.md R6 and R7 (MB-07, MB-08): many worlds created, used and retired leave the
//! listener count at its baseline, and every callback (with what it captured) is freed.

#![allow(clippy::unwrap_used)] // tests unwrap freely

mod common;

use std::rc::Rc;

use common::*;
use gatehouse_messaging::{Lifetime, Listen, ListenDyn, Match, Router};

/// The caller's state: a count of deliveries, and the current world's lifetime, which callbacks
/// may add listeners to.
#[derive(Default)]
struct Session {
    delivered: usize,
    world: Option<Lifetime>,
}

/// docs/spec/router.md R6 and R7: a thousand worlds, each registering typed, dynamic, hierarchical
/// and sticky-replayed listeners (some from inside callbacks), broadcasting, then retiring.
#[test]
fn many_worlds_created_used_and_retired_leave_the_listener_count_at_its_baseline() {
    let router: Router<Session> = router(true);
    let mut session = Session::default();
    let _session_listener = router
        .listen(&mut session, Listen::<Notice>::tag(tag("Message"), Match::Hierarchical), |d, _| {
            d.state().delivered += 1
        })
        .unwrap();
    let baseline = router.listener_count();
    let token = Rc::new(());

    for i in 0..1000 {
        session.world = Some(Lifetime::new(format!("world {i}")));
        let hold = |session: &mut Session, listener| {
            session.world.as_mut().unwrap().hold(listener);
        };
        let t = Rc::clone(&token);
        let l = router
            .listen(&mut session, Listen::channel(PING, Match::Exact), move |d, _| {
                let _ = &t;
                d.state().delivered += 1;
            })
            .unwrap();
        hold(&mut session, l);
        let t = Rc::clone(&token);
        let l = router
            .listen_dyn(
                &mut session,
                ListenDyn::new("Message.Test", Match::Hierarchical, "Notice"),
                move |d, _| {
                    let _ = &t;
                    d.state().delivered += 1;
                },
            )
            .unwrap();
        hold(&mut session, l);
        // A listener that, on its first message, registers another into the world.
        let t = Rc::clone(&token);
        let l = router
            .listen(&mut session, Listen::channel(DEPTH4, Match::Exact), move |d, _| {
                let t = Rc::clone(&t);
                let router = d.router();
                let extra = router
                    .listen(d.state(), Listen::channel(DEPTH2, Match::Hierarchical), move |d, _| {
                        let _ = &t;
                        d.state().delivered += 1;
                    })
                    .unwrap();
                d.state().world.as_mut().unwrap().hold(extra);
            })
            .unwrap();
        hold(&mut session, l);

        router.broadcast(&mut session, PING, &spawned(i)).unwrap();
        router.broadcast(&mut session, DEPTH4, &spawned(i)).unwrap();
        router.broadcast(&mut session, DEPTH2, &Notice { n: i }).unwrap();
        assert_eq!(router.listener_count(), baseline + 4);

        session.world.take().unwrap().retire();
        assert_eq!(router.listener_count(), baseline, "world {i} left listeners behind");
    }
    assert_eq!(Rc::strong_count(&token), 1, "every world's callbacks were freed");
    assert!(session.delivered > 1000 * 5);
    assert_eq!(router.stats().mismatches, 0);
}

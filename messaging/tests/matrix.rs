//! docs/spec/router.md R2 and R3 (MB-02, MB-03): one test matrix, run through both APIs with
//! identical expectations. One table of cases; each case runs once through the typed API and once
//! through the dynamic API, and both runs must match the table (and so each other).
//!
//! The message is always `Spawned` (derives from `Notice`) on `Message.Test.Ping`, broadcast
//! twice (messages 1 and 2). The subject listener varies:
//! - matching: exact on `Message.Test.Ping`, or hierarchical on its parent `Message.Test`;
//! - the payload type it reads: the same (`Spawned`), a base (`Notice`), a narrower derived type
//!   (`SpawnedLocal`), or an unrelated type (`Unrelated`, which `Message.Test.PingReply` carries,
//!   so a hierarchical listener on `Message.Test` can register with it);
//! - when it registers: before message 1, after message 1, or during the delivery of message 1
//!   (registered by another listener's callback);
//! - whether `Message.Test.Ping` is sticky.

#![allow(clippy::unwrap_used)] // tests unwrap freely

mod common;

use common::*;
use gatehouse_messaging::{Error, Listen, ListenDyn, Listener, Match, Router};
use gatehouse_tags::GameplayTag;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    Same,
    Base,
    Narrower,
    Unrelated,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Before,
    After,
    During,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Plain,
    Sticky,
}

/// What the subject must see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Receives these message numbers, in order, and no mismatch.
    Gets(&'static [u32]),
    /// Receives nothing; this many deliveries were skipped as mismatches (logged and counted).
    Skipped(u64),
    /// Registration is refused: the listener could never receive anything.
    Refused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Typed,
    Dynamic,
}

use Channel::*;
use Expect::*;
use Match::*;
use Reads::*;
use When::*;

struct Case(Match, Reads, When, Channel, Expect);

#[rustfmt::skip]
const CASES: &[Case] = &[
    // matching      reads      registers  channel  expected
    Case(Exact,        Same,      Before, Plain,  Gets(&[1, 2])),
    Case(Exact,        Same,      Before, Sticky, Gets(&[1, 2])),
    Case(Exact,        Same,      After,  Plain,  Gets(&[2])),
    Case(Exact,        Same,      After,  Sticky, Gets(&[1, 2])),
    Case(Exact,        Same,      During, Plain,  Gets(&[2])),
    Case(Exact,        Same,      During, Sticky, Gets(&[1, 2])),
    Case(Exact,        Base,      Before, Plain,  Gets(&[1, 2])),
    Case(Exact,        Base,      Before, Sticky, Gets(&[1, 2])),
    Case(Exact,        Base,      After,  Plain,  Gets(&[2])),
    Case(Exact,        Base,      After,  Sticky, Gets(&[1, 2])),
    Case(Exact,        Base,      During, Plain,  Gets(&[2])),
    Case(Exact,        Base,      During, Sticky, Gets(&[1, 2])),
    Case(Exact,        Narrower,  Before, Plain,  Skipped(2)),
    Case(Exact,        Narrower,  Before, Sticky, Skipped(2)),
    Case(Exact,        Narrower,  After,  Plain,  Skipped(1)),
    Case(Exact,        Narrower,  After,  Sticky, Skipped(2)),
    Case(Exact,        Narrower,  During, Plain,  Skipped(1)),
    Case(Exact,        Narrower,  During, Sticky, Skipped(2)),
    Case(Exact,        Unrelated, Before, Plain,  Refused),
    Case(Exact,        Unrelated, Before, Sticky, Refused),
    Case(Exact,        Unrelated, After,  Plain,  Refused),
    Case(Exact,        Unrelated, After,  Sticky, Refused),
    Case(Exact,        Unrelated, During, Plain,  Refused),
    Case(Exact,        Unrelated, During, Sticky, Refused),
    Case(Hierarchical, Same,      Before, Plain,  Gets(&[1, 2])),
    Case(Hierarchical, Same,      Before, Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Same,      After,  Plain,  Gets(&[2])),
    Case(Hierarchical, Same,      After,  Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Same,      During, Plain,  Gets(&[2])),
    Case(Hierarchical, Same,      During, Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Base,      Before, Plain,  Gets(&[1, 2])),
    Case(Hierarchical, Base,      Before, Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Base,      After,  Plain,  Gets(&[2])),
    Case(Hierarchical, Base,      After,  Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Base,      During, Plain,  Gets(&[2])),
    Case(Hierarchical, Base,      During, Sticky, Gets(&[1, 2])),
    Case(Hierarchical, Narrower,  Before, Plain,  Skipped(2)),
    Case(Hierarchical, Narrower,  Before, Sticky, Skipped(2)),
    Case(Hierarchical, Narrower,  After,  Plain,  Skipped(1)),
    Case(Hierarchical, Narrower,  After,  Sticky, Skipped(2)),
    Case(Hierarchical, Narrower,  During, Plain,  Skipped(1)),
    Case(Hierarchical, Narrower,  During, Sticky, Skipped(2)),
    Case(Hierarchical, Unrelated, Before, Plain,  Skipped(2)),
    Case(Hierarchical, Unrelated, Before, Sticky, Skipped(2)),
    Case(Hierarchical, Unrelated, After,  Plain,  Skipped(1)),
    Case(Hierarchical, Unrelated, After,  Sticky, Skipped(2)),
    Case(Hierarchical, Unrelated, During, Plain,  Skipped(1)),
    Case(Hierarchical, Unrelated, During, Sticky, Skipped(2)),
];

/// The subject's state: what it received, and its registration when made inside a callback.
#[derive(Default)]
struct State {
    got: Vec<u32>,
    subject: Option<Result<Listener, Error>>,
}

fn subject_tag(matching: Match) -> &'static str {
    match matching {
        Exact => "Message.Test.Ping",
        Hierarchical => "Message.Test",
    }
}

/// Registers the subject through `api`.
fn subscribe(
    router: &Router<State>,
    state: &mut State,
    api: Api,
    matching: Match,
    reads: Reads,
) -> Result<Listener, Error> {
    let on = GameplayTag::parse(subject_tag(matching)).unwrap();
    match api {
        Api::Typed => match reads {
            Same => router.listen(state, Listen::<Spawned>::tag(on, matching), |d, p| {
                d.state().got.push(p.notice.n)
            }),
            Base => router
                .listen(state, Listen::<Notice>::tag(on, matching), |d, p| d.state().got.push(p.n)),
            Narrower => router.listen(state, Listen::<SpawnedLocal>::tag(on, matching), |d, p| {
                d.state().got.push(p.spawned.notice.n)
            }),
            Unrelated => {
                router.listen(state, Listen::<common::Unrelated>::tag(on, matching), |d, p| {
                    d.state().got.push(p.n)
                })
            }
        },
        Api::Dynamic => {
            let type_name = match reads {
                Same => "Spawned",
                Base => "Notice",
                Narrower => "SpawnedLocal",
                Unrelated => "Unrelated",
            };
            let on = ListenDyn::new(subject_tag(matching), matching, type_name);
            router.listen_dyn(state, on, |d, p| {
                let n = match p.type_name() {
                    "Spawned" => p.downcast_ref::<Spawned>().map(|s| s.notice.n),
                    "Notice" => p.downcast_ref::<Notice>().map(|s| s.n),
                    "SpawnedLocal" => p.downcast_ref::<SpawnedLocal>().map(|s| s.spawned.notice.n),
                    _ => p.downcast_ref::<common::Unrelated>().map(|s| s.n),
                };
                d.state().got.push(n.unwrap());
            })
        }
    }
}

fn broadcast(router: &Router<State>, state: &mut State, api: Api, n: u32) {
    let report = match api {
        Api::Typed => router.broadcast(state, PING, &spawned(n)),
        Api::Dynamic => router.broadcast_dyn(state, "Message.Test.Ping", "Spawned", &spawned(n)),
    };
    report.unwrap();
}

/// What one run showed.
#[derive(Debug, PartialEq)]
struct Outcome {
    expect: Expect,
    warnings_at_least_mismatches: bool,
}

fn run(case: &Case, api: Api) -> Outcome {
    let Case(matching, reads, when, channel, _) = *case;
    let router: Router<State> = router(channel == Sticky);
    let mut state = State::default();
    let ((subject, registrar), warnings) = count_warnings(|| {
        let mut subject = None;
        let mut registrar = None;
        match when {
            Before => subject = Some(subscribe(&router, &mut state, api, matching, reads)),
            During => {
                // Another listener of the same API registers the subject while message 1 is
                // being delivered.
                let register = move |d: &mut gatehouse_messaging::Delivery<'_, State>| {
                    if d.state().subject.is_none() {
                        let router = d.router();
                        let made = subscribe(router, d.state(), api, matching, reads);
                        d.state().subject = Some(made);
                    }
                };
                let on = Listen::channel(PING, Exact);
                registrar = Some(match api {
                    Api::Typed => router.listen(&mut state, on, move |d, _| register(d)),
                    Api::Dynamic => router.listen_dyn(
                        &mut state,
                        ListenDyn::new("Message.Test.Ping", Exact, "Spawned"),
                        move |d, _| register(d),
                    ),
                });
            }
            After => {}
        }
        broadcast(&router, &mut state, api, 1);
        if when == After {
            subject = Some(subscribe(&router, &mut state, api, matching, reads));
        }
        broadcast(&router, &mut state, api, 2);
        (subject, registrar)
    });
    let subject = subject.or_else(|| state.subject.take()).unwrap();
    drop(registrar);
    let stats = router.stats();
    let expect = match subject {
        Err(Error::ListenerNeverDelivered { .. }) => Refused,
        Err(other) => panic!("unexpected refusal: {other}"),
        Ok(_) if stats.mismatches > 0 => {
            assert!(state.got.is_empty(), "a mismatched listener received {:?}", state.got);
            Skipped(stats.mismatches)
        }
        Ok(_) => Gets(state.got.leak()),
    };
    let loud = match expect {
        Refused => {
            warnings as u64 >= stats.refused_registrations && stats.refused_registrations == 1
        }
        _ => warnings as u64 >= stats.mismatches,
    };
    Outcome { expect, warnings_at_least_mismatches: loud }
}

/// docs/spec/router.md R2: every case of the table, through the typed and the dynamic API.
#[test]
fn one_matrix_through_both_apis_with_identical_expectations() {
    assert_eq!(CASES.len(), 2 * 4 * 3 * 2, "every combination is in the table once");
    let mut failures = Vec::new();
    for case in CASES {
        let Case(matching, reads, when, channel, expected) = *case;
        for api in [Api::Typed, Api::Dynamic] {
            let outcome = run(case, api);
            let wanted = Outcome { expect: expected, warnings_at_least_mismatches: true };
            if outcome != wanted {
                failures.push(format!(
                    "{api:?} {matching:?} {reads:?} {when:?} {channel:?}: expected {wanted:?}, got {outcome:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} cases failed:\n{}", failures.len(), failures.join("\n"));
}

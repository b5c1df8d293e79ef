//! docs/spec/router.md R10 (MB-11, and the delivery contract): a property test comparing the router
//! with a simple reference model. The model is a list of listeners in registration order; a
//! broadcast snapshots the live matching ones and calls each that is still live when its turn
//! comes; a sticky channel replays its last message to a listener when it registers.

#![allow(clippy::unwrap_used)] // tests unwrap freely

mod common;

use common::*;
use gatehouse_messaging::{Delivery, Listen, ListenDyn, Listener, Match, Router};
use gatehouse_tags::GameplayTag;
use proptest::prelude::*;

/// Listen points: (name, is a declared channel).
const POINTS: [(&str, bool); 7] = [
    ("Message", false),
    ("Message.Test", false),
    ("Message.Test.Ping", true),
    ("Message.Test.Depth1", false),
    ("Message.Test.Depth1.Depth2", true),
    ("Message.Test.Depth1.Depth2.Depth3", false),
    ("Message.Test.Depth1.Depth2.Depth3.Depth4", true),
];
/// Channels, as indices into `POINTS`; Depth2 (index 4) is sticky.
const CHANNELS: [usize; 3] = [2, 4, 6];
const STICKY: usize = 4;

#[derive(Clone, Copy, Debug)]
enum Action {
    Nothing,
    /// Removes the listener at this registration index (modulo the count at call time).
    Remove(usize),
    RemoveSelf,
    /// Registers a plain listener at (point, hierarchical).
    Register(usize, bool),
}

#[derive(Clone, Debug)]
enum Op {
    Listen { point: usize, hierarchical: bool, dynamic: bool, action: Action },
    Drop(usize),
    Broadcast(usize),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => Just(Action::Nothing),
        1 => any::<usize>().prop_map(Action::Remove),
        1 => Just(Action::RemoveSelf),
        1 => (0..POINTS.len(), any::<bool>()).prop_map(|(p, h)| Action::Register(p, h)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..POINTS.len(), any::<bool>(), any::<bool>(), action()).prop_map(
            |(point, hierarchical, dynamic, action)| Op::Listen { point, hierarchical, dynamic, action }
        ),
        1 => any::<usize>().prop_map(Op::Drop),
        3 => (0..CHANNELS.len()).prop_map(|c| Op::Broadcast(CHANNELS[c])),
    ]
}

fn tag(point: usize) -> GameplayTag {
    GameplayTag::parse(POINTS[point].0).unwrap()
}

/// Whether a listener at (point, hierarchical) hears channel `channel` (a point index).
fn hears(point: usize, hierarchical: bool, channel: usize) -> bool {
    if hierarchical { tag(channel).matches(tag(point)) } else { point == channel }
}

// ---- the reference model ----

struct ModelListener {
    point: usize,
    hierarchical: bool,
    live: bool,
    action: Action,
}

#[derive(Default)]
struct Model {
    listeners: Vec<ModelListener>,
    retained: Option<u32>,
    log: Vec<(usize, u32)>,
}

impl Model {
    fn listen(&mut self, point: usize, hierarchical: bool, action: Action) -> bool {
        if !hierarchical && !POINTS[point].1 {
            return false;
        }
        self.listeners.push(ModelListener { point, hierarchical, live: true, action });
        let me = self.listeners.len() - 1;
        if let Some(n) = self.retained
            && hears(point, hierarchical, STICKY)
        {
            self.call(me, n);
        }
        true
    }

    fn call(&mut self, me: usize, n: u32) {
        self.log.push((me, n));
        match self.listeners[me].action {
            Action::Nothing => {}
            Action::Remove(k) => {
                let k = k % self.listeners.len();
                self.listeners[k].live = false;
            }
            Action::RemoveSelf => self.listeners[me].live = false,
            Action::Register(point, hierarchical) => {
                self.listen(point, hierarchical, Action::Nothing);
            }
        }
    }

    fn broadcast(&mut self, channel: usize, n: u32) {
        if channel == STICKY {
            self.retained = Some(n);
        }
        let recipients: Vec<usize> = (0..self.listeners.len())
            .filter(|&i| {
                let l = &self.listeners[i];
                l.live && hears(l.point, l.hierarchical, channel)
            })
            .collect();
        for i in recipients {
            if self.listeners[i].live {
                self.call(i, n);
            }
        }
    }

    fn live(&self) -> usize {
        self.listeners.iter().filter(|l| l.live).count()
    }
}

// ---- the real router, driven the same way ----

#[derive(Default)]
struct Real {
    handles: Vec<Option<Listener>>,
    log: Vec<(usize, u32)>,
}

fn on_message(me: usize, action: Action, d: &mut Delivery<'_, Real>, n: u32) {
    d.state().log.push((me, n));
    match action {
        Action::Nothing => {}
        Action::Remove(k) => {
            let k = k % d.state().handles.len();
            if k == me {
                d.unlisten_self();
            }
            drop(d.state().handles[k].take());
        }
        Action::RemoveSelf => {
            d.unlisten_self();
        }
        Action::Register(point, hierarchical) => {
            let router = d.router();
            real_listen(router, d.state(), point, hierarchical, false, Action::Nothing);
        }
    }
}

fn real_listen(
    router: &Router<Real>,
    real: &mut Real,
    point: usize,
    hierarchical: bool,
    dynamic: bool,
    action: Action,
) -> bool {
    let matching = if hierarchical { Match::Hierarchical } else { Match::Exact };
    // The index is reserved before registering, because a sticky replay runs inside `listen`.
    let me = real.handles.len();
    real.handles.push(None);
    let made = if dynamic {
        let on = ListenDyn::new(POINTS[point].0, matching, "Notice");
        router.listen_dyn(real, on, move |d, p| {
            let n = p.downcast_ref::<Notice>().unwrap().n;
            on_message(me, action, d, n)
        })
    } else {
        let on = Listen::<Notice>::tag(tag(point), matching);
        router.listen(real, on, move |d, p| on_message(me, action, d, p.n))
    };
    match made {
        Ok(handle) => {
            if real.handles[me].is_none() {
                real.handles[me] = Some(handle);
            }
            true
        }
        Err(_) => {
            real.handles.pop();
            false
        }
    }
}

fn real_router() -> Router<Real> {
    let mut channels = gatehouse_messaging::Channels::new();
    channels.declare(PING).unwrap().declare_sticky(DEPTH2).unwrap().declare(DEPTH4).unwrap();
    Router::new(gatehouse_messaging::RouterConfig::default(), channels)
}

proptest! {
    /// docs/spec/router.md R10 and R12: delivery order, removal and registration during delivery,
    /// and sticky replay agree with the reference model for any sequence of operations, through
    /// either API.
    #[test]
    fn delivery_agrees_with_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        let router = real_router();
        let mut real = Real::default();
        let mut model = Model::default();
        let mut n = 0;
        for op in ops {
            match op {
                Op::Listen { point, hierarchical, dynamic, action } => {
                    let accepted = model.listen(point, hierarchical, action);
                    let made = real_listen(&router, &mut real, point, hierarchical, dynamic, action);
                    prop_assert_eq!(made, accepted);
                }
                Op::Drop(k) => {
                    if !model.listeners.is_empty() {
                        let k = k % model.listeners.len();
                        model.listeners[k].live = false;
                        drop(real.handles[k].take());
                    }
                }
                Op::Broadcast(channel) => {
                    n += 1;
                    model.broadcast(channel, n);
                    let result = match channel {
                        2 => router.broadcast(&mut real, PING, &spawned(n)),
                        4 => router.broadcast(&mut real, DEPTH2, &Notice { n }),
                        _ => router.broadcast(&mut real, DEPTH4, &spawned(n)),
                    };
                    prop_assert!(result.is_ok());
                }
            }
            prop_assert_eq!(&real.log, &model.log);
            prop_assert_eq!(router.listener_count(), model.live());
        }
        prop_assert_eq!(router.stats().mismatches, 0);
    }
}

//! Shared fixtures for the router's tests: payload types with a declared derivation chain,
//! channels over the catalog's `Message.Test` tags, and a tracing subscriber that
//! captures what is logged, with its level.

#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use gatehouse_messaging::{Channel, Channels, Derives, Parent, Payload, Router, RouterConfig};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

/// Root payload type.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub n: u32,
}
impl Payload for Notice {
    const NAME: &'static str = "Notice";
}

/// Derives from `Notice`.
#[derive(Clone, Debug, PartialEq)]
pub struct Spawned {
    pub notice: Notice,
}
impl Payload for Spawned {
    const NAME: &'static str = "Spawned";
    const PARENT: Option<Parent> = Some(Parent::of::<Self, Notice>());
}
impl Derives<Notice> for Spawned {
    fn parent(&self) -> &Notice {
        &self.notice
    }
}

/// Derives from `Spawned` (so, two steps, from `Notice`).
#[derive(Clone, Debug, PartialEq)]
pub struct SpawnedLocal {
    pub spawned: Spawned,
}
impl Payload for SpawnedLocal {
    const NAME: &'static str = "SpawnedLocal";
    const PARENT: Option<Parent> = Some(Parent::of::<Self, Spawned>());
}
impl Derives<Spawned> for SpawnedLocal {
    fn parent(&self) -> &Spawned {
        &self.spawned
    }
}

/// Related to nothing above.
#[derive(Clone, Debug, PartialEq)]
pub struct Unrelated {
    pub n: u32,
}
impl Payload for Unrelated {
    const NAME: &'static str = "Unrelated";
}

pub fn spawned(n: u32) -> Spawned {
    Spawned { notice: Notice { n } }
}

/// `Message.Test.Ping` carries `Spawned`.
pub const PING: Channel<Spawned> = Channel::new(MESSAGE_TEST_PING);
/// `Message.Test.PingReply` carries `Unrelated` (a prefix of `Ping` without a dot boundary).
pub const REPLY: Channel<Unrelated> = Channel::new(MESSAGE_TEST_PING_REPLY);
/// `Message.Test.Depth1.Depth2` carries `Notice`.
pub const DEPTH2: Channel<Notice> = Channel::new(MESSAGE_TEST_DEPTH1_DEPTH2);
/// `Message.Test.Depth1.Depth2.Depth3.Depth4` carries `Spawned`.
pub const DEPTH4: Channel<Spawned> = Channel::new(MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4);

pub fn tag(name: &str) -> GameplayTag {
    GameplayTag::parse(name).unwrap()
}

/// The test channels, `PING` sticky or not; `SpawnedLocal` declared for derived broadcasts.
pub fn channels(sticky_ping: bool) -> Channels {
    let mut channels = Channels::new();
    if sticky_ping {
        channels.declare_sticky(PING).unwrap();
    } else {
        channels.declare(PING).unwrap();
    }
    channels
        .declare(REPLY)
        .unwrap()
        .declare(DEPTH2)
        .unwrap()
        .declare(DEPTH4)
        .unwrap()
        .declare_payload::<SpawnedLocal>()
        .unwrap();
    channels
}

pub fn router<C: 'static>(sticky_ping: bool) -> Router<C> {
    Router::new(RouterConfig::default(), channels(sticky_ping))
}

/// One event logged on the current thread: its level, and its message and fields as text
/// (`message field=value ...`).
#[derive(Clone, Debug)]
pub struct Logged {
    pub level: tracing::Level,
    pub text: String,
}

/// Every event logged on the current thread while `f` runs, at every level. This is how the
/// tests observe log levels: a subscriber of their own, installed for the call only.
pub fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, Vec<Logged>) {
    let logged = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Capture(Arc::clone(&logged));
    let result = tracing::subscriber::with_default(subscriber, f);
    let logged = logged.lock().unwrap().clone();
    (result, logged)
}

/// Counts WARN and ERROR events (the loud ones) on the current thread while `f` runs.
pub fn count_warnings<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let (result, logged) = capture_logs(f);
    (result, logged.iter().filter(|l| l.level <= tracing::Level::WARN).count())
}

struct Capture(Arc<Mutex<Vec<Logged>>>);

struct Text(String);

impl tracing::field::Visit for Text {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = Text(String::new());
        event.record(&mut text);
        let level = *event.metadata().level();
        self.0.lock().unwrap().push(Logged { level, text: text.0 });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

//! Channels and subscriptions: which tag a message travels on, and what a listener asks for.
//!
//! A [`Channel<T>`] constant is a channel's name in code: it binds a tag from `config/tags.toml`
//! to the payload type `T`. The binding takes effect, once, when the constant is declared on a
//! router's [`Channels`](crate::Channels); the router refuses any other binding for that tag.
//!
//! A subscription ([`Listen`], [`ListenDyn`]) always states its [`Match`]: every way of
//! registering reaches hierarchical matching, because there is no form that leaves it out (MB-05).

use std::fmt;
use std::marker::PhantomData;

use gatehouse_tags::GameplayTag;

use crate::payload::Payload;

/// How a listener's tag is compared with a message's channel.
///
/// Deliberately without a `Default`: every registration chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Match {
    /// Only messages on exactly this channel.
    Exact,
    /// Messages on this tag and on every channel below it (`Message.Replication` hears
    /// `Message.Replication.PawnSpawned`), on whole segments.
    Hierarchical,
}

/// A channel: a gameplay tag bound to its payload type `T`.
///
/// ```
/// use gatehouse_messaging::{Channel, Payload};
/// use gatehouse_tags::catalog::MESSAGE_TRANSITION_SHOWN;
///
/// #[derive(Clone)]
/// pub struct TransitionShown { pub transition: u64 }
/// impl Payload for TransitionShown {
///     const NAME: &'static str = "TransitionShown";
/// }
///
/// pub const TRANSITION_SHOWN: Channel<TransitionShown> = Channel::new(MESSAGE_TRANSITION_SHOWN);
/// ```
pub struct Channel<T> {
    tag: GameplayTag,
    payload: PhantomData<fn() -> T>,
}

impl<T: Payload> Channel<T> {
    /// Binds `tag` to the payload type `T`. The binding is checked when declared on a router.
    pub const fn new(tag: GameplayTag) -> Channel<T> {
        Channel { tag, payload: PhantomData }
    }

    /// The channel's tag.
    pub const fn tag(self) -> GameplayTag {
        self.tag
    }
}

impl<T> Clone for Channel<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Channel<T> {}

impl<T: Payload> fmt::Debug for Channel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Channel({} carries {})", self.tag, T::NAME)
    }
}

/// A typed subscription: a tag, a [`Match`], and the payload type `T` the callback reads.
pub struct Listen<T> {
    pub(crate) tag: GameplayTag,
    pub(crate) matching: Match,
    /// Made from a `Channel<T>` constant: the router checks that the channel carries `T`.
    pub(crate) from_channel: bool,
    payload: PhantomData<fn() -> T>,
}

impl<T: Payload> Listen<T> {
    /// Listens to `channel` (and, with [`Match::Hierarchical`], to every channel below it),
    /// reading its declared payload type.
    pub const fn channel(channel: Channel<T>, matching: Match) -> Listen<T> {
        Listen { tag: channel.tag, matching, from_channel: true, payload: PhantomData }
    }

    /// Listens at any tag that is a declared channel or an ancestor of one, reading messages as
    /// `T`: a base type of what the channels carry, typically, with [`Match::Hierarchical`] on a
    /// family tag such as `Message.Replication`.
    pub const fn tag(tag: GameplayTag, matching: Match) -> Listen<T> {
        Listen { tag, matching, from_channel: false, payload: PhantomData }
    }
}

impl<T> Clone for Listen<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Listen<T> {}

impl<T: Payload> fmt::Debug for Listen<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listen")
            .field("tag", &self.tag)
            .field("matching", &self.matching)
            .field("payload", &T::NAME)
            .finish()
    }
}

/// A dynamic subscription: channel and payload type named at run time, as a scripting layer or
/// a network decoder would name them.
#[derive(Clone, Copy, Debug)]
pub struct ListenDyn<'a> {
    pub(crate) channel: &'a str,
    pub(crate) matching: Match,
    pub(crate) payload_type: &'a str,
}

impl<'a> ListenDyn<'a> {
    /// Listens at the tag named `channel` with `matching`, reading messages as the payload type
    /// named `payload_type` (a name declared on the router; there is no "any type").
    pub const fn new(channel: &'a str, matching: Match, payload_type: &'a str) -> ListenDyn<'a> {
        ListenDyn { channel, matching, payload_type }
    }
}

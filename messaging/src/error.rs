//! The crate's one error type. Every refusal names what was expected and what arrived.

use gatehouse_tags::{GameplayTag, TagError};

/// Why the router refused a declaration, a registration or a broadcast.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A channel named at run time (dynamic API) is not a tag of `config/tags.toml`.
    #[error("unknown channel: {0}")]
    Tag(#[from] TagError),

    /// The tag is a known gameplay tag but not a channel declared on this router (for a
    /// hierarchical listener: nor an ancestor of one).
    #[error(
        "undeclared channel {channel}: expected a channel declared on this router \
         (or, for a hierarchical listener, an ancestor of one), got {channel}"
    )]
    UndeclaredChannel {
        /// The tag as given.
        channel: GameplayTag,
    },

    /// The tag cannot be a channel at all.
    #[error("tag {channel} cannot be a channel: {why}")]
    NotAChannelTag {
        /// The tag as given.
        channel: GameplayTag,
        /// What a channel tag must be.
        why: &'static str,
    },

    /// A channel was declared a second time (MB-10: each channel is declared once).
    #[error(
        "channel {channel} declared twice: first with payload {first}, then again with \
         payload {second}; declare each channel once"
    )]
    ChannelDeclaredTwice {
        /// The channel.
        channel: GameplayTag,
        /// Payload type of the first declaration.
        first: &'static str,
        /// Payload type of the second declaration.
        second: &'static str,
    },

    /// A `Channel<T>` constant disagrees with the channel's declaration on this router.
    #[error(
        "channel {channel} is declared with payload {declared}, but the Channel constant used \
         here names payload {arrived}"
    )]
    ChannelTypeConflict {
        /// The channel.
        channel: GameplayTag,
        /// The payload type it was declared with.
        declared: &'static str,
        /// The payload type of the constant that was used.
        arrived: &'static str,
    },

    /// A payload type name (or Rust type) is not declared on this router.
    #[error("unknown payload type {name:?}: expected a payload type declared on this router")]
    UnknownPayloadType {
        /// The name as given.
        name: String,
    },

    /// Two different Rust types claim the same payload name.
    #[error(
        "payload type name {name:?} is claimed by two different Rust types; expected each \
         payload name once"
    )]
    PayloadNameTaken {
        /// The contested name.
        name: &'static str,
    },

    /// A payload type's `PARENT` was built for another type.
    #[error(
        "payload type {name} declares parent {parent} with a Parent built for another type; \
         expected Parent::of::<{name}, {parent}>()"
    )]
    MisdeclaredParent {
        /// The declaring type.
        name: &'static str,
        /// The parent it names.
        parent: &'static str,
    },

    /// A payload type's parent chain is cyclic or longer than the router accepts.
    #[error(
        "payload type {name} has a parent chain with a cycle or longer than {limit} types; \
         expected a short acyclic chain"
    )]
    DerivationTooDeep {
        /// The declaring type.
        name: &'static str,
        /// The longest chain accepted.
        limit: usize,
    },

    /// The sent payload does not fit the channel's declared payload type (the one type rule).
    #[error(
        "payload mismatch on channel {channel}: expected {expected} or a type derived from it, \
         arrived {arrived}"
    )]
    PayloadMismatch {
        /// The channel.
        channel: GameplayTag,
        /// The channel's declared payload type.
        expected: &'static str,
        /// The payload type that was sent.
        arrived: &'static str,
    },

    /// A dynamic broadcast named a payload type, but the value is of another type.
    #[error(
        "dynamic payload named {named:?}: expected a value of type {named}, arrived another type"
    )]
    ValueNotOfNamedType {
        /// The payload type name given with the value.
        named: String,
    },

    /// The listener could never receive anything: no channel it matches carries its expected
    /// type, a type derived from it, or a type it derives from (it would be a dead listener).
    #[error(
        "listener on {channel} expecting {expected} would never receive anything: expected a \
         channel carrying a type related to {expected}, the channels it matches carry {carried}"
    )]
    ListenerNeverDelivered {
        /// The tag the listener asked for.
        channel: GameplayTag,
        /// The listener's expected payload type.
        expected: &'static str,
        /// The payload types of the channels it matches, comma-separated.
        carried: String,
    },

    /// A re-entrant broadcast (or a sticky replay) would nest deeper than configured (MB-12).
    #[error(
        "re-entrant delivery on {channel} refused: expected at most {limit} nested deliveries, \
         arrived at depth {arrived}"
    )]
    DepthExceeded {
        /// The channel of the refused broadcast or replay.
        channel: GameplayTag,
        /// The configured limit.
        limit: usize,
        /// The depth the refused delivery would have had.
        arrived: usize,
    },
}

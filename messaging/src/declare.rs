//! Declarations: the channels a router carries and the payload types it knows, each declared once.
//!
//! [`Channels`] is filled before the router exists and handed to [`Router::new`](crate::Router::new);
//! the set is closed from then on. Declaring checks everything that can be checked before a
//! message flows: a channel tag lives under the `Message` root and is declared (not merely implied)
//! in `config/tags.toml`; no channel is declared twice (MB-10); payload names are unique; every
//! declared parent chain is short, acyclic, and built for the type that declares it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::rc::Rc;

use gatehouse_tags::GameplayTag;

use crate::channel::Channel;
use crate::error::Error;
use crate::payload::{Payload, PayloadType};
use crate::rule::{self, Fits, MAX_DERIVATION};

/// The name of the root every channel tag lives under.
pub(crate) const CHANNEL_ROOT: &str = "Message";

/// Keeps a copy of a sticky channel's last message (the channel's declared type, `Clone`).
#[derive(Clone, Copy)]
pub(crate) struct Keep(fn(&dyn Any) -> Option<Rc<dyn Any>>);

impl Keep {
    fn of<T: Payload + Clone>() -> Keep {
        Keep(|value| value.downcast_ref::<T>().map(|v| Rc::new(v.clone()) as Rc<dyn Any>))
    }

    /// A retained copy of `value`; `None` if it is not of the channel's declared type.
    pub(crate) fn copy(self, value: &dyn Any) -> Option<Rc<dyn Any>> {
        (self.0)(value)
    }
}

/// One declared channel.
#[derive(Clone, Copy)]
pub(crate) struct ChannelDecl {
    pub(crate) tag: GameplayTag,
    pub(crate) ty: PayloadType,
    pub(crate) sticky: Option<Keep>,
}

/// The payload types a router knows, by name and by Rust type, each with a small index that
/// listener records carry instead of the whole description.
#[derive(Default)]
pub(crate) struct TypeTable {
    all: Vec<PayloadType>,
    by_name: HashMap<&'static str, u32>,
    by_id: HashMap<TypeId, u32>,
    /// The rule's answer for every (sent, expected) pair of declared types, row-major by sent
    /// type; filled by [`TypeTable::close`] once the set is closed, so a delivery looks the
    /// answer up instead of walking parent chains.
    fits: Vec<Option<Fits>>,
}

impl TypeTable {
    /// Declares `ty` and every ancestor it declares; all or nothing.
    fn declare(&mut self, ty: PayloadType) -> Result<(), Error> {
        let mut chain: Vec<PayloadType> = Vec::new();
        let mut next = Some(ty);
        while let Some(current) = next {
            if chain.len() > MAX_DERIVATION || chain.iter().any(|c| c.id == current.id) {
                return Err(Error::DerivationTooDeep { name: ty.name, limit: MAX_DERIVATION });
            }
            if let Some(parent) = current.parent
                && parent.child() != current.id
            {
                return Err(Error::MisdeclaredParent {
                    name: current.name,
                    parent: parent.ty().name,
                });
            }
            let known = self.by_name(current.name).map(|k| k.id);
            let in_chain = chain.iter().find(|c| c.name == current.name).map(|c| c.id);
            if known.or(in_chain).is_some_and(|id| id != current.id) {
                return Err(Error::PayloadNameTaken { name: current.name });
            }
            chain.push(current);
            next = current.parent.map(|p| p.ty());
        }
        for t in chain {
            if self.by_id.contains_key(&t.id) {
                continue;
            }
            // Fewer than 2^32 types: each one is a Rust type named in code.
            let index = self.all.len() as u32;
            self.all.push(t);
            self.by_name.insert(t.name, index);
            self.by_id.insert(t.id, index);
        }
        Ok(())
    }

    /// The declared type named `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<PayloadType> {
        self.index_named(name).map(|i| *self.get(i))
    }

    /// The index of the declared type named `name`.
    pub(crate) fn index_named(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The declared type `T`, if declared.
    pub(crate) fn by_id(&self, id: TypeId) -> Option<PayloadType> {
        self.index_of(id).map(|i| *self.get(i))
    }

    /// The index of the declared type `id`.
    pub(crate) fn index_of(&self, id: TypeId) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    /// The declared type at `index` (an index this table handed out).
    pub(crate) fn get(&self, index: u32) -> &PayloadType {
        &self.all[index as usize]
    }

    /// Closes the set: asks the rule once about every pair of declared types and keeps the
    /// answers for [`TypeTable::fits`]. Called when the router is built.
    pub(crate) fn close(&mut self) {
        let all = &self.all;
        self.fits = all
            .iter()
            .flat_map(|sent| all.iter().map(move |expected| rule::check(expected, sent).ok()))
            .collect();
    }

    /// The rule's answer for a payload sent as the type at `sent` and read as the type at
    /// `expected` (indices this table handed out): how far up its chain `sent` fits, or `None`.
    #[inline]
    pub(crate) fn fits(&self, sent: u32, expected: u32) -> Option<Fits> {
        let at = sent as usize * self.all.len() + expected as usize;
        self.fits.get(at).copied().flatten()
    }
}

/// The channels and payload types of one router, declared before it is built.
///
/// ```
/// # use gatehouse_messaging::{Channel, Channels, Payload};
/// # use gatehouse_tags::catalog::*;
/// # #[derive(Clone)] struct Shown;
/// # impl Payload for Shown { const NAME: &'static str = "Shown"; }
/// # struct Spawned;
/// # impl Payload for Spawned { const NAME: &'static str = "Spawned"; }
/// const SHOWN: Channel<Shown> = Channel::new(MESSAGE_TRANSITION_SHOWN);
/// const SPAWNED: Channel<Spawned> = Channel::new(MESSAGE_REPLICATION_PAWN_SPAWNED);
///
/// let mut channels = Channels::new();
/// channels.declare_sticky(SHOWN)?.declare(SPAWNED)?;
/// // A second declaration of the same tag is refused, whatever its payload type.
/// assert!(channels.declare(SPAWNED).is_err());
/// # Ok::<(), gatehouse_messaging::Error>(())
/// ```
#[derive(Default)]
pub struct Channels {
    pub(crate) channels: Vec<ChannelDecl>,
    pub(crate) types: TypeTable,
}

impl Channels {
    /// An empty declaration set.
    pub fn new() -> Channels {
        Channels::default()
    }

    /// Declares `channel`: its tag now carries `T` on this router.
    ///
    /// # Errors
    /// [`Error::NotAChannelTag`] for a tag outside `Message` or only implied in the catalog;
    /// [`Error::ChannelDeclaredTwice`]; the payload-type errors of [`Channels::declare_payload`].
    pub fn declare<T: Payload>(&mut self, channel: Channel<T>) -> Result<&mut Channels, Error> {
        self.add(channel.tag(), PayloadType::of::<T>(), None)
    }

    /// Declares a sticky `channel`: the router keeps a copy of its last message and replays it to
    /// every listener that registers later (MB-13).
    ///
    /// # Errors
    /// As [`Channels::declare`].
    pub fn declare_sticky<T: Payload + Clone>(
        &mut self,
        channel: Channel<T>,
    ) -> Result<&mut Channels, Error> {
        self.add(channel.tag(), PayloadType::of::<T>(), Some(Keep::of::<T>()))
    }

    /// Declares a payload type that no channel carries directly, such as a type derived from a
    /// channel's payload that some broadcasters send. Channel payload types (and all their
    /// declared ancestors) are declared with their channel.
    ///
    /// # Errors
    /// [`Error::PayloadNameTaken`], [`Error::MisdeclaredParent`], [`Error::DerivationTooDeep`].
    pub fn declare_payload<T: Payload>(&mut self) -> Result<&mut Channels, Error> {
        self.types.declare(PayloadType::of::<T>())?;
        Ok(self)
    }

    fn add(
        &mut self,
        tag: GameplayTag,
        ty: PayloadType,
        sticky: Option<Keep>,
    ) -> Result<&mut Channels, Error> {
        if tag.self_and_ancestors().last().map(GameplayTag::name) != Some(CHANNEL_ROOT) {
            return Err(Error::NotAChannelTag {
                channel: tag,
                why: "expected a tag under the Message root",
            });
        }
        if !tag.is_declared() {
            return Err(Error::NotAChannelTag {
                channel: tag,
                why: "expected a tag declared in config/tags.toml, not one only implied by its children",
            });
        }
        if let Some(first) = self.channels.iter().find(|c| c.tag == tag) {
            return Err(Error::ChannelDeclaredTwice {
                channel: tag,
                first: first.ty.name,
                second: ty.name,
            });
        }
        self.types.declare(ty)?;
        self.channels.push(ChannelDecl { tag, ty, sticky });
        Ok(self)
    }
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.channels.iter().map(|c| (c.tag, c.ty.name))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Derives, Parent};
    use gatehouse_tags::catalog::*;

    struct A;
    impl Payload for A {
        const NAME: &'static str = "A";
    }
    struct AlsoA;
    impl Payload for AlsoA {
        const NAME: &'static str = "A";
    }
    struct B(A);
    impl Payload for B {
        const NAME: &'static str = "B";
        const PARENT: Option<Parent> = Some(Parent::of::<Self, A>());
    }
    impl Derives<A> for B {
        fn parent(&self) -> &A {
            &self.0
        }
    }
    /// Claims B's parent declaration as its own.
    struct Impostor;
    impl Payload for Impostor {
        const NAME: &'static str = "Impostor";
        const PARENT: Option<Parent> = Some(Parent::of::<B, A>());
    }
    /// Two types that declare each other as parent.
    struct Ping(Box<Pong>);
    struct Pong(Box<Ping>);
    impl Payload for Ping {
        const NAME: &'static str = "Ping";
        const PARENT: Option<Parent> = Some(Parent::of::<Self, Pong>());
    }
    impl Payload for Pong {
        const NAME: &'static str = "Pong";
        const PARENT: Option<Parent> = Some(Parent::of::<Self, Ping>());
    }
    impl Derives<Pong> for Ping {
        fn parent(&self) -> &Pong {
            &self.0
        }
    }
    impl Derives<Ping> for Pong {
        fn parent(&self) -> &Ping {
            &self.0
        }
    }

    #[test]
    fn a_channel_tag_must_be_a_declared_message_tag() {
        let mut channels = Channels::new();
        let err = channels.declare(Channel::<A>::new(STATE_DEAD)).unwrap_err();
        assert!(matches!(err, Error::NotAChannelTag { channel, .. } if channel == STATE_DEAD));
        let implied = GameplayTag::parse("Message.Test").unwrap();
        let err = channels.declare(Channel::<A>::new(implied)).unwrap_err();
        assert!(err.to_string().contains("Message.Test"), "{err}");
    }

    #[test]
    fn payload_declarations_are_checked() {
        let mut channels = Channels::new();
        channels.declare_payload::<B>().unwrap();
        assert!(channels.types.by_name("A").is_some(), "ancestors are declared too");
        assert_eq!(
            channels.declare_payload::<AlsoA>().unwrap_err(),
            Error::PayloadNameTaken { name: "A" }
        );
        assert!(matches!(
            channels.declare_payload::<Impostor>().unwrap_err(),
            Error::MisdeclaredParent { name: "Impostor", .. }
        ));
        assert!(matches!(
            channels.declare_payload::<Ping>().unwrap_err(),
            Error::DerivationTooDeep { name: "Ping", .. }
        ));
    }
}

//! Payload types: what a message carries, and how one payload type derives from another.
//!
//! Rust has no struct inheritance, so "derives from" is never inferred here (not from field
//! layout, not from names). A payload type *declares* its parent, and the declaration is checked
//! by the compiler as far as it can be:
//!
//! - [`Payload`] gives the type its run-time name (what the dynamic API and error messages use)
//!   and, optionally, its declared parent in [`Payload::PARENT`];
//! - [`Derives<P>`] says how to lend a `&P` out of a `&Self`; in practice the derived payload
//!   holds its parent as a field, so a listener expecting the parent reads exactly the parent's
//!   part of the message;
//! - [`Parent::of`] builds the declaration and only compiles when `Derives<P>` is implemented.
//!
//! The chain `Self -> PARENT -> its PARENT -> ...` is the only relation the type rule
//! ([`crate::rule`]) reads. This module owns the declarations; it never decides delivery.

use std::any::{Any, TypeId};

/// A value that can travel on a channel.
///
/// ```
/// use gatehouse_messaging::{Derives, Parent, Payload};
///
/// /// Common part of every replication notification.
/// #[derive(Clone)]
/// struct ReplicationNotice { player: u64 }
/// impl Payload for ReplicationNotice {
///     const NAME: &'static str = "ReplicationNotice";
/// }
///
/// /// A pawn spawned; derives from `ReplicationNotice` by holding it.
/// #[derive(Clone)]
/// struct PawnSpawned { notice: ReplicationNotice, pawn: u64 }
/// impl Payload for PawnSpawned {
///     const NAME: &'static str = "PawnSpawned";
///     const PARENT: Option<Parent> = Some(Parent::of::<Self, ReplicationNotice>());
/// }
/// impl Derives<ReplicationNotice> for PawnSpawned {
///     fn parent(&self) -> &ReplicationNotice { &self.notice }
/// }
/// ```
pub trait Payload: Any {
    /// The run-time name of this payload type, unique on a router: how the dynamic API names it
    /// and how errors and logs report it.
    const NAME: &'static str;

    /// The declared parent type, if this payload derives from another: always
    /// `Some(Parent::of::<Self, TheParent>())`. `None` (the default) for a root type.
    const PARENT: Option<Parent> = None;
}

/// `Self` derives from `P`: a `&Self` can be read as a `&P`.
///
/// Implement it together with `Payload::PARENT = Some(Parent::of::<Self, P>())`; a type derives
/// from one parent only, and the router checks at declaration that `PARENT` was built for `Self`.
pub trait Derives<P: Payload>: Payload {
    /// The parent part of this payload (usually a field).
    fn parent(&self) -> &P;
}

/// The declaration "this payload type derives from that one", made by [`Parent::of`].
#[derive(Clone, Copy)]
pub struct Parent {
    child: fn() -> TypeId,
    ty: fn() -> PayloadType,
    project: for<'v> fn(&'v dyn Any) -> Option<&'v dyn Any>,
}

impl Parent {
    /// Declares that `S` derives from `P`, through `S`'s [`Derives<P>`] implementation.
    pub const fn of<S: Derives<P>, P: Payload>() -> Parent {
        Parent { child: TypeId::of::<S>, ty: PayloadType::of::<P>, project: project::<S, P> }
    }

    /// The type this declaration was built for (checked against the declaring type).
    pub(crate) fn child(&self) -> TypeId {
        (self.child)()
    }

    /// The parent type.
    pub(crate) fn ty(&self) -> PayloadType {
        (self.ty)()
    }

    /// A value of the child type seen as the parent; `None` if `value` is not of the child type.
    pub(crate) fn project<'v>(&self, value: &'v dyn Any) -> Option<&'v dyn Any> {
        (self.project)(value)
    }
}

impl std::fmt::Debug for Parent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Parent").field(&self.ty().name).finish()
    }
}

fn project<S: Derives<P>, P: Payload>(value: &dyn Any) -> Option<&dyn Any> {
    value.downcast_ref::<S>().map(|derived| derived.parent() as &dyn Any)
}

/// A payload type as the router sees it at run time: name, identity, declared parent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PayloadType {
    pub(crate) name: &'static str,
    pub(crate) id: TypeId,
    pub(crate) parent: Option<Parent>,
}

impl PayloadType {
    /// The run-time description of `T`.
    pub(crate) fn of<T: Payload>() -> PayloadType {
        PayloadType { name: T::NAME, id: TypeId::of::<T>(), parent: T::PARENT }
    }
}

/// A payload handed to a dynamic listener: already seen as the type the listener expects.
///
/// Its [`type_name`](DynPayload::type_name) is the listener's expected type (the type rule has
/// already accepted the message for it), so `downcast_ref` to that type always succeeds; the
/// type that was actually sent is [`Delivery::sent_type`](crate::Delivery::sent_type).
#[derive(Clone, Copy)]
pub struct DynPayload<'a> {
    type_name: &'static str,
    value: &'a dyn Any,
}

impl<'a> DynPayload<'a> {
    pub(crate) fn new(type_name: &'static str, value: &'a dyn Any) -> DynPayload<'a> {
        DynPayload { type_name, value }
    }

    /// The payload type name the listener registered with.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The value, as the listener's expected type.
    pub fn value(&self) -> &'a dyn Any {
        self.value
    }

    /// The value as `T`, if `T` is the listener's expected type.
    pub fn downcast_ref<T: Payload>(&self) -> Option<&'a T> {
        self.value.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for DynPayload<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynPayload").field("type_name", &self.type_name).finish_non_exhaustive()
    }
}

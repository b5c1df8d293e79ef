//! The one type rule, shared by the typed and the dynamic API (docs/spec/router.md R2, R3).
//!
//! A message whose payload was sent as type `S` may be read as type `E` exactly when `S` is `E`
//! or `E` is one of the ancestors `S` declares ([`crate::Payload::PARENT`]). There is no third
//! branch: no "any type" listener, no "no expected type" escape (MB-03), and no stricter or
//! looser variant for one of the APIs (MB-02). Every place that decides whether a payload fits a
//! type calls [`check`]: a broadcast against its channel's declared type, a delivery against the
//! listener's expected type, a sticky replay, and a registration's "could this ever deliver?".
//! The hot paths (broadcast and delivery) read its answers from the router's type table, which
//! asked it once about every pair of declared types when the router was built.
//!
//! This module decides and converts; reporting a mismatch is the caller's job.

use std::any::Any;

use crate::payload::PayloadType;

/// The longest parent chain a payload type may declare; longer chains (or cycles) are refused
/// when the type is declared, and the rule never walks further.
pub(crate) const MAX_DERIVATION: usize = 16;

/// `sent` fits `expected`, `steps` parents up its declared chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fits {
    steps: usize,
}

/// `sent` does not fit `expected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mismatch {
    pub(crate) expected: &'static str,
    pub(crate) arrived: &'static str,
}

/// The rule: `sent` fits `expected` when it is `expected` or declares it as an ancestor.
#[inline]
pub(crate) fn check(expected: &PayloadType, sent: &PayloadType) -> Result<Fits, Mismatch> {
    // Walks identities and parent links only: no whole type description is copied.
    let (mut id, mut parent) = (sent.id, sent.parent);
    for steps in 0..=MAX_DERIVATION {
        if id == expected.id {
            return Ok(Fits { steps });
        }
        match parent {
            Some(next) => {
                let ty = next.ty();
                (id, parent) = (ty.id, ty.parent);
            }
            None => break,
        }
    }
    Err(Mismatch { expected: expected.name, arrived: sent.name })
}

/// Whether some payload could ever fit both: one of the two types derives from the other. A
/// listener expecting `expected` on a channel carrying `carried` can receive something only then.
pub(crate) fn related(expected: &PayloadType, carried: &PayloadType) -> bool {
    check(expected, carried).is_ok() || check(carried, expected).is_ok()
}

impl Fits {
    /// `value`, a payload of type `sent`, seen as the expected type. `None` only if `value` is
    /// not actually of type `sent` (the callers check that before asking).
    #[inline]
    pub(crate) fn view<'v>(self, sent: &PayloadType, value: &'v dyn Any) -> Option<&'v dyn Any> {
        let (mut link, mut view) = (sent.parent, value);
        for step in 0..self.steps {
            if step > 0 {
                // The next link up, looked up only when there is a step to take from it.
                link = link?.ty().parent;
            }
            view = link?.project(view)?;
        }
        Some(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Derives, Parent, Payload};

    struct Base(u8);
    impl Payload for Base {
        const NAME: &'static str = "Base";
    }
    struct Mid(Base);
    impl Payload for Mid {
        const NAME: &'static str = "Mid";
        const PARENT: Option<Parent> = Some(Parent::of::<Self, Base>());
    }
    impl Derives<Base> for Mid {
        fn parent(&self) -> &Base {
            &self.0
        }
    }
    struct Leaf(Mid);
    impl Payload for Leaf {
        const NAME: &'static str = "Leaf";
        const PARENT: Option<Parent> = Some(Parent::of::<Self, Mid>());
    }
    impl Derives<Mid> for Leaf {
        fn parent(&self) -> &Mid {
            &self.0
        }
    }
    struct Other;
    impl Payload for Other {
        const NAME: &'static str = "Other";
    }

    #[test]
    fn a_type_fits_itself_and_its_declared_ancestors_only() {
        let (base, mid, leaf, other) = (
            PayloadType::of::<Base>(),
            PayloadType::of::<Mid>(),
            PayloadType::of::<Leaf>(),
            PayloadType::of::<Other>(),
        );
        assert_eq!(check(&leaf, &leaf), Ok(Fits { steps: 0 }));
        assert_eq!(check(&mid, &leaf), Ok(Fits { steps: 1 }));
        assert_eq!(check(&base, &leaf), Ok(Fits { steps: 2 }));
        let narrower = check(&leaf, &base).unwrap_err();
        assert_eq!((narrower.expected, narrower.arrived), ("Leaf", "Base"));
        assert!(check(&other, &leaf).is_err());
        assert!(check(&leaf, &other).is_err());
        assert!(related(&leaf, &base) && related(&base, &leaf));
        assert!(!related(&other, &mid));
    }

    #[test]
    fn a_fitting_value_is_seen_as_the_expected_type() {
        let leaf = Leaf(Mid(Base(7)));
        let fits = check(&PayloadType::of::<Base>(), &PayloadType::of::<Leaf>()).unwrap();
        let view = fits.view(&PayloadType::of::<Leaf>(), &leaf).unwrap();
        assert_eq!(view.downcast_ref::<Base>().map(|b| b.0), Some(7));
        // A value that is not of the type it claims is never reinterpreted.
        assert!(fits.view(&PayloadType::of::<Leaf>(), &Base(1)).is_none());
    }
}

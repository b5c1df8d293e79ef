//! The declared parent chain's bound (the one type rule, docs/spec/router.md R2): a chain of
//! [`MAX_DERIVATION`] + 1 types (16 steps up) is accepted and delivers to its root; one type more
//! is refused when declared, with the limit in the error.

#![allow(clippy::unwrap_used)] // tests unwrap freely

use gatehouse_messaging::{
    Channel, Channels, Derives, Error, Listen, Match, Parent, Payload, Router, RouterConfig,
};
use gatehouse_tags::catalog::MESSAGE_TEST_PING;

/// The longest chain the router takes, in steps from a type to its furthest ancestor.
const MAX_DERIVATION: usize = 16;

macro_rules! link {
    ($name:ident) => {
        #[derive(Clone, Default)]
        struct $name;
        impl Payload for $name {
            const NAME: &'static str = stringify!($name);
        }
    };
    ($name:ident : $parent:ident) => {
        #[derive(Clone, Default)]
        struct $name($parent);
        impl Payload for $name {
            const NAME: &'static str = stringify!($name);
            const PARENT: Option<Parent> = Some(Parent::of::<Self, $parent>());
        }
        impl Derives<$parent> for $name {
            fn parent(&self) -> &$parent {
                &self.0
            }
        }
    };
}

link!(C0);
link!(C1: C0);
link!(C2: C1);
link!(C3: C2);
link!(C4: C3);
link!(C5: C4);
link!(C6: C5);
link!(C7: C6);
link!(C8: C7);
link!(C9: C8);
link!(C10: C9);
link!(C11: C10);
link!(C12: C11);
link!(C13: C12);
link!(C14: C13);
link!(C15: C14);
link!(C16: C15);
link!(C17: C16);

#[test]
fn a_chain_at_the_bound_delivers_to_its_root_and_one_longer_is_refused() {
    let root: Channel<C0> = Channel::new(MESSAGE_TEST_PING);
    let mut channels = Channels::new();
    channels.declare(root).unwrap();
    channels.declare_payload::<C16>().unwrap();
    match Channels::new().declare_payload::<C17>() {
        Err(Error::DerivationTooDeep { name, limit }) => {
            assert_eq!((name, limit), ("C17", MAX_DERIVATION));
        }
        Err(other) => panic!("expected DerivationTooDeep, got {other}"),
        Ok(_) => panic!("a chain of {} steps was accepted", MAX_DERIVATION + 1),
    }
    let router: Router<Vec<&'static str>> = Router::new(RouterConfig::default(), channels);
    let mut log = Vec::new();
    let _root = router
        .listen(&mut log, Listen::channel(root, Match::Exact), |d, _| d.state().push("C0"))
        .unwrap();
    let report = router.broadcast_derived(&mut log, root, &C16::default()).unwrap();
    assert_eq!((report.delivered, &log[..]), (1, &["C0"][..]));
}

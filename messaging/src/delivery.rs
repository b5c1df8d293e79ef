//! What a callback receives besides the payload: the caller's state, the router, and the facts
//! of this delivery.
//!
//! Callbacks are `Fn(&mut Delivery<'_, C>, &T)`. The state `C` is the caller's (the client
//! session, a test log): the router never owns it, it only passes the `&mut C` that the
//! broadcaster handed in down to each listener in turn. Through [`Delivery::router`] a callback
//! may broadcast again (re-entrantly, bounded by the configured depth), register listeners and
//! remove any listener, itself included; the router holds no borrow while a callback runs.
//!
//! ```
//! # use gatehouse_messaging::*;
//! # use gatehouse_tags::catalog::*;
//! # #[derive(Clone)] struct Shown(u32);
//! # impl Payload for Shown { const NAME: &'static str = "Shown"; }
//! # #[derive(Clone)] struct Ended(u32);
//! # impl Payload for Ended { const NAME: &'static str = "Ended"; }
//! # const SHOWN: Channel<Shown> = Channel::new(MESSAGE_TRANSITION_SHOWN);
//! # const ENDED: Channel<Ended> = Channel::new(MESSAGE_TRANSITION_ENDED);
//! # let mut channels = Channels::new();
//! # channels.declare(SHOWN)?.declare(ENDED)?;
//! let router: Router<Vec<String>> = Router::new(RouterConfig::default(), channels);
//! let mut log = Vec::new();
//! let _relay = router.listen(&mut log, Listen::channel(SHOWN, Match::Exact), |d, shown| {
//!     d.state().push(format!("shown {}", shown.0));
//!     // Re-entrant broadcast: the state is lent on, the router comes from the delivery.
//!     let router = d.router();
//!     router.broadcast(d.state(), ENDED, &Ended(shown.0)).ok();
//! })?;
//! let _end = router.listen(&mut log, Listen::channel(ENDED, Match::Exact), |d, ended| {
//!     d.state().push(format!("ended {}", ended.0));
//! })?;
//! router.broadcast(&mut log, SHOWN, &Shown(7))?;
//! assert_eq!(log, ["shown 7", "ended 7"]);
//! # Ok::<(), Error>(())
//! ```

use gatehouse_tags::GameplayTag;

use crate::handle::ListenerId;
use crate::router::Router;

/// What every delivery of one message shares: made once per broadcast or replay.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub(crate) channel: GameplayTag,
    pub(crate) sent_type: &'static str,
    pub(crate) replay: bool,
}

/// One delivery to one listener.
pub struct Delivery<'a, C> {
    router: &'a Router<C>,
    state: &'a mut C,
    header: &'a Header,
    listener: &'a ListenerId,
}

impl<'a, C: 'static> Delivery<'a, C> {
    pub(crate) fn new(
        router: &'a Router<C>,
        state: &'a mut C,
        header: &'a Header,
        listener: &'a ListenerId,
    ) -> Delivery<'a, C> {
        Delivery { router, state, header, listener }
    }

    /// The next listener of the same message: a broadcast reuses one delivery for all of them.
    #[inline(always)]
    pub(crate) fn set_listener(&mut self, listener: &'a ListenerId) {
        self.listener = listener;
    }

    /// The caller's state, as lent to the broadcast.
    pub fn state(&mut self) -> &mut C {
        self.state
    }

    /// The router, to broadcast, register or remove listeners from inside the callback.
    pub fn router(&self) -> &'a Router<C> {
        self.router
    }

    /// The channel the message was broadcast on (for a hierarchical listener, the descendant
    /// channel, not the tag it listens at).
    pub fn channel(&self) -> GameplayTag {
        self.header.channel
    }

    /// The payload type the message was sent as (the listener reads it as its expected type,
    /// which is this type or one of its declared ancestors).
    pub fn sent_type(&self) -> &'static str {
        self.header.sent_type
    }

    /// The listener being called.
    pub fn listener(&self) -> ListenerId {
        *self.listener
    }

    /// Whether this is a sticky channel's retained message, replayed at registration.
    pub fn is_replay(&self) -> bool {
        self.header.replay
    }

    /// Removes the listener being called, at once (its handle, wherever held, becomes inert).
    pub fn unlisten_self(&self) -> bool {
        self.router.unlisten(*self.listener)
    }
}

impl<C> std::fmt::Debug for Delivery<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("channel", &self.header.channel)
            .field("sent_type", &self.header.sent_type)
            .field("listener", &self.listener)
            .field("replay", &self.header.replay)
            .finish_non_exhaustive()
    }
}

//! gatehouse-client: the gatehouse game client as a library.
//!
//! A game links this crate (or, from an engine, its C ABI) instead of writing the protocol
//! again from `docs/protocol.md`. At its core is [`Session`], a sans-IO state machine like
//! quinn-proto's `Connection`: it carries out the protocol's duties (the `Hello`, the answers
//! to every transition and join, the possession acknowledgements) and tells the game, as
//! [`Event`]s named the way a game programmer thinks of them, what to do: show the loading
//! screen, stream these levels, bind the camera to this pawn, drop the screen. The game answers
//! with its inputs: [`Session::levels_streamed`], [`Session::request_restart`],
//! [`Session::leave`]. `docs/client.md` is the integration guide.
//!
//! Modules: [`session`] (the state machine), [`screen`] (the loading screen's phases),
//! [`event`] (what the game is told), [`link`] (the session's connections, and what it asks its
//! shell to do with them: send, open a link to another server, close one), `timers` (the
//! session's deadlines), and [`net`], the
//! async shell that runs a session over QUIC ([`Client::connect`]), with [`quic`], the QUIC
//! plumbing it shares with endpoints that hold many connections, and [`pin`], trusting a server
//! by its certificate's fingerprint. On top, [`world`] keeps the
//! replicated world as the game's objects from the session's events and names each change as
//! a notification for a `gatehouse-messaging` router, and [`gates`] names the public lifecycle
//! gates a game opens on those objects and lets its code subscribe to them.

#![forbid(unsafe_code)]

pub mod event;
pub mod gates;
pub mod link;
pub mod net;
pub mod pin;
pub mod quic;
pub mod screen;
pub mod session;
mod timers;
pub mod world;

pub use event::{AbandonReason, CloseReason, Event, WorldChange};
pub use link::{Dial, LinkId, Output};
pub use net::{Client, ConnectConfig, ConnectError};
pub use pin::{CertificatePin, PinError};
pub use screen::{JoinScreen, JoinStage, Load, Screen, TransitionScreen, TransitionStage};
pub use session::{InputError, Life, Session, SessionConfig, WorldEvents};

/// The integration guide, `docs/client.md`, whose Rust examples compile as doctests so the
/// guide cannot fall behind the API.
#[doc = include_str!("../../docs/client.md")]
#[cfg(doctest)]
pub struct Guide;

//! The session's connections to servers, its links, and what it asks its shell to do with
//! them ([`Output`]): send a message on a link, open a link to another server, close one
//! (docs/client.md, "Changing servers"; docs/spec/travel.md V3).
//!
//! A session plays on one server at a time, over the link its shell opened first
//! ([`LinkId::FIRST`]). A move to another server (`TravelTo`) opens a second link for a while:
//! the session keeps the one to the server it leaves (the source, to hear of a failure) while it
//! logs in at the destination. Each link a session asks for gets the next id; ids are never
//! reused within a session, so a message that arrives late on a link the session closed is
//! recognised and dropped.

use std::fmt;

use gatehouse_protocol::{ClientMessage, NodeId};

use crate::pin::CertificatePin;

/// One of a session's connections to a server. The connection the shell opened first, before
/// the session started, is [`LinkId::FIRST`]; each server change the session follows asks the
/// shell for the next ([`Output::Dial`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

impl LinkId {
    /// The link the shell opened before the session started.
    pub const FIRST: LinkId = LinkId(0);

    /// The link after this one. Saturates: a session that moved four billion times reuses the
    /// last id, which is then never open twice at once (a move closes one of its two links).
    pub(crate) fn next(self) -> LinkId {
        LinkId(self.0.saturating_add(1))
    }
}

/// `link 1`: how logs name a link.
impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link {}", self.0)
    }
}

/// Where and how to open a link to another server: the destination a `TravelTo` named
/// (docs/protocol.md 5). The ticket is not here: it goes in the link's `Hello`, the next
/// [`Output::Send`] on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dial {
    /// The destination's game port, `host:port` as the source gave it: a DNS name or an IP
    /// address (at most 255 bytes). The shell resolves it.
    pub address: String,
    /// The name the destination's certificate is checked against (and sent as TLS SNI).
    pub server_name: String,
    /// Trust exactly the certificate with this SHA-256 fingerprint (docs/client.md, "Pinning
    /// the server's certificate"); `None`: trust the destination as the first link was trusted
    /// (the same certificate or CA, or the same pin).
    pub pin: Option<CertificatePin>,
    /// The node the player moves to, for logs and a game's "travelling to" text.
    pub node: NodeId,
}

/// What the session asks its shell to do, in order ([`crate::Session::poll_output`]).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// Send `message` on `link`, framed (docs/protocol.md 2) within the limit that link's
    /// `Welcome` gave (65,536 bytes before it). A link the shell no longer holds drops it.
    Send {
        /// The link.
        link: LinkId,
        /// The message.
        message: ClientMessage,
    },
    /// Open `link` as `dial` says, the way the first link was opened (QUIC with ALPN
    /// `gatehouse/1`, one bidirectional stream), within the shell's connect timeout; then give
    /// the session what arrives on it ([`crate::Session::handle_on`]) and say when it cannot be
    /// opened or ends ([`crate::Session::link_lost`]). The link's `Hello` follows as a
    /// [`Output::Send`]: hold what is sent on a link until it is open.
    Dial {
        /// The link to open.
        link: LinkId,
        /// Where to.
        dial: Dial,
    },
    /// Close `link`: write what was sent on it before, finish its stream and close the
    /// connection (application code 0, `Leave`). Nothing more is sent on it, and what still
    /// arrives on it is dropped. Closing a link still being opened gives up the dial.
    Close {
        /// The link.
        link: LinkId,
    },
}

// A `Hello` carries a credential (a session token, or a travel ticket at a destination): never
// in a log.
impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Send { link, message: ClientMessage::Hello { protocol_version, .. } } => f
                .debug_struct("Send")
                .field("link", link)
                .field(
                    "message",
                    &format_args!("Hello {{ protocol_version: {protocol_version}, .. }}"),
                )
                .finish(),
            Output::Send { link, message } => {
                f.debug_struct("Send").field("link", link).field("message", message).finish()
            }
            Output::Dial { link, dial } => {
                f.debug_struct("Dial").field("link", link).field("dial", dial).finish()
            }
            Output::Close { link } => f.debug_struct("Close").field("link", link).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credential a `Hello` carries never shows in an output's `Debug`; the rest does.
    #[test]
    fn a_hellos_token_never_shows_in_an_outputs_debug() {
        let hello = ClientMessage::Hello { protocol_version: 11, token: "secret.ticket".into() };
        let shown = format!("{:?}", Output::Send { link: LinkId(1), message: hello });
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("protocol_version: 11") && shown.contains("LinkId(1)"), "{shown}");
        let leave =
            format!("{:?}", Output::Send { link: LinkId::FIRST, message: ClientMessage::Leave });
        assert!(leave.contains("Leave"), "{leave}");
    }

    /// Link ids count up from the first and never wrap back to it.
    #[test]
    fn link_ids_count_up_and_saturate() {
        assert_eq!(LinkId::FIRST.next(), LinkId(1));
        assert_eq!(LinkId(u32::MAX).next(), LinkId(u32::MAX));
        assert_eq!(LinkId(3).to_string(), "link 3");
    }
}

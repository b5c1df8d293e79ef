//! The game task's half of travel between servers (docs/spec/travel.md): what the core cannot
//! do itself because it needs a key, the wall clock, the network or the directory.
//!
//! - [`Output::FindDestination`]: the fleet directory is asked on a task of its own (an
//!   allocator answers over HTTPS), its answer comes back as [`ShellEvent::DestinationFound`],
//!   and the candidate is remembered: what its clients dial, and where the peer link goes;
//! - [`Output::Peer`] to a server this travel found goes over a link this server dials
//!   ([`PeerLinks::send`]); to any other, back over the link it opened ([`PeerLinks::reply`]);
//! - [`Output::TravelTo`]: the ticket is minted under the fleet's key, with this server's wall
//!   clock, and the `TravelTo` filled with the candidate's address, server name and pin (the
//!   directory's, else the one its link's `Welcome` proved);
//! - a peer link's `Welcome` completes its candidate's pin, and a link lost is the core's
//!   [`Input::PeerLost`].
//!
//! [`Travels`] holds the directory, the ticket key and the candidates; it never feeds the core:
//! what the core must hear goes into the caller's queue or the game task's own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_protocol::ticket::{TicketClaims, mint_ticket};
use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{
    CertificateSha256, NodeId, PlayerId, ServerId, ServerMessage, TransitionId,
};
use tokio::sync::mpsc;

use super::ShellEvent;
use crate::fleet::{Candidate, FleetDirectory};
use crate::game::Input;

/// The most candidates remembered: one per server a travel found (a fleet's size bounds it;
/// a directory naming more than this forgets the oldest).
const MAX_CANDIDATES: usize = 1024;

/// What the game task needs to move players to other servers.
#[derive(Debug)]
pub(crate) struct Travels {
    /// This server's id in the fleet: every ticket's `src`.
    server: ServerId,
    /// The fleet's key tickets are signed with (`fleet.ticket_key`).
    key: TokenKey,
    /// `fleet.ticket_lifetime_s`.
    ticket_lifetime_s: u64,
    /// Where destinations come from.
    directory: Arc<dyn FleetDirectory>,
    /// The servers travels found, by id: what their clients dial.
    candidates: HashMap<ServerId, Candidate>,
    /// The game task's own queue: the directory's answers come back on it.
    events: mpsc::Sender<ShellEvent>,
}

/// What a `TravelTo` is minted from: [`Output::TravelTo`](crate::game::Output::TravelTo)'s
/// fields.
#[derive(Debug, Clone)]
pub(crate) struct Sending {
    pub(crate) player: PlayerId,
    pub(crate) transition: TransitionId,
    pub(crate) node: NodeId,
    pub(crate) server: ServerId,
    pub(crate) version: u64,
    pub(crate) generation: u32,
    pub(crate) valid: Duration,
}

impl Travels {
    /// Travels from `server`, signing tickets with `key` for at most `ticket_lifetime_s`,
    /// finding destinations in `directory`, answering on `events`.
    pub(crate) fn new(
        server: ServerId,
        key: TokenKey,
        ticket_lifetime_s: u64,
        directory: Arc<dyn FleetDirectory>,
        events: mpsc::Sender<ShellEvent>,
    ) -> Self {
        Travels { server, key, ticket_lifetime_s, directory, candidates: HashMap::new(), events }
    }

    /// Asks the directory for the server to ask next for `seats` seats on `node`, `asked`
    /// having refused; the answer comes back as [`ShellEvent::DestinationFound`], always (an
    /// error of the directory is logged and answered none).
    pub(crate) fn find(&self, transition: TransitionId, node: NodeId, seats: usize, asked: usize) {
        let directory = self.directory.clone();
        let events = self.events.clone();
        let seats = u32::try_from(seats).unwrap_or(u32::MAX);
        let asked = u32::try_from(asked).unwrap_or(u32::MAX);
        tokio::spawn(async move {
            let candidate = match directory.candidate(&node, seats, asked).await {
                Ok(candidate) => candidate,
                Err(e) => {
                    tracing::warn!(travel = transition.0, %node, error = %e,
                        "the fleet directory named no server");
                    None
                }
            };
            // The game task gone, nobody waits for the answer.
            let _ = events.send(ShellEvent::DestinationFound { transition, candidate }).await;
        });
    }

    /// The directory's answer: the candidate is remembered; the core's input.
    pub(crate) fn found(
        &mut self,
        transition: TransitionId,
        candidate: Option<Candidate>,
    ) -> Input {
        let server = candidate.map(|candidate| {
            let server = candidate.server.clone();
            if self.candidates.len() >= MAX_CANDIDATES && !self.candidates.contains_key(&server) {
                self.candidates.clear();
            }
            self.candidates.insert(server.clone(), candidate);
            server
        });
        Input::DestinationFound { transition, server }
    }

    /// The candidate `server`, if a travel found it.
    pub(crate) fn candidate(&self, server: &ServerId) -> Option<&Candidate> {
        self.candidates.get(server)
    }

    /// A link this server dialled proved `server`: its `Welcome`'s certificate fingerprint is
    /// the pin its travellers get when the directory knew none.
    pub(crate) fn linked(&mut self, server: &ServerId, certificate_sha256: Option<[u8; 32]>) {
        if let Some(candidate) = self.candidates.get_mut(server)
            && candidate.certificate_sha256.is_none()
        {
            candidate.certificate_sha256 = certificate_sha256;
        }
    }

    /// The `TravelTo` for `sending`, its ticket minted now; none when its destination is not a
    /// candidate this server found (the core names only those).
    pub(crate) fn travel_to(&self, sending: Sending) -> Option<ServerMessage> {
        let candidate = self.candidates.get(&sending.server)?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        // A ticket dies with its seat whatever its times (V9); its own life is the fleet's.
        let life = self.ticket_lifetime_s;
        let claims = TicketClaims {
            uid: sending.player,
            iat: now,
            exp: now + life,
            src: self.server.clone(),
            dst: sending.server,
            trn: sending.transition,
            node: sending.node.clone(),
            ver: sending.version,
            generation: sending.generation,
        };
        let ticket = mint_ticket(&self.key, &claims);
        Some(ServerMessage::TravelTo(Box::new(gatehouse_protocol::TravelTo {
            transition_id: sending.transition,
            node: sending.node,
            address: candidate.address.clone(),
            server_name: candidate.server_name.clone(),
            certificate_sha256: candidate.certificate_sha256.map(CertificateSha256),
            ticket,
            valid_ms: u32::try_from(sending.valid.as_millis()).unwrap_or(u32::MAX),
        })))
    }
}

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
//! - a peer link's `Welcome` gives its candidate's clients their pin, kept beside the candidate
//!   as the directory named it: the link is dialled to that candidate, and a candidate that
//!   changed is dialled anew, so a pin learnt from the link must not make it look changed; and
//!   the loss of a link this server dialled is the core's [`Input::PeerLost`].
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
    candidates: HashMap<ServerId, Found>,
    /// The game task's own queue: the directory's answers come back on it.
    events: mpsc::Sender<ShellEvent>,
}

/// A server a travel found.
#[derive(Debug)]
struct Found {
    /// As the directory named it: what the peer link to it is dialled to.
    candidate: Candidate,
    /// The certificate SHA-256 its link's `Welcome` proved, for its clients to pin when the
    /// directory names none.
    welcomed: Option<[u8; 32]>,
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

    /// The directory's answer: the candidate is remembered (with the pin its link proved, while
    /// the directory names it the same); the core's input.
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
            let welcomed = self
                .candidates
                .remove(&server)
                .filter(|known| known.candidate == candidate)
                .and_then(|known| known.welcomed);
            self.candidates.insert(server.clone(), Found { candidate, welcomed });
            server
        });
        Input::DestinationFound { transition, server }
    }

    /// The candidate `server` as the directory named it, if a travel found it.
    pub(crate) fn candidate(&self, server: &ServerId) -> Option<&Candidate> {
        self.candidates.get(server).map(|found| &found.candidate)
    }

    /// Where `server` is, for a message to it outside a travel (`PlayerTaken`,
    /// docs/spec/travel.md V17): as a travel found it, else as the directory names it by its
    /// id; `None` when neither knows it (an Agones directory names no server by its id).
    pub(crate) fn locate(&self, server: &ServerId) -> Option<Candidate> {
        self.candidate(server).cloned().or_else(|| self.directory.locate(server))
    }

    /// A link this server dialled proved `server`: its `Welcome`'s certificate fingerprint is
    /// the pin its travellers get when the directory knew none.
    pub(crate) fn linked(&mut self, server: &ServerId, certificate_sha256: Option<[u8; 32]>) {
        if let Some(found) = self.candidates.get_mut(server) {
            found.welcomed = certificate_sha256;
        }
    }

    /// The `TravelTo` for `sending`, its ticket minted now; none when its destination is not a
    /// candidate this server found (the core names only those).
    pub(crate) fn travel_to(&self, sending: Sending) -> Option<ServerMessage> {
        let Found { candidate, welcomed } = self.candidates.get(&sending.server)?;
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
            certificate_sha256: candidate.certificate_sha256.or(*welcomed).map(CertificateSha256),
            ticket,
            valid_ms: u32::try_from(sending.valid.as_millis()).unwrap_or(u32::MAX),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::StaticDirectory;
    use gatehouse_protocol::ticket::{TicketLimits, verify_ticket};

    const KEY: &str = "a-fleet-key-of-thirty-two-bytes-0";

    fn id(text: &str) -> ServerId {
        ServerId::new(text).unwrap()
    }

    fn travels() -> Travels {
        let directory = Arc::new(StaticDirectory::new(&id("hub-1"), &[]).unwrap());
        let (events, _) = mpsc::channel(1);
        Travels::new(id("hub-1"), TokenKey::new(KEY), 30, directory, events)
    }

    fn candidate_at(address: &str) -> Candidate {
        Candidate {
            server: id("isle-1"),
            address: address.into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
        }
    }

    /// The seat of `p-1` on `isle` at `isle-1` (travel 3, version 7) for `generation`, held
    /// `valid`.
    fn sending(generation: u32, valid: Duration) -> Sending {
        Sending {
            player: PlayerId::new("p-1").unwrap(),
            transition: TransitionId(3),
            node: NodeId::new("isle").unwrap(),
            server: id("isle-1"),
            version: 7,
            generation,
            valid,
        }
    }

    /// The pin a `TravelTo` to `isle-1` names.
    fn pin_sent(travels: &Travels) -> Option<[u8; 32]> {
        let sending = sending(1, Duration::from_secs(10));
        let Some(ServerMessage::TravelTo(travel)) = travels.travel_to(sending) else {
            panic!("a TravelTo to a server found")
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let claims =
            verify_ticket(&TokenKey::new(KEY), &travel.ticket, now, TicketLimits::DEFAULT).unwrap();
        assert_eq!((claims.ver, claims.generation), (7, 1));
        travel.certificate_sha256.map(|pin| pin.0)
    }

    /// The pin a link's `Welcome` proved reaches the travellers, and the candidate stays as the
    /// directory named it, the link dialled to it kept (a candidate that changed is dialled
    /// anew, closing the link every travel of this server there rides on: docs/spec/travel.md
    /// V3, V14), through later finds of the same candidate; a candidate the directory moved
    /// forgets the pin its older link proved.
    #[test]
    fn a_pin_a_link_proved_reaches_the_travellers_and_leaves_its_candidate_as_named() {
        let mut travels = travels();
        travels.found(TransitionId(3), Some(candidate_at("127.0.0.1:7001")));
        travels.linked(&id("isle-1"), Some([5; 32]));
        assert_eq!(travels.candidate(&id("isle-1")), Some(&candidate_at("127.0.0.1:7001")));
        assert_eq!(pin_sent(&travels), Some([5; 32]));
        travels.found(TransitionId(4), Some(candidate_at("127.0.0.1:7001")));
        assert_eq!(travels.candidate(&id("isle-1")), Some(&candidate_at("127.0.0.1:7001")));
        assert_eq!(pin_sent(&travels), Some([5; 32]), "kept while the directory names it so");
        travels.found(TransitionId(5), Some(candidate_at("127.0.0.1:7002")));
        assert_eq!(pin_sent(&travels), None, "a moved server's link proves its pin anew");
        let pinned =
            Candidate { certificate_sha256: Some([9; 32]), ..candidate_at("127.0.0.1:7002") };
        travels.found(TransitionId(6), Some(pinned));
        travels.linked(&id("isle-1"), Some([5; 32]));
        assert_eq!(pin_sent(&travels), Some([9; 32]), "the directory's pin first");
    }

    /// The directory is asked on a task of its own, and its answer comes back on the game
    /// task's queue, naming the candidate (docs/spec/travel.md V12).
    #[tokio::test]
    async fn a_find_answers_with_the_directorys_candidate_on_the_game_tasks_queue() {
        let entry = crate::config::StaticServer {
            id: "isle-1".into(),
            address: "127.0.0.1:7001".into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            nodes: vec!["isle".into()],
        };
        let directory = Arc::new(StaticDirectory::new(&id("hub-1"), &[entry]).unwrap());
        let (events, mut heard) = mpsc::channel(1);
        let travels = Travels::new(id("hub-1"), TokenKey::new(KEY), 30, directory, events);
        travels.find(TransitionId(3), NodeId::new("isle").unwrap(), 2, 0);
        let answer = tokio::time::timeout(Duration::from_secs(5), heard.recv()).await;
        let Ok(Some(ShellEvent::DestinationFound { transition, candidate })) = answer else {
            panic!("no answer from the directory")
        };
        assert_eq!(transition, TransitionId(3));
        assert_eq!(candidate, Some(candidate_at("127.0.0.1:7001")));
        travels.find(TransitionId(3), NodeId::new("isle").unwrap(), 2, 1);
        let answer = tokio::time::timeout(Duration::from_secs(5), heard.recv()).await;
        assert!(
            matches!(answer, Ok(Some(ShellEvent::DestinationFound { candidate: None, .. }))),
            "the one server asked already: none"
        );
    }

    /// The candidates kept are bounded by `MAX_CANDIDATES`: past it the oldest are forgotten
    /// (all at once), and a candidate found again takes no room of its own.
    #[test]
    fn the_candidates_kept_are_bounded_and_a_known_one_takes_no_more_room() {
        let mut travels = travels();
        let named = |i: usize| Candidate {
            server: id(&format!("s-{i}")),
            ..candidate_at("127.0.0.1:7001")
        };
        for i in 0..MAX_CANDIDATES {
            travels.found(TransitionId(1), Some(named(i)));
        }
        assert_eq!(travels.candidates.len(), MAX_CANDIDATES, "every one kept up to the bound");
        travels.found(TransitionId(2), Some(named(0)));
        assert_eq!(travels.candidates.len(), MAX_CANDIDATES, "a known one: nothing forgotten");
        assert!(travels.candidate(&id("s-5")).is_some());
        travels.found(TransitionId(3), Some(named(MAX_CANDIDATES)));
        assert_eq!(travels.candidates.len(), 1, "past the bound: the older ones forgotten");
        assert!(travels.candidate(&id(&format!("s-{MAX_CANDIDATES}"))).is_some());
    }

    /// A `TravelTo` names the seat its ticket is for (player, source, destination, travel,
    /// node, version, generation), the candidate's address and name and the seat's hold, and
    /// its ticket lives exactly `fleet.ticket_lifetime_s` from now (docs/spec/travel.md V8).
    #[test]
    fn a_travel_to_names_its_seat_and_a_ticket_living_the_fleets_lifetime() {
        let mut travels = travels();
        travels.found(TransitionId(3), Some(candidate_at("127.0.0.1:7001")));
        let sending = sending(2, Duration::from_millis(2500));
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let Some(ServerMessage::TravelTo(travel)) = travels.travel_to(sending) else {
            panic!("a TravelTo to a server found")
        };
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let claims =
            verify_ticket(&TokenKey::new(KEY), &travel.ticket, after, TicketLimits::DEFAULT)
                .unwrap();
        assert!((before..=after).contains(&claims.iat), "issued now: {}", claims.iat);
        assert_eq!(claims.exp, claims.iat + 30, "the fleet's ticket lifetime");
        assert_eq!((claims.uid.as_str(), claims.src.as_str()), ("p-1", "hub-1"));
        assert_eq!((claims.dst.as_str(), claims.node.as_str()), ("isle-1", "isle"));
        assert_eq!((claims.trn, claims.ver, claims.generation), (TransitionId(3), 7, 2));
        assert_eq!((travel.transition_id, travel.node.as_str()), (TransitionId(3), "isle"));
        assert_eq!(
            (travel.address.as_str(), travel.server_name.as_str()),
            ("127.0.0.1:7001", "localhost")
        );
        assert_eq!(travel.valid_ms, 2500);
    }

    /// docs/spec/travel.md V17: a `PlayerTaken` goes to a server as a travel found it (the
    /// link dialled there), else as the directory lists it by its id; a server neither knows is
    /// not located.
    #[test]
    fn a_server_is_located_as_a_travel_found_it_else_as_the_directory_lists_it() {
        let listed = |id: &str, address: &str| crate::config::StaticServer {
            id: id.into(),
            address: address.into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            nodes: vec!["isle".into()],
        };
        let servers = [listed("isle-1", "10.0.0.9:7777"), listed("arena-1", "10.0.0.3:7777")];
        let directory = Arc::new(StaticDirectory::new(&id("hub-1"), &servers).unwrap());
        let (events, _) = mpsc::channel(1);
        let mut travels = Travels::new(id("hub-1"), TokenKey::new(KEY), 30, directory, events);
        let address = |server: &str| travels.locate(&id(server)).map(|c| c.address);
        assert_eq!(address("isle-1").as_deref(), Some("10.0.0.9:7777"), "as listed");
        assert_eq!(address("arena-1").as_deref(), Some("10.0.0.3:7777"));
        assert_eq!(address("nobody"), None);
        travels.found(TransitionId(3), Some(candidate_at("127.0.0.1:7001")));
        assert_eq!(travels.locate(&id("isle-1")), Some(candidate_at("127.0.0.1:7001")), "as found");
    }
}

//! The peer links' own bookkeeping, without a network: the accepted half on the events the
//! driver would hand up (its queues in memory), the dialled half's queue bound. The links over
//! real QUIC are tested in `tests/e2e/peer_link.rs`.

use std::time::Duration;

use gatehouse_protocol::fleet::{PEER_EXPORTER_LEN, SeatRefusal};
use gatehouse_protocol::{FrameDecoder, NodeId, PlayerId};

use super::*;
use crate::game::Departure;
use crate::net::{Outbound, SendQueueRx, test_queue};

const KEY: &str = "the-fleet-key-of-thirty-two-bytes!!";

fn settings() -> PeerSettings {
    PeerSettings {
        server: ServerId::new("crypt-1").unwrap(),
        key: TokenKey::new(KEY),
        certificate_sha256: Some([9; 32]),
        max_frame_len: 65_536,
        peer_timeout: Duration::from_secs(2),
        peer_idle_timeout: Duration::from_secs(3),
    }
}

fn exporter(n: u64) -> [u8; PEER_EXPORTER_LEN] {
    let mut exporter = [0; PEER_EXPORTER_LEN];
    exporter[..8].copy_from_slice(&n.to_le_bytes());
    exporter
}

fn server(name: &str) -> ServerId {
    ServerId::new(name).unwrap()
}

/// `from`'s `Hello` on connection `n`, its proof made under `key`.
fn hello(from: &str, n: u64, key: &str) -> PeerMessage {
    PeerMessage::Hello {
        version: PEER_PROTOCOL_VERSION,
        server: server(from),
        proof: PeerProof::new(&TokenKey::new(key), PeerRole::Source, &exporter(n)),
    }
}

/// The driver's report that connection `n` opened a link with `first`: the link's writer end.
fn open(links: &mut PeerLinks, n: u64, first: PeerMessage) -> SendQueueRx {
    let connection = ConnectionId(n);
    let (outbound, queue, _rings) = test_queue(16, connection);
    links.handle_connection(PeerConnectionEvent::Opened {
        connection,
        exporter: exporter(n),
        server_name: Some("crypt-1.example".into()),
        first,
        outbound,
        span: tracing::Span::none(),
    });
    queue
}

/// Every event ready now.
fn events(links: &mut PeerLinks) -> Vec<PeerEvent> {
    std::iter::from_fn(|| links.poll_event(Instant::now())).collect()
}

/// The messages written to a link's queue.
fn written(queue: &mut SendQueueRx) -> Vec<PeerMessage> {
    let mut decoder = FrameDecoder::new(65_536);
    while let Some(item) = queue.try_recv() {
        if let Outbound::Frames { bytes, .. } = item {
            decoder.extend(&bytes);
        }
    }
    std::iter::from_fn(|| decoder.next_message::<PeerMessage>().unwrap()).collect()
}

fn reserve(players: usize) -> PeerMessage {
    PeerMessage::ReserveSeats {
        trn: TransitionId(1),
        node: NodeId::new("crypt").unwrap(),
        players: (0..players).map(|i| PlayerId::new(format!("p-{i}")).unwrap()).collect(),
    }
}

/// V14: a source whose Hello holds is welcomed with this server's id, the name it dialled,
/// this server's certificate and the destination's proof of the same connection; its messages
/// reach the game, and answers go back over its link.
#[test]
fn a_source_whose_proof_holds_is_welcomed_and_answered_on_its_link() {
    let mut links = PeerLinks::new(settings());
    let mut queue = open(&mut links, 1, hello("hub-1", 1, KEY));
    let welcome: [PeerMessage; 1] = written(&mut queue).try_into().unwrap();
    let [PeerMessage::Welcome { version, server: from, server_name, certificate_sha256, proof }] =
        welcome
    else {
        panic!("one Welcome");
    };
    assert_eq!(
        (version, from.as_str(), server_name.as_str()),
        (PEER_PROTOCOL_VERSION, "crypt-1", "crypt-1.example")
    );
    assert_eq!(certificate_sha256, Some([9; 32]));
    assert!(proof.holds(&TokenKey::new(KEY), PeerRole::Destination, &exporter(1)));
    assert_eq!(events(&mut links), [PeerEvent::Accepted { server: server("hub-1") }]);
    links.handle_connection(PeerConnectionEvent::Message {
        connection: ConnectionId(1),
        message: reserve(2),
    });
    assert_eq!(
        events(&mut links),
        [PeerEvent::Message { from: server("hub-1"), message: reserve(2) }]
    );
    let answer = PeerMessage::SeatsRefused { trn: TransitionId(1), reason: SeatRefusal::Busy };
    links.reply(&server("hub-1"), answer.clone()).unwrap();
    assert_eq!(written(&mut queue), std::slice::from_ref(&answer));
    assert_eq!(links.reply(&server("hub-2"), answer), Err(PeerSendError::NoLink(server("hub-2"))));
    let wrong_way = links.reply(&server("hub-1"), reserve(1)).unwrap_err();
    assert!(matches!(wrong_way, PeerSendError::Refused { .. }), "{wrong_way}");
    links.handle_connection(PeerConnectionEvent::Gone {
        connection: ConnectionId(1),
        departure: Departure::lost("closed by the peer: Leave"),
    });
    assert!(matches!(events(&mut links).as_slice(),
        [PeerEvent::Lost { role: PeerRole::Destination, why, .. }] if why.contains("Leave")));
    assert_eq!(links.link_count(), (0, 0));
}

/// V14: a source without the fleet key is closed `Rejected`, unwelcomed, and nothing it sent
/// after its Hello is carried.
#[test]
fn a_source_whose_proof_fails_is_closed_and_nothing_it_sends_is_carried() {
    let mut links = PeerLinks::new(settings());
    let mut queue = open(&mut links, 1, hello("hub-1", 1, "another-key-also-thirty-two-bytes!!"));
    assert_eq!(queue.take_turn().close_now, Some(CloseCode::Rejected));
    assert!(written(&mut queue).is_empty(), "no Welcome");
    links.handle_connection(PeerConnectionEvent::Message {
        connection: ConnectionId(1),
        message: reserve(1),
    });
    let mut queue = open(&mut links, 2, reserve(1));
    assert_eq!(queue.take_turn().close_now, Some(CloseCode::ProtocolViolation), "no Hello first");
    assert!(events(&mut links).is_empty(), "the game hears nothing: {:?}", events(&mut links));
}

/// V14: an accepted link that sends a list above 1,024 players, or a message the wrong way, is
/// closed and reported lost; nothing of it reaches the game.
#[test]
fn an_oversized_or_wrong_way_message_closes_an_accepted_link() {
    let mut links = PeerLinks::new(settings());
    let mut queue = open(&mut links, 1, hello("hub-1", 1, KEY));
    let _ = events(&mut links);
    links.handle_connection(PeerConnectionEvent::Message {
        connection: ConnectionId(1),
        message: reserve(MAX_PLAYERS + 1),
    });
    assert_eq!(queue.take_turn().close_now, Some(CloseCode::ProtocolViolation));
    assert!(matches!(events(&mut links).as_slice(),
        [PeerEvent::Lost { why, .. }] if why.contains("1025 players, above 1024")));
    let mut queue = open(&mut links, 2, hello("hub-1", 2, KEY));
    let _ = events(&mut links);
    let placed = PeerMessage::Placed { trn: TransitionId(1), player: PlayerId::new("p").unwrap() };
    links.handle_connection(PeerConnectionEvent::Message {
        connection: ConnectionId(2),
        message: placed,
    });
    assert_eq!(queue.take_turn().close_now, Some(CloseCode::ProtocolViolation));
    assert!(matches!(events(&mut links).as_slice(),
        [PeerEvent::Lost { why, .. }] if why.contains("Placed does not go this way")));
}

const MAX_PLAYERS: usize = gatehouse_protocol::fleet::MAX_PLAYERS_PER_PEER_MESSAGE;

/// One link per source: a newer link from the same server replaces the older (closed
/// `Replaced`); beyond [`MAX_PEER_LINKS`] servers a new link is refused `ServerFull`.
#[test]
fn links_are_one_per_source_and_at_most_max_peer_links() {
    let mut links = PeerLinks::new(settings());
    let mut older = open(&mut links, 0, hello("hub-0", 0, KEY));
    let _newer = open(&mut links, 1, hello("hub-0", 1, KEY));
    assert_eq!(older.take_turn().close_now, Some(CloseCode::Replaced));
    assert_eq!(links.link_count(), (0, 1));
    let mut queues = Vec::new();
    for n in 2..=MAX_PEER_LINKS as u64 {
        queues.push(open(&mut links, n, hello(&format!("hub-{n}"), n, KEY)));
    }
    assert_eq!(links.link_count(), (0, MAX_PEER_LINKS));
    let mut refused = open(&mut links, 999, hello("hub-999", 999, KEY));
    assert_eq!(refused.take_turn().close_now, Some(CloseCode::ServerFull));
    assert!(written(&mut refused).is_empty());
    assert_eq!(links.link_count(), (0, MAX_PEER_LINKS));
}

/// A dialled link that cannot take more (its queue full while it dials a silent address) is
/// closed and reported lost, its requests unanswered; nothing it cannot carry is kept.
#[tokio::test]
async fn a_dialled_link_whose_queue_is_full_is_closed_and_reported_lost() {
    let nobody = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = Candidate {
        server: server("crypt-1"),
        address: nobody.local_addr().unwrap().to_string(),
        server_name: "localhost".into(),
        certificate_sha256: None,
    };
    let mut links = PeerLinks::new(PeerSettings { server: server("hub-1"), ..settings() });
    for _ in 0..LINK_QUEUE {
        links.send(&to, reserve(1)).unwrap();
    }
    assert_eq!(links.send(&to, reserve(1)), Err(PeerSendError::Stuck(server("crypt-1"))));
    let events = events(&mut links);
    assert!(
        matches!(events.first(), Some(PeerEvent::Lost { role: PeerRole::Source, why, .. })
        if why.contains("queue")),
        "{events:?}"
    );
    assert_eq!(
        events.get(1),
        Some(&PeerEvent::Unanswered { server: server("crypt-1"), trn: TransitionId(1) })
    );
    assert_eq!(links.link_count(), (0, 0));
    let refused = links.send(
        &to,
        PeerMessage::Placed { trn: TransitionId(1), player: PlayerId::new("p").unwrap() },
    );
    assert!(matches!(refused, Err(PeerSendError::Refused { .. })), "a source sends no Placed");
}

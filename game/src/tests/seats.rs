//! The destination's seats, through the core (docs/spec/travel.md V9, V12, V14, V16): what a
//! source's `ReserveSeats`, `SeatConfirmed` and `ReleaseSeats` come to, and the seat hold.

use std::time::Duration;

use gatehouse_protocol::fleet::{PeerMessage, SeatLoss, SeatRefusal};
use gatehouse_protocol::{CloseCode, ServerId, TransitionId};

use super::*;

const HOLD: Duration = Duration::from_secs(10);

fn hub() -> ServerId {
    ServerId::new("hub-1").unwrap()
}

const TRAVEL: TransitionId = TransitionId(41);

/// A source's message from `hub-1`.
fn from_hub(h: &mut Harness, message: PeerMessage) {
    h.input(Input::Peer { from: hub(), message });
}

/// `hub-1` asks for seats on `node` for `players`.
fn reserve(h: &mut Harness, node_name: &str, players: &[&str]) {
    let players = players.iter().map(|p| pid(p)).collect();
    from_hub(h, PeerMessage::ReserveSeats { trn: TRAVEL, node: node(node_name), players });
}

/// Every message the core sent to `hub-1` so far, in order.
fn to_hub(h: &Harness) -> Vec<PeerMessage> {
    h.log
        .iter()
        .filter_map(|out| match out {
            Output::Peer { to, message } if *to == hub() => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn granted() -> PeerMessage {
    PeerMessage::SeatsGranted { trn: TRAVEL, hold_ms: 10_000 }
}

fn refused(reason: SeatRefusal) -> PeerMessage {
    PeerMessage::SeatsRefused { trn: TRAVEL, reason }
}

fn lost(player: &str, reason: SeatLoss) -> PeerMessage {
    PeerMessage::SeatLost { trn: TRAVEL, player: pid(player), reason }
}

#[test]
fn seats_are_granted_all_or_none() {
    let mut h = Harness::with(WORLD, GameRules { max_players: 3, ..rules() });
    h.stream_node("harbor");
    h.placed("resident");
    reserve(&mut h, "harbor", &["a", "b", "c"]);
    reserve(&mut h, "harbor", &["a", "b"]);
    assert_eq!(to_hub(&h), [refused(SeatRefusal::Full), granted()], "3 of 2 rooms: none");
    assert_eq!(h.game.seats.len(), 2);
}

#[test]
fn seats_hold_their_room_against_logins() {
    let mut h = Harness::with(WORLD, GameRules { max_players: 3, ..rules() });
    h.stream_node("harbor");
    reserve(&mut h, "harbor", &["a", "b"]);
    assert_eq!(to_hub(&h), [granted()]);
    h.placed("first");
    let second = h.login("second");
    assert_eq!(h.closed(second), Some(CloseCode::ServerFull), "two of three rooms are held");
    // Released, the room is free again.
    from_hub(&mut h, PeerMessage::ReleaseSeats { trn: TRAVEL, players: vec![pid("a")] });
    let third = h.login("third");
    assert_eq!(h.closed(third), None);
}

#[test]
fn seats_are_refused_during_a_world_transition_and_for_a_node_not_hosted() {
    let mut h = Harness::booted();
    reserve(&mut h, "forest", &["a"]);
    assert_eq!(to_hub(&h), [refused(SeatRefusal::WrongNode)], "the world stands on harbor");
    h.input(Input::Travel { node: node("forest") });
    reserve(&mut h, "harbor", &["a"]);
    reserve(&mut h, "forest", &["a"]);
    let expected =
        [refused(SeatRefusal::WrongNode), refused(SeatRefusal::Busy), refused(SeatRefusal::Busy)];
    assert_eq!(to_hub(&h), expected, "busy while a transition runs, whichever node");
    h.stream_node("forest");
    reserve(&mut h, "forest", &["a"]);
    assert_eq!(to_hub(&h).last(), Some(&granted()));
}

#[test]
fn a_seat_not_confirmed_within_its_hold_is_reported_lost_to_its_source() {
    let mut h = Harness::booted();
    reserve(&mut h, "harbor", &["a", "b"]);
    h.advance(HOLD / 2);
    let confirm =
        PeerMessage::SeatConfirmed { trn: TRAVEL, player: pid("b"), version: 4, generation: 1 };
    from_hub(&mut h, confirm);
    h.advance(HOLD / 2 - Duration::from_millis(1));
    assert_eq!(to_hub(&h), [granted()], "nothing lost before the hold");
    h.advance(Duration::from_millis(1));
    assert_eq!(to_hub(&h), [granted(), lost("a", SeatLoss::HoldExpired)], "a at its hold");
    h.advance(HOLD / 2 - Duration::from_millis(1));
    assert_eq!(to_hub(&h).len(), 2, "b's hold counts from its confirmation");
    h.advance(Duration::from_millis(1));
    assert_eq!(to_hub(&h).last(), Some(&lost("b", SeatLoss::HoldExpired)), "never redeemed");
    assert_eq!(h.game.seats.len(), 0);
    assert_eq!(h.game.poll_timeout(), None, "no seat timer left armed");
}

#[test]
fn a_confirmation_of_a_seat_not_held_is_answered_lost() {
    let mut h = Harness::booted();
    let confirm =
        PeerMessage::SeatConfirmed { trn: TRAVEL, player: pid("a"), version: 4, generation: 1 };
    from_hub(&mut h, confirm.clone());
    assert_eq!(to_hub(&h), [lost("a", SeatLoss::HoldExpired)]);
    // Another source cannot confirm hub-1's seat.
    reserve(&mut h, "harbor", &["a"]);
    h.input(Input::Peer { from: ServerId::new("other").unwrap(), message: confirm });
    let to_other = h.log.iter().filter(|o| matches!(o, Output::Peer { to, .. } if *to != hub()));
    assert_eq!(to_other.count(), 1, "the other source is told it holds no such seat");
    h.advance(HOLD);
    assert_eq!(to_hub(&h).last(), Some(&lost("a", SeatLoss::HoldExpired)), "still unconfirmed");
}

#[test]
fn a_newer_reservation_of_a_seated_player_reports_its_older_seat_lost() {
    let mut h = Harness::booted();
    reserve(&mut h, "harbor", &["a"]);
    let newer = TransitionId(TRAVEL.0 + 1);
    let players = vec![pid("a")];
    from_hub(&mut h, PeerMessage::ReserveSeats { trn: newer, node: node("harbor"), players });
    let expected = [
        granted(),
        lost("a", SeatLoss::NotPlaced),
        PeerMessage::SeatsGranted { trn: newer, hold_ms: 10_000 },
    ];
    assert_eq!(to_hub(&h), expected);
    assert_eq!(h.game.seats.len(), 1);
}

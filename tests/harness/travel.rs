//! Travel between servers, both sides (docs/spec/travel.md): two real cores, `hub-1` on the
//! harbor (the source, whose world marks `isle` remote) and `isle-1` on the isle (the
//! destination), real clients that follow a `TravelTo` over a second link, one store both
//! share, peer links with seeded latency, both arrival orders of the handoff's messages, and
//! the failures of V7 and V16 made on purpose. Every test ends with each player on exactly one
//! server, the one its client plays on, whose copy of it is the store's.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_client_sim::figures::ScreenKind;
use gatehouse_protocol::fleet::{PeerMessage, SeatRefusal};
use gatehouse_protocol::{
    ClientMessage, CloseCode, PlayerId, ServerId, ServerMessage, TransitionFailure, TransitionId,
};
use gatehouse_server::game::{HandoverOutcome, HandoverSide, Output};
use gatehouse_tests::sim::{ClientId, ClientOptions, Event, HoldId, ServerSpec, Sim, SimConfig};
use gatehouse_tests::worlds::{HUB, ISLE};
use proptest::prelude::*;

use crate::common::*;

fn hub() -> ServerId {
    ServerId::new("hub-1").unwrap()
}

fn isle() -> ServerId {
    ServerId::new("isle-1").unwrap()
}

/// The fleet of two seeded `seed`, the hub first; `tune` changes the run's config (the hub's)
/// and the isle's before they boot.
fn fleet_with(seed: u64, tune: impl FnOnce(&mut SimConfig, &mut ServerSpec)) -> Sim {
    let mut config = SimConfig::new(HUB, seed);
    config.server = hub();
    let mut destination = ServerSpec::new("isle-1", ISLE);
    tune(&mut config, &mut destination);
    let mut sim = Sim::new(config);
    sim.add_server(destination);
    sim
}

fn fleet(seed: u64) -> Sim {
    fleet_with(seed, |_, _| {})
}

/// `names` on the hub, placed on the harbor.
fn residents(sim: &mut Sim, names: &[&str]) -> Vec<ClientId> {
    let clients: Vec<ClientId> = names.iter().map(|n| sim.connect(n)).collect();
    sim.run_until("everyone placed on the harbor", secs(10), all_placed);
    clients
}

/// Whether `client` plays on `server`, placed there (its pawn acknowledged, no screen up).
fn placed_at(sim: &Sim, client: ClientId, server: &ServerId) -> bool {
    sim.is_open(client)
        && sim.server_of(client).as_ref() == Some(server)
        && sim.session(client).is_placed()
}

/// Every server between transitions and every client that plays placed where it plays.
fn settled(sim: &Sim) -> bool {
    let servers = sim.server_ids();
    servers.iter().all(|s| sim.game_at(s).transition_id().is_none())
        && sim.clients().filter(|&c| sim.is_open(c)).all(|c| sim.session(c).is_placed())
}

/// The id of the transition in flight on `server`.
fn transition_at(sim: &Sim, server: &ServerId) -> TransitionId {
    sim.game_at(server).transition_id().expect("a transition in flight")
}

fn is_travel_to(m: &ServerMessage) -> bool {
    matches!(m, ServerMessage::TravelTo(_))
}

fn is_join_ready(m: &ClientMessage) -> bool {
    matches!(m, ClientMessage::JoinReady { .. })
}

fn failed_with(id: TransitionId, why: TransitionFailure) -> impl Fn(&ServerMessage) -> bool {
    move |m| {
        matches!(m, ServerMessage::TransitionFailed { transition_id, reason, .. }
            if *transition_id == id && *reason == why)
    }
}

/// The version of `player`'s handoff save, from the `TravelTo` its source sent it last.
fn handoff_version(sim: &Sim, player: &PlayerId) -> u64 {
    let sent = sim.trace().iter().rev().find_map(|e| match &e.event {
        Event::Output(Output::TravelTo { player: p, version, .. }) if p == player => Some(*version),
        _ => None,
    });
    sent.expect("a TravelTo was sent")
}

/// What the store decided of `player`'s claims or recalls made by `server`, in order.
fn decided(sim: &Sim, server: &ServerId, player: &PlayerId) -> Vec<HandoverOutcome> {
    let at = sim.trace().iter().filter(|e| e.server == *server);
    at.filter_map(|e| match &e.event {
        Event::HandoverDecided { player: p, outcome } if p == player => Some(*outcome),
        _ => None,
    })
    .collect()
}

/// The store wrote `client`'s player once for `server`, a claim or a recall, at exactly the
/// version of its handoff save.
fn assert_written_at_handoff(sim: &Sim, server: &ServerId, client: ClientId) {
    let player = sim.player(client);
    let won = HandoverOutcome::Won { version: handoff_version(sim, player) + 1 };
    assert_eq!(decided(sim, server, player), [won], "{player}: {server} wrote it at v + 1");
}

/// Whether the source let `client` go: its first link closed `Travelled`.
fn let_go(sim: &Sim, client: ClientId) -> bool {
    sim.close_code(client) == Some(CloseCode::Travelled)
}

/// The stored version of `client`'s player.
fn stored(sim: &Sim, client: ClientId) -> u64 {
    sim.stored_player(sim.player(client)).map_or(0, |s| s.version)
}

/// The end of every travel test: each player whose client plays is held by exactly one server,
/// the one its client plays on, and a player whose clients are all gone by none; then every
/// server saves whom it holds (its drain), and no save conflicts: no server held a copy of a
/// player older than the store's. The clients that play end clean.
fn assert_each_player_on_one_server(sim: &mut Sim) {
    let mut players: BTreeMap<PlayerId, Option<ClientId>> = BTreeMap::new();
    for client in sim.clients() {
        let playing = players.entry(sim.player(client).clone()).or_default();
        if sim.is_open(client) {
            assert!(playing.is_none(), "{} plays on two clients", sim.player(client));
            *playing = Some(client);
        }
    }
    for (player, client) in &players {
        let holding = sim.servers_holding(player);
        let expected: Vec<ServerId> = client.and_then(|c| sim.server_of(c)).into_iter().collect();
        assert_eq!(holding, expected, "{player}: held by {holding:?}, played on {expected:?}");
        if let Some(client) = client {
            assert_clean(sim, *client);
        }
    }
    let conflicts = sim.store_conflicts();
    sim.drain_servers();
    assert_eq!(sim.store_conflicts(), conflicts, "a server saved a player it no longer holds");
    assert_eq!(conflicts, 0, "a server saved a player another server wrote since");
}

/// docs/spec/travel.md V1, V3, V4, V6: the players move with one loading screen. Each client's
/// screen goes up at the source's `FreezeCharacters` and comes down at the destination's
/// `EndJoin`, and is never down in between (one screen, a move's, in its figures); the
/// source closes its link `Travelled` once the destination placed it, the destination's claim
/// wrote the handoff's next version, and the session checks find nothing wrong on either
/// server.
#[test]
fn players_move_with_one_loading_screen() {
    let mut sim = fleet(101);
    let clients = residents(&mut sim, &["ann", "bob", "cay"]);
    let base = sim.now() - sim.elapsed();
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    sim.run_until("everyone placed on the isle and let go", secs(10), |s| {
        clients.iter().all(|&c| placed_at(s, c, &isle()) && let_go(s, c))
    });
    for &c in &clients {
        let frozen = sim
            .received_at(c, |m| matches!(m, ServerMessage::FreezeCharacters { transition_id } if *transition_id == travel))
            .expect("frozen by the source");
        let ended = sim
            .received_at(c, |m| matches!(m, ServerMessage::EndJoin { .. }))
            .expect("its join at the destination ended");
        let stats = sim.session(c).stats();
        let moves: Vec<_> = stats.screens.iter().filter(|s| s.kind == ScreenKind::Travel).collect();
        assert_eq!(moves.len(), 1, "one screen for the move");
        assert_eq!(moves[0].shown, base + frozen, "up at the source's FreezeCharacters");
        assert_eq!(moves[0].ended, Some(base + ended), "down at the destination's EndJoin");
        let after = stats.screens.iter().filter(|s| s.shown >= base + frozen).count();
        assert_eq!(after, 1, "no other screen since the freeze");
        assert_eq!((stats.travels, stats.server_changes, stats.travels_abandoned), (1, 1, 0));
        assert_written_at_handoff(&sim, &isle(), c);
    }
    assert_eq!(sim.game_at(&hub()).counters().players_travelled, 3);
    assert_eq!(sim.game_at(&isle()).counters().travellers_placed, 3);
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V1, V2, V4: a travel is a transition on the source and a join on the
/// destination, and each core sees its own end. The source's travel ends once its moving
/// players are placed, counted completed; a player who logged in there during the move is not
/// moved, and follows the source's transition to the node it stands on, which ends with its
/// `EndTransition`. The destination places each traveller by a join of its own (`EndJoin`),
/// and its own player is never frozen for them.
#[test]
fn two_cores_each_see_their_own_transition_end() {
    let mut sim = fleet(102);
    let local_options = ClientOptions { server: isle(), ..sim.client_options() };
    let local = sim.connect_with("dia", local_options);
    let movers = residents(&mut sim, &["ann", "bob"]);
    sim.run_until("dia placed on the isle", secs(10), |s| placed_at(s, local, &isle()));
    let local_seen = sim.received(local).len();
    let isle_before = sim.game_at(&isle()).counters().clone();
    let hub_before = sim.game_at(&hub()).counters().clone();
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    sim.run_until("the hub asked the directory", secs(5), |s| {
        s.output_at_server(&hub(), |o| matches!(o, Output::FindDestination { .. })).is_some()
    });
    let late = sim.connect("eve");
    sim.run_until("everyone settled", secs(20), settled);
    for &c in &movers {
        assert!(placed_at(&sim, c, &isle()));
        let joined =
            sim.received(c).iter().filter(|m| matches!(m, ServerMessage::EndJoin { .. })).count();
        assert!(joined >= 1, "placed by a join at the destination");
        assert!(
            sim.received_at(c, |m| matches!(m, ServerMessage::EndTransition { transition_id } if *transition_id == travel)).is_none(),
            "a travel is not ended by EndTransition"
        );
    }
    assert!(placed_at(&sim, late, &hub()), "eve stays on the source");
    let back = sim.received(late).iter().find_map(|m| match m {
        ServerMessage::EndTransition { transition_id } => Some(*transition_id),
        _ => None,
    });
    assert!(back.is_some_and(|id| id > travel), "eve's transition to the harbor ended: {back:?}");
    let (hub_now, isle_now) = (sim.game_at(&hub()).counters(), sim.game_at(&isle()).counters());
    assert_eq!(
        hub_now.transitions_completed - hub_before.transitions_completed,
        2,
        "the travel, then eve's"
    );
    assert_eq!(hub_now.transitions_failed, hub_before.transitions_failed);
    assert_eq!(isle_now.joins_completed - isle_before.joins_completed, 2, "a join a traveller");
    assert_eq!(
        isle_now.transitions_started, isle_before.transitions_started,
        "no transition there"
    );
    let frozen = sim.received(local)[local_seen..].iter().any(|m| {
        matches!(m, ServerMessage::FreezeCharacters { .. } | ServerMessage::ShowJoin { .. })
    });
    assert!(!frozen, "the destination's own player is not frozen for the travellers");
    assert_each_player_on_one_server(&mut sim);
}

/// Which of a ticket's login and its seat's `SeatConfirmed` reaches the destination first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    Confirmation,
    Ticket,
}

/// docs/spec/travel.md V9: a ticket may reach the destination before its seat's
/// `SeatConfirmed` (a client dials faster than the link carries one message). Either order
/// redeems the seat and places the traveller.
fn redeem_with(first: First) {
    let mut sim = fleet(103);
    let [ann] = residents(&mut sim, &["ann"])[..] else { unreachable!() };
    let is_confirmation = |m: &PeerMessage| matches!(m, PeerMessage::SeatConfirmed { .. });
    let held = match first {
        First::Confirmation => sim.hold_to_client(ann, is_travel_to),
        First::Ticket => sim.hold_peer(&hub(), &isle(), is_confirmation),
    };
    sim.travel("isle");
    let confirmed = |s: &Sim| {
        s.event_at(|e| matches!(e, Event::Peer { message: PeerMessage::SeatConfirmed { .. }, .. }))
    };
    let redeemed = |s: &Sim| s.event_at(|e| matches!(e, Event::TravellerLogin { .. }));
    match first {
        First::Confirmation => {
            sim.run_until("the confirmation arrived", secs(5), |s| confirmed(s).is_some())
        }
        First::Ticket => sim.run_until("the ticket arrived", secs(5), |s| redeemed(s).is_some()),
    };
    assert_eq!(sim.held_count(held), 1);
    sim.release(held);
    sim.run_until("ann placed on the isle", secs(10), |s| {
        placed_at(s, ann, &isle()) && let_go(s, ann)
    });
    let (confirmed, redeemed) = (confirmed(&sim).unwrap(), redeemed(&sim).unwrap());
    assert_eq!(confirmed < redeemed, first == First::Confirmation, "the order under test");
    assert_eq!(sim.game_at(&isle()).counters().tickets_refused, 0);
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V9: the seat's confirmation first, then the ticket.
#[test]
fn a_ticket_after_its_seat_confirmation_redeems_the_seat() {
    redeem_with(First::Confirmation);
}

/// docs/spec/travel.md V9: the ticket first: it confirms its seat itself, and the confirmation
/// after changes nothing.
#[test]
fn a_ticket_before_its_seat_confirmation_redeems_the_seat() {
    redeem_with(First::Ticket);
}

/// docs/spec/travel.md V5: a partition lets both sides decide: the destination claims the
/// traveller it placed while the source, its link lost, recalls it. The store writes the first
/// and refuses the second, in either order: the player ends on exactly one server, with the
/// handoff's next version, and the other lets it go.
fn race(claim_first: bool) {
    let mut sim = fleet(104);
    let [ann] = residents(&mut sim, &["ann"])[..] else { unreachable!() };
    sim.hold_handovers();
    sim.travel("isle");
    sim.run_until("the destination claims", secs(10), |s| s.held_handovers().len() == 1);
    sim.cut_peer(&hub(), &isle());
    sim.run_until("the source recalls", secs(10), |s| s.held_handovers().len() == 2);
    let held = sim.held_handovers();
    assert_eq!((held[0].0.clone(), held[0].1), (isle(), HandoverSide::Claim));
    assert_eq!((held[1].0.clone(), held[1].1), (hub(), HandoverSide::Recall));
    let player = sim.player(ann).clone();
    if claim_first {
        sim.release_handover(0);
    } else {
        sim.release_handover(1);
    }
    sim.release_handover(0);
    // The loser lets go as soon as it hears the store, whatever its client does meanwhile.
    let (winner, loser) = if claim_first { (isle(), hub()) } else { (hub(), isle()) };
    sim.run_until("the loser heard the store", secs(5), |s| {
        !decided(s, &loser, &player).is_empty()
    });
    assert_eq!(sim.servers_holding(&player), std::slice::from_ref(&winner), "{loser} let go");
    if !claim_first {
        let recalled = sim.output_at_server(&isle(), |o| {
            matches!(o, Output::Close { code: CloseCode::Recalled, .. })
        });
        assert!(recalled.is_some(), "the destination closed its traveller Recalled");
    }
    sim.run_until("everyone settled", secs(20), |s| settled(s) && (!claim_first || let_go(s, ann)));
    assert!(placed_at(&sim, ann, &winner), "ann plays on {winner}");
    assert_written_at_handoff(&sim, &winner, ann);
    assert_eq!(decided(&sim, &loser, &player), [HandoverOutcome::Lost], "the second refused");
    let (hub_counters, isle_counters) =
        (sim.game_at(&hub()).counters(), sim.game_at(&isle()).counters());
    if claim_first {
        assert_eq!((hub_counters.players_travelled, isle_counters.travellers_placed), (1, 1));
    } else {
        assert!(
            sim.received_at(ann, failed_with(TransitionId(2), TransitionFailure::DestinationLost))
                .is_some()
        );
        assert_eq!((hub_counters.travellers_sent_back, isle_counters.travellers_placed), (1, 0));
    }
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V5: the destination's claim reaches the store first: the player is the
/// destination's, and the source's recall, lost, lets it go (`Travelled`).
#[test]
fn a_claim_before_a_recall_leaves_the_player_at_the_destination() {
    race(true);
}

/// docs/spec/travel.md V5, V7: the source's recall reaches the store first: the player is the
/// source's, its client comes back there, and the destination's claim, lost, places nobody.
#[test]
fn a_recall_before_a_claim_brings_the_player_back_to_the_source() {
    race(false);
}

/// docs/spec/travel.md V7, V16: the destination dies after the tickets, before anyone was
/// placed there: the source hears its link lost at `fleet.peer_idle_timeout_ms`, recalls every
/// moving player, tells each `DestinationLost` (their screens stay up) and places them on the
/// harbor, which it never left, with their state: each keeps its pawn (teleported, not
/// spawned again) and its kits (never granted twice).
#[test]
fn a_destination_dying_mid_move_sends_the_unplaced_back() {
    let mut sim = fleet(105);
    let clients = residents(&mut sim, &["ann", "bob", "cay"]);
    let pawns: Vec<_> = clients.iter().map(|&c| sim.session(c).own_pawn()).collect();
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    for &c in &clients {
        // Arrived there, but not placed: its join never ends.
        sim.hold_to_server(c, is_ack);
    }
    sim.run_until("every client at the destination", secs(5), |s| {
        clients.iter().all(|&c| s.server_of(c) == Some(isle()))
    });
    sim.crash(&isle());
    let crashed = sim.elapsed();
    sim.run_until("everyone back on the harbor", secs(20), |s| {
        clients.iter().all(|&c| placed_at(s, c, &hub()))
    });
    let idle = SimConfig::new(HUB, 0).peer_idle_timeout;
    assert!(sim.elapsed() - crashed <= idle + secs(2), "back within the peer idle timeout");
    for (&c, pawn) in clients.iter().zip(&pawns) {
        assert!(
            sim.received_at(c, failed_with(travel, TransitionFailure::DestinationLost)).is_some()
        );
        assert_eq!(sim.session(c).own_pawn(), *pawn, "its pawn kept on the source");
        assert_written_at_handoff(&sim, &hub(), c);
    }
    let counters = sim.game_at(&hub()).counters();
    assert_eq!((counters.travellers_sent_back, counters.players_travelled), (3, 0));
    assert_eq!(counters.transitions_failed, 1, "a travel that placed nobody failed");
    assert_each_player_on_one_server(&mut sim);
}

/// The moving players, refused before any seat: each is told `DestinationUnavailable` for the
/// travel within `within` of its start, is placed back on the harbor by the source's next
/// transition, and no handoff save was written (seats first, V2).
fn assert_sent_back_before_the_seats(
    sim: &mut Sim,
    clients: &[ClientId],
    travel: TransitionId,
    within: Duration,
) {
    let started = sim.output_at_server(&hub(), |o| {
        matches!(o, Output::Broadcast { message: ServerMessage::FreezeCharacters { transition_id } } if *transition_id == travel)
    });
    let saves: Vec<u64> = clients.iter().map(|&c| stored(sim, c)).collect();
    sim.run_until("everyone placed back on the harbor", secs(20), settled);
    for (&c, before) in clients.iter().zip(saves) {
        assert!(placed_at(sim, c, &hub()));
        let why = TransitionFailure::DestinationUnavailable;
        let told = sim.received_at(c, failed_with(travel, why)).expect("told the move failed");
        let waited = told - started.expect("the travel started");
        assert!(waited <= within, "told after {waited:?}, not within {within:?}");
        assert!(sim.received_at(c, is_travel_to).is_none(), "no ticket");
        assert!(stored(sim, c) >= before);
    }
    let handoffs = sim
        .trace()
        .iter()
        .filter(|e| matches!(e.event, Event::Output(Output::SaveHandoff { .. })))
        .count();
    assert_eq!(handoffs, 0, "no handoff save for a travel no server took");
    assert_eq!(sim.game_at(&hub()).counters().travellers_sent_back, clients.len() as u64);
    assert_each_player_on_one_server(sim);
}

/// docs/spec/travel.md V7, V12: the directory names no server for the node.
#[test]
fn a_travel_no_server_hosts_sends_everyone_back() {
    let mut sim = fleet(106);
    let clients = residents(&mut sim, &["ann", "bob"]);
    sim.set_directory("isle", &[]);
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    // At once: nothing to wait for (not the resolve bound).
    assert_sent_back_before_the_seats(&mut sim, &clients, travel, ms(250));
}

/// docs/spec/travel.md V7, V12: the only server hosting the node has room for two of three:
/// it refuses them all (`Full`), the source asks the directory for the next, which has none.
#[test]
fn a_full_destination_refuses_every_seat_and_everyone_is_sent_back() {
    let mut sim = fleet_with(107, |_, isle| isle.rules.max_players = 2);
    let clients = residents(&mut sim, &["ann", "bob", "cay"]);
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    // One round trip to the destination: not its peer timeout.
    assert_sent_back_before_the_seats(&mut sim, &clients, travel, ms(400));
    let refused = sim.event_at(|e| {
        matches!(
            e,
            Event::Peer {
                message: PeerMessage::SeatsRefused { reason: SeatRefusal::Full, .. },
                ..
            }
        )
    });
    assert!(refused.is_some(), "the destination refused Full");
}

/// docs/spec/travel.md V12, V16: a destination that never answers `ReserveSeats` is passed
/// over once `fleet.peer_timeout_ms` passed (named as asked), and with no other candidate
/// everyone is sent back, no later than that.
#[test]
fn a_silent_destination_is_passed_over_after_the_peer_timeout() {
    let mut sim = fleet(108);
    let clients = residents(&mut sim, &["ann", "bob"]);
    let silent = sim.hold_peer(&isle(), &hub(), |_| true);
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    let asked = sim.elapsed();
    let failed = failed_with(travel, TransitionFailure::DestinationUnavailable);
    sim.run_until("the move failed", secs(10), |s| {
        clients.iter().all(|&c| s.received_at(c, &failed).is_some())
    });
    let told = |o: &Output| matches!(o, Output::Send { message, .. } if failed(message));
    let waited = sim.output_at_server(&hub(), told).unwrap() - asked;
    let peer_timeout = SimConfig::new(HUB, 0).rules.peer_timeout;
    assert!(waited >= peer_timeout, "not before the peer timeout: {waited:?}");
    assert!(waited <= peer_timeout + ms(100), "at the peer timeout: {waited:?}");
    let second = sim.trace().iter().rev().find_map(|e| match &e.event {
        Event::Output(Output::FindDestination { asked, .. }) => Some(asked.clone()),
        _ => None,
    });
    assert_eq!(second, Some(vec![isle()]), "the silent one named as asked");
    assert!(sim.held_count(silent) >= 1, "it granted, unheard");
    assert_sent_back_before_the_seats(&mut sim, &clients, travel, peer_timeout + ms(300));
}

/// docs/spec/travel.md V2, V7: a handoff save the store does not acknowledge sends its player
/// back without a ticket (`DestinationUnavailable`); the others move.
#[test]
fn an_unacknowledged_handoff_save_sends_its_player_back_without_a_ticket() {
    let mut sim = fleet(109);
    let clients = residents(&mut sim, &["ann", "bob"]);
    sim.fail_handoff_saves(&hub(), true);
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    let started = sim.elapsed();
    sim.run_until("everyone settled", secs(20), settled);
    for &c in &clients {
        assert!(placed_at(&sim, c, &hub()));
        assert!(sim.received_at(c, is_travel_to).is_none(), "no ticket on an unacknowledged save");
        let why = TransitionFailure::DestinationUnavailable;
        let told = sim.received_at(c, failed_with(travel, why)).expect("told the move failed");
        assert!(told - started <= secs(1), "told once the store answered, not at a seat's hold");
    }
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V9, V10: a traveller whose client dies at the destination before its
/// placement keeps its seat `fleet.seat_hold_ms` for a relaunch, which takes it with its
/// session token (no ticket), is placed there and claimed; the source lets the player go.
#[test]
fn a_relaunch_takes_the_held_seat_by_session_token() {
    let mut sim = fleet(110);
    let [ann] = residents(&mut sim, &["ann"])[..] else { unreachable!() };
    let unready = sim.hold_to_server(ann, is_join_ready);
    sim.travel("isle");
    sim.run_until("ann redeemed its seat, unplaced", secs(5), |s| s.held_count(unready) == 1);
    sim.disconnect(ann);
    sim.run_for(secs(2));
    let options = ClientOptions { server: isle(), ..sim.client_options() };
    let again = sim.connect_with("ann", options);
    sim.run_until("the relaunch placed on the isle", secs(10), |s| placed_at(s, again, &isle()));
    sim.run_until("everyone settled", secs(10), settled);
    let connection = sim.connection(again);
    let login = sim.event_at(|e| matches!(e, Event::Login { connection: c } if *c == connection));
    assert!(login.is_some(), "a session token's login, not a ticket's");
    assert!(sim.received_at(again, |m| matches!(m, ServerMessage::ShowJoin { .. })).is_some());
    assert_eq!(sim.game_at(&isle()).counters().travellers_placed, 1, "claimed");
    assert_eq!(sim.game_at(&hub()).counters().players_travelled, 1, "let go by its source");
    assert_written_at_handoff(&sim, &isle(), again);
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V11: a newer travel on the source after the tickets recalls every
/// moving player not yet placed; they follow the newer travel from the source's link, leave
/// the destination, and are told nothing failed; the destination places none of them.
#[test]
fn a_supersede_after_the_tickets_recalls_the_unplaced() {
    let mut sim = fleet(111);
    let clients = residents(&mut sim, &["ann", "bob"]);
    for &c in &clients {
        sim.hold_to_server(c, is_join_ready);
    }
    sim.travel("isle");
    let travel = transition_at(&sim, &hub());
    sim.run_until("both at the destination, unplaced", secs(5), |s| {
        clients.iter().all(|&c| s.server_of(c) == Some(isle()))
    });
    sim.travel("forest");
    let newer = transition_at(&sim, &hub());
    assert!(newer > travel);
    sim.run_until("everyone settled", secs(20), settled);
    for &c in &clients {
        assert!(placed_at(&sim, c, &hub()), "back on the source");
        assert_eq!(sim.session(c).streamed_node().map(|n| n.as_str()), Some("forest"));
        assert!(
            sim.received_at(c, |m| matches!(m, ServerMessage::TransitionFailed { .. })).is_none()
        );
        assert_written_at_handoff(&sim, &hub(), c);
    }
    assert_eq!(sim.game_at(&isle()).counters().travellers_placed, 0);
    assert_eq!(sim.game_at(&hub()).counters().travellers_sent_back, 2);
    assert_each_player_on_one_server(&mut sim);
}

/// docs/spec/travel.md V5, V7: a partition between the servers at any instant of a move (its
/// tickets out, clients dialling, arriving, streaming, acknowledging, claims in flight), with
/// clients quick to stream or slower than the source takes to hear of the partition, leaves
/// each player on exactly one server: the destination's claim or the source's recall wins,
/// and the loser lets go. The sweep sees both win.
#[test]
fn a_partitioned_travel_leaves_the_player_on_one_server() {
    let mut winners = BTreeMap::new();
    for stream in [ms(100), secs(4)] {
        for cut_after in (0..12).map(|n| ms(40 * n)) {
            let mut sim =
                fleet_with(112, |config, _| config.session.stream_time = (stream, stream));
            let clients = residents(&mut sim, &["ann", "bob"]);
            sim.travel("isle");
            sim.run_until("the first ticket", secs(5), |s| {
                s.output_at_server(&hub(), |o| matches!(o, Output::TravelTo { .. })).is_some()
            });
            sim.run_for(cut_after);
            sim.cut_peer(&hub(), &isle());
            sim.run_until("everyone settled", secs(30), settled);
            for &c in &clients {
                let server = sim.server_of(c).expect("it plays");
                assert!(
                    placed_at(&sim, c, &server),
                    "cut after {cut_after:?}: {} unplaced",
                    sim.player(c)
                );
                *winners.entry(server).or_insert(0) += 1;
            }
            assert_each_player_on_one_server(&mut sim);
        }
    }
    assert_eq!(winners.len(), 2, "claims and recalls both won: {winners:?}");
}

/// docs/spec/travel.md V17: after a move, the same player logs in again at the source with its
/// session token while its client still plays at the destination. The source takes it (a
/// write at the version the claim left, naming the source) and tells the destination, which
/// closes its copy `Replaced` and drops it unsaved: at the end the player plays on exactly one
/// server, the source, every save of it after the take lands (none refused), and the store
/// names the source as its holder.
#[test]
fn a_player_who_moved_and_logs_in_at_the_source_plays_on_one_server() {
    let mut sim = fleet(131);
    let [moved] = residents(&mut sim, &["ann"])[..] else { unreachable!() };
    sim.travel("isle");
    sim.run_until("ann placed on the isle and let go", secs(10), |s| {
        placed_at(s, moved, &isle()) && let_go(s, moved)
    });
    let claimed = stored(&sim, moved);
    let player = sim.player(moved).clone();
    assert_eq!(sim.stored_player(&player).and_then(|s| s.holder.clone()), Some(isle()));

    let again = sim.connect("ann");
    sim.run_until("ann plays on the harbor again, the isle let go", secs(10), |s| {
        placed_at(s, again, &hub()) && !s.is_open(moved)
    });
    let link = sim.session(moved).link();
    assert_eq!(sim.close_code_on(moved, link), Some(CloseCode::Replaced), "the isle's copy");
    let taken = HandoverOutcome::Won { version: claimed + 1 };
    assert_eq!(decided(&sim, &hub(), &player), [taken], "taken at the claim's version");
    let told = sim.event_at(|e| {
        matches!(e, Event::Peer { from, message: PeerMessage::PlayerTaken { player: p, version } }
            if *from == hub() && *p == player && *version == claimed + 1)
    });
    assert!(told.is_some(), "the isle was told");
    assert_eq!(sim.servers_holding(&player), [hub()]);
    assert_eq!(sim.game_at(&isle()).counters().players_replaced_elsewhere, 1);
    assert_eq!(sim.game_at(&hub()).counters().players_taken, 1);

    // The source plays on and saves it (a transition's end, then the drain): every save lands.
    sim.travel("forest");
    sim.run_until("the harbor's players placed on the forest", secs(20), settled);
    assert!(stored(&sim, again) > claimed + 1, "the source's saves after the take landed");
    assert_eq!(sim.stored_player(&player).and_then(|s| s.holder.clone()), Some(hub()));
    assert_eq!(sim.store_conflicts(), 0, "the isle saved nothing of its copy after the take");
    assert_each_player_on_one_server(&mut sim);
}

// --- The property ------------------------------------------------------------------------------

/// Players of the property's runs.
const PLAYERS: [&str; 4] = ["p0", "p1", "p2", "p3"];

/// How long a client's stream of one level takes at most in the property's runs.
const CLIENT_STREAM: Duration = Duration::from_millis(400);

/// How long the churn goes on, then how long the fleet is left to settle.
const CHURN: Duration = Duration::from_secs(20);
const SETTLE: Duration = Duration::from_secs(30);

/// Every this long an operator moves the players: the hub's to the isle, then the isle's back
/// to the harbor, and so on.
const TRAVEL_EVERY: Duration = Duration::from_secs(3);

/// How long a late ready report is held back at most before it leaves.
const LATE_REPORT: Duration = Duration::from_millis(1_500);

/// How long a partition between the servers lasts at most.
const PARTITION: Duration = Duration::from_secs(5);

/// One change the script makes to the clients, the link between the servers, or the world.
#[derive(Debug, Clone)]
enum Churn {
    /// The client drops its links and relaunches at once, on the server it played on.
    Relaunch(usize),
    /// The client drops its links and comes back this many ms later, where it played.
    Disconnect(usize, u64),
    /// The client's next ready report (a join's or a transition's) is held back this many ms.
    LateReport(usize, u64),
    /// The link between the servers is cut for this many ms, then healed.
    Partition(u64),
    /// An operator's travel besides the schedule's: on the hub (to the isle, the forest or the
    /// harbor) or on the isle (to the harbor or the isle), by this index.
    Travel(bool, usize),
}

fn churn() -> impl Strategy<Value = Churn> {
    let late = u64::try_from(LATE_REPORT.as_millis()).unwrap_or(u64::MAX);
    let cut = u64::try_from(PARTITION.as_millis()).unwrap_or(u64::MAX);
    prop_oneof![
        3 => (0..PLAYERS.len()).prop_map(Churn::Relaunch),
        2 => ((0..PLAYERS.len()), 0..3_000u64).prop_map(|(i, back)| Churn::Disconnect(i, back)),
        2 => ((0..PLAYERS.len()), 0..=late).prop_map(|(i, ms)| Churn::LateReport(i, ms)),
        1 => (0..=cut).prop_map(Churn::Partition),
        1 => (any::<bool>(), 0..3usize).prop_map(|(on_hub, n)| Churn::Travel(on_hub, n)),
    ]
}

/// The node of an operator's travel on the hub (`on_hub`) or the isle, by `n`.
fn destination(on_hub: bool, n: usize) -> (ServerId, &'static str) {
    if on_hub {
        (hub(), ["isle", "forest", "harbor"][n % 3])
    } else {
        (isle(), ["harbor", "isle"][n % 2])
    }
}

/// What the script does next, at a simulated time.
#[derive(Debug)]
enum Action {
    Churn(Churn),
    /// A player that disconnected comes back, on this server.
    Return(usize, ServerId),
    /// A held ready report leaves.
    Release(HoldId),
    /// The partition ends.
    Heal,
    /// The operator's travel on this server to this node.
    Travel(ServerId, &'static str),
}

/// One travel between servers of a run: its server and id, when it started, and when it ended
/// if it did.
#[derive(Debug)]
struct Travel {
    server: ServerId,
    id: TransitionId,
    started: Duration,
    ended: Option<Duration>,
}

/// Watches, after every step, each server's transition: one seen in the phase `Moving` is a
/// travel between servers, from the step it was first seen in to the step it was gone.
#[derive(Default)]
struct TravelWatch {
    /// Each server's transition in flight at the last step, and when it was first seen.
    current: BTreeMap<ServerId, (TransitionId, Duration, bool)>,
    travels: Vec<Travel>,
}

impl TravelWatch {
    fn observe(&mut self, sim: &Sim) {
        let at = sim.elapsed();
        for server in sim.server_ids() {
            let game = sim.game_at(&server);
            let now = game.transition_id();
            let moving = game.phase_name() == "Moving";
            let seen = self.current.get(&server).copied();
            if let Some((id, started, travel)) = seen
                && now != Some(id)
            {
                if travel {
                    self.travels.push(Travel {
                        server: server.clone(),
                        id,
                        started,
                        ended: Some(at),
                    });
                }
                self.current.remove(&server);
            }
            if let Some(id) = now {
                let entry = self.current.entry(server.clone()).or_insert((id, at, false));
                entry.2 |= moving;
            }
        }
    }

    /// Every travel seen, those still in flight unended.
    fn travels(mut self) -> Vec<Travel> {
        for (server, (id, started, travel)) in self.current {
            if travel {
                self.travels.push(Travel { server, id, started, ended: None });
            }
        }
        self.travels
    }
}

/// Plays `events` (ms into the run, what happens) on a fleet seeded `seed` with `loss`, the
/// operator moving the players every [`TRAVEL_EVERY`], then leaves it to settle; returns the
/// run, every travel of it, and when each disturbance happened (a client dropped, a
/// partition began or ended, a late report left).
fn play(seed: u64, loss: f64, events: &[(u64, Churn)]) -> (Sim, Vec<Travel>, Vec<Duration>) {
    let mut sim = fleet_with(seed, |config, _| {
        config.net = lossy(loss);
        config.session.stream_time = (ms(50), CLIENT_STREAM);
    });
    let mut clients: Vec<Option<ClientId>> =
        PLAYERS.iter().map(|name| Some(sim.connect(name))).collect();
    let (mut schedule, mut next) = script(events, Action::Churn);
    let mut at = TRAVEL_EVERY;
    let mut there = true;
    while at < CHURN {
        let (server, node) = destination(there, 0);
        schedule.insert((at, next), Action::Travel(server, node));
        (next, at, there) = (next + 1, at + TRAVEL_EVERY, !there);
    }
    let mut disturbed = Vec::new();
    let mut watch = TravelWatch::default();
    while let Some(((at, _), action)) = schedule.pop_first() {
        sim.run_for_observing(at.saturating_sub(sim.elapsed()), |s| watch.observe(s));
        let now = sim.elapsed();
        let mut later = |after: u64, action: Action| {
            schedule.insert((now + ms(after), next), action);
            next += 1;
        };
        match action {
            Action::Churn(Churn::Relaunch(i)) => {
                if let Some(client) = clients[i] {
                    let server = sim.server_of(client).unwrap_or_else(hub);
                    sim.disconnect(client);
                    disturbed.push(now);
                    let options = ClientOptions { server, ..sim.client_options() };
                    clients[i] = Some(sim.connect_with(PLAYERS[i], options));
                }
            }
            Action::Churn(Churn::Disconnect(i, back)) => {
                if let Some(client) = clients[i].take() {
                    let server = sim.server_of(client).unwrap_or_else(hub);
                    sim.disconnect(client);
                    disturbed.push(now);
                    later(back, Action::Return(i, server));
                }
            }
            Action::Churn(Churn::LateReport(i, late)) => {
                if let Some(client) = clients[i] {
                    let ready = |m: &ClientMessage| {
                        matches!(
                            m,
                            ClientMessage::JoinReady { .. } | ClientMessage::TransitionReady { .. }
                        )
                    };
                    later(late, Action::Release(sim.hold_to_server(client, ready)));
                }
            }
            Action::Churn(Churn::Partition(lasting)) => {
                sim.cut_peer(&hub(), &isle());
                disturbed.push(now);
                later(lasting, Action::Heal);
            }
            Action::Churn(Churn::Travel(on_hub, n)) => {
                let (server, node) = destination(on_hub, n);
                sim.travel_at(&server, node);
            }
            Action::Return(i, server) => {
                let options = ClientOptions { server, ..sim.client_options() };
                clients[i] = Some(sim.connect_with(PLAYERS[i], options));
            }
            Action::Release(hold) => {
                sim.release(hold);
                disturbed.push(now);
            }
            Action::Heal => {
                sim.heal_peer(&hub(), &isle());
                disturbed.push(now);
            }
            Action::Travel(server, node) => sim.travel_at(&server, node),
        }
    }
    let rest = CHURN.saturating_sub(sim.elapsed()) + SETTLE;
    sim.run_for_observing(rest, |s| watch.observe(s));
    (sim, watch.travels(), disturbed)
}

/// The same seed gives the same run of two servers: every delivery on the clients' links and
/// the peer link, every store and directory answer, every input and output of both cores, at
/// the same simulated instant in the same order, through relaunches, late reports, a partition
/// and operators' travels; another seed gives another run.
#[test]
fn a_fleets_run_repeats_from_its_seed() {
    let events = [
        (2_500, Churn::LateReport(0, 900)),
        (3_200, Churn::Relaunch(1)),
        (6_100, Churn::Partition(3_500)),
        (9_050, Churn::Disconnect(2, 1_200)),
        (11_000, Churn::Travel(true, 1)),
    ];
    let trace = |seed| play(seed, 0.05, &events).0.trace().to_vec();
    let first = trace(91);
    assert!(first.len() > 1_000, "a run worth comparing: {} events", first.len());
    assert!(first == trace(91), "one seed, one run");
    assert!(first != trace(92), "another seed, another run");
}

proptest! {
    #![proptest_config(property_config(32))]

    /// docs/spec/travel.md V16 (and V5, V10): under any interleaving of relaunches, disconnects
    /// and returns, loss, and operators moving the players back and forth between the servers
    /// every few seconds (each move maybe refused `Busy` by a destination in a transition, or
    /// superseded by the next), every travel ends within its bounds: never past
    /// `game.transition_max_ms`, and within `fleet.resolve_timeout_ms` and one
    /// `fleet.seat_hold_ms` of its start or of the last drop of a client it moves (a seat
    /// waits that long for its redemption or its relaunch), answering time aside. Once the
    /// churn stops, every player whose client plays is placed on exactly one server, the one
    /// it plays on, and no server holds an older copy of a player than the store's.
    #[test]
    fn every_travel_ends_within_its_bound_under_churn(
        seed in any::<u64>(),
        loss in 0.0..0.1f64,
        events in proptest::collection::vec((0..CHURN.as_millis() as u64, churn()), 0..40),
    ) {
        let (mut sim, travels, disturbed) = play(seed, loss, &events);
        let rules = SimConfig::new(HUB, 0).rules;
        let hard = rules.transition_max;
        let quiet = rules.resolve_timeout + rules.seat_hold + secs(3);
        prop_assert!(!travels.is_empty(), "the operators moved the players");
        for t in &travels {
            let Some(ended) = t.ended else {
                prop_assert!(false, "travel {} of {} (started {:?}) never ended", t.id, t.server, t.started);
                continue;
            };
            let took = ended - t.started;
            prop_assert!(took <= hard, "travel {} of {} took {:?}", t.id, t.server, took);
            let last = disturbed.iter().copied().filter(|d| *d >= t.started && *d <= ended).max();
            let from = last.unwrap_or(t.started);
            prop_assert!(
                ended - from <= quiet,
                "travel {} of {} started {:?} ended {:?}, {:?} after its last disturbance; the trace ends:\n{}",
                t.id, t.server, t.started, ended, ended - from, sim.trace_text(80)
            );
        }
        prop_assert!(settled(&sim), "the fleet settled once the churn stopped");
        assert_each_player_on_one_server(&mut sim);
    }
}

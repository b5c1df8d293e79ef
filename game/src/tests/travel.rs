//! Travel between servers through two real cores (docs/spec/travel.md): a source `hub-1` on
//! `harbor` whose world marks `isle` remote, and a destination `isle-1` standing on `isle`.
//! [`Fleet`] plays both shells: it carries peer messages between the cores (or holds them, for
//! arrival orders), answers the directory, and keeps one store both share, with the
//! conditional writes of the real one. Clients act by hand: a moving player's client logs in at
//! the destination with the ticket its `TravelTo` named.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_protocol::fleet::{PeerMessage, SeatLoss};
use gatehouse_protocol::{
    ClientMessage, CloseCode, PlayerId, RejectReason, ServerId, ServerMessage, TransitionFailure,
    TransitionId,
};

use super::*;
use crate::interface::{HandoverOutcome, HandoverSide, TicketedSeat};
use crate::model::PlayerSave;

/// The source's world: the core world, with `isle` hosted by another server.
fn source_world() -> String {
    format!("{WORLD}\n[[node]]\nid = \"isle\"\nremote = true\n")
}

/// The destination's world: the core world standing on `isle`.
fn destination_world() -> String {
    let world = WORLD.replace("start_node = \"harbor\"", "start_node = \"isle\"");
    format!(
        "{world}\n[[node]]\nid = \"isle\"\nlevels = [{{ name = \"isle_shore\", stream_ms = 250 }}]\nspawn_points_register_ms = 50\n"
    )
}

fn hub() -> ServerId {
    ServerId::new("hub-1").unwrap()
}

fn isle() -> ServerId {
    ServerId::new("isle-1").unwrap()
}

/// Which core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Source,
    Destination,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Source => Side::Destination,
            Side::Destination => Side::Source,
        }
    }

    fn id(self) -> ServerId {
        match self {
            Side::Source => hub(),
            Side::Destination => isle(),
        }
    }
}

/// A `TravelTo` as the source's shell receives it.
#[derive(Debug, Clone)]
struct Sent {
    connection: ConnectionId,
    transition: TransitionId,
    version: u64,
    generation: u32,
}

/// Two cores and the shells between them.
struct Fleet {
    source: Harness,
    dest: Harness,
    /// Each core's log, carried up to here.
    cursors: [usize; 2],
    /// The store both share: each player's save.
    store: BTreeMap<PlayerId, PlayerSave>,
    /// What the directory answers.
    directory: Option<ServerId>,
    /// Whether peer messages wait in `held` for the test.
    hold_peer: bool,
    held: Vec<(Side, PeerMessage)>,
    /// Whether handoff saves wait in `held_saves` for the test.
    hold_saves: bool,
    held_saves: Vec<(PlayerSave, u64)>,
    /// Whether claims and recalls wait in `held_handovers` for the test.
    hold_handovers: bool,
    held_handovers: Vec<(Side, HandoverSide, PlayerSave, u64)>,
    /// Whether ordinary saves are written as the store worker writes them (rebased onto the
    /// writing side's own saves, a conflict past the other side's answered
    /// `Input::PlayerSaveConflicted`) instead of always on the newest version
    /// (docs/spec/travel.md V17).
    strict: bool,
    /// In a strict store, what each side's worker wrote of each player, consecutively:
    /// (low, latest), as `server/src/store/worker/job.rs` `Lineage`.
    lineages: BTreeMap<(usize, PlayerId), (u64, u64)>,
}

impl Fleet {
    fn new() -> Fleet {
        Fleet::with(rules())
    }

    fn with(rules: GameRules) -> Fleet {
        // Each names itself as the holder of what it writes (V17).
        let source_rules = GameRules { server: Some(hub()), ..rules.clone() };
        let source = Harness::build(&source_world(), source_rules, false);
        let dest_rules = GameRules { server: Some(isle()), ..rules };
        let dest = Harness::build(&destination_world(), dest_rules, false);
        let mut fleet = Fleet {
            source,
            dest,
            cursors: [0, 0],
            store: BTreeMap::new(),
            directory: Some(isle()),
            hold_peer: false,
            held: Vec::new(),
            hold_saves: false,
            held_saves: Vec::new(),
            hold_handovers: false,
            held_handovers: Vec::new(),
            strict: false,
            lineages: BTreeMap::new(),
        };
        fleet.pump();
        fleet.source.stream_node("harbor");
        fleet.dest.stream_node("isle");
        fleet.pump();
        fleet
    }

    fn side(&mut self, side: Side) -> &mut Harness {
        match side {
            Side::Source => &mut self.source,
            Side::Destination => &mut self.dest,
        }
    }

    /// Carries every output of both cores until neither has anything new.
    fn pump(&mut self) {
        loop {
            let mut carried = false;
            for (i, side) in [Side::Source, Side::Destination].into_iter().enumerate() {
                let from = self.cursors[i];
                let log = &self.side(side).log;
                let (new, len): (Vec<Output>, usize) = (log[from..].to_vec(), log.len());
                self.cursors[i] = len;
                for out in new {
                    carried = true;
                    self.carry(side, out);
                }
            }
            if !carried {
                break;
            }
        }
    }

    fn carry(&mut self, side: Side, out: Output) {
        match out {
            Output::LoadSession => self.side(side).answer_session(LoadOutcome::NotFound),
            Output::LoadPlayer { player, .. } => {
                let found = self.store.get(&player).cloned();
                if self.strict {
                    let seen = found.as_ref().map_or(0, |s| s.version);
                    let lineage = self.lineages.entry((side as usize, player.clone()));
                    let lineage = lineage.or_insert((seen, seen));
                    if lineage.1 != seen {
                        *lineage = (seen, seen);
                    }
                }
                let outcome = found.map_or(LoadOutcome::NotFound, LoadOutcome::Found);
                self.side(side).answer_load(player.as_str(), outcome);
            }
            Output::SavePlayer(save) if self.strict => self.write_strictly(side, save),
            Output::SavePlayers(saves) if self.strict => {
                for save in saves {
                    self.write_strictly(side, save);
                }
            }
            Output::SavePlayer(save) => {
                self.write(save);
            }
            Output::SavePlayers(saves) => {
                for save in saves {
                    self.write(save);
                }
            }
            Output::SaveHandoff { save, ticket } if self.hold_saves => {
                self.held_saves.push((save, ticket))
            }
            Output::SaveHandoff { save, ticket } => self.answer_save(save, ticket, true),
            Output::Handover { side: who, save, ticket } if self.hold_handovers => {
                self.held_handovers.push((side, who, save, ticket))
            }
            Output::Handover { save, ticket, .. } => self.decide(side, save, ticket),
            Output::Peer { message, .. } if self.hold_peer => {
                self.held.push((side.other(), message))
            }
            Output::Peer { message, .. } => {
                self.side(side.other()).input(Input::Peer { from: side.id(), message })
            }
            Output::FindDestination { transition, .. } => {
                let server = self.directory.clone();
                self.side(side).input(Input::DestinationFound { transition, server });
            }
            _ => {}
        }
    }

    /// An ordinary save, as the store worker writes one: based on the newest stored version.
    fn write(&mut self, save: PlayerSave) -> u64 {
        let version = self.store.get(&save.player).map_or(0, |s| s.version).max(save.version) + 1;
        self.store.insert(save.player.clone(), PlayerSave { version, ..save });
        version
    }

    /// An ordinary save as the store worker writes one (module `store::worker`): rebased onto
    /// what `side` wrote itself, refused when another side wrote since (answered
    /// `Input::PlayerSaveConflicted` with the version found).
    fn write_strictly(&mut self, side: Side, save: PlayerSave) {
        let key = (side as usize, save.player.clone());
        let mut base = save.version;
        if let Some(&(low, latest)) = self.lineages.get(&key)
            && low <= base
            && base < latest
        {
            base = latest;
        }
        let found = self.store.get(&save.player).map(|s| s.version);
        if found.unwrap_or(0) != base {
            let player = save.player;
            self.side(side).input(Input::PlayerSaveConflicted { player, found });
            return;
        }
        self.chain(key, base, base + 1);
        self.store.insert(save.player.clone(), PlayerSave { version: base + 1, ..save });
    }

    /// A strict store's lineage of `key` after a write that replaced `base` with `new`.
    fn chain(&mut self, key: (usize, PlayerId), base: u64, new: u64) {
        let lineage = match self.lineages.get(&key) {
            Some(&(low, latest)) if latest == base => (low, new),
            _ => (base, new),
        };
        self.lineages.insert(key, lineage);
    }

    fn answer_save(&mut self, save: PlayerSave, ticket: u64, acknowledged: bool) {
        let player = save.player.clone();
        let version = acknowledged.then(|| self.write(save));
        self.source.input(Input::HandoffSaved { player, ticket, version });
    }

    /// A claim or a recall: written only at its version.
    fn decide(&mut self, side: Side, save: PlayerSave, ticket: u64) {
        let player = save.player.clone();
        let stored = self.store.get(&player).map_or(0, |s| s.version);
        let outcome = if stored == save.version {
            let version = stored + 1;
            if self.strict {
                self.chain((side as usize, player.clone()), stored, version);
            }
            self.store.insert(player.clone(), PlayerSave { version, ..save });
            HandoverOutcome::Won { version }
        } else {
            HandoverOutcome::Lost
        };
        self.side(side).input(Input::HandoverDecided { player, ticket, outcome });
    }

    /// Delivers the held peer messages, oldest first.
    fn release_peer(&mut self) {
        self.hold_peer = false;
        for (to, message) in std::mem::take(&mut self.held) {
            self.side(to).input(Input::Peer { from: to.other().id(), message });
        }
        self.pump();
    }

    /// Places `names` on the source.
    fn residents(&mut self, names: &[&str]) -> Vec<ConnectionId> {
        let connections = names.iter().map(|n| {
            let c = self.source.login(n);
            self.pump();
            self.source.join_ready(c);
            self.source.ack(c);
            c
        });
        connections.collect()
    }

    /// An operator's travel to `isle` on the source.
    fn travel(&mut self) -> TransitionId {
        self.source.input(Input::Travel { node: node("isle") });
        let travel = self.source.transition();
        self.pump();
        travel
    }

    /// The newest `TravelTo` the source sent for `name`.
    fn sent(&self, name: &str) -> Option<Sent> {
        self.source.log.iter().rev().find_map(|o| match o {
            Output::TravelTo { connection, player, transition, version, generation, .. }
                if player.as_str() == name =>
            {
                Some(Sent {
                    connection: *connection,
                    transition: *transition,
                    version: *version,
                    generation: *generation,
                })
            }
            _ => None,
        })
    }

    /// `name`'s client presents its ticket at the destination: its connection there.
    fn redeem(&mut self, name: &str) -> ConnectionId {
        let sent = self.sent(name).expect("a TravelTo to follow");
        let seat = TicketedSeat {
            source: hub(),
            travel: sent.transition,
            version: sent.version,
            generation: sent.generation,
        };
        let connection = self.dest.connect();
        self.dest.input(Input::TravellerLogin { connection, player: pid(name), seat });
        self.pump();
        connection
    }

    /// `name`'s client follows its `TravelTo`: redeems, streams, acknowledges its pawn.
    fn arrive(&mut self, name: &str) -> ConnectionId {
        let c = self.redeem(name);
        self.dest.join_ready(c);
        self.pump();
        self.dest.ack(c);
        self.pump();
        c
    }
}

/// Whether `messages` hold one matching `f`.
fn has(messages: &[ServerMessage], f: impl Fn(&ServerMessage) -> bool) -> bool {
    messages.iter().any(f)
}

/// V1–V6: the source freezes and sends `TravelTo` instead of `ShowTransition`; the destination
/// places the traveller by a join that ends only once its claim committed; the source releases
/// the player only at `Placed`, closing it `Travelled`, and the travel ends.
#[test]
fn players_move_to_another_server_behind_one_loading_screen() {
    let mut f = Fleet::new();
    let [a, b] = f.residents(&["a", "b"])[..] else { unreachable!() };
    let travel = f.travel();
    for c in [a, b] {
        let got = f.source.received(c);
        assert!(has(
            &got,
            |m| matches!(m, ServerMessage::FreezeCharacters { transition_id } if *transition_id == travel)
        ));
        assert!(
            !has(&got, |m| matches!(m, ServerMessage::ShowTransition { .. })),
            "nothing streams at the source"
        );
    }
    let sent = f.sent("a").expect("a is sent on");
    assert_eq!((sent.connection, sent.transition, sent.generation), (a, travel, 1));
    assert_eq!(
        f.store[&pid("a")].version,
        sent.version,
        "its ticket names the handoff save's version"
    );
    let at_dest = f.arrive("a");
    let got = f.dest.received(at_dest);
    let end = got.iter().position(|m| matches!(m, ServerMessage::EndJoin { .. }));
    assert!(end.is_some(), "placed there: its screen drops at the destination's end");
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled), "released once placed");
    assert!(f.source.game.roster.player(&pid("a")).is_none());
    assert_eq!(f.source.pawns_of("a"), 0);
    assert!(f.source.game.transition_id().is_some(), "b is still moving");
    f.arrive("b");
    assert_eq!(f.source.closed(b), Some(CloseCode::Travelled));
    assert_eq!(f.source.game.transition_id(), None, "every moving player placed: the travel ended");
    assert_eq!(f.source.game.counters().players_travelled, 2);
    assert_eq!(f.dest.game.counters().travellers_placed, 2);
    // The boot transition, then the travel.
    assert_eq!(f.source.game.counters().transitions_completed, 2);
    assert_eq!(f.source.game.counters().transitions_failed, 0);
    assert_eq!(f.store[&pid("a")].version, sent.version + 1, "the claim wrote the next version");
}

/// V5: the traveller's join holds its screen until the claim committed, and its source hears
/// `Placed` only then.
#[test]
fn a_traveller_is_placed_only_once_its_claim_commits() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    f.travel();
    f.hold_handovers = true;
    let c = f.arrive("a");
    assert!(
        !has(&f.dest.received(c), |m| matches!(m, ServerMessage::EndJoin { .. })),
        "claim in flight"
    );
    assert_eq!(f.source.game.counters().players_travelled, 0);
    let (side, who, save, ticket) = f.held_handovers.pop().expect("a claim");
    assert_eq!((side, who), (Side::Destination, HandoverSide::Claim));
    f.decide(side, save, ticket);
    f.pump();
    assert!(has(&f.dest.received(c), |m| matches!(m, ServerMessage::EndJoin { .. })));
    assert_eq!(f.source.game.counters().players_travelled, 1);
}

/// V2: no seat is confirmed and no ticket issued before the handoff save is acknowledged; an
/// unacknowledged one sends the player back.
#[test]
fn no_ticket_before_the_handoff_save_is_acknowledged() {
    let mut f = Fleet::new();
    let [a, _] = f.residents(&["a", "b"])[..] else { unreachable!() };
    f.hold_saves = true;
    let travel = f.travel();
    assert_eq!(f.held_saves.len(), 2, "both handoff saves asked for");
    assert!(f.sent("a").is_none() && f.sent("b").is_none());
    let confirmed = f.dest.game.seats.len();
    assert_eq!(confirmed, 2, "seats granted, none confirmed");
    let (save_a, ticket_a) = f.held_saves.remove(0);
    f.answer_save(save_a, ticket_a, true);
    f.pump();
    assert!(f.sent("a").is_some(), "a's ticket once its save is acknowledged");
    let (save_b, ticket_b) = f.held_saves.remove(0);
    f.answer_save(save_b, ticket_b, false);
    f.pump();
    assert!(f.sent("b").is_none(), "never a ticket on an unacknowledged save");
    let failed = f.source.received(ConnectionId(2));
    assert!(has(
        &failed,
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, reason: TransitionFailure::DestinationUnavailable, .. } if *transition_id == travel)
    ));
    assert_eq!(f.source.closed(a), None);
}

/// V2, V4: the handoff save carries the player state, and the destination places the
/// traveller with it.
#[test]
fn the_handoff_save_carries_health_effects_kits_death_and_team() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    let team = f.source.player("a").team;
    f.source.kill("a");
    f.travel();
    let handoff = f.store[&pid("a")].handoff.clone().expect("a handoff state");
    assert_eq!(handoff.team, team);
    assert!(handoff.is_dead(), "death travels");
    assert!(handoff.kits.startup_granted, "its kit latches travel");
    f.redeem("a");
    let arrived = f.dest.player("a");
    assert!(arrived.is_dead(), "it arrives dead");
    assert_eq!(arrived.team, team);
    assert!(arrived.abilities.granted_kits().is_empty() || handoff.kits.startup_granted);
}

/// V6: until `Placed`, the source keeps the moving player, frozen, with its pawn.
#[test]
fn the_source_keeps_the_player_until_it_is_placed() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.travel();
    f.hold_peer = true;
    f.arrive("a");
    // The claim committed; `Placed` is held on the way.
    assert!(f.held.iter().any(|(_, m)| matches!(m, PeerMessage::Placed { .. })));
    assert!(f.source.game.roster.player(&pid("a")).is_some());
    assert_eq!(f.source.pawns_of("a"), 1);
    assert_eq!(f.source.closed(a), None);
    f.release_peer();
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled));
}

/// V2: a move's entry in `recent_transition_timings` counts the players it moved (none is left
/// on the source once every one is placed), and a move that sent its players back counts them
/// too.
#[test]
fn a_moves_timing_counts_the_players_it_moved() {
    let mut f = Fleet::new();
    f.residents(&["a", "b", "c"]);
    let travel = f.travel();
    for name in ["a", "b", "c"] {
        f.arrive(name);
    }
    assert_eq!(f.source.game.transition_id(), None, "the travel ended");
    let timings = f.source.game.snapshot().recent_transition_timings;
    let timing = timings.iter().find(|t| t.transition_id == travel).expect("its timing");
    assert_eq!(timing.players, 3, "the players it moved, not the none left here");

    let mut f = Fleet::new();
    f.residents(&["a", "b"]);
    f.directory = None;
    let travel = f.travel();
    let timings = f.source.game.snapshot().recent_transition_timings;
    let timing = timings.iter().find(|t| t.transition_id == travel).expect("its timing");
    assert_eq!(timing.players, 2, "the players it set out to move, sent back");
}

/// V7: a destination that no candidate grants sends everyone back
/// (`DestinationUnavailable`), and they follow a transition to the node the source stands on.
#[test]
fn a_travel_no_server_grants_sends_every_moving_player_back() {
    let mut f = Fleet::new();
    let [a, b] = f.residents(&["a", "b"])[..] else { unreachable!() };
    f.directory = None;
    let travel = f.travel();
    for c in [a, b] {
        let got = f.source.received(c);
        assert!(has(
            &got,
            |m| matches!(m, ServerMessage::TransitionFailed { transition_id, reason: TransitionFailure::DestinationUnavailable, .. } if *transition_id == travel)
        ));
    }
    let back = f.source.transition();
    assert!(back > travel, "they follow a transition to harbor");
    assert_eq!(f.source.game.counters().transitions_failed, 1, "it placed nobody");
    assert_eq!(f.source.game.counters().travellers_sent_back, 2);
    f.source.stream_node("harbor");
    for c in [a, b] {
        f.source.ready(c);
    }
    f.source.advance(Duration::from_millis(10));
    for c in [a, b] {
        f.source.ack(c);
    }
    assert!(f.source.ended(back), "placed again at the source");
    assert_eq!(f.source.game.transition.unavailable(), None);
}

/// V12: a candidate that refuses (here: full) is passed over, and a silent one after the peer
/// timeout; past the resolve bound everyone is sent back.
#[test]
fn a_silent_candidate_is_passed_over_and_the_resolve_bound_ends_the_search() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.hold_peer = true;
    let travel = f.travel();
    let asks = |f: &Fleet| {
        f.source.log.iter().filter(|o| matches!(o, Output::FindDestination { .. })).count()
    };
    assert_eq!(asks(&f), 1);
    f.source.advance(rules().peer_timeout - Duration::from_millis(1));
    f.pump();
    assert_eq!(asks(&f), 1, "not before the peer timeout");
    f.source.advance(Duration::from_millis(1));
    f.pump();
    let last = f.source.log.iter().rev().find_map(|o| match o {
        Output::FindDestination { asked, .. } => Some(asked.clone()),
        _ => None,
    });
    assert_eq!(last, Some(vec![isle()]), "the silent candidate is named as asked");
    // The directory names it again (it has no other): the travel gives up.
    assert!(has(
        &f.source.received(a),
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel)
    ));
}

/// V7, V16: a destination that refuses `Busy` (a transition of its own in flight) is asked
/// again a retry delay later, and grants once its transition ended; one still busy at the
/// resolve bound leaves the search to that bound.
#[test]
fn a_busy_destination_is_asked_again_within_the_resolve_bound() {
    let retry = rules().resolve_timeout / 10;
    let busy_answers = |f: &Fleet| {
        let busy = |o: &&Output| {
            matches!(o, Output::Peer { message: PeerMessage::SeatsRefused { reason, .. }, .. }
                if *reason == gatehouse_protocol::fleet::SeatRefusal::Busy)
        };
        f.dest.log.iter().filter(busy).count()
    };
    let failed = |f: &Fleet, a: ConnectionId, travel: TransitionId| {
        has(
            &f.source.received(a),
            |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel),
        )
    };

    // Busy, then free: the travel asks again and moves the player.
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.dest.input(Input::Travel { node: node("isle") });
    let own = f.dest.transition();
    f.pump();
    let travel = f.travel();
    assert_eq!(busy_answers(&f), 1, "refused: the destination is in a transition");
    assert!(!failed(&f, a, travel), "a busy destination is not given up at once");
    f.dest.stream_node("isle");
    f.dest.advance(Duration::from_millis(100));
    f.pump();
    assert!(f.dest.ended(own), "the destination's own transition ended");
    f.source.advance(retry - Duration::from_millis(1));
    f.pump();
    assert!(f.sent("a").is_none(), "not asked again before the retry delay");
    f.source.advance(Duration::from_millis(1));
    f.pump();
    assert_eq!(busy_answers(&f), 1, "asked again, and granted");
    assert!(f.sent("a").is_some(), "sent on");
    f.arrive("a");
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled));
    assert!(!failed(&f, a, travel));

    // Busy to the end: asked again and again, and the resolve bound ends the search.
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.dest.input(Input::Travel { node: node("isle") });
    f.pump();
    let travel = f.travel();
    for _ in 1..10 {
        f.source.advance(retry);
        f.pump();
    }
    f.source.advance(retry - Duration::from_millis(1));
    f.pump();
    assert_eq!(busy_answers(&f), 10, "asked again every retry delay while busy");
    assert!(!failed(&f, a, travel), "not before the resolve bound");
    f.source.advance(Duration::from_millis(1));
    f.pump();
    assert!(failed(&f, a, travel), "at the resolve bound");
    assert!(f.sent("a").is_none(), "never sent on");
}

/// V7: two servers each busy searching for seats on the other would each wait for the other to
/// its resolve bound. The one whose id sorts after the other's gives way: refused `Busy` by a
/// server whose own seats it refused `Busy` (in either order), it does not ask again and sends
/// its players back at once. The one whose id sorts first waits, asks again once the other's
/// transition ended, and its players move.
#[test]
fn in_a_mutual_travel_the_server_whose_id_sorts_after_gives_way_and_the_other_goes_ahead() {
    let retry = rules().resolve_timeout / 10;
    let theirs = PeerMessage::ReserveSeats {
        trn: TransitionId(77),
        node: node("harbor"),
        players: vec![pid("z")],
    };
    let refused_busy = |f: &Fleet| {
        f.source.log.iter().any(|o| {
            matches!(o, Output::Peer { message: PeerMessage::SeatsRefused { reason, .. }, .. }
                if *reason == gatehouse_protocol::fleet::SeatRefusal::Busy)
        })
    };
    let failed = |f: &Fleet, a: ConnectionId, travel: TransitionId| {
        has(
            &f.source.received(a),
            |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel),
        )
    };
    for theirs_first in [false, true] {
        // hub-1 sorts before isle-1: the source waits for the destination to give way (its
        // own transition, played by hand, ends).
        let mut f = Fleet::new();
        let [a] = f.residents(&["a"])[..] else { unreachable!() };
        f.dest.input(Input::Travel { node: node("isle") });
        let own = f.dest.transition();
        f.pump();
        let travel = if theirs_first {
            f.hold_peer = true;
            let travel = f.travel();
            f.source.input(Input::Peer { from: isle(), message: theirs.clone() });
            f.release_peer();
            travel
        } else {
            let travel = f.travel();
            f.source.input(Input::Peer { from: isle(), message: theirs.clone() });
            f.pump();
            travel
        };
        assert!(refused_busy(&f), "the source refused the destination Busy ({theirs_first})");
        assert!(!failed(&f, a, travel), "the server whose id sorts first waits ({theirs_first})");
        f.dest.stream_node("isle");
        f.dest.advance(Duration::from_millis(100));
        f.pump();
        assert!(f.dest.ended(own), "the other gave way");
        f.source.advance(retry);
        f.pump();
        assert!(f.sent("a").is_some(), "asked again, granted and sent on ({theirs_first})");
        f.arrive("a");
        assert_eq!(f.source.closed(a), Some(CloseCode::Travelled));

        // aa-1 sorts before hub-1: the source gives way at once.
        let aa = ServerId::new("aa-1").unwrap();
        let mut f = Fleet::new();
        let [a] = f.residents(&["a"])[..] else { unreachable!() };
        f.directory = Some(aa.clone());
        f.hold_peer = true;
        let travel = f.travel();
        // Its ReserveSeats went to aa-1, which answers by hand.
        f.held.clear();
        let refusal = PeerMessage::SeatsRefused {
            trn: travel,
            reason: gatehouse_protocol::fleet::SeatRefusal::Busy,
        };
        let order =
            if theirs_first { [theirs.clone(), refusal] } else { [refusal, theirs.clone()] };
        for message in order {
            f.source.input(Input::Peer { from: aa.clone(), message });
            f.pump();
        }
        assert!(refused_busy(&f), "the source refused aa-1 Busy ({theirs_first})");
        assert!(failed(&f, a, travel), "given way at once, not at a retry ({theirs_first})");
        assert!(f.sent("a").is_none());
    }
}

/// V7: the peer link lost after the tickets recalls every unplaced player
/// (`DestinationLost`); those already placed stay placed.
#[test]
fn a_destination_lost_mid_move_sends_the_unplaced_back_with_their_state() {
    let mut f = Fleet::new();
    let [a, b] = f.residents(&["a", "b"])[..] else { unreachable!() };
    let travel = f.travel();
    f.arrive("a");
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled));
    let version = f.store[&pid("b")].version;
    f.source.input(Input::PeerLost { server: isle() });
    f.pump();
    assert_eq!(f.store[&pid("b")].version, version + 1, "recalled at its handoff version");
    let recalled = &f.store[&pid("b")];
    assert!(recalled.handoff.is_none(), "a recall stores no handoff state");
    assert_eq!(recalled.node, Some(node("harbor")), "written where the source stands");
    assert_eq!(
        f.source.player("b").persistence,
        crate::players::Persistence::Loaded { version: version + 1 },
        "its saves chain from the recall"
    );
    let got = f.source.received(b);
    assert!(has(
        &got,
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, reason: TransitionFailure::DestinationLost, .. } if *transition_id == travel)
    ));
    assert!(f.source.game.transition_id() > Some(travel), "b follows a transition home");
    assert_eq!(f.source.game.counters().travellers_sent_back, 1);
    assert_eq!(f.source.game.counters().transitions_failed, 0, "it placed one: not a failure");
    // b's later ticket finds its seat given back (or, had that not arrived, its save taken
    // back): b is the source's.
    let c = f.redeem("b");
    assert!(matches!(f.dest.closed(c), Some(CloseCode::Rejected | CloseCode::Recalled)));
    assert!(f.dest.game.roster.player(&pid("b")).is_none());
}

/// V5: of a claim and a recall at the handoff version, the first wins; the claim first.
#[test]
fn a_claim_before_a_recall_places_the_player_at_the_destination() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.travel();
    f.hold_handovers = true;
    let c = f.arrive("a");
    f.source.input(Input::Peer {
        from: isle(),
        message: PeerMessage::SeatLost {
            trn: f.sent("a").unwrap().transition,
            player: pid("a"),
            reason: SeatLoss::HoldExpired,
        },
    });
    f.pump();
    assert_eq!(f.held_handovers.len(), 2, "a claim and a recall in flight");
    let claim = f.held_handovers.remove(0);
    let recall = f.held_handovers.remove(0);
    assert_eq!((claim.1, recall.1), (HandoverSide::Claim, HandoverSide::Recall));
    f.decide(claim.0, claim.2, claim.3);
    f.decide(recall.0, recall.2, recall.3);
    f.pump();
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled), "the recall lost: placed there");
    assert_eq!(f.dest.closed(c), None, "the destination holds it");
    assert_eq!(f.source.game.counters().transitions_failed, 0, "it counts as placed");
}

/// V5: of a claim and a recall at the handoff version, the first wins; the recall first.
#[test]
fn a_recall_before_a_claim_keeps_the_player_at_the_source() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.travel();
    f.hold_handovers = true;
    let c = f.arrive("a");
    f.source.input(Input::Peer {
        from: isle(),
        message: PeerMessage::SeatLost {
            trn: f.sent("a").unwrap().transition,
            player: pid("a"),
            reason: SeatLoss::HoldExpired,
        },
    });
    f.pump();
    let claim = f.held_handovers.remove(0);
    let recall = f.held_handovers.remove(0);
    f.decide(recall.0, recall.2, recall.3);
    f.decide(claim.0, claim.2, claim.3);
    f.pump();
    assert_eq!(f.dest.closed(c), Some(CloseCode::Recalled), "the claim lost: sent back");
    assert_eq!(f.source.closed(a), None, "the source holds it");
    assert!(has(&f.source.received(a), |m| matches!(
        m,
        ServerMessage::TransitionFailed { reason: TransitionFailure::DestinationLost, .. }
    )));
    assert_eq!(f.dest.game.counters().travellers_placed, 0);
    assert_eq!(f.source.game.counters().transitions_failed, 1, "the travel placed nobody");
}

/// V9: a replayed ticket is refused `TicketUsed` and the connection that redeemed it stays; a
/// ticket naming no seat here is `TicketStale`.
#[test]
fn a_replayed_ticket_is_refused_and_changes_nothing() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    f.travel();
    let first = f.redeem("a");
    let replay = f.redeem("a");
    assert!(has(&f.dest.received(replay), |m| matches!(
        m,
        ServerMessage::Rejected { reason: RejectReason::TicketUsed, .. }
    )));
    assert_eq!(f.dest.closed(replay), Some(CloseCode::Rejected));
    assert_eq!(f.dest.closed(first), None, "the redeeming connection stays");
    assert_eq!(f.dest.game.roster.connection_of(&pid("a")), Some(first));
    let stale = f.dest.connect();
    let seat = TicketedSeat { source: hub(), travel: TransitionId(999), version: 1, generation: 1 };
    f.dest.input(Input::TravellerLogin { connection: stale, player: pid("b"), seat });
    assert!(has(&f.dest.received(stale), |m| matches!(
        m,
        ServerMessage::Rejected { reason: RejectReason::TicketStale, .. }
    )));
    assert_eq!(f.dest.game.counters().tickets_refused, 2);
}

/// V9: a ticket may reach the destination before its `SeatConfirmed`: both orders redeem.
#[test]
fn a_ticket_redeems_its_seat_whichever_comes_first_of_it_and_its_confirmation() {
    for confirmation_first in [true, false] {
        let mut f = Fleet::new();
        f.residents(&["a"]);
        f.hold_peer = true;
        f.source.input(Input::Travel { node: node("isle") });
        f.pump();
        // Deliver the seat request and its grant, hold the rest.
        while f.sent("a").is_none() {
            let (to, message) = f.held.remove(0);
            f.side(to).input(Input::Peer { from: to.other().id(), message });
            f.pump();
        }
        let confirmation =
            f.held.iter().position(|(_, m)| matches!(m, PeerMessage::SeatConfirmed { .. }));
        let (to, confirmation) = f.held.remove(confirmation.expect("the confirmation held"));
        if confirmation_first {
            f.dest.input(Input::Peer { from: to.other().id(), message: confirmation.clone() });
        }
        let c = f.redeem("a");
        if !confirmation_first {
            f.dest.input(Input::Peer { from: to.other().id(), message: confirmation });
        }
        assert_eq!(f.dest.closed(c), None, "redeemed (confirmation first: {confirmation_first})");
        assert!(f.dest.game.roster.player(&pid("a")).is_some());
    }
}

/// V4: the traveller is placed only on the save at its ticket's version: a newer save means
/// its source took it back.
#[test]
fn a_traveller_is_placed_only_on_the_tickets_version() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    f.travel();
    let mut save = f.store[&pid("a")].clone();
    save.version += 1;
    f.store.insert(pid("a"), save);
    f.hold_peer = true;
    let c = f.redeem("a");
    assert_eq!(f.dest.closed(c), Some(CloseCode::Recalled));
    let lost = f
        .held
        .iter()
        .any(|(_, m)| matches!(m, PeerMessage::SeatLost { reason: SeatLoss::NotPlaced, .. }));
    assert!(lost, "a newer save: its source took it back, not a failed save");
    assert!(f.dest.game.roster.player(&pid("a")).is_none());
    assert!(f.dest.game.seats.len() == 0, "its seat is gone");
}

/// V11: a newer travel after the tickets recalls the unplaced, who follow the newer one
/// without a `TransitionFailed`.
#[test]
fn a_supersede_after_the_tickets_recalls_the_unplaced() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    let version = f.store[&pid("a")].version;
    f.source.input(Input::Travel { node: node("forest") });
    f.pump();
    assert_eq!(f.store[&pid("a")].version, version + 1, "recalled");
    assert_eq!(
        f.source.player("a").persistence,
        crate::players::Persistence::Loaded { version: version + 1 },
        "a recall outliving its travel still hands the player back"
    );
    assert!(f.source.transition() > travel);
    assert!(!has(&f.source.received(a), |m| matches!(m, ServerMessage::TransitionFailed { .. })));
    let c = f.redeem("a");
    assert_eq!(f.dest.closed(c), Some(CloseCode::Recalled), "the save is the source's again");
}

/// V10: a player who leaves before its ticket gives its seat back.
#[test]
fn a_player_who_leaves_before_its_ticket_releases_its_seat() {
    let mut f = Fleet::new();
    let [a, _] = f.residents(&["a", "b"])[..] else { unreachable!() };
    f.hold_saves = true;
    f.travel();
    assert_eq!(f.dest.game.seats.len(), 2);
    f.source.disconnect(a);
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 1, "its seat released");
}

/// V10: a traveller that disconnects before its placement keeps its seat for a relaunch, which
/// takes it with its session token.
#[test]
fn a_relaunch_takes_the_held_seat_by_session_token() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    f.travel();
    let c = f.redeem("a");
    f.dest.disconnect(c);
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 1, "held for a relaunch");
    let relaunch = f.dest.login("a");
    f.pump();
    assert_eq!(f.dest.closed(relaunch), None);
    f.dest.join_ready(relaunch);
    f.dest.ack(relaunch);
    f.pump();
    assert_eq!(f.dest.game.counters().travellers_placed, 1);
    assert_eq!(f.source.game.counters().players_travelled, 1);
}

/// V4: nobody at the destination is frozen for a traveller.
#[test]
fn the_destinations_own_players_are_not_frozen_for_a_traveller() {
    let mut f = Fleet::new();
    let local = f.dest.login("local");
    f.pump();
    f.dest.join_ready(local);
    f.dest.ack(local);
    let before = f.dest.received(local).len();
    f.residents(&["a"]);
    f.travel();
    f.arrive("a");
    let after = f.dest.received(local);
    assert!(!after[before..].iter().any(|m| matches!(
        m,
        ServerMessage::FreezeCharacters { .. } | ServerMessage::ShowTransition { .. }
    )));
}

/// V15: `TravelAbandoned` from a ticketed client recalls it.
#[test]
fn an_abandoned_travel_recalls_the_player() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    assert_eq!(f.dest.game.seats.len(), 1);
    f.source.send(a, ClientMessage::TravelAbandoned { transition_id: travel });
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 0, "its seat there is given back once it is recalled");
    assert!(has(&f.source.received(a), |m| matches!(
        m,
        ServerMessage::TransitionFailed { reason: TransitionFailure::DestinationLost, .. }
    )));
    assert_eq!(f.source.game.counters().travellers_sent_back, 1);
}

/// V9: a moving player relaunching at the source while its seat is held is sent on again with
/// the next generation, which voids its older ticket.
#[test]
fn a_relaunch_at_the_source_is_sent_on_with_the_next_generation() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    let first = f.sent("a").expect("a first ticket");
    f.source.disconnect(a);
    f.pump();
    let relaunch = f.source.login("a");
    f.pump();
    let again = f.sent("a").expect("sent on again");
    assert_eq!(
        (again.connection, again.transition, again.generation),
        (relaunch, travel, first.generation + 1)
    );
    assert_eq!(again.version, first.version);
    assert!(
        matches!(f.source.player("a").persistence, crate::players::Persistence::Handover { .. }),
        "its save stays the handoff's"
    );
    // The older ticket is stale now; the newer one redeems.
    let stale = f.dest.connect();
    let seat = TicketedSeat {
        source: hub(),
        travel,
        version: first.version,
        generation: first.generation,
    };
    f.dest.input(Input::TravellerLogin { connection: stale, player: pid("a"), seat });
    f.pump();
    assert!(has(&f.dest.received(stale), |m| matches!(
        m,
        ServerMessage::Rejected { reason: RejectReason::TicketStale, .. }
    )));
    f.arrive("a");
    assert_eq!(f.source.closed(relaunch), Some(CloseCode::Travelled));
}

/// V2: a travel that moves nobody asks no server and ends as completed, not failed.
#[test]
fn a_travel_that_moves_nobody_asks_no_server_and_completes() {
    let mut f = Fleet::new();
    let completed = f.source.game.counters().transitions_completed;
    f.source.input(Input::Travel { node: node("isle") });
    f.pump();
    assert!(!f.source.log.iter().any(|o| matches!(o, Output::FindDestination { .. })));
    assert_eq!(f.source.game.transition_id(), None);
    assert_eq!(f.source.game.counters().transitions_completed, completed + 1);
    assert_eq!(f.source.game.counters().transitions_failed, 0);
}

/// Answers naming another travel, a save or a claim not asked for, change nothing and are
/// counted stale.
#[test]
fn stale_answers_of_a_travel_change_nothing() {
    let mut f = Fleet::new();
    f.residents(&["a"]);
    f.hold_saves = true;
    let travel = f.travel();
    let before = f.source.game.counters().stale_ignored;
    let old = TransitionId(travel.0 - 1);
    f.source.input(Input::DestinationFound { transition: old, server: Some(isle()) });
    assert_eq!(f.source.game.counters().stale_ignored, before + 1, "another travel's answer");
    let (save, ticket) = f.held_saves[0].clone();
    f.source.input(Input::HandoffSaved {
        player: pid("a"),
        ticket: ticket + 100,
        version: Some(9),
    });
    f.source.input(Input::HandoffSaved { player: pid("zz"), ticket, version: Some(9) });
    assert_eq!(f.source.game.counters().stale_ignored, before + 3, "a save not asked for");
    assert!(f.sent("a").is_none());
    let outcome = HandoverOutcome::Won { version: 3 };
    f.dest.input(Input::HandoverDecided { player: pid("a"), ticket: 77, outcome });
    assert_eq!(f.dest.game.counters().stale_ignored, 1, "a claim never asked");
    f.answer_save(save, ticket, true);
    f.pump();
    assert!(f.sent("a").is_some(), "the right answer still counts");
    assert_eq!(f.source.game.counters().saves_requested, 1, "its handoff save");
}

/// V7: a recall the store does not confirm sends the player back anyway, counted.
#[test]
fn a_recall_the_store_does_not_confirm_sends_the_player_back_anyway() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    let version = f.store[&pid("a")].version;
    f.hold_handovers = true;
    f.source.input(Input::PeerLost { server: isle() });
    f.pump();
    let (side, _, save, ticket) = f.held_handovers.pop().expect("a recall");
    assert_eq!(side, Side::Source);
    let player = save.player.clone();
    f.source.input(Input::HandoverDecided { player, ticket, outcome: HandoverOutcome::Failed });
    f.pump();
    assert_eq!(f.source.game.counters().recalls_unconfirmed, 1);
    assert!(has(
        &f.source.received(a),
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel)
    ));
    assert_eq!(
        f.source.player("a").persistence,
        crate::players::Persistence::Loaded { version },
        "its saves are based on the handoff save again"
    );
}

/// V12: past the resolve bound the search ends, whether a candidate is being asked or the
/// directory has not answered.
#[test]
fn the_resolve_bound_ends_the_search_whatever_it_waits_for() {
    for directory_answers in [true, false] {
        let rules = GameRules { peer_timeout: Duration::from_secs(4), ..rules() };
        let mut f = Fleet::with(rules.clone());
        let [a] = f.residents(&["a"])[..] else { unreachable!() };
        f.hold_peer = true;
        if !directory_answers {
            f.directory = None;
            f.source.input(Input::Travel { node: node("isle") });
            // The question stays unanswered: not pumped.
        } else {
            f.travel();
        }
        let travel = f.source.log.iter().rev().find_map(|o| match o {
            Output::FindDestination { transition, .. } => Some(*transition),
            _ => None,
        });
        let failed = |f: &Fleet| {
            has(
                &f.source.received(a),
                |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if Some(*transition_id) == travel),
            )
        };
        f.source.advance(rules.resolve_timeout - Duration::from_millis(1));
        assert!(!failed(&f), "not before the bound (directory answers: {directory_answers})");
        f.source.advance(Duration::from_millis(1));
        assert!(failed(&f), "at the bound (directory answers: {directory_answers})");
    }
}

/// V14: more players than one message names are asked for in several, and the saves wait for
/// every grant.
#[test]
fn seats_for_more_players_than_one_message_names_all_wait_for_every_grant() {
    let rules = GameRules { max_players: 1100, ..rules() };
    let mut f = Fleet::with(rules);
    let players = gatehouse_protocol::fleet::MAX_PLAYERS_PER_PEER_MESSAGE + 1;
    for i in 0..players {
        f.source.login(&format!("p{i:04}"));
    }
    f.pump();
    f.hold_peer = true;
    f.travel();
    assert_eq!(f.held.len(), 2, "two ReserveSeats");
    for (to, message) in std::mem::take(&mut f.held) {
        f.side(to).input(Input::Peer { from: to.other().id(), message });
    }
    f.pump();
    assert_eq!(f.held.len(), 2, "two grants");
    let (_, granted) = f.held.remove(0);
    f.source.input(Input::Peer { from: isle(), message: granted });
    f.pump();
    assert!(
        !f.source.log.iter().any(|o| matches!(o, Output::SaveHandoff { .. })),
        "one grant of two"
    );
    f.release_peer();
    let saves = f.source.log.iter().filter(|o| matches!(o, Output::SaveHandoff { .. })).count();
    assert_eq!(saves, players, "every grant in: every handoff save");
}

/// V11: a player whose recall outlives a superseded travel is released by a placement that
/// wins, and is told nothing of the old travel when its recall loses.
#[test]
fn a_placement_after_a_supersede_releases_the_player_whose_recall_lost() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    f.hold_handovers = true;
    f.arrive("a");
    // The claim is held; the source loses the link, recalls with a reason, then supersedes.
    f.source.input(Input::PeerLost { server: isle() });
    f.source.input(Input::Travel { node: node("forest") });
    f.pump();
    let claim = f.held_handovers.iter().position(|h| h.1 == HandoverSide::Claim).unwrap();
    let claim = f.held_handovers.remove(claim);
    f.decide(claim.0, claim.2, claim.3);
    f.pump();
    assert_eq!(f.source.closed(a), Some(CloseCode::Travelled), "placed there: released");
    let recall = f.held_handovers.remove(0);
    f.decide(recall.0, recall.2, recall.3);
    f.pump();
    assert!(!has(
        &f.source.received(a),
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel)
    ));
}

/// V9: a newer ticket's login replaces the connection that redeemed an older one, and a
/// ticket of an older generation than the seat's is stale.
#[test]
fn a_newer_ticket_replaces_the_connection_that_redeemed_an_older_one() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.travel();
    let first = f.redeem("a");
    f.source.disconnect(a);
    f.pump();
    f.source.login("a");
    f.pump();
    let second = f.redeem("a");
    assert_eq!(f.dest.closed(first), Some(CloseCode::Replaced));
    assert_eq!(f.dest.closed(second), None);
    assert_eq!(f.dest.game.roster.connection_of(&pid("a")), Some(second));
}

/// V4: a save older than the ticket's version, or one without its handoff state, loses the
/// seat (`SaveUnavailable`) and sends the traveller back.
#[test]
fn a_traveller_whose_save_is_older_or_bare_loses_its_seat() {
    for older in [true, false] {
        let mut f = Fleet::new();
        f.residents(&["a"]);
        f.travel();
        let mut save = f.store[&pid("a")].clone();
        match older {
            true => save.version -= 1,
            false => save.handoff = None,
        }
        f.store.insert(pid("a"), save);
        f.hold_peer = true;
        let c = f.redeem("a");
        assert_eq!(f.dest.closed(c), Some(CloseCode::Recalled), "older: {older}");
        let lost = f.held.iter().any(|(_, m)| {
            matches!(m, PeerMessage::SeatLost { reason: SeatLoss::SaveUnavailable, .. })
        });
        assert!(lost, "its source hears why (older: {older})");
    }
}

/// V10, V16: a traveller that disconnects before its placement and never comes back loses its
/// seat one hold after the disconnect, and its source takes it back.
#[test]
fn a_traveller_gone_before_its_placement_loses_its_seat_one_hold_later() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    let c = f.redeem("a");
    // Past a hold, short of its join's client-ready timeout.
    f.dest.advance(rules().seat_hold * 2);
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 1, "held while its traveller is connected");
    f.dest.disconnect(c);
    f.pump();
    f.dest.advance(rules().seat_hold - Duration::from_millis(1));
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 1, "held for a relaunch");
    f.dest.advance(Duration::from_millis(1));
    f.pump();
    assert_eq!(f.dest.game.seats.len(), 0, "lost at its hold");
    assert!(has(
        &f.source.received(a),
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel)
    ));
}

/// V7: a travel whose recall lost to a claim placed that player, so it is no failure even
/// when every other moving player came back.
#[test]
fn a_recall_lost_to_a_claim_counts_its_player_placed() {
    let mut f = Fleet::new();
    f.residents(&["a", "b"]);
    f.travel();
    f.hold_handovers = true;
    f.arrive("a");
    f.source.input(Input::PeerLost { server: isle() });
    f.pump();
    let failed = f.source.game.counters().transitions_failed;
    // a's claim first (its Placed held on the way), then both recalls: a's loses, b's wins.
    f.hold_peer = true;
    let claim = f.held_handovers.iter().position(|h| h.1 == HandoverSide::Claim).unwrap();
    let claim = f.held_handovers.remove(claim);
    f.decide(claim.0, claim.2, claim.3);
    for (side, _, save, ticket) in std::mem::take(&mut f.held_handovers) {
        f.decide(side, save, ticket);
    }
    f.pump();
    assert_eq!(f.source.game.counters().players_travelled, 1, "a's recall lost: placed there");
    assert_eq!(f.source.game.counters().travellers_sent_back, 1, "b came back");
    assert_eq!(f.source.game.counters().transitions_failed, failed, "a was placed: no failure");
}

/// V12: a candidate asked late, whose silence would outlast the resolve bound, does not hold
/// the search past it.
#[test]
fn a_candidate_asked_late_does_not_hold_the_search_past_the_resolve_bound() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    f.hold_peer = true;
    let travel = f.travel();
    // The first candidate is silent; the directory's next answer comes 1.5 s later.
    f.source.advance(rules().peer_timeout + Duration::from_millis(1500));
    let ghost = ServerId::new("ghost-1").unwrap();
    f.source.input(Input::DestinationFound { transition: travel, server: Some(ghost) });
    let failed = |f: &Fleet| {
        has(
            &f.source.received(a),
            |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel),
        )
    };
    let left = rules().resolve_timeout - rules().peer_timeout - Duration::from_millis(1500);
    f.source.advance(left - Duration::from_millis(1));
    assert!(!failed(&f), "not before the resolve bound");
    f.source.advance(Duration::from_millis(1));
    assert!(failed(&f), "at the resolve bound, though the candidate's own has not passed");
    let released = f.source.log.iter().any(|o| {
        matches!(o, Output::Peer { to, message: PeerMessage::ReleaseSeats { .. } } if to.as_str() == "ghost-1")
    });
    assert!(released, "what the late candidate may have granted is given back");
}

/// V11: a recall that outlives its travel tells the client nothing of the old travel when it
/// wins: the client follows the newer transition.
#[test]
fn a_recall_outliving_its_travel_tells_the_client_nothing_when_it_wins() {
    let mut f = Fleet::new();
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let travel = f.travel();
    f.hold_handovers = true;
    f.source.input(Input::PeerLost { server: isle() });
    f.source.input(Input::Travel { node: node("forest") });
    f.pump();
    let (side, _, save, ticket) = f.held_handovers.pop().expect("the recall");
    f.decide(side, save, ticket);
    f.pump();
    assert!(!has(
        &f.source.received(a),
        |m| matches!(m, ServerMessage::TransitionFailed { transition_id, .. } if *transition_id == travel)
    ));
    assert_eq!(f.source.game.counters().travellers_sent_back, 1);
}

/// A handoff save answered when no travel is in flight is stale.
#[test]
fn a_handoff_save_answered_with_no_travel_in_flight_is_stale() {
    let mut f = Fleet::new();
    let before = f.source.game.counters().stale_ignored;
    f.source.input(Input::HandoffSaved { player: pid("a"), ticket: 1, version: Some(1) });
    assert_eq!(f.source.game.counters().stale_ignored, before + 1);
}

// ---- One server plays a player at a time (V17) ----

/// `name`'s save at `version`, written by `holder`.
fn held_save(name: &str, version: u64, holder: ServerId) -> PlayerSave {
    PlayerSave {
        player: pid(name),
        node: None,
        preset: crate::model::Preset::ReadOnly { name: "Vanguard".into() },
        inventory: vec![],
        equipment: vec![],
        version,
        handoff: None,
        holder: Some(holder),
    }
}

/// Every save of `name` in `h`'s log from output `from` on, single or batched.
fn saves_of(h: &Harness, name: &str, from: usize) -> Vec<PlayerSave> {
    let saves = h.log[from..].iter().flat_map(|o| match o {
        Output::SavePlayer(save) => vec![save.clone()],
        Output::SavePlayers(saves) => saves.clone(),
        _ => vec![],
    });
    saves.filter(|s| s.player.as_str() == name).collect()
}

/// A strict fleet in which `a` plays on the source, its save at version 3 held by the source.
fn a_playing_on_the_source() -> (Fleet, ConnectionId) {
    let mut f = Fleet::new();
    f.strict = true;
    f.store.insert(pid("a"), held_save("a", 3, hub()));
    let [a] = f.residents(&["a"])[..] else { unreachable!() };
    let takes = f.source.position(|o| matches!(o, Output::Handover { .. }));
    assert_eq!(takes, None, "a save this server holds is not taken");
    (f, a)
}

/// V17: a session-token login at another server takes the player (a write at exactly the
/// version it loaded, naming itself), so the older server's next save of it conflicts: that
/// server closes the player `Replaced` and drops it, and no save of it is written after the
/// take. The peer message is held: the store's fence alone acts.
#[test]
fn a_login_elsewhere_takes_the_player_and_fences_the_older_server() {
    let (mut f, a) = a_playing_on_the_source();
    f.hold_peer = true;
    let b = f.dest.login("a");
    f.pump();
    let take = f.dest.log.iter().find_map(|o| match o {
        Output::Handover { side: HandoverSide::Take, save, .. } => Some(save.clone()),
        _ => None,
    });
    let take = take.expect("the login takes the player");
    assert_eq!((take.version, take.holder.clone()), (3, Some(isle())), "at the version loaded");
    assert_eq!(f.store[&pid("a")].version, 4);
    assert_eq!(f.store[&pid("a")].holder, Some(isle()), "the store names the taker");
    assert_eq!(f.dest.game.counters().players_taken, 1);
    assert!(f.source.closed(a).is_none(), "the source has not heard yet");
    // The source's next save of it conflicts: it is fenced.
    f.source.game.drain();
    f.source.drain();
    f.pump();
    assert_eq!(f.source.closed(a), Some(CloseCode::Replaced));
    assert!(f.source.game.roster.player(&pid("a")).is_none(), "dropped");
    assert_eq!(f.source.game.counters().players_replaced_elsewhere, 1);
    assert_eq!(f.store[&pid("a")].version, 4, "no save of the older copy after the take");
    assert_eq!(f.store[&pid("a")].holder, Some(isle()));
    assert!(f.dest.closed(b).is_none(), "the newer login plays on");
    // The message, late, finds nothing more to do.
    f.release_peer();
    assert_eq!(f.source.game.counters().players_replaced_elsewhere, 1);
}

/// V17: a save conflict for a player this server plays means another server wrote it since:
/// the player is closed `Replaced`, and its state is neither saved on the way out nor kept for
/// a relaunch (S9).
#[test]
fn a_save_conflict_closes_the_player_replaced_and_keeps_nothing() {
    let mut h = Harness::booted_holding_loads();
    let a = h.login("a");
    h.answer_load("a", LoadOutcome::Found(held_save("a", 7, hub())));
    h.join_ready(a);
    h.ack(a);
    let before = h.log.len();
    h.input(Input::PlayerSaveConflicted { player: pid("a"), found: Some(8) });
    assert_eq!(h.closed(a), Some(CloseCode::Replaced));
    assert!(h.game.roster.player(&pid("a")).is_none());
    assert!(saves_of(&h, "a", before).is_empty(), "the fenced copy is never saved");
    assert_eq!(h.game.counters().players_replaced_elsewhere, 1);
    h.login("a");
    assert_eq!(h.game.counters().player_states_restored, 0, "nothing kept for a relaunch");
}

/// V17: a conflict answering a save of an older connection (the departure save of the
/// connection a relaunch replaced, which met a version no newer than the relaunch then loaded)
/// leaves the newer connection playing; a conflict past what the newer one loaded closes it.
#[test]
fn a_conflict_for_an_older_connection_does_not_close_the_newer() {
    let mut h = Harness::booted_holding_loads();
    let older = h.login("a");
    h.answer_load("a", LoadOutcome::Found(held_save("a", 7, hub())));
    let newer = h.login("a");
    assert_eq!(h.closed(older), Some(CloseCode::Replaced), "the relaunch replaced it");
    // Another server wrote 8 and 9 meanwhile: the older connection's save met 8, and the
    // newer connection loaded 9.
    h.answer_load("a", LoadOutcome::Found(held_save("a", 9, isle())));
    let stale = h.game.counters().stale_ignored;
    h.input(Input::PlayerSaveConflicted { player: pid("a"), found: Some(8) });
    assert_eq!(h.closed(newer), None, "the older connection's conflict");
    assert_eq!(h.game.counters().stale_ignored, stale + 1, "counted stale");
    assert!(h.game.roster.player(&pid("a")).is_some());
    assert_eq!(h.game.counters().players_replaced_elsewhere, 0);
    h.input(Input::PlayerSaveConflicted { player: pid("a"), found: Some(10) });
    assert_eq!(h.closed(newer), Some(CloseCode::Replaced), "its own save's conflict");
}

/// V17: the taker tells the server it took the player from (`PlayerTaken`, with the version
/// its take wrote): that server closes its older copy `Replaced` at once and drops it, without
/// saving it.
#[test]
fn a_taken_message_closes_the_player_on_the_older_server() {
    let (mut f, a) = a_playing_on_the_source();
    let before = f.source.log.len();
    let b = f.dest.login("a");
    f.pump();
    assert!(
        f.dest.log.iter().any(|o| matches!(
            o,
            Output::Peer { to, message: PeerMessage::PlayerTaken { player, version: 4 } }
                if *to == hub() && player.as_str() == "a"
        )),
        "the source is told the version the take wrote"
    );
    assert_eq!(f.source.closed(a), Some(CloseCode::Replaced));
    assert!(f.source.game.roster.player(&pid("a")).is_none());
    assert!(saves_of(&f.source, "a", before).is_empty(), "dropped unsaved");
    assert_eq!(f.source.game.counters().players_replaced_elsewhere, 1);
    assert!(f.dest.closed(b).is_none());
    assert_eq!(f.store[&pid("a")].holder, Some(isle()));
}

/// V17: a `PlayerTaken` older than the copy a server plays (a late or repeated message about a
/// take this server has since taken back) changes nothing.
#[test]
fn a_stale_or_duplicate_taken_message_does_nothing() {
    let (mut f, a) = a_playing_on_the_source();
    let b = f.dest.login("a");
    f.pump();
    assert_eq!(f.source.closed(a), Some(CloseCode::Replaced), "taken at 4");
    // The player comes back to the source, which takes it back at 5.
    let again = f.source.login("a");
    f.pump();
    assert_eq!(f.dest.closed(b), Some(CloseCode::Replaced), "taken back at 5");
    assert_eq!(f.store[&pid("a")].version, 5);
    let fenced = f.source.game.counters().players_replaced_elsewhere;
    let stale = f.source.game.counters().stale_ignored;
    for version in [4, 5] {
        let message = PeerMessage::PlayerTaken { player: pid("a"), version };
        f.source.input(Input::Peer { from: isle(), message });
        f.pump();
    }
    assert_eq!(f.source.closed(again), None, "a stale message closes nothing");
    assert!(f.source.game.roster.player(&pid("a")).is_some());
    assert_eq!(f.source.game.counters().players_replaced_elsewhere, fenced);
    assert_eq!(f.source.game.counters().stale_ignored, stale + 2, "each counted stale");
}

/// V17: a take lost to a save that landed after the login's load (the older server's last save,
/// late) does not cost the newer login: its save is loaded again, with that save's progress, and
/// taken at the version found; the older server is then fenced.
#[test]
fn a_take_lost_to_a_late_save_loads_again_and_takes_the_newer_version() {
    let (mut f, a) = a_playing_on_the_source();
    f.hold_handovers = true;
    let b = f.dest.login("a");
    f.pump();
    let (side, who, take, ticket) = f.held_handovers.pop().expect("the take");
    assert_eq!((side, who, take.version), (Side::Destination, HandoverSide::Take, 3));
    // The source's save lands first (its drain, say), at 4.
    f.source.game.drain();
    f.source.drain();
    f.pump();
    assert_eq!(f.store[&pid("a")].holder, Some(hub()));
    f.hold_handovers = false;
    f.decide(side, take, ticket);
    f.pump();
    assert_eq!(f.dest.closed(b), None, "the newer login plays on");
    assert_eq!(f.store[&pid("a")].version, 5, "taken again at the version it found");
    assert_eq!(f.store[&pid("a")].holder, Some(isle()));
    assert_eq!(f.source.closed(a), Some(CloseCode::Replaced));
    assert_eq!(f.dest.game.counters().players_taken, 1);
}

/// V17: a login whose every take is lost (each after a fresh load) is fenced after the bound,
/// so a login never takes for ever.
#[test]
fn a_login_whose_takes_keep_losing_is_fenced_after_its_attempts() {
    let (mut f, _) = a_playing_on_the_source();
    f.hold_handovers = true;
    f.hold_peer = true;
    let b = f.dest.login("a");
    f.pump();
    for attempt in 1..=crate::presence::TAKE_ATTEMPTS {
        assert_eq!(f.dest.closed(b), None, "before the answer to take {attempt}");
        let (_, who, save, ticket) = f.held_handovers.pop().expect("a take");
        assert_eq!(who, HandoverSide::Take);
        let lost =
            Input::HandoverDecided { player: save.player, ticket, outcome: HandoverOutcome::Lost };
        f.dest.input(lost);
        f.pump();
    }
    assert_eq!(f.dest.closed(b), Some(CloseCode::Replaced));
    assert!(f.held_handovers.is_empty(), "no take after the last");
}

/// A booted core of `server` in a fleet (its loads held): it names itself as the holder of
/// what it writes, and takes what another server holds (V17).
fn fleet_member_holding_loads(server: ServerId) -> Harness {
    let mut h = Harness::build(WORLD, GameRules { server: Some(server), ..rules() }, false);
    h.answer_session(LoadOutcome::NotFound);
    h.stream_node("harbor");
    h
}

/// Every take in `h`'s log, in order: what it writes and its ticket.
fn takes(h: &Harness) -> Vec<(PlayerSave, u64)> {
    let takes = h.log.iter().filter_map(|o| match o {
        Output::Handover { side: HandoverSide::Take, save, ticket } => {
            Some((save.clone(), *ticket))
        }
        _ => None,
    });
    takes.collect()
}

/// V17: a take of a connection a relaunch has since replaced, lost, is stale: it neither loads
/// the player again for the newer connection nor fences it, whose own take goes on.
#[test]
fn a_take_lost_after_its_login_was_replaced_changes_nothing() {
    let mut h = fleet_member_holding_loads(hub());
    let older = h.login("a");
    h.answer_load("a", LoadOutcome::Found(held_save("a", 3, isle())));
    let newer = h.login("a");
    assert_eq!(h.closed(older), Some(CloseCode::Replaced), "the relaunch replaced it");
    // The other server wrote it again meanwhile: the newer login takes it at 4.
    h.answer_load("a", LoadOutcome::Found(held_save("a", 4, isle())));
    let [(first, older_take), (second, newer_take)] = &takes(&h)[..] else {
        panic!("a take of each login: {:?}", takes(&h))
    };
    assert_eq!((first.version, second.version), (3, 4));
    let stale = h.game.counters().stale_ignored;
    let lost = HandoverOutcome::Lost;
    h.input(Input::HandoverDecided { player: pid("a"), ticket: *older_take, outcome: lost });
    assert_eq!(h.game.counters().stale_ignored, stale + 1);
    assert_eq!(h.closed(newer), None, "the newer login is not fenced");
    assert!(h.loads.is_empty(), "nor loaded again");
    assert_eq!(h.game.counters().players_replaced_elsewhere, 0);
    let won = HandoverOutcome::Won { version: 5 };
    h.input(Input::HandoverDecided { player: pid("a"), ticket: *newer_take, outcome: won });
    assert_eq!(h.game.counters().players_taken, 1);
    assert!(h.game.takes.is_idle(), "every take settled");
}

/// V17: a login that leaves while it takes (its take lost, its save loading again) leaves no
/// count of its takes behind: what the takes keep is bounded by the logins taking now.
#[test]
fn a_login_that_leaves_while_it_takes_leaves_nothing_in_the_takes() {
    let mut h = fleet_member_holding_loads(hub());
    let c = h.login("a");
    h.answer_load("a", LoadOutcome::Found(held_save("a", 3, isle())));
    let [(_, ticket)] = takes(&h)[..] else { panic!("one take") };
    let lost = HandoverOutcome::Lost;
    h.input(Input::HandoverDecided { player: pid("a"), ticket, outcome: lost });
    assert_eq!(h.loads.len(), 1, "loading again");
    h.disconnect(c);
    h.answer_load("a", LoadOutcome::Found(held_save("a", 4, isle())));
    assert_eq!(takes(&h).len(), 1, "no take for a login gone");
    assert!(h.game.takes.is_idle());
}

/// V17 and V5: a session-token login at the destination while the player moves there (its
/// seat held, before or after its handoff save) takes nothing and is never saved, so the move's
/// claim wins: the traveller's ticket login replaces that copy and is placed, and the source
/// releases the player `Travelled`. The player ends on one server, the destination's.
#[test]
fn a_login_at_the_destination_during_the_move_there_leaves_the_move_to_its_claim() {
    for before_the_handoff_save in [true, false] {
        let (mut f, a) = a_playing_on_the_source();
        f.hold_saves = before_the_handoff_save;
        f.travel();
        let early = f.dest.login("a");
        f.pump();
        if before_the_handoff_save {
            let (save, ticket) = f.held_saves.remove(0);
            f.hold_saves = false;
            f.answer_save(save, ticket, true);
            f.pump();
        }
        let takes =
            f.dest.position(|o| matches!(o, Output::Handover { side: HandoverSide::Take, .. }));
        assert_eq!(takes, None, "no take of a player moving here ({before_the_handoff_save})");
        f.arrive("a");
        assert_eq!(f.dest.closed(early), Some(CloseCode::Replaced), "the traveller replaced it");
        assert_eq!(f.source.closed(a), Some(CloseCode::Travelled), "placed at the destination");
        assert_eq!(f.store[&pid("a")].holder, Some(isle()), "the claim won");
        assert_eq!(f.dest.game.counters().travellers_placed, 1);
    }
}

/// V17: a take lost, then the load again failing: the login is fenced, not left playing on a
/// failed load's defaults (an empty inventory, the default preset) in place of what it had.
#[test]
fn a_failed_load_after_a_lost_take_fences_the_login_instead_of_wiping_its_state() {
    let mut h = fleet_member_holding_loads(hub());
    let c = h.login("a");
    let mut save = held_save("a", 3, isle());
    let lantern = crate::model::InventoryItem { item: "lantern".into(), count: 1 };
    save.inventory = vec![lantern.clone()];
    h.answer_load("a", LoadOutcome::Found(save));
    assert_eq!(h.player("a").inventory, vec![lantern]);
    let [(_, ticket)] = takes(&h)[..] else { panic!("one take") };
    h.input(Input::HandoverDecided { player: pid("a"), ticket, outcome: HandoverOutcome::Lost });
    assert_eq!(h.loads.len(), 1, "loading again");
    h.answer_load("a", LoadOutcome::Failed("the store is down".into()));
    assert_eq!(h.closed(c), Some(CloseCode::Replaced), "fenced, not played on defaults");
    assert!(h.game.takes.is_idle());
    assert_eq!(h.game.counters().load_failures, 1);
}

/// V17: a save conflict for a player not playing here with its save loaded (gone, or still
/// loading) is stale: nothing is closed.
#[test]
fn a_save_conflict_for_a_player_not_playing_here_is_stale() {
    let mut h = fleet_member_holding_loads(hub());
    let a = h.login("a");
    let stale = h.game.counters().stale_ignored;
    h.input(Input::PlayerSaveConflicted { player: pid("a"), found: Some(8) });
    h.input(Input::PlayerSaveConflicted { player: pid("nobody"), found: Some(8) });
    assert_eq!(h.game.counters().stale_ignored, stale + 2);
    assert_eq!(h.closed(a), None, "a player loading is not fenced");
    assert_eq!(h.game.counters().players_replaced_elsewhere, 0);
}

/// V17: `PlayerTaken` for a player that left this server drops the state kept for its
/// relaunch (it played elsewhere since), and only that one: a relaunch here starts from the
/// save, not from what it left here before.
#[test]
fn a_player_taken_after_it_left_is_not_restored_from_what_it_left() {
    let mut f = Fleet::new();
    f.strict = true;
    f.store.insert(pid("a"), held_save("a", 3, hub()));
    let [x, a] = f.residents(&["x", "a"])[..] else { unreachable!() };
    f.source.disconnect(x);
    f.source.disconnect(a);
    f.pump();
    assert_eq!(f.source.game.session.kept(), (vec![pid("x"), pid("a")], 2));
    f.dest.login("a");
    f.pump();
    assert_eq!(f.dest.game.counters().players_taken, 1, "taken from the source");
    assert_eq!(f.source.game.session.kept(), (vec![pid("x")], 1), "only a's state goes");
    f.source.login("a");
    f.pump();
    assert_eq!(f.source.game.counters().player_states_restored, 0);
    f.source.login("x");
    assert_eq!(f.source.game.counters().player_states_restored, 1, "x's state stays kept");
}

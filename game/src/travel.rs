//! Travel between servers (docs/spec/travel.md): the peer link's messages dispatched to the
//! destination's seat book and to the source's travel, the source's steps, and the timers of
//! both. The destination's travellers (their logins, loads and claims) are in `inbound.rs`.
//!
//! The source's travel, as the pass and the inputs drive it (`outbound.rs` holds where each
//! moving player stands):
//!
//! 1. a transition whose node is remote freezes as any, then, instead of streaming, asks the
//!    directory for a candidate ([`Output::FindDestination`]) and the candidate for a seat per
//!    moving player, all or none; a refusal or `peer_timeout` of silence asks the next, within
//!    `resolve_timeout`, else every moving player is sent back (`DestinationUnavailable`); a
//!    candidate that refused `Busy` is asked again a retry delay after the directory named no
//!    other, until `resolve_timeout`;
//! 2. with every seat granted, each moving player's handoff save is written
//!    ([`Output::SaveHandoff`]); once the store acknowledged its version `v`, the seat is
//!    confirmed (`SeatConfirmed`) and the client sent `TravelTo` ([`Output::TravelTo`]); from
//!    then on nothing but a claim or a recall writes the player (`Persistence::Handover`);
//! 3. `Placed` releases a moving player: its pawn destroyed, its state dropped, closed
//!    `Travelled`; a lost seat, a lost link or the client's `TravelAbandoned` recalls a ticketed
//!    one ([`Output::Handover`]) and sends it back (`TransitionFailed { DestinationLost }`);
//! 4. once every moving player is released or sent back, the travel ends, and the players still
//!    here (sent back, or logged in meanwhile) follow a transition to the node this server
//!    stands on, which it never left.

use std::time::{Duration, Instant};

use gatehouse_protocol::fleet::{MAX_PLAYERS_PER_PEER_MESSAGE, PeerMessage, SeatLoss, SeatRefusal};
use gatehouse_protocol::{
    CloseCode, NodeId, PlayerId, ServerId, ServerMessage, TransitionFailure, TransitionId,
};

use super::outbound::{Asking, Mover, Recall, Stage};
use super::persistence;
use super::players::Persistence;
use super::seats::SeatKey;
use super::timers::Timer;
use super::transition::Destination;
use super::{Departure, Game, HandoverOutcome, HandoverSide, Output};

/// The seat generation a first ticket names.
const FIRST_GENERATION: u32 = 1;

/// The retry delay of a candidate that refused `Busy` is the resolve bound over this: it is
/// asked again that long after the directory named no other, so a few times within the bound
/// (docs/spec/travel.md V7, V16).
const BUSY_RETRIES_PER_RESOLVE: u32 = 10;

impl Game {
    /// One message of the peer link from `from`.
    pub(crate) fn handle_peer(&mut self, now: Instant, from: &ServerId, message: PeerMessage) {
        match message {
            PeerMessage::ReserveSeats { trn, node, players } => {
                self.reserve_seats(now, from, trn, node, &players)
            }
            PeerMessage::SeatConfirmed { trn, player, version, generation } => {
                let key = SeatKey { source: from.clone(), travel: trn, player };
                if !self.seats.confirm(&key, version, generation, now, self.rules.seat_hold) {
                    // Lost already (its hold passed, or released): the source recalls it.
                    self.seat_lost(key, SeatLoss::HoldExpired);
                }
            }
            PeerMessage::ReleaseSeats { trn, players } => {
                for (key, holder) in self.seats.release(from, trn, &players) {
                    // A traveller here whose source no longer moves it goes back there.
                    if let Some(connection) = holder {
                        self.recall_traveller(
                            now,
                            connection,
                            &key.player,
                            "its source released its seat",
                        );
                    }
                }
            }
            PeerMessage::SeatsGranted { trn, hold_ms } => {
                self.seats_granted(now, from, trn, hold_ms)
            }
            PeerMessage::SeatsRefused { trn, reason } => {
                let busy = reason == SeatRefusal::Busy;
                self.candidate_refused(now, from, trn, reason.as_str(), busy)
            }
            PeerMessage::Placed { trn, player } => self.mover_placed(now, from, trn, &player),
            PeerMessage::SeatLost { trn, player, reason } => {
                self.mover_seat_lost(from, trn, &player, reason)
            }
            PeerMessage::PlayerTaken { player, version } => {
                self.handle_player_taken(now, from, &player, version)
            }
            // The link's own: the shell's.
            PeerMessage::Hello { .. } | PeerMessage::Welcome { .. } => {}
        }
    }

    /// `ReserveSeats` from `from`: granted all or none (docs/spec/travel.md V12).
    fn reserve_seats(
        &mut self,
        now: Instant,
        from: &ServerId,
        trn: TransitionId,
        node: NodeId,
        players: &[PlayerId],
    ) {
        // The link refuses a longer list before it comes here; a shorter bound on what a peer
        // can make this server keep is the room it has.
        let room = self.rules.max_players.saturating_sub(self.roster.len());
        let busy = self.transition.current().is_some();
        let hosted = self.session.node().clone();
        let hold = self.rules.seat_hold;
        let answer =
            match self.seats.reserve(from, trn, &node, players, &hosted, busy, room, now, hold) {
                Ok(replaced) => {
                    for older in replaced {
                        self.seat_lost(older, SeatLoss::NotPlaced);
                    }
                    let hold_ms = u32::try_from(hold.as_millis()).unwrap_or(u32::MAX);
                    tracing::info!(source = %from, travel = trn.0, %node,
                        seats = players.len(), "seats granted");
                    PeerMessage::SeatsGranted { trn, hold_ms }
                }
                Err(reason) => {
                    tracing::info!(source = %from, travel = trn.0, %node,
                        seats = players.len(), reason = reason.as_str(), "seats refused");
                    PeerMessage::SeatsRefused { trn, reason }
                }
            };
        let given_up =
            matches!(answer, PeerMessage::SeatsRefused { reason: SeatRefusal::Busy, .. })
                && self.turned_away(from);
        self.out.push(Output::Peer { to: from.clone(), message: answer });
        if given_up {
            // Each would wait for the other to its bound: this travel gives up, as the other's
            // does on this refusal.
            let detail = format!("{from} is busy moving players here: a mutual travel");
            self.send_back_all(TransitionFailure::DestinationUnavailable, &detail);
        }
    }

    /// Notes that this server refused `from`'s seats `Busy` during its own travel's search,
    /// when it is the one that gives way to `from` in a mutual travel ([`Game::gives_way_to`]).
    /// If `from` refused this travel `Busy` too, the travel is mutual (docs/spec/travel.md V7):
    /// `from` is not asked again; returns whether the travel then has nothing left to wait for.
    /// The server that does not give way keeps asking `from`, which gives up its own travel.
    fn turned_away(&mut self, from: &ServerId) -> bool {
        if !self.gives_way_to(from) {
            return false;
        }
        let Some(travel) = self.outbound.current_mut() else { return false };
        let Stage::Resolving { asking, busy, retry, turned_away, .. } = &mut travel.stage else {
            return false;
        };
        if !turned_away.contains(from) {
            turned_away.push(from.clone());
        }
        let Some(at) = busy.iter().position(|s| s == from) else { return false };
        busy.remove(at);
        asking.is_none() && busy.is_empty() && retry.is_some()
    }

    /// Whether this server gives way to `other` in a mutual travel (each busy searching for
    /// seats on the other): the one whose `fleet.server_id` sorts after the other's gives its
    /// travel up, the other waits for it within its resolve bound, so one of the two goes
    /// ahead (docs/spec/travel.md V7).
    fn gives_way_to(&self, other: &ServerId) -> bool {
        self.rules.server.as_ref().is_none_or(|me| me > other)
    }

    /// The seat timer came due: every seat past its hold is lost.
    pub(crate) fn handle_seat_holds(&mut self, now: Instant) {
        for key in self.seats.expire(now) {
            self.seat_lost(key, SeatLoss::HoldExpired);
        }
    }

    /// Tells a seat's source it is lost.
    pub(crate) fn seat_lost(&mut self, key: SeatKey, reason: SeatLoss) {
        tracing::info!(source = %key.source, travel = key.travel.0, player = %key.player,
            reason = reason.as_str(), "seat lost");
        let message = PeerMessage::SeatLost { trn: key.travel, player: key.player, reason };
        self.out.push(Output::Peer { to: key.source, message });
    }

    /// Arms the seat timer at the earliest seat deadline.
    pub(crate) fn rearm_seat_timer(&mut self) {
        self.timers.arm(Timer::SeatHold, self.seats.next_deadline());
    }

    /// Arms the source's travel timer at its candidate's silence or its resolve bound.
    pub(crate) fn rearm_outbound_timer(&mut self) {
        self.timers.arm(Timer::Outbound, self.outbound.next_deadline());
    }

    // ---- the source ----

    /// Step 1 of the pass resolved a remote node: the transition moves its players to another
    /// server (docs/spec/travel.md V2). The moving players are those it waits for now whose
    /// save loaded (a player whose load failed is never saved, so it cannot be handed off: it
    /// stays, and follows the transition that ends the travel).
    pub(crate) fn begin_move(&mut self, now: Instant, id: TransitionId, node: NodeId) {
        self.transition.resolve_remote(node.clone(), now);
        let movers: Vec<PlayerId> = self
            .roster
            .players()
            .filter(|p| matches!(p.persistence, Persistence::Loaded { .. }))
            .filter(|p| !self.transition.is_set_aside(&p.id))
            .map(|p| p.id.clone())
            .collect();
        let seats = movers.len();
        tracing::info!(%node, moving = seats, "the node is another server's: finding seats there");
        self.outbound.start(id, node.clone(), movers, now, self.rules.resolve_timeout);
        if seats > 0 {
            self.out.push(Output::FindDestination {
                transition: id,
                node,
                seats,
                asked: Vec::new(),
            });
        }
    }

    /// The directory answered: ask `server` for every seat, or send everyone back.
    pub(crate) fn handle_destination_found(
        &mut self,
        now: Instant,
        transition: TransitionId,
        server: Option<ServerId>,
    ) {
        let peer_timeout = self.rules.peer_timeout;
        let retry_delay = self.rules.resolve_timeout / BUSY_RETRIES_PER_RESOLVE;
        let Some(travel) = self.outbound.travel_mut(transition) else {
            self.out.counters.stale_ignored += 1;
            return;
        };
        let Stage::Resolving { asked, asking: asking @ None, busy, retry: retry @ None, .. } =
            &mut travel.stage
        else {
            return;
        };
        let Some(server) = server.filter(|s| !asked.contains(s)) else {
            if !busy.is_empty() {
                // No other candidate: those that were busy are asked again shortly, within the
                // resolve bound (the travel timer).
                tracing::info!(busy = busy.len(), "no other candidate: asking the busy again");
                *retry = Some(now + retry_delay);
                return;
            }
            let detail = format!(
                "no server of the fleet grants {} seats on {}",
                travel.movers.len(),
                travel.node
            );
            self.send_back_all(TransitionFailure::DestinationUnavailable, &detail);
            return;
        };
        let players: Vec<PlayerId> = travel.movers.keys().cloned().collect();
        let chunks: Vec<Vec<PlayerId>> =
            players.chunks(MAX_PLAYERS_PER_PEER_MESSAGE).map(<[PlayerId]>::to_vec).collect();
        *asking = Some(Asking {
            server: server.clone(),
            requests: chunks.len(),
            granted: 0,
            deadline: now + peer_timeout,
        });
        let (trn, node) = (travel.id, travel.node.clone());
        tracing::info!(destination = %server, seats = players.len(), "asking for seats");
        for players in chunks {
            let message = PeerMessage::ReserveSeats { trn, node: node.clone(), players };
            self.out.push(Output::Peer { to: server.clone(), message });
        }
    }

    /// `SeatsGranted` from `from`: once every request is granted, the moving players' handoff
    /// saves are written (V2: seats first, so a refused travel costs no save).
    fn seats_granted(&mut self, now: Instant, from: &ServerId, trn: TransitionId, hold_ms: u32) {
        let Some(travel) = self.outbound.travel_mut(trn) else { return };
        let Stage::Resolving { asking: Some(asking), .. } = &mut travel.stage else { return };
        if asking.server != *from {
            return;
        }
        asking.granted += 1;
        if asking.granted < asking.requests {
            return;
        }
        let hold = Duration::from_millis(u64::from(hold_ms));
        travel.stage = Stage::Seated { server: from.clone(), hold };
        let node = travel.node.clone();
        let waiting: Vec<PlayerId> = travel.movers.keys().cloned().collect();
        tracing::info!(destination = %from, seats = waiting.len(), "every seat granted; saving");
        for player in waiting {
            let holder = self.rules.server.as_ref();
            let save = persistence::player_save(&self.roster, &player, Some(node.clone()), holder);
            let handoff = self.roster.player(&player).map(|p| p.handoff(now));
            let (Some(mut save), Some(handoff)) = (save, handoff) else {
                // Its save cannot be written (it left, or its load failed meanwhile).
                self.send_back(
                    &player,
                    TransitionFailure::DestinationUnavailable,
                    "its save cannot be handed off",
                );
                continue;
            };
            save.handoff = Some(Box::new(handoff));
            let ticket = self.roster.allocate_ticket();
            self.out.counters.saves_requested += 1;
            self.out.push(Output::SaveHandoff { save: save.clone(), ticket });
            if let Some(travel) = self.outbound.current_mut() {
                travel.movers.insert(player, Mover::Saving { ticket, save });
            }
        }
    }

    /// A candidate refused the seats (or was silent, or its link died): release what it
    /// granted, and ask the directory for the next, within the resolve bound. One that refused
    /// because it was `busy` is kept to be asked again once no other is left.
    fn candidate_refused(
        &mut self,
        now: Instant,
        from: &ServerId,
        trn: TransitionId,
        why: &str,
        was_busy: bool,
    ) {
        let Some(travel) = self.outbound.travel_mut(trn) else { return };
        let Stage::Resolving { asked, asking, busy, turned_away, deadline, .. } = &mut travel.stage
        else {
            return;
        };
        if asking.as_ref().is_none_or(|a| a.server != *from) {
            return;
        }
        *asking = None;
        asked.push(from.clone());
        // Busy moving players here, which this server refused and gives way to: a mutual
        // travel, not waited for (the other waits for this one to give up).
        if was_busy && !busy.contains(from) && !turned_away.contains(from) {
            busy.push(from.clone());
        }
        let (asked, deadline) = (asked.clone(), *deadline);
        let players: Vec<PlayerId> = travel.movers.keys().cloned().collect();
        let node = travel.node.clone();
        tracing::info!(candidate = %from, reason = why, "candidate refused the seats");
        self.release_seats(from, trn, players.clone());
        if now >= deadline {
            let detail = format!(
                "no server granted the seats within fleet.resolve_timeout_ms ({} asked)",
                asked.len()
            );
            self.send_back_all(TransitionFailure::DestinationUnavailable, &detail);
            return;
        }
        let seats = players.len();
        self.out.push(Output::FindDestination { transition: trn, node, seats, asked });
    }

    /// The travel timer: a silent candidate counts as refusing; past the resolve bound,
    /// everyone is sent back; at the retry, the candidates that were busy are asked again.
    pub(crate) fn handle_outbound_timer(&mut self, now: Instant) {
        let Some(travel) = self.outbound.travel() else { return };
        let Stage::Resolving { asking, deadline, retry, .. } = &travel.stage else { return };
        let trn = travel.id;
        if let Some(asking) = asking.as_ref().filter(|a| a.deadline <= now) {
            let server = asking.server.clone();
            self.candidate_refused(now, &server, trn, "silent for fleet.peer_timeout_ms", false);
        } else if *deadline <= now {
            let detail = "no server granted the seats within fleet.resolve_timeout_ms";
            self.send_back_all(TransitionFailure::DestinationUnavailable, detail);
        } else if retry.is_some_and(|r| r <= now) {
            self.ask_busy_again(trn);
        }
    }

    /// The retry of the candidates that refused `Busy`: they are no longer counted as asked,
    /// and the directory is asked again (docs/spec/travel.md V7).
    fn ask_busy_again(&mut self, trn: TransitionId) {
        let Some(travel) = self.outbound.travel_mut(trn) else { return };
        let Stage::Resolving { asked, busy, retry, .. } = &mut travel.stage else { return };
        asked.retain(|s| !busy.contains(s));
        tracing::info!(travel = trn.0, candidates = busy.len(), "asking the busy candidates again");
        busy.clear();
        *retry = None;
        let asked = asked.clone();
        let (node, seats) = (travel.node.clone(), travel.movers.len());
        self.out.push(Output::FindDestination { transition: trn, node, seats, asked });
    }

    /// The handoff save of `player` under `ticket` was answered: at its version the seat is
    /// confirmed and the client sent on; unacknowledged, the player is sent back.
    pub(crate) fn handle_handoff_saved(
        &mut self,
        player: &PlayerId,
        ticket: u64,
        version: Option<u64>,
    ) {
        let Some(travel) = self.outbound.current_mut() else {
            self.out.counters.stale_ignored += 1;
            return;
        };
        let Some(Mover::Saving { ticket: awaited, save }) = travel.movers.get(player) else {
            self.out.counters.stale_ignored += 1;
            return;
        };
        if *awaited != ticket {
            self.out.counters.stale_ignored += 1;
            return;
        }
        let Stage::Seated { server, hold } = travel.stage.clone() else { return };
        let (trn, node) = (travel.id, travel.node.clone());
        let Some(version) = version else {
            self.send_back(
                player,
                TransitionFailure::DestinationUnavailable,
                "its handoff save was not acknowledged",
            );
            self.release_seats(&server, trn, vec![player.clone()]);
            return;
        };
        let save = crate::model::PlayerSave { version, ..save.clone() };
        travel
            .movers
            .insert(player.clone(), Mover::Ticketed { save, generation: FIRST_GENERATION });
        let Some(mut p) = self.roster.player_mut(player) else { return };
        // From now on only a claim or a recall writes it (V5).
        p.persistence = Persistence::Handover { version };
        let connection = p.connection;
        drop(p);
        let confirmed = PeerMessage::SeatConfirmed {
            trn,
            player: player.clone(),
            version,
            generation: FIRST_GENERATION,
        };
        self.out.push(Output::Peer { to: server.clone(), message: confirmed });
        tracing::debug!(%player, version, destination = %server, "handed off; sent on");
        self.out.push(Output::TravelTo {
            connection,
            player: player.clone(),
            transition: trn,
            node,
            server,
            version,
            generation: FIRST_GENERATION,
            valid: hold,
        });
    }

    /// `Placed` from `from`: the destination claimed `player`; the source lets it go (V6).
    fn mover_placed(
        &mut self,
        now: Instant,
        from: &ServerId,
        trn: TransitionId,
        player: &PlayerId,
    ) {
        let ours = self.outbound.travel_mut(trn).filter(|t| t.destination() == Some(from));
        // A recall in flight loses to the claim that placed it.
        let ticketed = ours.is_some_and(|t| {
            let ticketed =
                matches!(t.movers.get(player), Some(Mover::Ticketed { .. } | Mover::Recalling(_)));
            if ticketed {
                t.movers.remove(player);
                t.placed += 1;
            }
            ticketed
        });
        let recalled = !ticketed && self.outbound.take_recall_of(player, trn).is_some();
        if ticketed || recalled {
            self.release_mover(now, player);
        }
    }

    /// `SeatLost` from `from`: before its ticket the player is sent back; after it, recalled.
    fn mover_seat_lost(
        &mut self,
        from: &ServerId,
        trn: TransitionId,
        player: &PlayerId,
        reason: SeatLoss,
    ) {
        let Some(travel) = self.outbound.travel_mut(trn) else { return };
        if travel.peer() != Some(from) {
            return;
        }
        let detail = format!("its seat at {from} was lost: {}", reason.as_str());
        match travel.movers.get(player) {
            Some(Mover::Ticketed { .. }) => {
                self.recall(player, Some(TransitionFailure::DestinationLost), &detail)
            }
            Some(_) => self.send_back(player, TransitionFailure::DestinationUnavailable, &detail),
            None => {}
        }
    }

    /// The peer link to `server` is gone: a candidate being asked counts as refusing, and a
    /// destination's moving players come back (V7).
    pub(crate) fn handle_peer_lost(&mut self, now: Instant, server: &ServerId) {
        let Some(travel) = self.outbound.travel() else { return };
        if travel.peer() != Some(server) {
            return;
        }
        let trn = travel.id;
        if travel.destination().is_none() {
            self.candidate_refused(now, server, trn, "its peer link was lost", false);
            return;
        }
        let detail = format!("the peer link to {server} was lost");
        self.send_back_all(TransitionFailure::DestinationLost, &detail);
    }

    /// `TravelAbandoned` from `player`'s client: the destination did not take it. Returns
    /// false when `transition` is not the travel in flight.
    pub(crate) fn abandon_travel_of(
        &mut self,
        player: &PlayerId,
        transition: TransitionId,
    ) -> bool {
        let Some(travel) = self.outbound.travel_mut(transition) else { return false };
        let detail = "its client gave the move up (TravelAbandoned)";
        match travel.movers.get(player) {
            Some(Mover::Ticketed { .. }) => {
                self.recall(player, Some(TransitionFailure::DestinationLost), detail)
            }
            Some(_) => self.send_back(player, TransitionFailure::DestinationUnavailable, detail),
            None => {}
        }
        true
    }

    /// A recall or a claim was answered (V5), or a login's take (V17, `presence.rs`).
    pub(crate) fn handle_handover_decided(
        &mut self,
        now: Instant,
        player: &PlayerId,
        ticket: u64,
        outcome: HandoverOutcome,
    ) {
        if self.take_decided(now, player, ticket, outcome) {
            return;
        }
        let Some(recall) = self.outbound.take_recall_answered(player, ticket) else {
            self.claim_decided(now, player, ticket, outcome);
            return;
        };
        match outcome {
            HandoverOutcome::Lost => {
                // The destination's claim came first: it holds the player.
                tracing::info!(%player, "recall lost to the destination's claim: placed there");
                if let Some(travel) = self.outbound.travel_mut(recall.travel) {
                    travel.placed += 1;
                }
                self.release_mover(now, player);
                return;
            }
            HandoverOutcome::Won { version } => {
                self.set_persistence(player, version);
                // The player is this server's again: its seat there is no longer wanted
                // (docs/spec/travel.md V14, "abandoned"), so it holds no room until its hold.
                let peer = self.outbound.travel_mut(recall.travel).and_then(|t| t.peer().cloned());
                if let Some(peer) = peer {
                    self.release_seats(&peer, recall.travel, vec![player.clone()]);
                }
            }
            HandoverOutcome::Failed => {
                self.out.counters.recalls_unconfirmed += 1;
                tracing::warn!(%player, "the store did not confirm the recall: sent back anyway");
                self.set_persistence(player, recall.version);
            }
        }
        if let Some(travel) = self.outbound.travel_mut(recall.travel) {
            travel.sent_back += 1;
        }
        self.out.counters.travellers_sent_back += 1;
        if let Some(reason) = recall.reason {
            self.tell_sent_back(player, recall.travel, reason, "recalled from the destination");
        }
    }

    /// A recalled or sent-back player's saves are ordinary again, based on `version`.
    fn set_persistence(&mut self, player: &PlayerId, version: u64) {
        if let Some(mut p) = self.roster.player_mut(player)
            && matches!(p.persistence, Persistence::Handover { .. })
        {
            p.persistence = Persistence::Loaded { version };
        }
    }

    /// Takes a ticketed moving player back (V5, V7): its handoff save is written back at its
    /// version unless the destination's claim came first. `reason` is what its client is told
    /// once the store answered (none when a newer transition took it back).
    fn recall(&mut self, player: &PlayerId, reason: Option<TransitionFailure>, detail: &str) {
        let ticket = self.roster.allocate_ticket();
        let Some(travel) = self.outbound.current_mut() else { return };
        let Some(Mover::Ticketed { save, .. }) = travel.movers.get(player).cloned() else { return };
        let (travel_id, version) = (travel.id, save.version);
        let recall = Recall { travel: travel_id, ticket, version, reason };
        // It stays in the book until the store answers: the travel ends only then.
        travel.movers.insert(player.clone(), Mover::Recalling(recall));
        tracing::info!(%player, version, %detail, "recalling a moving player");
        // Written where this server stands: never the claim's content, so a write whose answer
        // was lost is recognised as the side's own and no other.
        let node = Some(self.session.node().clone());
        let save = crate::model::PlayerSave { handoff: None, node, ..save };
        self.out.push(Output::Handover { side: HandoverSide::Recall, save, ticket });
    }

    /// Sends `player` back before its ticket: it leaves the travel's book, and its client is
    /// told the move failed (its screen stays up until the transition that follows).
    fn send_back(&mut self, player: &PlayerId, reason: TransitionFailure, detail: &str) {
        let Some(travel) = self.outbound.current_mut() else { return };
        if !matches!(travel.movers.get(player), Some(Mover::Waiting | Mover::Saving { .. })) {
            return;
        }
        travel.movers.remove(player);
        travel.sent_back += 1;
        let trn = travel.id;
        self.out.counters.travellers_sent_back += 1;
        tracing::info!(%player, %detail, "moving player sent back");
        self.tell_sent_back(player, trn, reason, detail);
    }

    /// `TransitionFailed` for the travel to `player`'s client, if it is here.
    fn tell_sent_back(
        &mut self,
        player: &PlayerId,
        trn: TransitionId,
        reason: TransitionFailure,
        detail: &str,
    ) {
        if let Some(connection) = self.roster.connection_of(player) {
            let detail = format!("travel {trn}: {detail}; staying on this server");
            self.send(
                connection,
                ServerMessage::TransitionFailed { transition_id: trn, reason, detail },
            );
        }
    }

    /// Every moving player not yet placed comes back: before its ticket sent back (its seat
    /// released), after it recalled.
    fn send_back_all(&mut self, reason: TransitionFailure, detail: &str) {
        let Some(travel) = self.outbound.travel() else { return };
        let peer = travel.peer().cloned();
        let trn = travel.id;
        let movers: Vec<(PlayerId, Mover)> =
            travel.movers.iter().map(|(p, m)| (p.clone(), m.clone())).collect();
        tracing::warn!(%detail, moving = movers.len(), "travel failed: sending the moving players back");
        let mut released = Vec::new();
        for (player, mover) in movers {
            if matches!(mover, Mover::Recalling(_)) {
                continue;
            }
            if matches!(mover, Mover::Ticketed { .. }) {
                let lost = match reason {
                    TransitionFailure::DestinationUnavailable => TransitionFailure::DestinationLost,
                    other => other,
                };
                self.recall(&player, Some(lost), detail);
            } else {
                self.send_back(&player, reason, detail);
                released.push(player);
            }
        }
        if let Some(peer) = peer {
            self.release_seats(&peer, trn, released);
        }
    }

    /// A newer transition supersedes the travel in flight, or the hard maximum fails it (V11):
    /// seats not ticketed are released, ticketed players recalled; the players follow the newer
    /// transition, so nobody is told this one failed. Returns whether a travel was in flight.
    pub(crate) fn abandon_move(&mut self, now: Instant) -> bool {
        let Some(travel) = self.outbound.travel() else { return false };
        let peer = travel.peer().cloned();
        let trn = travel.id;
        let movers: Vec<(PlayerId, Mover)> =
            travel.movers.iter().map(|(p, m)| (p.clone(), m.clone())).collect();
        let mut released = Vec::new();
        for (player, mover) in &movers {
            match mover {
                Mover::Ticketed { .. } => {
                    self.recall(player, None, "a newer transition takes it back")
                }
                Mover::Recalling(_) => {}
                Mover::Waiting | Mover::Saving { .. } => released.push(player.clone()),
            }
        }
        if let Some(peer) = peer {
            self.release_seats(&peer, trn, released);
        }
        // Its recalls outlive it; the players follow the newer transition, told nothing of
        // this one.
        for (player, mover) in self.outbound.take().map(|t| t.movers).unwrap_or_default() {
            if let Mover::Recalling(recall) = mover {
                self.outbound.recalling(player, Recall { reason: None, ..recall });
            }
        }
        let _ = now;
        true
    }

    /// `ReleaseSeats` for `players` to `server`, in messages of at most the peer link's bound.
    fn release_seats(&mut self, server: &ServerId, trn: TransitionId, players: Vec<PlayerId>) {
        for chunk in players.chunks(MAX_PLAYERS_PER_PEER_MESSAGE) {
            let message = PeerMessage::ReleaseSeats { trn, players: chunk.to_vec() };
            self.out.push(Output::Peer { to: server.clone(), message });
        }
    }

    /// A moving player is placed at the destination: its pawn goes, its state is dropped (not
    /// kept for a relaunch here, V6), its connection closed `Travelled`.
    fn release_mover(&mut self, now: Instant, player: &PlayerId) {
        self.out.counters.players_travelled += 1;
        let Some(connection) = self.roster.connection_of(player) else { return };
        tracing::debug!(%player, "placed at the destination: released");
        self.out.push(Output::Close { connection, code: CloseCode::Travelled });
        self.depart(now, connection, Departure::closed(CloseCode::Travelled), false);
    }

    /// A ticketed moving player logged in again here (a relaunch while its seat is held):
    /// its seat is confirmed at the next generation, which voids the older ticket, and it is
    /// sent on with a new one (V9). Its transition id stays: it supersedes nothing.
    pub(crate) fn mover_relaunched(&mut self, player: &PlayerId) {
        let Some(connection) = self.roster.connection_of(player) else { return };
        let Some(travel) = self.outbound.current_mut() else { return };
        let Stage::Seated { server, hold } = travel.stage.clone() else { return };
        let Some(Mover::Ticketed { save, generation }) = travel.movers.get_mut(player) else {
            return;
        };
        *generation += 1;
        let (version, generation) = (save.version, *generation);
        let (trn, node) = (travel.id, travel.node.clone());
        tracing::info!(%player, generation, "a moving player relaunched: sent on again");
        let confirmed =
            PeerMessage::SeatConfirmed { trn, player: player.clone(), version, generation };
        self.out.push(Output::Peer { to: server.clone(), message: confirmed });
        let player = player.clone();
        self.out.push(Output::TravelTo {
            connection,
            player,
            transition: trn,
            node,
            server,
            version,
            generation,
            valid: hold,
        });
    }

    /// After a relaunched moving player's load: its save is the handoff's until the travel
    /// decides (V5), whatever the load found.
    pub(crate) fn hold_mover(&mut self, player: &PlayerId) {
        let Some(travel) = self.outbound.travel() else { return };
        let Some(Mover::Ticketed { save, .. }) = travel.movers.get(player) else { return };
        let version = save.version;
        if let Some(mut p) = self.roster.player_mut(player)
            && matches!(p.persistence, Persistence::Loaded { .. })
        {
            p.persistence = Persistence::Handover { version };
        }
    }

    /// A moving player left this server (disconnected, kicked): before its ticket its seat is
    /// released; after it nothing changes (V10: its client may still redeem the ticket).
    pub(crate) fn mover_left(&mut self, player: &PlayerId) {
        let Some(travel) = self.outbound.current_mut() else { return };
        if matches!(travel.movers.get(player), None | Some(Mover::Ticketed { .. })) {
            return;
        }
        travel.movers.remove(player);
        let (trn, peer) = (travel.id, travel.peer().cloned());
        if let Some(peer) = peer {
            self.release_seats(&peer, trn, vec![player.clone()]);
        }
    }

    /// Step 5 of the pass for a travel to another server: once every moving player is
    /// released or sent back, it ends, and the players still here follow a transition to the
    /// node this server stands on. Returns whether that transition started.
    pub(super) fn try_finish_move(&mut self, now: Instant) -> bool {
        if self.outbound.travel().is_some_and(|t| !t.movers.is_empty()) {
            return false;
        }
        // Only a transition in Moving ends here (`finish_move` checks the phase).
        let (moving, placed, sent_back) =
            self.outbound.travel().map_or((0, 0, 0), |t| (t.moving, t.placed, t.sent_back));
        let failed = placed == 0 && sent_back > 0;
        // Its timing counts the players it moved, not those left here (none, once all moved).
        let Some(t) = self.transition.finish_move(now, moving, failed) else {
            return false;
        };
        self.outbound.take();
        self.responses.forget_shown();
        self.end_excuses(&t);
        if failed {
            self.out.counters.transitions_failed += 1;
        } else {
            self.out.counters.transitions_completed += 1;
        }
        let duration_ms = crate::fields::millis(now.saturating_duration_since(t.started));
        let outcome = if failed { "failed" } else { "completed" };
        t.span.in_scope(|| {
            tracing::info!(placed, sent_back, outcome = %outcome, duration_ms, "travel to another server ended")
        });
        if self.roster.len() == 0 {
            return false;
        }
        // Those still here were frozen for it: they travel to where the server stands.
        let node = self.session.node().clone();
        self.start_transition(now, Destination::Node(node));
        true
    }
}

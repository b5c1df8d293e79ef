//! The destination's travellers (docs/spec/travel.md V4, V5, V9, V10): a login with a ticket
//! redeems its seat, its save is loaded at the ticket's version and its player state arrives
//! from the handoff, a join places it as any late joiner (S5: nobody here is frozen for it),
//! and once it acknowledged its pawn the claim decides that this server holds it. Only then
//! does its join end (`EndJoin` drops the loading screen it kept since the source's
//! `FreezeCharacters`) and its source hear `Placed`.
//!
//! [`Inbound`] keeps which travellers await their claim and the claims in flight; it sees no
//! roster and emits nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use gatehouse_protocol::fleet::{PeerMessage, SeatLoss};
use gatehouse_protocol::{CloseCode, PlayerId, RejectReason, ServerMessage};

use super::players::Persistence;
use super::seats::{Redemption, SeatKey};
use super::{ConnectionId, Departure, Game, HandoverOutcome, HandoverSide, Output, TicketedSeat};
use crate::model::{LoadOutcome, PlayerSave};

/// The travellers here whose claim is not decided.
#[derive(Debug, Default)]
pub(crate) struct Inbound {
    /// Loaded from their handoff save, not yet claimed: placed, they are claimed.
    unclaimed: BTreeSet<PlayerId>,
    /// Claims in flight, by their ticket.
    claims: BTreeMap<PlayerId, u64>,
}

impl Inbound {
    /// Whether `player` is a traveller whose claim is not decided: its join waits for it.
    pub(crate) fn holds(&self, player: &PlayerId) -> bool {
        self.unclaimed.contains(player) || self.claims.contains_key(player)
    }
}

impl Game {
    /// `Input::TravellerLogin`: the ticket's signature, times and destination held; its seat
    /// decides (V9). A stale or used ticket is refused and changes nothing; a redeemed one logs
    /// the traveller in (replacing the connection that held the seat before) without the cap
    /// (its seat held the room).
    pub(crate) fn handle_traveller_login(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: PlayerId,
        seat: TicketedSeat,
        caller: &tracing::Span,
    ) {
        let key = SeatKey { source: seat.source, travel: seat.travel, player: player.clone() };
        let replaced = match self.seats.redeem(&key, seat.version, seat.generation, connection) {
            Redemption::Stale => {
                return self.refuse_ticket(
                    connection,
                    &key,
                    RejectReason::TicketStale,
                    "no seat is held here for it at its generation",
                );
            }
            Redemption::Used => {
                return self.refuse_ticket(
                    connection,
                    &key,
                    RejectReason::TicketUsed,
                    "it was redeemed already",
                );
            }
            Redemption::Redeemed { replaced, .. } => replaced,
        };
        // The older connection of this player (an earlier redemption, a relaunch) leaves first.
        let older = self.roster.connection_of(&player).into_iter().chain(replaced);
        let older: BTreeSet<ConnectionId> = older.filter(|c| *c != connection).collect();
        for old in older {
            if self.roster.player_on(old).is_some() {
                self.replace_connection(now, old);
                self.advance(now);
            }
        }
        tracing::info!(parent: caller, %player, source = %key.source, travel = key.travel.0,
            "traveller redeemed its seat");
        self.log_in(now, connection, player, caller, true);
    }

    /// A ticket that holds no seat: `Rejected` and closed; the seat and its holder stay.
    fn refuse_ticket(
        &mut self,
        connection: ConnectionId,
        key: &SeatKey,
        reason: RejectReason,
        why: &str,
    ) {
        self.out.counters.tickets_refused += 1;
        tracing::info!(player = %key.player, source = %key.source, travel = key.travel.0,
            reason = %why, "ticket refused");
        let detail = format!("travel ticket of {} from {} refused: {why}", key.player, key.source);
        self.send(connection, ServerMessage::Rejected { reason, detail });
        self.out.push(Output::Close { connection, code: CloseCode::Rejected });
    }

    /// The load of a traveller's save settled: it must be the handoff save at the ticket's
    /// version (V4). A newer one means its source took it back: closed `Recalled`; anything
    /// else loses the seat. Returns the outcome for the ordinary load path, or none when the
    /// traveller was sent away; a player that is no traveller passes through unchanged.
    pub(crate) fn traveller_loaded(
        &mut self,
        now: Instant,
        player: &PlayerId,
        ticket: u64,
        outcome: LoadOutcome<PlayerSave>,
    ) -> Option<LoadOutcome<PlayerSave>> {
        let Some(p) = self.roster.player(player) else { return Some(outcome) };
        if p.persistence != (Persistence::Loading { ticket }) {
            return Some(outcome);
        }
        let connection = p.connection;
        let Some((_, version)) = self.seats.held_by(player, connection) else {
            return Some(outcome);
        };
        let refused = match &outcome {
            LoadOutcome::Found(save) if save.version > version => {
                Some((SeatLoss::NotPlaced, "its source took it back"))
            }
            LoadOutcome::Found(save) if save.version == version => match &save.handoff {
                Some(handoff) => {
                    let max_health = self.world.max_health;
                    match self
                        .roster
                        .player_mut(player)
                        .map(|mut p| p.arrive(handoff, max_health, now))
                    {
                        Some(Ok(())) => None,
                        _ => Some((SeatLoss::SaveUnavailable, "its handoff state is invalid")),
                    }
                }
                None => Some((SeatLoss::SaveUnavailable, "its save holds no handoff state")),
            },
            LoadOutcome::Found(_) => {
                Some((SeatLoss::SaveUnavailable, "its save is older than the handoff"))
            }
            LoadOutcome::NotFound => Some((SeatLoss::SaveUnavailable, "it has no save")),
            LoadOutcome::Failed(_) => Some((SeatLoss::SaveUnavailable, "its save did not load")),
        };
        if let Some((loss, why)) = refused {
            if let Some(key) = self.seats.placed(player) {
                self.seat_lost(key, loss);
            }
            self.recall_traveller(now, connection, player, why);
            return None;
        }
        self.inbound.unclaimed.insert(player.clone());
        // The ordinary load path reads the rest of the save (never its handoff state).
        Some(outcome)
    }

    /// After its ordinary load: a traveller's save is the handoff's until its claim (V5).
    pub(crate) fn hold_for_claim(&mut self, player: &PlayerId) {
        if !self.inbound.unclaimed.contains(player) {
            return;
        }
        if let Some(mut p) = self.roster.player_mut(player)
            && let Persistence::Loaded { version } = p.persistence
        {
            p.persistence = Persistence::Handover { version };
        }
    }

    /// A step of the pass: every traveller that acknowledged its pawn is claimed (V5).
    pub(crate) fn claim_placed_travellers(&mut self) {
        let placed: Vec<PlayerId> = self
            .inbound
            .unclaimed
            .iter()
            .filter(|p| self.roster.player(p).is_some_and(|p| p.is_placed()))
            .cloned()
            .collect();
        for player in placed {
            self.inbound.unclaimed.remove(&player);
            let Some(p) = self.roster.player(&player) else { continue };
            let Persistence::Handover { version } = p.persistence else { continue };
            let node = self.roster.possessed_pawn(&player).map(|pawn| pawn.node.clone());
            let Some(preset) = p.preset.as_ref() else { continue };
            let save = PlayerSave {
                player: player.clone(),
                node,
                preset: preset.source.clone(),
                inventory: p.inventory.clone(),
                equipment: p.equipment.clone(),
                version,
                handoff: None,
                // The destination writes the claim: it holds the player (V17).
                holder: self.rules.server.clone(),
            };
            let ticket = self.roster.allocate_ticket();
            tracing::debug!(%player, version, "traveller placed: claiming it");
            self.inbound.claims.insert(player, ticket);
            self.out.push(Output::Handover { side: HandoverSide::Claim, save, ticket });
        }
    }

    /// A claim was answered: won, the traveller is this server's and its source is told;
    /// lost (its source recalled it first) or undecided, it goes back (V5, V7).
    pub(crate) fn claim_decided(
        &mut self,
        now: Instant,
        player: &PlayerId,
        ticket: u64,
        outcome: HandoverOutcome,
    ) {
        if self.inbound.claims.get(player) != Some(&ticket) {
            self.out.counters.stale_ignored += 1;
            return;
        }
        self.inbound.claims.remove(player);
        let key = self.seats.placed(player);
        match outcome {
            HandoverOutcome::Won { version } => {
                if let Some(mut p) = self.roster.player_mut(player)
                    && matches!(p.persistence, Persistence::Handover { .. })
                {
                    p.persistence = Persistence::Loaded { version };
                }
                self.out.counters.travellers_placed += 1;
                tracing::info!(%player, version, "traveller claimed: placed here");
                if let Some(key) = key {
                    let message = PeerMessage::Placed { trn: key.travel, player: key.player };
                    self.out.push(Output::Peer { to: key.source, message });
                }
            }
            HandoverOutcome::Lost | HandoverOutcome::Failed => {
                let why = match outcome {
                    HandoverOutcome::Lost => "its source recalled it first",
                    _ => "the store did not confirm its claim",
                };
                if let (Some(key), HandoverOutcome::Failed) = (key, outcome) {
                    self.seat_lost(key, SeatLoss::SaveUnavailable);
                }
                if let Some(connection) = self.roster.connection_of(player) {
                    self.recall_traveller(now, connection, player, why);
                }
            }
        }
    }

    /// Sends a traveller back to its source: closed `Recalled`, its pawn withdrawn, nothing
    /// saved nor kept (its source holds it).
    pub(crate) fn recall_traveller(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        why: &str,
    ) {
        self.inbound.unclaimed.remove(player);
        tracing::info!(%player, reason = %why, "traveller sent back to its source");
        self.out.push(Output::Close { connection, code: CloseCode::Recalled });
        if self.roster.player_on(connection).is_some() {
            self.depart(
                now,
                connection,
                Departure::closed_because(CloseCode::Recalled, why),
                false,
            );
        }
    }

    /// A traveller's connection is gone before its claim: its seat waits for a relaunch (V10).
    pub(crate) fn traveller_left(
        &mut self,
        now: Instant,
        player: &PlayerId,
        connection: ConnectionId,
    ) {
        self.inbound.unclaimed.remove(player);
        self.seats.disconnected(player, connection, now, self.rules.seat_hold);
    }
}

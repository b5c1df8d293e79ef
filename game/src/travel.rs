//! Travel between servers, the destination's part so far (docs/spec/travel.md V9, V12, V14,
//! V16): the handlers of a source's messages about seats, and the seat timer.
//!
//! A source asks for seats (`ReserveSeats`), all or none; a granted seat waits
//! `seat_hold` for its confirmation (`SeatConfirmed`, after the source's handoff save), then
//! as long again for its ticket's redemption; a seat that waits past its hold is lost and its
//! source told (`SeatLost`), which recalls the player. The travellers' logins, the inbound
//! transition that places them and the source's own part are still to be written.

use std::time::Instant;

use gatehouse_protocol::ServerId;
use gatehouse_protocol::fleet::{PeerMessage, SeatLoss};

use super::seats::SeatKey;
use super::timers::Timer;
use super::{Game, Output};

impl Game {
    /// One message of the peer link from `from`.
    pub(crate) fn handle_peer(&mut self, now: Instant, from: &ServerId, message: PeerMessage) {
        match message {
            PeerMessage::ReserveSeats { trn, node, players } => {
                // The link refuses a longer list before it comes here; a shorter bound on what a
                // peer can make this server keep is the room it has.
                let room = self.rules.max_players.saturating_sub(self.roster.len());
                let busy = self.transition.current().is_some();
                let hosted = self.session.node().clone();
                let hold = self.rules.seat_hold;
                let answer = match self
                    .seats
                    .reserve(from, trn, &node, &players, &hosted, busy, room, now, hold)
                {
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
                self.out.push(Output::Peer { to: from.clone(), message: answer });
            }
            PeerMessage::SeatConfirmed { trn, player, version, generation } => {
                let key = SeatKey { source: from.clone(), travel: trn, player };
                if !self.seats.confirm(&key, version, generation, now, self.rules.seat_hold) {
                    // Lost already (its hold passed, or released): the source recalls it.
                    self.seat_lost(key, SeatLoss::HoldExpired);
                }
            }
            PeerMessage::ReleaseSeats { trn, players } => {
                // Nothing redeems a seat yet: no traveller is here to close.
                self.seats.release(from, trn, &players);
            }
            // The link's own, and the source's part of a travel: not this core's yet.
            PeerMessage::Hello { .. }
            | PeerMessage::Welcome { .. }
            | PeerMessage::SeatsGranted { .. }
            | PeerMessage::SeatsRefused { .. }
            | PeerMessage::Placed { .. }
            | PeerMessage::SeatLost { .. } => {}
        }
        self.rearm_seat_timer();
    }

    /// The seat timer came due: every seat past its hold is lost.
    pub(crate) fn handle_seat_holds(&mut self, now: Instant) {
        for key in self.seats.expire(now) {
            self.seat_lost(key, SeatLoss::HoldExpired);
        }
        self.rearm_seat_timer();
    }

    /// Tells a seat's source it is lost.
    fn seat_lost(&mut self, key: SeatKey, reason: SeatLoss) {
        tracing::info!(source = %key.source, travel = key.travel.0, player = %key.player,
            reason = reason.as_str(), "seat lost");
        let message = PeerMessage::SeatLost { trn: key.travel, player: key.player, reason };
        self.out.push(Output::Peer { to: key.source, message });
    }

    /// Arms the seat timer at the earliest seat deadline.
    fn rearm_seat_timer(&mut self) {
        self.timers.arm(Timer::SeatHold, self.seats.next_deadline());
    }
}

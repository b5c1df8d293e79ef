//! The destination's seats: its promises to take players another server moves here
//! (docs/spec/travel.md V9, V10, V12, V16).
//!
//! ```text
//! ReserveSeats ──> granted, all or none ── held seat_hold until confirmed ──> lost
//! SeatConfirmed{v, g} ──> confirmed ──────── held seat_hold until redeemed ──> lost
//! a login with the ticket (v, g) ──> redeemed by its connection (no deadline while connected)
//!       the connection gone ──> held seat_hold from then for a relaunch ──────> lost
//! placed (its claim committed) ──> the seat ends: the source releases the player
//! ```
//!
//! A seat is keyed by the source, the source's transition and the player; a player holds at
//! most one seat here, and the newest reservation naming it replaces an older one (the source
//! releases the older first; only a confused source names a player twice). A seat holds room:
//! seats not held by a connected traveller count against the player cap, so a grant never
//! promises room that a stream of logins takes meanwhile, and a source can hold at most the
//! room there is. [`Seats`] owns the seats and their deadlines; it sees no roster and emits
//! nothing: the game acts on what its methods return.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use gatehouse_protocol::fleet::SeatRefusal;
use gatehouse_protocol::{NodeId, PlayerId, ServerId, TransitionId};

use crate::interface::ConnectionId;

/// A seat's name: the source, the source's transition (the travel) and the player.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SeatKey {
    pub(crate) source: ServerId,
    pub(crate) travel: TransitionId,
    pub(crate) player: PlayerId,
}

/// One seat.
#[derive(Debug, Clone)]
struct Seat {
    node: NodeId,
    /// The handoff save's version and the ticket generation, once confirmed.
    confirmed: Option<(u64, u32)>,
    /// The generation a ticket redeemed, and the connection holding the seat while it is
    /// connected.
    redeemed: Option<(u32, Option<ConnectionId>)>,
    /// When the seat is lost unless something happens first; none while a connected
    /// traveller holds it (the inbound transition bounds it then, T7, T9, T10).
    deadline: Option<Instant>,
}

impl Seat {
    /// Whether the seat's room is held by a connected traveller (who then counts as a player).
    fn is_occupied(&self) -> bool {
        matches!(self.redeemed, Some((_, Some(_))))
    }
}

/// What a ticket's redemption came to (docs/spec/travel.md V9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redemption {
    /// The seat is the connection's now; `replaced` held it before (an earlier redemption of
    /// an older generation, or of the same player's relaunch).
    Redeemed { node: NodeId, version: u64, replaced: Option<ConnectionId> },
    /// No seat held for that source, travel and player, or not at that version and
    /// generation: `TicketStale`.
    Stale,
    /// The seat was redeemed with that generation already: `TicketUsed`.
    Used,
}

/// The seats granted here.
#[derive(Debug, Default)]
pub(crate) struct Seats {
    seats: BTreeMap<SeatKey, Seat>,
    by_player: HashMap<PlayerId, SeatKey>,
    /// Every seat's deadline, in order: the hold timer is the first.
    deadlines: BTreeSet<(Instant, SeatKey)>,
}

impl Seats {
    /// How many seats hold room not yet counted as a player (not held by a connected
    /// traveller).
    pub(crate) fn holding_room(&self) -> usize {
        self.seats.values().filter(|s| !s.is_occupied()).count()
    }

    /// Grants a seat on `node` to each of `players` for `source`'s `travel`, all or none,
    /// each held `hold` for its confirmation. `room` is how many more players the cap allows,
    /// seats held excluded; `hosted` is the node this server's world stands on; `busy` says a
    /// world transition runs. A player already seated for this travel keeps its seat; one
    /// seated for another travel loses that seat, which is returned to be reported lost.
    ///
    /// # Errors
    /// `Busy` during a world transition, `WrongNode` when `node` is not `hosted`, `Full` when
    /// the players not seated for this travel already are more than the room left.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reserve(
        &mut self,
        source: &ServerId,
        travel: TransitionId,
        node: &NodeId,
        players: &[PlayerId],
        hosted: &NodeId,
        busy: bool,
        room: usize,
        now: Instant,
        hold: Duration,
    ) -> Result<Vec<SeatKey>, SeatRefusal> {
        // Busy first: the node the world stands on is changing.
        if busy {
            return Err(SeatRefusal::Busy);
        }
        if node != hosted {
            return Err(SeatRefusal::WrongNode);
        }
        let key =
            |player: &PlayerId| SeatKey { source: source.clone(), travel, player: player.clone() };
        let mut wanted: Vec<SeatKey> = players.iter().map(key).collect();
        wanted.sort();
        wanted.dedup();
        wanted.retain(|k| !self.seats.contains_key(k));
        // A player seated for another travel gives that seat's room back as it moves.
        let moved = wanted.iter().filter(|k| self.by_player.contains_key(&k.player)).count();
        if wanted.len().saturating_sub(moved) > room.saturating_sub(self.holding_room()) {
            return Err(SeatRefusal::Full);
        }
        let mut replaced = Vec::new();
        for key in wanted {
            if let Some(older) = self.by_player.get(&key.player).cloned() {
                self.remove(&older);
                replaced.push(older);
            }
            let seat = Seat { node: node.clone(), confirmed: None, redeemed: None, deadline: None };
            self.by_player.insert(key.player.clone(), key.clone());
            self.seats.insert(key.clone(), seat);
            self.set_deadline(&key, Some(now + hold));
        }
        Ok(replaced)
    }

    /// The source confirms a seat: its handoff save stands at `version`, its ticket names
    /// `generation`. A newer generation (a relaunch at the source, V9) voids the older ticket;
    /// an older one or a repeat changes nothing. The seat is held `hold` from now for its
    /// redemption unless a connected traveller holds it.
    ///
    /// Returns false when no such seat is held (the source is told it is lost).
    pub(crate) fn confirm(
        &mut self,
        key: &SeatKey,
        version: u64,
        generation: u32,
        now: Instant,
        hold: Duration,
    ) -> bool {
        let Some(seat) = self.seats.get_mut(key) else { return false };
        if seat.confirmed.is_some_and(|(_, known)| generation <= known) {
            return true;
        }
        seat.confirmed = Some((version, generation));
        let deadline = (!seat.is_occupied()).then_some(now + hold);
        self.set_deadline(key, deadline);
        true
    }

    /// A login presents a ticket naming `key` at `version` and `generation` (its signature,
    /// times and destination already checked, V8). Redeemed, the seat is `connection`'s and
    /// waits for nothing else; stale or used, nothing changes.
    pub(crate) fn redeem(
        &mut self,
        key: &SeatKey,
        version: u64,
        generation: u32,
        connection: ConnectionId,
    ) -> Redemption {
        let Some(seat) = self.seats.get_mut(key) else { return Redemption::Stale };
        match seat.confirmed {
            // The ticket may come before its `SeatConfirmed` (a client can dial faster than
            // the link carries): signed by the fleet key, it confirms the seat itself.
            None => seat.confirmed = Some((version, generation)),
            Some((_, known)) if generation > known => seat.confirmed = Some((version, generation)),
            Some(confirmed) if confirmed != (version, generation) => return Redemption::Stale,
            Some(_) => {}
        }
        let replaced = match seat.redeemed {
            Some((used, _)) if used == generation => return Redemption::Used,
            Some((_, holder)) => holder,
            None => None,
        };
        seat.redeemed = Some((generation, Some(connection)));
        let node = seat.node.clone();
        self.set_deadline(key, None);
        Redemption::Redeemed { node, version, replaced }
    }

    /// A relaunch of `player` logs in with its session token: a seat a ticket redeemed is the
    /// player's, not the ticket's, and the new connection takes it (V9). Returns the seat and
    /// the connection that held it; none when the player holds no redeemed seat.
    pub(crate) fn take(
        &mut self,
        player: &PlayerId,
        connection: ConnectionId,
    ) -> Option<(SeatKey, Option<ConnectionId>)> {
        let key = self.by_player.get(player)?.clone();
        let seat = self.seats.get_mut(&key)?;
        let (generation, holder) = seat.redeemed?;
        seat.redeemed = Some((generation, Some(connection)));
        self.set_deadline(&key, None);
        Some((key, holder))
    }

    /// The seat `player` redeemed on `connection`, with the handoff version it was confirmed
    /// at: whether that connection's player is a traveller here.
    pub(crate) fn held_by(
        &self,
        player: &PlayerId,
        connection: ConnectionId,
    ) -> Option<(SeatKey, u64)> {
        let key = self.by_player.get(player)?;
        let seat = self.seats.get(key)?;
        match (seat.redeemed, seat.confirmed) {
            (Some((_, Some(holder))), Some((version, _))) if holder == connection => {
                Some((key.clone(), version))
            }
            _ => None,
        }
    }

    /// `connection` is gone: a seat it held waits `hold` from now for a relaunch (V10).
    pub(crate) fn disconnected(
        &mut self,
        player: &PlayerId,
        connection: ConnectionId,
        now: Instant,
        hold: Duration,
    ) {
        let Some(key) = self.by_player.get(player).cloned() else { return };
        let Some(seat) = self.seats.get_mut(&key) else { return };
        match &mut seat.redeemed {
            Some((_, holder)) if *holder == Some(connection) => *holder = None,
            _ => return,
        }
        self.set_deadline(&key, Some(now + hold));
    }

    /// The source no longer wants these seats (superseded, set aside, abandoned, left).
    /// Returns those that were held, with the connection that held each.
    pub(crate) fn release(
        &mut self,
        source: &ServerId,
        travel: TransitionId,
        players: &[PlayerId],
    ) -> Vec<(SeatKey, Option<ConnectionId>)> {
        let mut released = Vec::new();
        for player in players {
            let key = SeatKey { source: source.clone(), travel, player: player.clone() };
            if let Some(seat) = self.remove(&key) {
                released.push((key, seat.redeemed.and_then(|(_, holder)| holder)));
            }
        }
        released
    }

    /// Whether a seat is held here for `player`, redeemed or not: a move of it to here is in
    /// flight (docs/spec/travel.md V17).
    pub(crate) fn awaits(&self, player: &PlayerId) -> bool {
        self.by_player.contains_key(player)
    }

    /// The player is placed here and its claim committed: its seat ends. Returns it, for the
    /// source to be told.
    pub(crate) fn placed(&mut self, player: &PlayerId) -> Option<SeatKey> {
        let key = self.by_player.get(player)?.clone();
        self.remove(&key).map(|_| key)
    }

    /// Removes and returns every seat whose deadline is at or before `now`, in deadline order.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<SeatKey> {
        let mut lost = Vec::new();
        while let Some((at, key)) = self.deadlines.first().cloned() {
            if at > now {
                break;
            }
            self.remove(&key);
            lost.push(key);
        }
        lost
    }

    /// The earliest seat deadline, for the hold timer.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// How many seats are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.seats.len()
    }

    fn remove(&mut self, key: &SeatKey) -> Option<Seat> {
        let seat = self.seats.remove(key)?;
        if let Some(at) = seat.deadline {
            self.deadlines.remove(&(at, key.clone()));
        }
        if self.by_player.get(&key.player) == Some(key) {
            self.by_player.remove(&key.player);
        }
        Some(seat)
    }

    fn set_deadline(&mut self, key: &SeatKey, deadline: Option<Instant>) {
        let Some(seat) = self.seats.get_mut(key) else { return };
        if let Some(at) = seat.deadline.take() {
            self.deadlines.remove(&(at, key.clone()));
        }
        seat.deadline = deadline;
        if let Some(at) = deadline {
            self.deadlines.insert((at, key.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(10);

    fn pid(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    fn hub() -> ServerId {
        ServerId::new("hub-1").unwrap()
    }

    fn crypt() -> NodeId {
        NodeId::new("crypt").unwrap()
    }

    fn key(player: &str, travel: u64) -> SeatKey {
        SeatKey { source: hub(), travel: TransitionId(travel), player: pid(player) }
    }

    /// Seats for `players` on the crypt for travel 1, with `room`.
    fn reserve(
        seats: &mut Seats,
        players: &[&str],
        room: usize,
        now: Instant,
    ) -> Result<Vec<SeatKey>, SeatRefusal> {
        let players: Vec<PlayerId> = players.iter().map(|p| pid(p)).collect();
        seats.reserve(&hub(), TransitionId(1), &crypt(), &players, &crypt(), false, room, now, HOLD)
    }

    #[test]
    fn seats_are_granted_all_or_none() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        assert_eq!(reserve(&mut seats, &["a", "b", "c"], 2, t0), Err(SeatRefusal::Full));
        assert_eq!(seats.len(), 0, "none of the three");
        assert_eq!(reserve(&mut seats, &["a", "b"], 2, t0), Ok(vec![]));
        assert_eq!(seats.len(), 2);
        assert_eq!(reserve(&mut seats, &["c"], 2, t0), Err(SeatRefusal::Full), "the room is held");
        assert_eq!(reserve(&mut seats, &["a", "b"], 2, t0), Ok(vec![]), "asked again: kept");
        let other = |node: &NodeId, busy| {
            Seats::default().reserve(
                &hub(),
                TransitionId(1),
                node,
                &[pid("a")],
                &crypt(),
                busy,
                9,
                t0,
                HOLD,
            )
        };
        assert_eq!(other(&NodeId::new("town").unwrap(), false), Err(SeatRefusal::WrongNode));
        assert_eq!(other(&crypt(), true), Err(SeatRefusal::Busy));
    }

    #[test]
    fn a_seat_not_confirmed_or_not_redeemed_within_its_hold_is_lost() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a", "b"], 9, t0).unwrap();
        let later = t0 + Duration::from_secs(4);
        assert!(seats.confirm(&key("b", 1), 3, 1, later, HOLD));
        assert_eq!(seats.next_deadline(), Some(t0 + HOLD));
        assert_eq!(seats.expire(t0 + HOLD - Duration::from_millis(1)), vec![]);
        assert_eq!(seats.expire(t0 + HOLD), vec![key("a", 1)], "a was never confirmed");
        assert_eq!(
            seats.next_deadline(),
            Some(later + HOLD),
            "b's hold counts from its confirmation"
        );
        assert_eq!(seats.expire(later + HOLD), vec![key("b", 1)], "b was never redeemed");
        assert_eq!(seats.len(), 0);
    }

    #[test]
    fn a_lost_seat_gives_its_room_back_once() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 1, t0).unwrap();
        assert_eq!(seats.expire(t0 + HOLD), vec![key("a", 1)]);
        reserve(&mut seats, &["b"], 1, t0 + HOLD).unwrap();
        let again = [pid("a")];
        let refused =
            seats.reserve(&hub(), TransitionId(2), &crypt(), &again, &crypt(), false, 1, t0, HOLD);
        assert_eq!(refused, Err(SeatRefusal::Full), "a holds no seat to move from any more");
        assert_eq!(seats.placed(&pid("a")), None);
    }

    #[test]
    fn a_replayed_ticket_is_refused_and_changes_nothing() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 9, t0).unwrap();
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        let first = seats.redeem(&key("a", 1), 3, 1, ConnectionId(1));
        assert_eq!(first, Redemption::Redeemed { node: crypt(), version: 3, replaced: None });
        assert_eq!(seats.redeem(&key("a", 1), 3, 1, ConnectionId(2)), Redemption::Used);
        // The first connection still holds it, with no deadline.
        assert_eq!(seats.next_deadline(), None);
        seats.disconnected(&pid("a"), ConnectionId(2), t0, HOLD);
        assert_eq!(seats.next_deadline(), None, "the replaying connection held nothing");
        assert_eq!(seats.holding_room(), 0, "the redeeming traveller counts as a player");
    }

    #[test]
    fn a_ticket_before_its_confirmation_confirms_its_seat() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 9, t0).unwrap();
        let redeemed = seats.redeem(&key("a", 1), 3, 1, ConnectionId(1));
        assert_eq!(redeemed, Redemption::Redeemed { node: crypt(), version: 3, replaced: None });
        assert_eq!(seats.next_deadline(), None, "held by its connection");
        // Its confirmation, arriving after, changes nothing; an older generation is stale.
        assert!(seats.confirm(&key("a", 1), 3, 1, t0, HOLD));
        assert_eq!(seats.held_by(&pid("a"), ConnectionId(1)), Some((key("a", 1), 3)));
        assert_eq!(seats.redeem(&key("a", 1), 3, 0, ConnectionId(2)), Redemption::Stale);
        assert_eq!(seats.held_by(&pid("a"), ConnectionId(2)), None, "another connection's");
        // A ticket of a newer generation than the seat's confirmation confirms it anew.
        let newer = seats.redeem(&key("a", 1), 3, 2, ConnectionId(3));
        let replaced = Some(ConnectionId(1));
        assert_eq!(newer, Redemption::Redeemed { node: crypt(), version: 3, replaced });
    }

    #[test]
    fn a_ticket_of_an_older_generation_is_stale() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 9, t0).unwrap();
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        seats.confirm(&key("a", 1), 3, 2, t0, HOLD);
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        assert_eq!(seats.redeem(&key("a", 1), 3, 1, ConnectionId(1)), Redemption::Stale);
        assert_eq!(
            seats.redeem(&key("a", 1), 2, 2, ConnectionId(1)),
            Redemption::Stale,
            "other version"
        );
        assert_eq!(
            seats.redeem(&key("a", 2), 3, 2, ConnectionId(1)),
            Redemption::Stale,
            "other travel"
        );
        assert!(matches!(
            seats.redeem(&key("a", 1), 3, 2, ConnectionId(1)),
            Redemption::Redeemed { .. }
        ));
    }

    #[test]
    fn a_newer_generation_after_a_redemption_lets_its_ticket_replace_the_holder() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 9, t0).unwrap();
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        seats.redeem(&key("a", 1), 3, 1, ConnectionId(1));
        seats.confirm(&key("a", 1), 3, 2, t0, HOLD);
        let again = seats.redeem(&key("a", 1), 3, 2, ConnectionId(2));
        assert_eq!(
            again,
            Redemption::Redeemed { node: crypt(), version: 3, replaced: Some(ConnectionId(1)) }
        );
    }

    #[test]
    fn a_relaunch_takes_the_held_seat_by_session_token() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a", "b"], 9, t0).unwrap();
        assert_eq!(
            seats.take(&pid("a"), ConnectionId(5)),
            None,
            "not redeemed: the ticket is needed"
        );
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        seats.redeem(&key("a", 1), 3, 1, ConnectionId(1));
        let gone = t0 + Duration::from_secs(1);
        seats.disconnected(&pid("a"), ConnectionId(1), gone, HOLD);
        assert_eq!(seats.holding_room(), 2, "a's room is held for its relaunch");
        assert_eq!(seats.take(&pid("a"), ConnectionId(7)), Some((key("a", 1), None)));
        assert_eq!(
            seats.expire(gone + HOLD),
            vec![key("b", 1)],
            "a's seat is held by its relaunch"
        );
        seats.disconnected(&pid("a"), ConnectionId(7), gone + HOLD, HOLD);
        assert_eq!(seats.next_deadline(), Some(gone + HOLD + HOLD), "held from the disconnect");
        assert_eq!(
            seats.expire(gone + HOLD + HOLD),
            vec![key("a", 1)],
            "lost once nobody came back"
        );
    }

    #[test]
    fn a_newer_reservation_of_a_seated_player_replaces_its_older_seat() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a"], 1, t0).unwrap();
        let players = [pid("a")];
        let replaced = seats
            .reserve(&hub(), TransitionId(2), &crypt(), &players, &crypt(), false, 1, t0, HOLD)
            .unwrap();
        assert_eq!(replaced, vec![key("a", 1)], "its room moves to the newer seat");
        assert_eq!(seats.len(), 1);
        assert_eq!(seats.placed(&pid("a")), Some(key("a", 2)));
        assert_eq!(seats.len(), 0);
        assert_eq!(seats.next_deadline(), None);
    }

    #[test]
    fn released_seats_name_the_connection_that_held_them() {
        let t0 = Instant::now();
        let mut seats = Seats::default();
        reserve(&mut seats, &["a", "b"], 9, t0).unwrap();
        seats.confirm(&key("a", 1), 3, 1, t0, HOLD);
        seats.redeem(&key("a", 1), 3, 1, ConnectionId(4));
        let released = seats.release(&hub(), TransitionId(1), &[pid("a"), pid("b"), pid("c")]);
        assert_eq!(released, vec![(key("a", 1), Some(ConnectionId(4))), (key("b", 1), None)]);
        assert_eq!(seats.len(), 0);
        assert_eq!(seats.next_deadline(), None);
    }
}

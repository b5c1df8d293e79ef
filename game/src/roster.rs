//! The roster: who is logged in, on which connection, and the pawns they own.
//!
//! [`Roster`] owns every [`Player`] (with its player state), the index from connections to
//! players, every [`Pawn`], and the ids it hands out: pawn ids (never reused within a process)
//! and the tickets of save loads. It keeps the books and nothing more: it knows no spawning
//! rule, no transition and no output; the game decides, then records the result here.
//! Iteration is in id order, so every decision made over the roster is deterministic.
//!
//! It also keeps each player's refusal rate-limit window, by player rather than by connection,
//! so a reconnect does not reset it (until the window is over).
//!
//! Cost: the checks the game makes after every input (everyone placed? everyone's effects
//! paused? which team is smaller?) read [`Books`] the roster keeps up to date as players join,
//! leave and change, never a scan of every player, so one input's work does not grow with the
//! number of players. Every change to a player goes through [`PlayerMut`], which updates the
//! books when it is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use gatehouse_protocol::{CharacterDef, NodeId, PawnId, PlayerId, TeamId, TransitionId};

use super::ConnectionId;
use super::logins::LoginRate;
use super::players::{Pawn, Player, RefusalVerdict, RefusalWindow};

/// Logged-in players, their connections and their pawns.
#[derive(Debug)]
pub(crate) struct Roster {
    /// Logged-in players, in id order.
    players: BTreeMap<PlayerId, Player>,
    /// Which player each logged-in connection is.
    connections: HashMap<ConnectionId, PlayerId>,
    /// Every pawn, possessed or lingering dead.
    pawns: BTreeMap<PawnId, Pawn>,
    /// The pawns of each owner (a departure removes its pawns without a scan of every pawn).
    owned: HashMap<PlayerId, BTreeSet<PawnId>>,
    /// The id of the next pawn.
    next_pawn: u64,
    /// The ticket of the next save load.
    next_ticket: u64,
    /// How often each player id logged in lately (`logins.rs`): a login past it is refused
    /// before it changes the roster.
    login_rate: LoginRate,
    /// Refused requests per player in its current window, kept while the player is away
    /// until the window is over.
    refusals: HashMap<PlayerId, RefusalWindow>,
    /// What the per-input checks read.
    books: Books,
    /// Players who logged in since the pause sync last took them (a login during a transition
    /// is the one way a player is frozen and its effects not yet paused).
    logins: Vec<PlayerId>,
    /// Player and pawn records visited by whole-roster walks: the complexity tests read it
    /// (no input may walk every player).
    visits: Visits,
}

/// A count of the records walks visited; one add per record, nothing else.
#[derive(Debug, Default)]
struct Visits(std::cell::Cell<u64>);

impl Visits {
    /// One more record visited.
    fn one(&self) {
        self.0.set(self.0.get().wrapping_add(1));
    }

    /// Records visited so far.
    #[cfg(test)]
    fn total(&self) -> u64 {
        self.0.get()
    }
}

/// What the roster counts over its players, kept up to date by every change.
#[derive(Debug, Default)]
struct Books {
    /// Players neither placed nor excused from placement.
    unplaced: usize,
    /// Players whose finite effects are paused (outside a transition, the joiners: the pause
    /// sync visits these rather than every player).
    paused: BTreeSet<PlayerId>,
    /// Players on team 1 and on team 2.
    teams: [usize; 2],
    /// Each player's next finite-effect event (a tick or an expiry), in time order: the effects
    /// timer reads the first without a walk of every player.
    effect_events: BTreeSet<(Instant, PlayerId)>,
}

/// What the books count of one player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    placed_or_excused: bool,
    paused: bool,
    team: TeamId,
    next_effect: Option<Instant>,
}

impl Counted {
    fn of(player: &Player) -> Counted {
        Counted {
            placed_or_excused: player.is_placed_or_excused(),
            paused: player.abilities.is_paused(),
            team: player.team,
            next_effect: player.abilities.next_event(),
        }
    }
}

impl Books {
    /// Counts `player` as `counted` in (`add`) or out.
    fn count(&mut self, player: &PlayerId, counted: Counted, add: bool) {
        if let Some(at) = counted.next_effect {
            if add {
                self.effect_events.insert((at, player.clone()));
            } else {
                self.effect_events.remove(&(at, player.clone()));
            }
        }
        let step = |n: &mut usize| *n = if add { *n + 1 } else { n.saturating_sub(1) };
        if !counted.placed_or_excused {
            step(&mut self.unplaced);
        }
        if counted.paused {
            if add {
                self.paused.insert(player.clone());
            } else {
                self.paused.remove(player);
            }
        }
        if let Some(team) = self.teams.get_mut(usize::from(counted.team.0).wrapping_sub(1)) {
            step(team);
        }
    }
}

/// A logged-in player lent out for a change: dropping it brings the roster's books up to date
/// with whatever changed.
pub(crate) struct PlayerMut<'a> {
    player: &'a mut Player,
    books: &'a mut Books,
    before: Counted,
}

impl<'a> PlayerMut<'a> {
    fn new(player: &'a mut Player, books: &'a mut Books) -> PlayerMut<'a> {
        let before = Counted::of(player);
        PlayerMut { player, books, before }
    }
}

impl Deref for PlayerMut<'_> {
    type Target = Player;
    fn deref(&self) -> &Player {
        self.player
    }
}

impl DerefMut for PlayerMut<'_> {
    fn deref_mut(&mut self) -> &mut Player {
        self.player
    }
}

impl Drop for PlayerMut<'_> {
    fn drop(&mut self) {
        let after = Counted::of(self.player);
        if after != self.before {
            self.books.count(&self.player.id, self.before, false);
            self.books.count(&self.player.id, after, true);
        }
    }
}

impl Roster {
    /// An empty roster whose player ids may each log in at `logins` (`[game] login_burst`,
    /// `login_interval_ms`).
    pub(crate) fn new(logins: LoginRate) -> Self {
        Roster {
            login_rate: logins,
            players: BTreeMap::new(),
            connections: HashMap::new(),
            pawns: BTreeMap::new(),
            owned: HashMap::new(),
            next_pawn: 1,
            next_ticket: 1,
            refusals: HashMap::new(),
            books: Books::default(),
            logins: Vec::new(),
            visits: Visits::default(),
        }
    }
}

impl Roster {
    /// Whether `player` may log in at `now` (`logins.rs`): `Ok` counts the login; `Err` holds
    /// how long until one more would be admitted, and counts nothing.
    pub(crate) fn admit_login(
        &mut self,
        player: &PlayerId,
        now: Instant,
    ) -> Result<(), std::time::Duration> {
        self.login_rate.admit(player, now)
    }

    /// Logged-in players.
    pub(crate) fn len(&self) -> usize {
        self.players.len()
    }

    /// The logged-in player `id`, if any.
    pub(crate) fn player(&self, id: &PlayerId) -> Option<&Player> {
        self.players.get(id)
    }

    /// The logged-in player `id`, if any, for the coordinator to edit its record (not the
    /// roster's indexes: its id and connection stay as `join` set them).
    pub(crate) fn player_mut(&mut self, id: &PlayerId) -> Option<PlayerMut<'_>> {
        let books = &mut self.books;
        self.players.get_mut(id).map(|player| PlayerMut::new(player, books))
    }

    /// Every logged-in player, in id order.
    pub(crate) fn players(&self) -> impl Iterator<Item = &Player> {
        self.players.values().inspect(|_| self.visits.one())
    }

    /// Every logged-in player, not counted as visits: for checks the tests make.
    #[cfg(test)]
    pub(crate) fn players_unvisited(&self) -> impl Iterator<Item = &Player> {
        self.players.values()
    }

    /// Calls `change` on every logged-in player, in id order.
    pub(crate) fn change_each(&mut self, mut change: impl FnMut(&mut Player)) {
        for player in self.players.values_mut() {
            self.visits.one();
            change(&mut PlayerMut::new(player, &mut self.books));
        }
    }

    /// A transition started: every client streams its destination anew.
    pub(crate) fn forget_loaded_levels(&mut self) {
        for player in self.players.values_mut() {
            self.visits.one();
            player.loaded = None;
        }
    }

    /// Every logged-in player's id, in order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &PlayerId> {
        self.players.keys().inspect(|_| self.visits.one())
    }

    /// Player and pawn records the whole-roster walks visited so far.
    #[cfg(test)]
    pub(crate) fn visits(&self) -> u64 {
        self.visits.total()
    }

    /// The player logged in on `connection`.
    pub(crate) fn player_on(&self, connection: ConnectionId) -> Option<&PlayerId> {
        self.connections.get(&connection)
    }

    /// The connection `player` is logged in on.
    pub(crate) fn connection_of(&self, player: &PlayerId) -> Option<ConnectionId> {
        self.players.get(player).map(|p| p.connection)
    }

    /// A ticket for a new save load, never reused.
    pub(crate) fn allocate_ticket(&mut self) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        ticket
    }

    /// Adds a player who just logged in.
    pub(crate) fn join(&mut self, player: Player) {
        self.connections.insert(player.connection, player.id.clone());
        if let Some(before) = self.players.get(&player.id) {
            // The game removes a player before it logs in again; should a second record of
            // the same id arrive anyway, it replaces the first in the books too (counted out
            // before the new one is counted in: both may be unplaced).
            self.books.count(&before.id, Counted::of(before), false);
        }
        self.books.count(&player.id, Counted::of(&player), true);
        self.logins.push(player.id.clone());
        self.players.insert(player.id.clone(), player);
    }

    /// The players who logged in since the last call, for the pause sync.
    pub(crate) fn take_logins(&mut self) -> Vec<PlayerId> {
        std::mem::take(&mut self.logins)
    }

    /// One more refused request of `player` at `now`, in its rate-limit window.
    pub(crate) fn record_refusal(&mut self, player: &PlayerId, now: Instant) -> RefusalVerdict {
        self.refusals.entry(player.clone()).or_insert_with(|| RefusalWindow::new(now)).record(now)
    }

    /// Removes the player on `connection` and every pawn it owns; returns the player and the
    /// removed pawns, in id order. Windows of refusals that are over are forgotten now, the
    /// leaving player's is kept while it lasts.
    pub(crate) fn leave(
        &mut self,
        connection: ConnectionId,
        now: Instant,
    ) -> Option<(Player, Vec<PawnId>)> {
        self.refusals.retain(|_, window| !window.is_over(now));
        let id = self.connections.remove(&connection)?;
        let player = self.players.remove(&id)?;
        self.books.count(&player.id, Counted::of(&player), false);
        let owned: Vec<PawnId> = self.owned.remove(&id).unwrap_or_default().into_iter().collect();
        for pawn in &owned {
            self.pawns.remove(pawn);
        }
        Some((player, owned))
    }

    /// The pawn `id`, if it exists.
    pub(crate) fn pawn(&self, id: PawnId) -> Option<&Pawn> {
        self.pawns.get(&id)
    }

    /// The pawn `id`, if it exists, for the coordinator to edit (its id and owner stay).
    pub(crate) fn pawn_mut(&mut self, id: PawnId) -> Option<&mut Pawn> {
        self.pawns.get_mut(&id)
    }

    /// Every pawn, in id order.
    pub(crate) fn pawns(&self) -> impl Iterator<Item = &Pawn> {
        self.pawns.values().inspect(|_| self.visits.one())
    }

    /// The pawn `player` possesses.
    pub(crate) fn possessed_pawn(&self, player: &PlayerId) -> Option<&Pawn> {
        self.players.get(player).and_then(|p| p.pawn).and_then(|pawn| self.pawns.get(&pawn))
    }

    /// How many pawns `player` owns (a dead pawn lingers until its replacement exists).
    pub(crate) fn owned_pawn_count(&self, player: &PlayerId) -> usize {
        self.owned.get(player).map_or(0, BTreeSet::len)
    }

    /// Creates a pawn for `owner` on `node`, with a fresh id (dead for an owner whose kept
    /// player state holds `State.Dead`).
    pub(crate) fn create_pawn(
        &mut self,
        owner: &PlayerId,
        character_def: CharacterDef,
        node: &NodeId,
        alive: bool,
    ) -> &Pawn {
        let id = PawnId(self.next_pawn);
        self.next_pawn += 1;
        let pawn = Pawn { id, owner: owner.clone(), character_def, node: node.clone(), alive };
        self.owned.entry(owner.clone()).or_default().insert(id);
        self.pawns.entry(id).or_insert(pawn)
    }

    /// Destroys a pawn; returns whether it existed.
    pub(crate) fn destroy_pawn(&mut self, id: PawnId) -> bool {
        let Some(pawn) = self.pawns.remove(&id) else { return false };
        if let Some(owned) = self.owned.get_mut(&pawn.owner) {
            owned.remove(&id);
            if owned.is_empty() {
                self.owned.remove(&pawn.owner);
            }
        }
        true
    }

    /// `ArePlayersPlaced`, the roster's half: every player placed or excused from placement.
    pub(crate) fn all_placed_or_excused(&self) -> bool {
        self.books.unplaced == 0
    }

    /// How many logged-in players have their finite effects paused.
    #[cfg(test)]
    pub(crate) fn paused_count(&self) -> usize {
        self.books.paused.len()
    }

    /// The players whose finite effects are paused, in id order.
    pub(crate) fn paused_players(&self) -> impl Iterator<Item = &PlayerId> {
        self.books.paused.iter()
    }

    /// The earliest finite-effect event (a tick or an expiry) of any player whose effects run.
    pub(crate) fn next_effect_event(&self) -> Option<Instant> {
        self.books.effect_events.first().map(|(at, _)| *at)
    }

    /// The players with a finite-effect event due at or before `now`, in time order, read from
    /// the index (not a walk of every player).
    pub(crate) fn effects_due(&self, now: Instant) -> Vec<PlayerId> {
        let due = self.books.effect_events.iter().take_while(|(at, _)| *at <= now);
        due.map(|(_, id)| id.clone()).collect()
    }

    /// The team a new player joins: the smaller of team 1 and team 2 (team 1 on a tie).
    pub(crate) fn smaller_team(&self) -> TeamId {
        let [one, two] = self.books.teams;
        TeamId(if one <= two { 1 } else { 2 })
    }

    /// The team rebalance of a travel (only for worlds that ask for it): teams are evened
    /// out, then one pair, chosen by the transition id, swaps sides. Returns the players whose
    /// team changed, in the order they changed (a player may appear twice).
    pub(crate) fn rebalance_teams(&mut self, id: TransitionId) -> Vec<PlayerId> {
        let on = |roster: &Roster, t: u8| -> Vec<PlayerId> {
            roster.players.values().filter(|p| p.team == TeamId(t)).map(|p| p.id.clone()).collect()
        };
        let mut changed = Vec::new();
        loop {
            let (one, two) = (on(self, 1), on(self, 2));
            let (from, to) = if one.len() > two.len() + 1 {
                (one, 2)
            } else if two.len() > one.len() + 1 {
                (two, 1)
            } else {
                break;
            };
            if let Some(mut p) = from.last().and_then(|p| self.player_mut(p)) {
                p.team = TeamId(to);
                changed.push(p.id.clone());
            }
        }
        let (one, two) = (on(self, 1), on(self, 2));
        if !one.is_empty() && !two.is_empty() {
            let pick = |v: &Vec<PlayerId>| v[id.0 as usize % v.len()].clone();
            let (a, b) = (pick(&one), pick(&two));
            if let Some(mut p) = self.player_mut(&a) {
                p.team = TeamId(2);
            }
            if let Some(mut p) = self.player_mut(&b) {
                p.team = TeamId(1);
            }
            changed.extend([a, b]);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A login rate no test here reaches.
    fn test_rate() -> LoginRate {
        LoginRate::new(u32::MAX, std::time::Duration::ZERO)
    }

    fn pid(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    fn player(name: &str, connection: u64, team: u8) -> Player {
        Player::new(pid(name), ConnectionId(connection), TeamId(team), 1, 100)
    }

    type Counts = (usize, Vec<PlayerId>, [usize; 2], Vec<(Instant, PlayerId)>);

    /// The books as a scan of every player would count them.
    fn recount(roster: &Roster) -> Counts {
        let players = || roster.players.values();
        let unplaced = players().filter(|p| !p.is_placed_or_excused()).count();
        let paused = players().filter(|p| p.abilities.is_paused()).map(|p| p.id.clone()).collect();
        let on = |t: u8| players().filter(|p| p.team == TeamId(t)).count();
        let mut events: Vec<_> = players()
            .filter_map(|p| p.abilities.next_event().map(|at| (at, p.id.clone())))
            .collect();
        events.sort();
        (unplaced, paused, [on(1), on(2)], events)
    }

    fn books(roster: &Roster) -> Counts {
        let b = &roster.books;
        let events = b.effect_events.iter().cloned().collect();
        (b.unplaced, b.paused.iter().cloned().collect(), b.teams, events)
    }

    /// A rebalance evens out teams that differ by more than one, then swaps one pair: teams
    /// that differ by one are even already (nobody moves for the odd player), and a lone
    /// player has nobody to swap with.
    #[test]
    fn a_rebalance_moves_nobody_for_the_odd_player_and_swaps_only_across_two_teams() {
        let mut roster = Roster::new(test_rate());
        roster.join(player("a", 1, 1));
        roster.join(player("b", 2, 1));
        roster.join(player("c", 3, 2));
        let changed = roster.rebalance_teams(TransitionId(1));
        assert_eq!(changed.len(), 2, "one pair swapped, nobody moved: {changed:?}");
        assert_eq!(roster.books.teams, [2, 1]);
        let mut mirror = Roster::new(test_rate());
        mirror.join(player("a", 1, 2));
        mirror.join(player("b", 2, 2));
        mirror.join(player("c", 3, 1));
        assert_eq!(mirror.rebalance_teams(TransitionId(1)).len(), 2, "the same from team 2");
        assert_eq!(mirror.books.teams, [1, 2]);
        let mut lone = Roster::new(test_rate());
        lone.join(player("a", 1, 1));
        assert!(lone.rebalance_teams(TransitionId(1)).is_empty());
        assert_eq!(lone.books.teams, [1, 0]);
    }

    /// The counts the per-input checks read (unplaced players, paused effects, team
    /// sizes) agree with a scan of every player after joins, every kind of change, a
    /// rebalance and departures.
    #[test]
    fn the_books_agree_with_a_scan_after_every_change() {
        let t0 = Instant::now();
        let mut roster = Roster::new(test_rate());
        let check =
            |roster: &Roster, step: &str| assert_eq!(books(roster), recount(roster), "{step}");
        for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            roster.join(player(name, i as u64, 1));
            check(&roster, name);
        }
        assert!(!roster.all_placed_or_excused());
        assert_eq!(roster.smaller_team(), TeamId(2));
        for name in ["a", "b", "c"] {
            if let Some(mut p) = roster.player_mut(&pid(name)) {
                p.possess(PawnId(1), &[]);
                p.acknowledge(PawnId(1));
            }
            check(&roster, name);
        }
        if let Some(mut p) = roster.player_mut(&pid("d")) {
            p.placement_excused = true;
        }
        check(&roster, "d excused");
        assert!(roster.all_placed_or_excused());
        roster.change_each(|p| p.abilities.pause(t0));
        check(&roster, "paused");
        assert_eq!(roster.paused_count(), 4);
        if let Some(mut p) = roster.player_mut(&pid("b")) {
            p.abilities.resume(t0);
            p.possess(PawnId(2), &[]);
        }
        check(&roster, "b resumed and unplaced");
        assert!(!roster.all_placed_or_excused());
        roster.rebalance_teams(TransitionId(3));
        check(&roster, "rebalanced");
        assert_eq!(roster.smaller_team(), TeamId(1), "an even split picks team 1");
        roster.leave(ConnectionId(1), t0);
        check(&roster, "b left");
        assert!(roster.all_placed_or_excused());
        assert_eq!(roster.paused_count(), 3);
        for connection in [0, 2, 3] {
            roster.leave(ConnectionId(connection), t0);
        }
        assert_eq!(books(&roster), (0, Vec::new(), [0, 0], Vec::new()));
    }

    /// A second record of the same player id replaces the first in the books as well: the
    /// player stays unplaced (both records are).
    #[test]
    fn a_second_join_of_the_same_id_keeps_the_books_in_agreement_with_a_scan() {
        let mut roster = Roster::new(test_rate());
        roster.join(player("a", 0, 1));
        roster.join(player("a", 1, 1));
        assert_eq!(books(&roster), recount(&roster));
        assert!(!roster.all_placed_or_excused(), "a is not placed");
    }

    /// A departure removes exactly the leaving player's pawns (live and lingering dead), from
    /// the owner index rather than a scan of every pawn; the others keep theirs.
    #[test]
    fn a_departure_removes_exactly_its_own_pawns() {
        let t0 = Instant::now();
        let mut roster = Roster::new(test_rate());
        roster.join(player("a", 1, 1));
        roster.join(player("b", 2, 2));
        let (def, node) = (CharacterDef::new("Vanguard").unwrap(), NodeId::new("harbor").unwrap());
        let dead = roster.create_pawn(&pid("a"), def.clone(), &node, false).id;
        let live = roster.create_pawn(&pid("a"), def.clone(), &node, true).id;
        let other = roster.create_pawn(&pid("b"), def.clone(), &node, true).id;
        let gone = roster.create_pawn(&pid("a"), def, &node, true).id;
        assert!(roster.destroy_pawn(gone));
        assert!(!roster.destroy_pawn(gone), "once");
        assert_eq!(
            (roster.owned_pawn_count(&pid("a")), roster.owned_pawn_count(&pid("b"))),
            (2, 1)
        );
        let (_, removed) = roster.leave(ConnectionId(1), t0).unwrap();
        assert_eq!(removed, vec![dead, live]);
        assert_eq!(roster.pawns().map(|p| p.id).collect::<Vec<_>>(), vec![other]);
        assert_eq!(roster.owned_pawn_count(&pid("a")), 0);
    }
}

//! One server of the fleet plays a player at a time (docs/spec/travel.md V17): a newer login
//! wins, as it does on one server, with the store's version as the fence.
//!
//! 1. **A login takes the player.** A session-token login whose save names another server as
//!    its holder writes the player at once, at exactly the version it loaded
//!    ([`Output::Handover`] with [`HandoverSide::Take`]): the store's version moves on, and
//!    this server is the holder.
//! 2. **The older server is told.** A take won sends that server `PlayerTaken` with the version
//!    it wrote.
//! 3. **A conflict fences.** A player this server plays (its save loaded, not moving) whose save
//!    conflicted with a newer version, or whom `PlayerTaken` names at a newer version than this
//!    server's, is closed `Replaced` and dropped: not saved again, not kept for a relaunch (S9).
//!
//! A take lost means the row moved after the login loaded it (the older server's last save
//! landed late, or another login took it first): the newer login still wins, so the player is
//! loaded again and taken at the version found, at most [`TAKE_ATTEMPTS`] times in all; past
//! them it is fenced as in 3, as it is when that load fails (it never plays on a failed load's
//! defaults in place of what it had).
//!
//! A session-token login of a player moving here (a seat held for it) takes nothing and is
//! never saved: the move's handoff save and claim alone write it (V5), and its traveller's
//! ticket login replaces it.
//!
//! [`Takes`] holds the takes awaiting the store's answer and the attempts of each login, and
//! nothing else; the player states are the roster's, the kept ones the session's.

use std::collections::BTreeMap;
use std::time::Instant;

use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{CloseCode, PlayerId, ServerId};

use super::players::Persistence;
use super::{ConnectionId, Departure, Game, HandoverOutcome, HandoverSide, Output, persistence};

/// How many times one login takes its player, each after a fresh load, before a take lost
/// fences it (docs/spec/travel.md V17).
pub(crate) const TAKE_ATTEMPTS: u32 = 3;

/// A take awaiting the store's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Take {
    /// Whose.
    player: PlayerId,
    /// The server that held the save the login loaded: told once the take is won.
    from: ServerId,
    /// The login's connection: a take lost fences that connection only.
    connection: ConnectionId,
}

/// The takes in flight, by their handover ticket, and the takes each login made so far.
#[derive(Debug, Default)]
pub(crate) struct Takes {
    pending: BTreeMap<u64, Take>,
    /// Takes made by the login on a connection, while it takes (forgotten once one is won,
    /// undecided, or the login fenced or gone).
    attempts: BTreeMap<ConnectionId, u32>,
}

impl Takes {
    /// The login on `connection` left: its count of takes goes (a take still pending is
    /// settled by its answer, which finds the connection gone).
    pub(crate) fn left(&mut self, connection: ConnectionId) {
        self.attempts.remove(&connection);
    }

    /// Whether no take awaits the store and no login's takes are counted.
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.attempts.is_empty()
    }
}

impl Game {
    /// After `id`'s save loaded, naming `holder` as the server that wrote it: if that is
    /// another server and the player is an ordinary login here (its save loaded, neither a
    /// traveller awaiting its claim nor a moving player, whose saves V5 rules), this server
    /// takes it (module docs, 1).
    pub(crate) fn take_if_held_elsewhere(&mut self, id: &PlayerId, holder: Option<ServerId>) {
        let Some(me) = self.rules.server.clone() else { return };
        let Some(from) = holder.filter(|holder| *holder != me) else { return };
        let Some(player) = self.roster.player(id) else { return };
        if !matches!(player.persistence, Persistence::Loaded { .. }) {
            return;
        }
        let connection = player.connection;
        let node = Some(self.current_spawn_node());
        let Some(save) = persistence::player_save(&self.roster, id, node, Some(&me)) else {
            return;
        };
        let ticket = self.roster.allocate_ticket();
        let attempts = self.takes.attempts.entry(connection).or_insert(0);
        *attempts += 1;
        tracing::info!(player = %id, holder = %from, version = save.version, attempt = *attempts,
            "login of a player another server holds: taking it");
        self.takes.pending.insert(ticket, Take { player: id.clone(), from, connection });
        self.out.push(Output::Handover { side: HandoverSide::Take, save, ticket });
    }

    /// A session-token login of `id` whose save loaded while a seat is held here for it (a move
    /// of it to here is in flight): the move's handoff save and claim alone write it (V5), so
    /// this copy takes nothing and is never saved; the traveller's ticket login replaces it.
    /// Returns whether it was such a login (module docs).
    pub(crate) fn await_the_traveller(&mut self, id: &PlayerId) -> bool {
        if !self.seats.awaits(id) {
            return false;
        }
        let Some(mut player) = self.roster.player_mut(id) else { return false };
        if !matches!(player.persistence, Persistence::Loaded { .. }) {
            return false;
        }
        player.persistence = Persistence::Disabled;
        drop(player);
        tracing::info!(player = %id,
            "login of a player moving here: it plays unsaved until its traveller arrives");
        true
    }

    /// The store answered the handover `ticket` of `player`: if it is a take, it is settled
    /// here and true is returned; false for a claim's or a recall's.
    ///
    /// Won: the player's saves carry the version written, and the server it was taken from is
    /// told (`PlayerTaken`). Lost: another server wrote the player since the login loaded it,
    /// so the login loads it again and takes it at the version found, up to [`TAKE_ATTEMPTS`]
    /// takes, then is fenced; a take of an older connection changes nothing (a newer
    /// connection's own load came after). Undecided: it plays on; its next save decides.
    pub(crate) fn take_decided(
        &mut self,
        now: Instant,
        player: &PlayerId,
        ticket: u64,
        outcome: HandoverOutcome,
    ) -> bool {
        let Some(take) = self.takes.pending.remove(&ticket) else { return false };
        let current = self.roster.player(player).is_some_and(|p| p.connection == take.connection);
        let attempts = match outcome {
            HandoverOutcome::Lost if current => {
                self.takes.attempts.get(&take.connection).copied().unwrap_or(TAKE_ATTEMPTS)
            }
            _ => {
                self.takes.attempts.remove(&take.connection);
                0
            }
        };
        match outcome {
            HandoverOutcome::Won { version } => {
                self.out.counters.players_taken += 1;
                if current
                    && let Some(mut p) = self.roster.player_mut(player)
                    && matches!(p.persistence, Persistence::Loaded { .. })
                {
                    p.persistence = Persistence::Loaded { version };
                }
                tracing::info!(%player, from = %take.from, version,
                    "player taken from another server: telling it");
                let message = PeerMessage::PlayerTaken { player: take.player, version };
                self.out.push(Output::Peer { to: take.from, message });
            }
            HandoverOutcome::Lost if current && attempts < TAKE_ATTEMPTS => {
                self.reload(player);
            }
            // The fence's departure forgets the login's takes (`Takes::left`).
            HandoverOutcome::Lost if current => {
                let why = "its takes lost: other servers wrote it after each load";
                self.fence(now, player, why);
            }
            HandoverOutcome::Lost => self.out.counters.stale_ignored += 1,
            HandoverOutcome::Failed => {
                tracing::warn!(%player, from = %take.from,
                    "the store did not decide the take: playing on, its next save decides");
            }
        }
        true
    }

    /// A take of `player` was lost: its save is loaded again, and the load takes it again at
    /// the version found (`take_if_held_elsewhere`). Meanwhile it plays on, unsaved.
    fn reload(&mut self, player: &PlayerId) {
        let ticket = self.roster.allocate_ticket();
        let Some(mut p) = self.roster.player_mut(player) else { return };
        if !matches!(p.persistence, Persistence::Loaded { .. }) {
            return;
        }
        p.persistence = Persistence::Loading { ticket };
        drop(p);
        tracing::info!(%player, "take lost: another server wrote the player since its load; loading it again");
        self.out.push(Output::LoadPlayer { player: player.clone(), ticket });
    }

    /// `id`'s load under `ticket` failed, and it was the reload after a lost take (its login
    /// took already): the player is fenced, keeping what the store has, instead of playing on
    /// a failed load's defaults in place of what it had (module docs). Returns whether it was.
    pub(crate) fn reload_failed(
        &mut self,
        now: Instant,
        id: &PlayerId,
        ticket: u64,
        failed: bool,
    ) -> bool {
        let Some(player) = self.roster.player(id) else { return false };
        let reloading = player.persistence == (Persistence::Loading { ticket })
            && self.takes.attempts.contains_key(&player.connection);
        if !failed || !reloading {
            return false;
        }
        self.out.counters.load_failures += 1;
        self.fence(now, id, "its load after a lost take failed: the store keeps the newer copy");
        true
    }

    /// `Input::PlayerSaveConflicted`: a save of `player` met the stored version `found`. It was
    /// this connection's when `found` is newer than the version the connection loaded or took
    /// (a save of an older connection ran before this one's load, so it met at most that
    /// version): the player is fenced. Otherwise, or for a player not playing here with its
    /// save loaded (gone, loading, moving, or never saved), nothing changes.
    pub(crate) fn handle_save_conflicted(
        &mut self,
        now: Instant,
        player: &PlayerId,
        found: Option<u64>,
    ) {
        let ours = match self.roster.player(player).map(|p| &p.persistence) {
            Some(Persistence::Loaded { version }) => *version,
            _ => {
                self.out.counters.stale_ignored += 1;
                return;
            }
        };
        if found.is_none_or(|found| found <= ours) {
            tracing::debug!(%player, version = ours, found,
                "a save conflict of an older connection of the player: ignored");
            self.out.counters.stale_ignored += 1;
            return;
        }
        self.fence(now, player, "a save of it conflicted: another server wrote it since");
    }

    /// `PlayerTaken` from `from`: it took `player` at `version`. A copy this server plays at an
    /// older version is fenced; a state kept for its relaunch is dropped (the player played
    /// elsewhere since). A copy at `version` or newer (this server took it back since), loading,
    /// or moving stays: the message is stale.
    pub(crate) fn handle_player_taken(
        &mut self,
        now: Instant,
        from: &ServerId,
        player: &PlayerId,
        version: u64,
    ) {
        match self.roster.player(player).map(|p| &p.persistence) {
            Some(Persistence::Loaded { version: ours }) if *ours < version => {
                tracing::debug!(%player, %from, version, ours, "PlayerTaken for an older copy");
                self.fence(now, player, "another server took it (PlayerTaken)");
            }
            Some(_) => {
                tracing::debug!(%player, %from, version, "PlayerTaken for a newer copy: stale");
                self.out.counters.stale_ignored += 1;
            }
            None => self.session.forget_kept(player),
        }
    }

    /// Closes `player`'s connection `Replaced` and drops it unsaved and unkept: another server
    /// plays it now, and what this copy did since its last save is lost (docs/spec/travel.md
    /// V17).
    fn fence(&mut self, now: Instant, player: &PlayerId, why: &str) {
        let Some(mut p) = self.roster.player_mut(player) else { return };
        // Never saved again: the departure's save is skipped.
        p.persistence = Persistence::Disabled;
        let connection = p.connection;
        drop(p);
        self.out.counters.players_replaced_elsewhere += 1;
        tracing::info!(%player, connection = connection.0, reason = %why,
            "the player plays on another server: closed Replaced, dropped unsaved");
        self.out.push(Output::Close { connection, code: CloseCode::Replaced });
        self.depart(now, connection, Departure::closed_because(CloseCode::Replaced, why), false);
    }
}

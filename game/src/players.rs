//! One player and one pawn: the records the roster (`roster.rs`) keeps.
//!
//! A [`Player`] is one logged-in connection (Unreal's PlayerController) together with its
//! player state: team, CharacterDef, preset, ability system, inventory, and where its save
//! stands. A [`Pawn`] is owned by a player and stands on a node; the player possesses at most
//! one pawn at a time, and a dead pawn lingers (unpossessed) until its replacement exists.
//! Transition bookkeeping (who reported ready, when a player was shown a transition) is not
//! here: the transition owns it (`transition.rs`).
//!
//! A leaving player's player state becomes a [`KeptState`] (the session keeps it for
//! `[game] player_state_retention_ms`) and is restored into the player of a relaunch. A travel
//! carries it to another server as a [`HandoffState`] instead ([`Player::handoff`],
//! [`Player::arrive`]; docs/spec/travel.md V2, V4).

use std::collections::VecDeque;
use std::time::Instant;

use gatehouse_protocol::{
    CharacterDef, NodeId, PawnId, PawnView, PlayerId, PlayerStateView, TeamId,
};
use gatehouse_tags::GameplayTag;

use super::ConnectionId;
use super::abilities::AbilityState;
use crate::model::{HandoffDefect, HandoffState, InventoryItem, Preset};

/// Where a player's save stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// Its load is in flight: the preset is not known yet.
    Loading {
        /// Names the load; a reply with another ticket is stale.
        ticket: u64,
    },
    /// Loaded (or new): saves carry this version.
    Loaded {
        /// The version the load found (0: new); every save of the session is based on it.
        version: u64,
    },
    /// The load failed or timed out: the player plays the default preset and is never saved,
    /// so the stored save is not overwritten with defaults.
    Disabled,
    /// Moving between servers (docs/spec/travel.md V5): its save stands at the handoff save's
    /// `version`, which neither server writes but by a claim or a recall; no other save is
    /// made of it meanwhile.
    Handover {
        /// The handoff save's version.
        version: u64,
    },
}

/// The resolved preset of a player state.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedPreset {
    /// What the save records.
    pub(crate) source: Preset,
    /// The composed kits it grants.
    pub(crate) kits: Vec<GameplayTag>,
}

/// A logged-in player and its player state.
#[derive(Debug)]
pub(crate) struct Player {
    pub(crate) id: PlayerId,
    pub(crate) connection: ConnectionId,
    pub(crate) team: TeamId,
    /// The pawn class; unknown until the save loads (or a relaunch remembers it). No pawn is
    /// spawned for a player without one.
    pub(crate) character_def: Option<CharacterDef>,
    /// The preset, once resolved.
    pub(crate) preset: Option<ResolvedPreset>,
    pub(crate) persistence: Persistence,
    /// Belongs to the player (its controller, not the pawn); survives pawn swaps.
    pub(crate) inventory: Vec<InventoryItem>,
    /// Equipment tags (infinite effects on the ability system).
    pub(crate) equipment: Vec<GameplayTag>,
    pub(crate) abilities: AbilityState,
    /// A dead pawn waiting for its replacement to exist before it is destroyed.
    pub(crate) dead_pawn: Option<PawnId>,
    /// The pawn this player possesses.
    pub(crate) pawn: Option<PawnId>,
    /// The pawn the owning client acknowledged possession of. The player is placed only when
    /// this equals `pawn` (docs/spec/transitions.md T8: placed means acknowledged).
    pub(crate) acknowledged: Option<PawnId>,
    /// The last pawns possessed for this player (kept across a relaunch): an acknowledgement
    /// of one of them that is not `pawn` is stale; of any other pawn, refused.
    pub(crate) possessed: RecentPawns,
    /// The node whose levels this player's client reported streamed (its join, or the
    /// transition in flight), forgotten when a transition starts: a pawn is placed for it only
    /// there (docs/spec/transitions.md T1: never a pawn before its level, on any machine).
    pub(crate) loaded: Option<NodeId>,
    /// The client left a possession unacknowledged for a whole settle timeout under the
    /// `proceed` policy: settle-holds do not wait for it until it acknowledges a pawn.
    pub(crate) placement_excused: bool,
}

/// Counts refused requests per window: past a limit further refusals are dropped with one
/// `RateLimited` error, and far past it the connection is closed for abuse.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefusalWindow {
    started: Instant,
    count: u32,
}

/// What to do with one more refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefusalVerdict {
    /// Answer it with its error.
    Answer,
    /// Answer with `RateLimited` (once per window), then stay silent.
    Limit,
    /// Drop it silently.
    Drop,
    /// Close the connection.
    Close,
}

impl RefusalWindow {
    /// Window length.
    pub(crate) const WINDOW: std::time::Duration = std::time::Duration::from_secs(10);
    /// Refusals answered per window.
    pub(crate) const ANSWERED: u32 = 5;
    /// Refusals per window that close the connection.
    pub(crate) const CLOSE_AT: u32 = 50;

    /// A window starting at `now`, with nothing counted yet.
    pub(crate) fn new(now: Instant) -> Self {
        RefusalWindow { started: now, count: 0 }
    }

    /// Whether the window started `WINDOW` or more before `now`: it counts nothing any more.
    pub(crate) fn is_over(&self, now: Instant) -> bool {
        now.duration_since(self.started) >= Self::WINDOW
    }

    /// Counts one refusal at `now` (starting a new window if this one is over) and says what to
    /// do with it: answer it, answer once that the limit is reached, drop it, or close.
    pub(crate) fn record(&mut self, now: Instant) -> RefusalVerdict {
        if self.is_over(now) {
            *self = RefusalWindow::new(now);
        }
        self.count += 1;
        match self.count {
            n if n <= Self::ANSWERED => RefusalVerdict::Answer,
            n if n == Self::ANSWERED + 1 => RefusalVerdict::Limit,
            n if n >= Self::CLOSE_AT => RefusalVerdict::Close,
            _ => RefusalVerdict::Drop,
        }
    }
}

impl Player {
    /// A player who just logged in on `connection`, not yet placed.
    pub(crate) fn new(
        id: PlayerId,
        connection: ConnectionId,
        team: TeamId,
        ticket: u64,
        max_health: u32,
    ) -> Self {
        Player {
            id,
            connection,
            team,
            character_def: None,
            preset: None,
            persistence: Persistence::Loading { ticket },
            inventory: Vec::new(),
            equipment: Vec::new(),
            abilities: AbilityState::new(max_health),
            dead_pawn: None,
            pawn: None,
            acknowledged: None,
            possessed: RecentPawns::default(),
            loaded: None,
            placement_excused: false,
        }
    }

    /// The player state to keep when this player leaves at `now`: its finite effects pause
    /// while it is away.
    pub(crate) fn keep(mut self, now: Instant) -> KeptState {
        self.abilities.pause(now);
        KeptState {
            left_at: now,
            team: self.team,
            character_def: self.character_def,
            abilities: self.abilities,
            possessed: self.possessed,
        }
    }

    /// A relaunch: the player state kept when this player left comes back whole (team, tags,
    /// effects, health, kit latches, class). Its effects stay paused until the join ends.
    pub(crate) fn restore(&mut self, kept: KeptState) {
        self.team = kept.team;
        self.character_def = kept.character_def;
        self.abilities = kept.abilities;
        self.possessed = kept.possessed;
    }

    /// The player state a travel's handoff save carries at `now` (docs/spec/travel.md V2):
    /// team, health, tags, effects (paused: their time left from the pause, or from `now`) and
    /// kit latches ([`AbilityState::handoff`]).
    pub(crate) fn handoff(&self, now: Instant) -> HandoffState {
        let (tags, effects, kits) = self.abilities.handoff(now);
        HandoffState { team: self.team, health: self.abilities.health(), tags, effects, kits }
    }

    /// A traveller's arrival at `now` on the destination, a world whose players have
    /// `max_health` (docs/spec/travel.md V4): its team and ability state become the handoff
    /// save's ([`AbilityState::from_handoff`]: effects paused at `now` until its transition
    /// ends, health clamped, a dead player dead), as a relaunch's kept state does
    /// ([`Player::restore`]).
    ///
    /// # Errors
    /// The [`HandoffDefect`] [`HandoffState::check`] finds; the player is left as it was.
    pub(crate) fn arrive(
        &mut self,
        state: &HandoffState,
        max_health: u32,
        now: Instant,
    ) -> Result<(), HandoffDefect> {
        self.abilities = AbilityState::from_handoff(state, max_health, now)?;
        self.team = state.team;
        Ok(())
    }

    /// Whether the player has a pawn whose possession its client acknowledged.
    pub(crate) fn is_placed(&self) -> bool {
        self.pawn.is_some() && self.acknowledged == self.pawn
    }

    /// Whether a settle-hold has nothing to wait for from this player: it is placed, or
    /// excused from placement.
    pub(crate) fn is_placed_or_excused(&self) -> bool {
        self.is_placed() || self.placement_excused
    }

    /// `PossessedBy` on the player's side: it controls `pawn` now (its client must acknowledge
    /// it), and the ability system initialises (`InitAbilityActorInfo`: the kit latch's
    /// possession side). Returns the kits granted now and the dead pawn that waited for this
    /// replacement, for the caller to destroy.
    pub(crate) fn possess(
        &mut self,
        pawn: PawnId,
        startup: &[GameplayTag],
    ) -> (Vec<GameplayTag>, Option<PawnId>) {
        self.pawn = Some(pawn);
        self.possessed.push(pawn);
        self.acknowledged = None;
        let composed = self.preset.as_ref().map(|preset| preset.kits.clone());
        let granted = self.abilities.init_ability_actor_info(startup, composed.as_deref());
        (granted, self.dead_pawn.take())
    }

    /// Its client acknowledged `pawn`, the pawn it possesses: the player is placed, and no
    /// longer excused from placement.
    pub(crate) fn acknowledge(&mut self, pawn: PawnId) {
        self.acknowledged = Some(pawn);
        self.placement_excused = false;
    }

    /// Whether the player's ability state holds `State.Dead`.
    pub(crate) fn is_dead(&self) -> bool {
        self.abilities.is_dead()
    }

    /// Whether clients are told of this player state: once its class is known, at login for a
    /// relaunch that kept it, else once its save loaded (docs/spec/sessions.md S13). Before
    /// that nothing about it is replicated, not even its leaving.
    pub(crate) fn is_announced(&self) -> bool {
        self.character_def.is_some()
    }

    /// The player state as clients see it (`PlayerState` messages and snapshots).
    pub(crate) fn view(&self) -> PlayerStateView {
        PlayerStateView {
            player_id: self.id.clone(),
            team: Some(self.team),
            character_def: self.character_def.clone(),
        }
    }
}

/// A leaving player's player state, kept for a relaunch (`[game] player_state_retention_ms`).
#[derive(Debug)]
pub(crate) struct KeptState {
    /// When the player left.
    pub(crate) left_at: Instant,
    pub(crate) team: TeamId,
    pub(crate) character_def: Option<CharacterDef>,
    /// Tags, effects (paused), health and kit latches.
    pub(crate) abilities: AbilityState,
    pub(crate) possessed: RecentPawns,
}

/// How many of a player's last pawns an acknowledgement may still name: one in flight is for a
/// pawn possessed within a round trip of the newest, so a few cover any real client, and what a
/// player keeps does not grow with its deaths and travels (docs/protocol.md 5, "Client → server").
pub(crate) const RECENT_PAWNS: usize = 8;

/// A player's last [`RECENT_PAWNS`] pawns, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecentPawns(VecDeque<PawnId>);

impl RecentPawns {
    /// Remembers `pawn`, forgetting the oldest past [`RECENT_PAWNS`].
    pub(crate) fn push(&mut self, pawn: PawnId) {
        if self.0.len() == RECENT_PAWNS {
            self.0.pop_front();
        }
        self.0.push_back(pawn);
    }

    /// Whether `pawn` is one of them.
    pub(crate) fn contains(&self, pawn: &PawnId) -> bool {
        self.0.contains(pawn)
    }

    /// How many are remembered.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// A pawn in the world.
#[derive(Debug, Clone)]
pub(crate) struct Pawn {
    pub(crate) id: PawnId,
    pub(crate) owner: PlayerId,
    pub(crate) character_def: CharacterDef,
    pub(crate) node: NodeId,
    pub(crate) alive: bool,
}

impl Pawn {
    /// The pawn died (`PawnDied`): it stays in the world, dead, until its replacement.
    pub(crate) fn die(&mut self) {
        self.alive = false;
    }

    /// The pawn as clients see it (`PawnSpawned` messages and snapshots).
    pub(crate) fn view(&self) -> PawnView {
        PawnView {
            pawn_id: self.id,
            owner: self.owner.clone(),
            character_def: self.character_def.clone(),
            node: self.node.clone(),
            alive: self.alive,
        }
    }
}

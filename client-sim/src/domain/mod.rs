//! The simulated client's domain objects: login, world, player states, characters, UI
//! subsystem and team cache, as the game's own classes would hold them.
//!
//! Domain objects expose their state and change it when replication or time says so; each
//! change returns what changed so the replication layer can announce it. They do not include,
//! resolve or call the lifecycle registry, the adapters or the router (seed 000, "System
//! boundary"): the dependency points one way, from the adapters to here.

mod character;
mod login;
mod player_state;
mod team;
mod ui;
mod world;

use std::time::Instant;

use gatehouse_protocol::{NodeId, PlayerId, PlayerStateView, TransitionId};

pub use character::{Character, Characters, NetRole, Spawned};
pub use login::Login;
pub use player_state::{PlayerState, PlayerStateChange, PlayerStates, is_valid_team};
pub use team::{TeamCache, TeamChange};
pub use ui::{UiConfig, UiEvents, UiSubsystem};
pub use world::{World, WorldPhase};

use crate::ids::WorldId;

/// What a travel did to the worlds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Travelled {
    /// The world torn down, if there was one.
    pub torn_down: Option<WorldId>,
    /// The world created for the destination.
    pub created: WorldId,
}

/// Every domain object of one simulated client.
#[derive(Debug)]
pub struct Domain {
    pub(crate) login: Login,
    pub(crate) world: Option<World>,
    worlds_created: u64,
    pub(crate) player_states: PlayerStates,
    pub(crate) characters: Characters,
    pub(crate) ui: UiSubsystem,
    pub(crate) teams: TeamCache,
}

impl Domain {
    /// A client before login: no world, nothing replicated.
    pub fn new(ui: UiConfig, seed: u64) -> Domain {
        Domain {
            login: Login::default(),
            world: None,
            worlds_created: 0,
            player_states: PlayerStates::default(),
            characters: Characters::default(),
            ui: UiSubsystem::new(ui, seed),
            teams: TeamCache::default(),
        }
    }

    /// The login.
    pub fn login(&self) -> &Login {
        &self.login
    }

    /// The player this client is, once logged in.
    pub fn local_player(&self) -> Option<&PlayerId> {
        self.login.player()
    }

    /// The local player's controlled player state, once replicated.
    pub fn local_player_state(&self) -> Option<&PlayerState> {
        self.player_states.get(self.local_player()?)
    }

    /// The current world.
    pub fn world(&self) -> Option<&World> {
        self.world.as_ref()
    }

    /// Every player state.
    pub fn player_states(&self) -> &PlayerStates {
        &self.player_states
    }

    /// Every character.
    pub fn characters(&self) -> &Characters {
        &self.characters
    }

    /// The UI subsystem.
    pub fn ui(&self) -> &UiSubsystem {
        &self.ui
    }

    /// The team cache.
    pub fn teams(&self) -> &TeamCache {
        &self.teams
    }

    /// The session token was validated: the client is `player`. Returns false for a repeat.
    pub(crate) fn log_in(&mut self, now: Instant, player: PlayerId) -> bool {
        if self.login.player() == Some(&player) {
            return false;
        }
        self.login = Login::Succeeded { player };
        self.ui.arm_resets(now);
        true
    }

    /// The validated login ended. Returns whether it was active.
    pub(crate) fn log_out(&mut self) -> bool {
        let was = self.login.is_active();
        self.login = Login::Ended;
        was
    }

    /// Travels: tears down the current world (its characters stop playing) and creates a new
    /// one for `node`, whose UI rebuilds every widget controller.
    pub(crate) fn travel(
        &mut self,
        now: Instant,
        node: Option<NodeId>,
        transition: Option<TransitionId>,
    ) -> Travelled {
        let torn_down = self.tear_down_world();
        self.worlds_created += 1;
        let created = WorldId(self.worlds_created);
        self.world = Some(World::new(created, node, transition, now));
        self.ui.rebuild(now);
        Travelled { torn_down, created }
    }

    /// Freezes or unfreezes every character locally (seed 001: on every machine).
    pub(crate) fn set_characters_frozen(&mut self, frozen: bool) {
        self.characters.set_frozen(frozen);
    }

    /// Tears down the current world, if any.
    pub(crate) fn tear_down_world(&mut self) -> Option<WorldId> {
        let world = self.world.take()?;
        self.characters.set_begun_play(false);
        Some(world.id())
    }

    /// The current world begins play, and every character in it. Returns the world if it was
    /// loading.
    pub(crate) fn begin_play(&mut self, now: Instant) -> Option<WorldId> {
        let world = self.world.as_mut()?;
        if !world.begin_play(now) {
            return None;
        }
        self.characters.set_begun_play(true);
        Some(world.id())
    }

    /// Applies a replicated player state to the player state and the team cache; the UI starts
    /// building a new player state's controller.
    pub(crate) fn apply_player_state(
        &mut self,
        now: Instant,
        view: PlayerStateView,
    ) -> (PlayerStateChange, Option<TeamChange>) {
        let player = view.player_id.clone();
        let team = view.team;
        let change = self.player_states.apply(view);
        if change.appeared {
            self.ui.track(now, &player);
        }
        let team_change = self.teams.update(&player, team);
        (change, team_change)
    }

    /// A player left: its player state, cached team and widget controller go.
    pub(crate) fn remove_player_state(&mut self, player: &PlayerId) -> bool {
        self.ui.untrack(player);
        self.teams.remove(player);
        self.player_states.remove(player).is_some()
    }

    /// Whether the current world plays.
    pub(crate) fn is_playing(&self) -> bool {
        self.world.as_ref().is_some_and(World::is_playing)
    }
}

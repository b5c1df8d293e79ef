//! The simulated client's domain objects: the replicated world (the library's
//! [`Replica`]: login, world, player states, characters) beside the example game's own UI
//! subsystem and team cache, as the game's own classes would hold them.
//!
//! Domain objects expose their state and change it when replication or time says so; each
//! change returns what changed so the replication layer can announce it. They do not include,
//! resolve or call the lifecycle registry, the adapters or the router: the dependency points one
//! way, from the adapters to here (docs/client.md, "The replicated world").

mod team;
mod ui;

use std::time::Instant;

use gatehouse_protocol::PlayerId;

pub use gatehouse_client::world::{
    Character, Characters, Login, NetRole, PlayerState, PlayerStateChange, PlayerStates, Replica,
    World, WorldPhase, is_valid_team,
};
pub use team::{TeamCache, TeamChange};
pub use ui::{UiConfig, UiEvents, UiSubsystem};

/// Every domain object of one simulated client.
#[derive(Debug)]
pub struct Domain {
    pub(crate) replica: Replica,
    pub(crate) ui: UiSubsystem,
    pub(crate) teams: TeamCache,
}

impl Domain {
    /// A client before login: no world, nothing replicated.
    pub fn new(ui: UiConfig, seed: u64) -> Domain {
        Domain {
            replica: Replica::new(),
            ui: UiSubsystem::new(ui, seed),
            teams: TeamCache::default(),
        }
    }

    /// The login.
    pub fn login(&self) -> &Login {
        self.replica.login()
    }

    /// The player this client is, once logged in.
    pub fn local_player(&self) -> Option<&PlayerId> {
        self.replica.local_player()
    }

    /// The current world.
    pub fn world(&self) -> Option<&World> {
        self.replica.world()
    }

    /// Every player state.
    pub fn player_states(&self) -> &PlayerStates {
        self.replica.player_states()
    }

    /// Every character.
    pub fn characters(&self) -> &Characters {
        self.replica.characters()
    }

    /// The UI subsystem.
    pub fn ui(&self) -> &UiSubsystem {
        &self.ui
    }

    /// The team cache.
    pub fn teams(&self) -> &TeamCache {
        &self.teams
    }

    /// Whether the current world plays.
    pub(crate) fn is_playing(&self) -> bool {
        self.replica.is_playing()
    }

    /// What the example game does before a replicated change is announced, so its listeners
    /// find the game's own objects in step: a login arms the UI's resets, a travel rebuilds
    /// every widget controller, a new player state starts building its controller and every
    /// player state's team goes to the team cache (returning the cache's change, announced
    /// after the player state's), a removed one's controller and cached team go.
    pub(crate) fn before(
        &mut self,
        now: Instant,
        notice: &gatehouse_client::world::Notice,
    ) -> Option<TeamChange> {
        use gatehouse_client::world::Notice;
        match notice {
            Notice::LoginSucceeded(_) => self.ui.arm_resets(now),
            // A travel rebuilds the UI before its first notice, the teardown (the first world
            // has no controllers to rebuild).
            Notice::WorldTornDown(_) => self.ui.rebuild(now),
            Notice::PlayerStateChanged(player, change) => {
                if change.appeared {
                    self.ui.track(now, player);
                }
                let team = self.replica.player_states().get(player).and_then(PlayerState::team);
                return self.teams.update(player, team);
            }
            Notice::PlayerStateRemoved(player) => {
                self.ui.untrack(player);
                self.teams.remove(player);
            }
            _ => {}
        }
        None
    }
}

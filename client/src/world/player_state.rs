//! Player states: every player's replicated state as this client holds it (team, CharacterDef,
//! health and ability tags).
//!
//! Owns the per-player state and says what an update changed. It knows nothing of the team cache,
//! the UI, facts or gates; those observe it.

use std::collections::BTreeMap;

use gatehouse_protocol::{CharacterDef, PlayerId, PlayerStateView, TeamId};
use gatehouse_tags::GameplayTag;

/// One player's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayerState {
    player: PlayerId,
    team: Option<TeamId>,
    character_def: Option<CharacterDef>,
    health: Option<u32>,
    tags: Option<Vec<GameplayTag>>,
}

impl PlayerState {
    /// Whose state.
    pub fn player(&self) -> &PlayerId {
        &self.player
    }

    /// The team id, once processed.
    pub fn team(&self) -> Option<TeamId> {
        self.team
    }

    /// Whether the match team id has been processed (a valid team: never team 0).
    pub fn is_team_processed(&self) -> bool {
        self.team.is_some_and(is_valid_team)
    }

    /// The CharacterDef, once the player's save resolved it.
    pub fn character_def(&self) -> Option<&CharacterDef> {
        self.character_def.as_ref()
    }

    /// The replicated health, once a health change arrived; until then full health, which the
    /// game knows from its own data (docs/protocol.md 5, `HealthChanged`).
    pub fn health(&self) -> Option<u32> {
        self.health
    }

    /// Every tag its ability state holds (states and active effects), as last replicated;
    /// `None` until the first tags message (none, per docs/protocol.md 5, `HealthChanged`).
    pub fn tags(&self) -> Option<&[GameplayTag]> {
        self.tags.as_deref()
    }
}

/// Whether `team` is a real team (0 means "no team").
pub fn is_valid_team(team: TeamId) -> bool {
    team.0 != 0
}

/// What one `PlayerStateUpdated` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlayerStateChange {
    /// The player state is new to this client.
    pub appeared: bool,
    /// Its team changed.
    pub team: bool,
    /// Its CharacterDef changed.
    pub character_def: bool,
}

impl PlayerStateChange {
    /// Whether the update changed nothing (a duplicate notification).
    pub fn is_duplicate(&self) -> bool {
        !(self.appeared || self.team || self.character_def)
    }
}

/// Every player state, by player.
#[derive(Debug, Default)]
pub struct PlayerStates {
    by_player: BTreeMap<PlayerId, PlayerState>,
}

impl PlayerStates {
    /// `player`'s state.
    pub fn get(&self, player: &PlayerId) -> Option<&PlayerState> {
        self.by_player.get(player)
    }

    /// Every player state, by player id.
    pub fn iter(&self) -> impl Iterator<Item = &PlayerState> + '_ {
        self.by_player.values()
    }

    /// How many player states.
    pub fn len(&self) -> usize {
        self.by_player.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_player.is_empty()
    }

    /// Applies a replicated update.
    pub(crate) fn apply(&mut self, view: PlayerStateView) -> PlayerStateChange {
        let PlayerStateView { player_id, team, character_def } = view;
        match self.by_player.get_mut(&player_id) {
            Some(state) => {
                let change = PlayerStateChange {
                    appeared: false,
                    team: state.team != team,
                    character_def: state.character_def != character_def,
                };
                state.team = team;
                state.character_def = character_def;
                change
            }
            None => {
                let change = PlayerStateChange {
                    appeared: true,
                    team: team.is_some(),
                    character_def: character_def.is_some(),
                };
                self.by_player.insert(
                    player_id.clone(),
                    PlayerState {
                        player: player_id,
                        team,
                        character_def,
                        health: None,
                        tags: None,
                    },
                );
                change
            }
        }
    }

    /// Applies a replicated health change. Returns whether it changed anything: false for a
    /// duplicate, or for a player whose state this client does not hold.
    pub(crate) fn set_health(&mut self, player: &PlayerId, health: u32) -> bool {
        let Some(state) = self.by_player.get_mut(player) else { return false };
        let changed = state.health != Some(health);
        state.health = Some(health);
        changed
    }

    /// Applies replicated ability tags. Returns whether they changed anything: false for the
    /// same set again, or for a player whose state this client does not hold; the first tags
    /// of a player state always change it.
    pub(crate) fn set_tags(&mut self, player: &PlayerId, tags: &[GameplayTag]) -> bool {
        let Some(state) = self.by_player.get_mut(player) else { return false };
        let changed = state.tags.as_deref() != Some(tags);
        if changed {
            state.tags = Some(tags.to_vec());
        }
        changed
    }

    /// The player left.
    pub(crate) fn remove(&mut self, player: &PlayerId) -> Option<PlayerState> {
        self.by_player.remove(player)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(team: Option<u8>, def: Option<&str>) -> PlayerStateView {
        PlayerStateView {
            player_id: PlayerId::new("p").unwrap(),
            team: team.map(TeamId),
            character_def: def.map(|d| CharacterDef::new(d).unwrap()),
        }
    }

    #[test]
    fn an_update_says_what_changed() {
        let mut states = PlayerStates::default();
        let first = states.apply(view(Some(1), None));
        assert!(first.appeared && first.team && !first.character_def);
        assert!(states.apply(view(Some(1), None)).is_duplicate());
        let change = states.apply(view(Some(2), Some("Medic")));
        assert!(!change.appeared && change.team && change.character_def);
        let state = states.get(&PlayerId::new("p").unwrap()).unwrap();
        assert!(state.is_team_processed());
        assert!(!PlayerStates::default().apply(view(Some(0), None)).is_duplicate());
        assert!(!is_valid_team(TeamId(0)));
    }

    /// A player state reads back what was replicated; team 0 is a team not processed.
    #[test]
    fn a_player_state_reads_back_what_was_replicated() {
        let p = PlayerId::new("p").unwrap();
        let mut states = PlayerStates::default();
        assert!(states.is_empty());
        assert_eq!((states.len(), states.iter().count()), (0, 0));
        states.apply(view(Some(0), None));
        let state = states.get(&p).unwrap();
        assert_eq!(
            (state.player(), state.team(), state.character_def()),
            (&p, Some(TeamId(0)), None)
        );
        assert!(!state.is_team_processed(), "team 0 is no team");
        states.apply(view(Some(2), Some("Medic")));
        let state = states.get(&p).unwrap();
        let medic = CharacterDef::new("Medic").unwrap();
        assert_eq!((state.team(), state.character_def()), (Some(TeamId(2)), Some(&medic)));
        assert!(state.is_team_processed());
        assert!(!states.is_empty());
        assert_eq!(states.len(), 1);
        assert_eq!(states.iter().map(PlayerState::player).collect::<Vec<_>>(), [&p]);
    }

    /// An update is a duplicate only when it changed nothing at all.
    #[test]
    fn an_update_is_a_duplicate_only_when_nothing_changed() {
        let duplicate = |appeared, team, character_def| {
            PlayerStateChange { appeared, team, character_def }.is_duplicate()
        };
        assert!(duplicate(false, false, false));
        assert!(!duplicate(true, false, false));
        assert!(!duplicate(false, true, false));
        assert!(!duplicate(false, false, true));
    }

    #[test]
    fn health_is_kept_across_updates_and_duplicates_change_nothing() {
        let p = PlayerId::new("p").unwrap();
        let mut states = PlayerStates::default();
        assert!(!states.set_health(&p, 90), "no player state to apply it to");
        states.apply(view(Some(1), None));
        assert!(states.set_health(&p, 90));
        assert!(!states.set_health(&p, 90), "a duplicate is no change");
        states.apply(view(Some(2), None));
        assert_eq!(states.get(&p).unwrap().health(), Some(90), "a team update keeps the health");
    }
}

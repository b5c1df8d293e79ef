//! The team cache (an Unreal game's TeamSubsystem): each player state's processed team, updated the
//! moment a team arrives.
//!
//! Owns the cache and reports each change with its old and new team (the raw `OnTeamChanged`).
//! Delaying that event for presentation is the team adapter's job, not this cache's.

use std::collections::BTreeMap;

use gatehouse_protocol::{PlayerId, TeamId};

use super::is_valid_team;

/// One change of a cached team.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeamChange {
    /// The team cached before, if any.
    pub old: Option<TeamId>,
    /// The team cached now, if any.
    pub new: Option<TeamId>,
}

/// Each player's cached, valid team.
#[derive(Debug, Default)]
pub struct TeamCache {
    teams: BTreeMap<PlayerId, TeamId>,
}

impl TeamCache {
    /// `player`'s cached team: a valid team assignment, ready for presentation.
    pub fn team_of(&self, player: &PlayerId) -> Option<TeamId> {
        self.teams.get(player).copied()
    }

    /// Caches `player`'s team (an invalid or absent team clears it). `None` when nothing changed.
    pub(crate) fn update(&mut self, player: &PlayerId, team: Option<TeamId>) -> Option<TeamChange> {
        let new = team.filter(|t| is_valid_team(*t));
        let old = match new {
            Some(team) => self.teams.insert(player.clone(), team),
            None => self.teams.remove(player),
        };
        (old != new).then_some(TeamChange { old, new })
    }

    /// Forgets `player` (it left).
    pub(crate) fn remove(&mut self, player: &PlayerId) -> Option<TeamChange> {
        self.update(player, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_reports_changes_only() {
        let p = PlayerId::new("p").unwrap();
        let mut cache = TeamCache::default();
        assert_eq!(
            cache.update(&p, Some(TeamId(1))),
            Some(TeamChange { old: None, new: Some(TeamId(1)) })
        );
        assert_eq!(cache.update(&p, Some(TeamId(1))), None, "a duplicate is no change");
        assert_eq!(
            cache.update(&p, Some(TeamId(0))),
            Some(TeamChange { old: Some(TeamId(1)), new: None }),
            "team 0 is no valid team"
        );
        assert_eq!(cache.remove(&p), None);
        assert_eq!(cache.team_of(&p), None);
    }
}

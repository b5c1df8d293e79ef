//! The login: whether this client's session token was validated, and as which player.
//!
//! Owns the login state only. The server validates the token; its `Welcome` is the validated
//! login-success state. Nothing here knows of what a game publishes when it changes.

use gatehouse_protocol::PlayerId;

/// The login state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Login {
    /// No validated session yet.
    #[default]
    Pending,
    /// The session token was validated: the client is this player.
    Succeeded {
        /// The player id the server welcomed the client as.
        player: PlayerId,
    },
    /// The session ended (closed, replaced or refused).
    Ended,
}

impl Login {
    /// The validated player, while the login is active.
    pub fn player(&self) -> Option<&PlayerId> {
        match self {
            Login::Succeeded { player } => Some(player),
            Login::Pending | Login::Ended => None,
        }
    }

    /// Whether the validated login-success state is active.
    pub fn is_active(&self) -> bool {
        matches!(self, Login::Succeeded { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a login that succeeded is active, and only it names its player.
    #[test]
    fn only_a_succeeded_login_is_active_and_names_its_player() {
        let me = PlayerId::new("me").unwrap();
        let succeeded = Login::Succeeded { player: me.clone() };
        assert!(succeeded.is_active());
        assert_eq!(succeeded.player(), Some(&me));
        for over in [Login::Pending, Login::Ended] {
            assert!(!over.is_active());
            assert_eq!(over.player(), None);
        }
    }
}

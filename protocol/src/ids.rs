//! Identifiers that cross the wire.
//!
//! Numeric ids (`PawnId`, `TransitionId`, `JoinId`) are allocated by the server and never reused within a
//! server process, so a late or stale message is recognised by its id and ignored. Named ids
//! (`PlayerId`, `ServerId`, `NodeId`, `LevelName`, `CharacterDef`) are validated strings: decoding
//! refuses an empty, overlong or oddly charactered name with an error naming it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Maximum length of a named id, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Why a named id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name was empty.
    #[error("{kind} is empty")]
    Empty {
        /// Which kind of name (e.g. "player id").
        kind: &'static str,
    },
    /// The name was longer than [`MAX_NAME_LEN`] bytes.
    #[error("{kind} {name:?} is {len} bytes long, the maximum is {MAX_NAME_LEN}")]
    TooLong {
        /// Which kind of name.
        kind: &'static str,
        /// The first bytes of the name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The name held a character outside `[A-Za-z0-9_.:-]`.
    #[error("{kind} {name:?} holds {bad:?}; only ASCII letters, digits and `_ . : -` are allowed")]
    BadCharacter {
        /// Which kind of name.
        kind: &'static str,
        /// The name.
        name: String,
        /// The first refused character.
        bad: char,
    },
}

fn check_name(kind: &'static str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { kind });
    }
    if name.len() > MAX_NAME_LEN {
        let cut: String = name.chars().take(MAX_NAME_LEN).collect();
        return Err(NameError::TooLong { kind, name: cut, len: name.len() });
    }
    if let Some(bad) =
        name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(NameError::BadCharacter { kind, name: name.to_owned(), bad });
    }
    Ok(())
}

/// Declares a validated string id: `new` checks it, serde refuses invalid names on decode.
macro_rules! named_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps a name.
            ///
            /// # Errors
            /// [`NameError`] when the name is empty, longer than [`MAX_NAME_LEN`] bytes, or
            /// holds a character outside `[A-Za-z0-9_.:-]`.
            pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
                let name = name.into();
                check_name($kind, &name)?;
                Ok(Self(name))
            }

            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(name: String) -> Result<Self, NameError> {
                Self::new(name)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

named_id!(
    /// A player, as named by the `uid` claim of its session token (the form Nakama issues).
    /// Stable across connections: a relaunch with the same token is the same player.
    PlayerId,
    "player id"
);
named_id!(
    /// A server of a fleet, as a travel ticket names its source and destination
    /// (docs/spec/travel.md V8, V12): `fleet.server_id`, by default the store session or, under
    /// Agones, the GameServer's name. The `PlayerId` rule: 1 to [`MAX_NAME_LEN`] bytes of
    /// `[A-Za-z0-9_.:-]`.
    ServerId,
    "server id"
);
named_id!(
    /// A world-map node from `config/world.toml` (docs/spec/transitions.md T1).
    NodeId,
    "node id"
);
named_id!(
    /// A streamable level named by a world-map node or dungeon room.
    LevelName,
    "level name"
);
named_id!(
    /// A character definition (the pawn class a player state selects).
    CharacterDef,
    "character def"
);

/// A pawn, unique within a server process and never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PawnId(pub u64);

/// A transition (one travel), unique within a server process and increasing: a larger id is a
/// newer transition.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TransitionId(pub u64);

/// A join: one player's own streaming before its first pawn (a player who logs in while no
/// transition runs), unique within a server process and increasing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JoinId(pub u64);

/// A team number assigned by the server. Team 0 is never assigned (it means "no team").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TeamId(pub u8);

impl fmt::Debug for PawnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pawn#{}", self.0)
    }
}
impl fmt::Display for PawnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Debug for TransitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "transition#{}", self.0)
    }
}
impl fmt::Display for TransitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Debug for JoinId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "join#{}", self.0)
    }
}
impl fmt::Display for JoinId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Debug for TeamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "team#{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_on_construction_and_decode() {
        assert!(PlayerId::new("sim-0001").is_ok());
        assert!(ServerId::new("gatehouse-7x2kq.eu-west:1").is_ok());
        assert_eq!(ServerId::new(""), Err(NameError::Empty { kind: "server id" }));
        assert!(matches!(ServerId::new("a/b"), Err(NameError::BadCharacter { bad: '/', .. })));
        assert!(matches!(ServerId::new("s".repeat(65)), Err(NameError::TooLong { len: 65, .. })));
        assert_eq!(PlayerId::new(""), Err(NameError::Empty { kind: "player id" }));
        assert!(matches!(NodeId::new("a b"), Err(NameError::BadCharacter { bad: ' ', .. })));
        assert!(matches!(LevelName::new("x".repeat(65)), Err(NameError::TooLong { len: 65, .. })));
        let err = serde_json::from_str::<NodeId>("\"bad/name\"").unwrap_err();
        assert!(err.to_string().contains("bad/name"), "{err}");
    }
}

//! Identities the registry speaks in: objects, generations, scope tokens, requirements and
//! request names.
//!
//! This module owns only value types. It holds no state and knows nothing of facts being ready;
//! tokens are minted by the scope table (`scopes.rs`) and nowhere else, so a caller cannot forge
//! a current token for an object it never scoped.

use std::borrow::{Borrow, Cow};
use std::fmt;

use gatehouse_tags::GameplayTag;

/// The identity of an object whose readiness is observed, or that owns waits, or that groups
/// scopes as a lifetime (a world, a game instance).
///
/// The number is chosen by the caller (a pawn id, a player-state id, a world id); the registry
/// never dereferences anything through it. Two objects must not share an id while both are
/// scoped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(u64);

impl ObjectId {
    /// The object identified by `raw`.
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The number the caller chose for this object.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "object#{}", self.0)
    }
}

/// One scope's place in the registry's history.
///
/// Generations come from a single counter per registry and are never reused, so a scope created
/// for an object after its previous scope was reset can never be mistaken for the old one, even
/// when the object id is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Generation(u64);

impl Generation {
    /// The generation after this one.
    pub(crate) const fn next(self) -> Self {
        Self(self.0 + 1)
    }

    /// The first generation a registry hands out.
    pub(crate) const FIRST: Self = Self(1);

    /// The generation as a number (the first one is 1).
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "generation {}", self.0)
    }
}

/// Proof that an object had a particular scope: its id and the generation of that scope.
///
/// Only [`Registry::scope`](crate::Registry::scope) and
/// [`Registry::token`](crate::Registry::token) make tokens. A token stays *current* until its
/// object's scope is reset (directly, through its lifetime, or by re-scoping the object with a
/// different lifetime); after that every operation presented with it is refused. Asynchronous
/// work should capture the token it started with and never acquire a fresh one when it
/// completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeToken {
    object: ObjectId,
    generation: Generation,
}

impl ScopeToken {
    pub(crate) const fn new(object: ObjectId, generation: Generation) -> Self {
        Self { object, generation }
    }

    /// The object this scope belongs to.
    pub const fn object(self) -> ObjectId {
        self.object
    }

    /// The generation of this scope.
    pub const fn generation(self) -> Generation {
        self.generation
    }
}

impl fmt::Display for ScopeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@gen{}", self.object, self.generation.0)
    }
}

/// One term of an AND-gate: `fact` must be ready on the scope named by `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    /// The scope on which the fact must be ready.
    pub token: ScopeToken,
    /// The fact that must be ready.
    pub fact: GameplayTag,
}

impl Requirement {
    /// `fact` ready on the scope `token`.
    pub const fn new(token: ScopeToken, fact: GameplayTag) -> Self {
        Self { token, fact }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.fact, self.token)
    }
}

/// The name of a wait operation, unique per owner object (`"Feature.Initialize"`).
///
/// It identifies an operation, not a readiness state: it is never a fact. Registering a second
/// wait under the same owner and name replaces the pending one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestName(Cow<'static, str>);

impl RequestName {
    /// A request name from a string known at compile time.
    pub const fn new(name: &'static str) -> Self {
        Self(Cow::Borrowed(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&'static str> for RequestName {
    fn from(name: &'static str) -> Self {
        Self::new(name)
    }
}

impl From<String> for RequestName {
    fn from(name: String) -> Self {
        Self(Cow::Owned(name))
    }
}

// Lets the per-owner name index be searched with a plain `&str`. Sound because `Cow<str>` hashes
// and compares exactly as the `str` it holds.
impl Borrow<str> for RequestName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn request_names_are_found_by_plain_text_whatever_their_storage() {
        let mut map = HashMap::new();
        map.insert(RequestName::new("Feature.Initialize"), 1);
        map.insert(RequestName::from(String::from("Gate.Sub.7")), 2);
        assert_eq!(map.get("Feature.Initialize"), Some(&1));
        assert_eq!(map.get("Gate.Sub.7"), Some(&2));
        assert_eq!(RequestName::new("Gate.Sub.7"), RequestName::from("Gate.Sub.7".to_owned()));
    }

    #[test]
    fn displays_name_the_object_and_generation() {
        let token = ScopeToken::new(ObjectId::new(7), Generation::FIRST.next());
        assert_eq!(token.to_string(), "object#7@gen2");
        assert_eq!(token.generation().to_string(), "generation 2");
    }
}

//! The scope table: which objects have a current scope, of which generation and lifetime, and
//! which facts are cached on it.
//!
//! It owns generation numbering and the lifetime index. It knows nothing of waits: retiring the
//! waits of a reset scope is the registry's job, done in the same step.

use std::collections::{BTreeSet, HashMap, HashSet};

use gatehouse_tags::GameplayTag;

use crate::id::{Generation, ObjectId, Requirement, ScopeToken};

/// One object's current scope.
#[derive(Debug)]
struct Scope {
    generation: Generation,
    lifetime: ObjectId,
    /// Facts currently ready. A handful per object, so a small ordered set.
    facts: BTreeSet<GameplayTag>,
}

/// What [`ScopeTable::scope`] found for the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scoped {
    /// The object already had a scope of that lifetime; its token is unchanged.
    Existing(ScopeToken),
    /// The object had no scope; a new one was created.
    Created(ScopeToken),
    /// The object had a scope of another lifetime; it was removed with its facts and a new one
    /// created. The caller must retire the waits that touched the old one.
    Replaced(ScopeToken),
}

/// Every current scope, indexed by object and by lifetime.
#[derive(Debug)]
pub(crate) struct ScopeTable {
    next_generation: Generation,
    scopes: HashMap<ObjectId, Scope>,
    by_lifetime: HashMap<ObjectId, HashSet<ObjectId>>,
}

impl ScopeTable {
    pub(crate) fn new() -> Self {
        Self {
            next_generation: Generation::FIRST,
            scopes: HashMap::new(),
            by_lifetime: HashMap::new(),
        }
    }

    /// Returns the object's scope of `lifetime`, creating it when the object has none and
    /// replacing it when the object has a scope of another lifetime.
    pub(crate) fn scope(&mut self, object: ObjectId, lifetime: ObjectId) -> Scoped {
        let replaced = match self.scopes.get(&object) {
            Some(scope) if scope.lifetime == lifetime => {
                return Scoped::Existing(ScopeToken::new(object, scope.generation));
            }
            Some(_) => self.remove(object),
            None => false,
        };
        let generation = self.next_generation;
        self.next_generation = generation.next();
        self.scopes.insert(object, Scope { generation, lifetime, facts: BTreeSet::new() });
        self.by_lifetime.entry(lifetime).or_default().insert(object);
        let token = ScopeToken::new(object, generation);
        if replaced { Scoped::Replaced(token) } else { Scoped::Created(token) }
    }

    /// The object's current token, if it has a scope.
    pub(crate) fn current(&self, object: ObjectId) -> Option<ScopeToken> {
        self.scopes.get(&object).map(|scope| ScopeToken::new(object, scope.generation))
    }

    /// The object's current generation, if it has a scope.
    pub(crate) fn generation(&self, object: ObjectId) -> Option<Generation> {
        self.scopes.get(&object).map(|scope| scope.generation)
    }

    /// Whether `token` names the object's current scope.
    pub(crate) fn is_current(&self, token: ScopeToken) -> bool {
        self.generation(token.object()) == Some(token.generation())
    }

    /// Sets or clears a fact on a current scope.
    ///
    /// Returns `Ok(true)` when the cached value changed, `Ok(false)` when it already had that
    /// value, and `Err` with the object's current generation when `token` is not current.
    pub(crate) fn set_fact(
        &mut self,
        token: ScopeToken,
        fact: GameplayTag,
        ready: bool,
    ) -> Result<bool, Option<Generation>> {
        match self.scopes.get_mut(&token.object()) {
            Some(scope) if scope.generation == token.generation() => {
                Ok(if ready { scope.facts.insert(fact) } else { scope.facts.remove(&fact) })
            }
            Some(scope) => Err(Some(scope.generation)),
            None => Err(None),
        }
    }

    /// Whether the object's current scope has `fact` ready.
    pub(crate) fn has_fact(&self, object: ObjectId, fact: GameplayTag) -> bool {
        self.scopes.get(&object).is_some_and(|scope| scope.facts.contains(&fact))
    }

    /// Whether the requirement's token is current and its fact ready.
    pub(crate) fn holds(&self, requirement: &Requirement) -> bool {
        self.scopes.get(&requirement.token.object()).is_some_and(|scope| {
            scope.generation == requirement.token.generation()
                && scope.facts.contains(&requirement.fact)
        })
    }

    /// Removes the object's scope. Returns whether it had one.
    pub(crate) fn remove(&mut self, object: ObjectId) -> bool {
        let Some(scope) = self.scopes.remove(&object) else {
            return false;
        };
        if let Some(members) = self.by_lifetime.get_mut(&scope.lifetime) {
            members.remove(&object);
            if members.is_empty() {
                self.by_lifetime.remove(&scope.lifetime);
            }
        }
        true
    }

    /// Takes the objects scoped under `lifetime` out of the lifetime index, in id order so that
    /// retiring them is deterministic. Their scopes remain until [`Self::remove`] is called.
    pub(crate) fn take_lifetime(&mut self, lifetime: ObjectId) -> Vec<ObjectId> {
        let mut members: Vec<ObjectId> = self
            .by_lifetime
            .remove(&lifetime)
            .map(|set| set.into_iter().collect())
            .unwrap_or_default();
        members.sort_unstable();
        members
    }

    /// How many objects have a current scope.
    pub(crate) fn len(&self) -> usize {
        self.scopes.len()
    }

    /// Checks the lifetime index against the scopes (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let indexed: usize = self.by_lifetime.values().map(HashSet::len).sum();
        assert_eq!(indexed, self.scopes.len(), "lifetime index size");
        for (lifetime, members) in &self.by_lifetime {
            assert!(!members.is_empty(), "empty lifetime entry for {lifetime}");
            for object in members {
                assert_eq!(
                    self.scopes.get(object).map(|scope| scope.lifetime),
                    Some(*lifetime),
                    "{object} indexed under {lifetime}"
                );
            }
        }
        for scope in self.scopes.values() {
            assert!(scope.generation < self.next_generation, "generation reuse");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_tags::catalog::LIFECYCLE_FACT_WORLD_BEGIN_PLAY;

    const WORLD: ObjectId = ObjectId::new(1);
    const PAWN: ObjectId = ObjectId::new(2);

    #[test]
    fn a_removed_scope_leaves_no_lifetime_entry_behind() {
        let mut table = ScopeTable::new();
        let Scoped::Created(token) = table.scope(PAWN, WORLD) else {
            panic!("first scope must be created");
        };
        assert_eq!(table.set_fact(token, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true), Ok(true));
        assert!(table.remove(PAWN));
        assert!(!table.remove(PAWN));
        assert!(table.by_lifetime.is_empty());
        assert_eq!(table.set_fact(token, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true), Err(None));
        table.check_invariants();
    }

    #[test]
    fn taking_a_lifetime_lists_members_in_id_order() {
        let mut table = ScopeTable::new();
        for raw in [9, 3, 5] {
            table.scope(ObjectId::new(raw), WORLD);
        }
        let members = table.take_lifetime(WORLD);
        assert_eq!(members, vec![ObjectId::new(3), ObjectId::new(5), ObjectId::new(9)]);
    }
}

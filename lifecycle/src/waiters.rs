//! The waiter table: every pending wait and the three indexes that find it.
//!
//! - by owner and request name, for replacement, cancellation and `blocking_facts`;
//! - by (object, fact), so publishing a fact examines only the waits that reference it;
//! - by object (as owner, requirement or guard), so resetting a scope retires exactly the waits
//!   that touch it.
//!
//! It stores callbacks but never calls them, and never looks at which facts are ready: that is
//! the registry's job.

use std::collections::{BTreeSet, HashMap};

use gatehouse_tags::GameplayTag;

use crate::id::{ObjectId, RequestName, Requirement, ScopeToken};
use crate::registry::Registry;

/// Identifies one registration. Increasing, never reused, so ordering by id is registration
/// order and a queued id whose wait was replaced can never reach the replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct WaitId(u64);

/// The boxed one-shot callback of a wait.
#[allow(
    clippy::type_complexity,
    reason = "this newtype is the factoring; the style forbids a type alias"
)]
pub(crate) struct Callback<C>(Box<dyn FnOnce(&mut Registry<C>, &mut C)>);

impl<C> Callback<C> {
    pub(crate) fn new(f: impl FnOnce(&mut Registry<C>, &mut C) + 'static) -> Self {
        Self(Box::new(f))
    }

    pub(crate) fn call(self, registry: &mut Registry<C>, ctx: &mut C) {
        (self.0)(registry, ctx);
    }
}

/// One pending wait.
pub(crate) struct Waiter<C> {
    pub(crate) owner: ScopeToken,
    pub(crate) request: RequestName,
    pub(crate) guard: Option<ScopeToken>,
    /// Deduplicated, in the order given.
    pub(crate) requirements: Vec<Requirement>,
    pub(crate) callback: Callback<C>,
}

impl<C> Waiter<C> {
    /// Every object this wait touches, each once: owner, requirement objects, guard.
    ///
    /// Without allocating: a wait touches a handful of objects, so a quadratic scan for
    /// duplicates is cheaper than building a set on every insertion and removal.
    fn objects(&self) -> impl Iterator<Item = ObjectId> + '_ {
        let all = || {
            std::iter::once(self.owner.object())
                .chain(self.requirements.iter().map(|r| r.token.object()))
                .chain(self.guard.map(ScopeToken::object))
        };
        all()
            .enumerate()
            .filter(move |&(i, object)| !all().take(i).any(|earlier| earlier == object))
            .map(|(_, object)| object)
    }
}

/// Every pending wait, indexed.
pub(crate) struct WaiterTable<C> {
    next_id: u64,
    waiters: HashMap<WaitId, Waiter<C>>,
    by_name: HashMap<ObjectId, HashMap<RequestName, WaitId>>,
    by_fact: HashMap<(ObjectId, GameplayTag), BTreeSet<WaitId>>,
    by_object: HashMap<ObjectId, BTreeSet<WaitId>>,
}

impl<C> WaiterTable<C> {
    pub(crate) fn new() -> Self {
        Self {
            next_id: 0,
            waiters: HashMap::new(),
            by_name: HashMap::new(),
            by_fact: HashMap::new(),
            by_object: HashMap::new(),
        }
    }

    /// Adds a wait, returning its id and the pending wait of the same owner and name that it
    /// replaced, if any (already removed from every index).
    ///
    /// The replaced wait is removed after the new one is indexed, so index entries the two
    /// share are not dropped and rebuilt.
    pub(crate) fn insert(&mut self, waiter: Waiter<C>) -> (WaitId, Option<Waiter<C>>) {
        let id = WaitId(self.next_id);
        self.next_id += 1;
        let old = self
            .by_name
            .entry(waiter.owner.object())
            .or_default()
            .insert(waiter.request.clone(), id);
        for requirement in &waiter.requirements {
            self.by_fact
                .entry((requirement.token.object(), requirement.fact))
                .or_default()
                .insert(id);
        }
        for object in waiter.objects() {
            self.by_object.entry(object).or_default().insert(id);
        }
        self.waiters.insert(id, waiter);
        (id, old.and_then(|old| self.remove(old)))
    }

    /// Removes a wait from the table and every index.
    pub(crate) fn remove(&mut self, id: WaitId) -> Option<Waiter<C>> {
        let waiter = self.waiters.remove(&id)?;
        let owner = waiter.owner.object();
        if let Some(names) = self.by_name.get_mut(&owner) {
            // A replaced wait's name already points at its replacement.
            if names.get(waiter.request.as_str()) == Some(&id) {
                names.remove(waiter.request.as_str());
            }
            if names.is_empty() {
                self.by_name.remove(&owner);
            }
        }
        for requirement in &waiter.requirements {
            remove_from(&mut self.by_fact, (requirement.token.object(), requirement.fact), id);
        }
        for object in waiter.objects() {
            remove_from(&mut self.by_object, object, id);
        }
        Some(waiter)
    }

    pub(crate) fn get(&self, id: WaitId) -> Option<&Waiter<C>> {
        self.waiters.get(&id)
    }

    /// The pending wait of `owner` named `request`.
    pub(crate) fn id_named(&self, owner: ObjectId, request: &str) -> Option<WaitId> {
        self.by_name.get(&owner)?.get(request).copied()
    }

    /// The waits that reference `fact` on `object`, in registration order.
    pub(crate) fn waiting_on(
        &self,
        object: ObjectId,
        fact: GameplayTag,
    ) -> impl Iterator<Item = WaitId> + '_ {
        self.by_fact.get(&(object, fact)).into_iter().flatten().copied()
    }

    /// Removes every wait that owns, references or is guarded by `object`, and returns how
    /// many there were.
    pub(crate) fn remove_touching(&mut self, object: ObjectId) -> usize {
        let ids = self.by_object.remove(&object).unwrap_or_default();
        ids.into_iter().filter(|id| self.remove(*id).is_some()).count()
    }

    /// Every pending wait, in registration order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Waiter<C>> + '_ {
        let mut ids: Vec<WaitId> = self.waiters.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| self.waiters.get(&id))
    }

    pub(crate) fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Checks every index against the table (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut names = 0;
        for (owner, by_request) in &self.by_name {
            assert!(!by_request.is_empty(), "empty name entry for {owner}");
            for (request, id) in by_request {
                names += 1;
                let waiter = &self.waiters[id];
                assert_eq!(waiter.owner.object(), *owner);
                assert_eq!(&waiter.request, request);
            }
        }
        assert_eq!(names, self.waiters.len(), "name index size");
        let facts: usize = self.by_fact.values().map(BTreeSet::len).sum();
        let expected: usize = self.waiters.values().map(|w| w.requirements.len()).sum();
        assert_eq!(facts, expected, "fact index size");
        for ((object, fact), ids) in &self.by_fact {
            assert!(!ids.is_empty(), "empty fact entry");
            for id in ids {
                assert!(
                    self.waiters[id]
                        .requirements
                        .iter()
                        .any(|r| r.token.object() == *object && r.fact == *fact)
                );
            }
        }
        let objects: usize = self.by_object.values().map(BTreeSet::len).sum();
        let expected: usize = self.waiters.values().map(|w| w.objects().count()).sum();
        assert_eq!(objects, expected, "object index size");
        for (object, ids) in &self.by_object {
            assert!(!ids.is_empty(), "empty object entry");
            for id in ids {
                assert!(self.waiters[id].objects().any(|o| o == *object));
            }
        }
    }
}

/// Removes `id` from the set at `key`, dropping the entry when it empties so that the index
/// never grows with objects that no longer have waits.
fn remove_from<K: std::hash::Hash + Eq>(
    index: &mut HashMap<K, BTreeSet<WaitId>>,
    key: K,
    id: WaitId,
) {
    if let Some(ids) = index.get_mut(&key) {
        ids.remove(&id);
        if ids.is_empty() {
            index.remove(&key);
        }
    }
}

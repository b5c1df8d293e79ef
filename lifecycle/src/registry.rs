//! The registry: scopes and facts joined to waits, and the pump that delivers callbacks.
//!
//! It owns the registry's delivery rules (docs/spec/gates.md G2–G5): a callback is removed from the
//! waiter table before it runs, runs only while every requirement holds, and updates made from
//! inside a callback are drained by the outermost call after the callback returns. Storage and
//! indexing live in `scopes.rs` and `waiters.rs`; this module only orchestrates them.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use gatehouse_tags::GameplayTag;

use crate::error::LifecycleError;
use crate::id::{ObjectId, RequestName, Requirement, ScopeToken};
use crate::inspect::{Counters, PendingWait};
use crate::scopes::{ScopeTable, Scoped};
use crate::waiters::{Callback, WaitId, Waiter, WaiterTable};

/// What became of a wait that the registry accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitStatus {
    /// Every requirement was already ready: the callback ran before the registration returned
    /// (ready-before-register). Code after the call must expect that.
    Delivered,
    /// Every requirement is ready but the registration was made from inside a callback: the wait
    /// is queued and will be delivered after the running callback returns, before the outermost
    /// registry call returns, unless it is cancelled or one of its facts closes first.
    Queued,
    /// At least one requirement is not ready; the callback runs when the last one is published.
    Pending,
}

/// The lifecycle gate registry: object-scoped readiness facts and one-shot AND-gates over them.
///
/// `C` is the caller's own state, handed to every callback together with the registry, so that
/// a callback can change the simulated client and the registry without shared ownership. Every
/// method that may run callbacks takes `ctx: &mut C`; the others never run one.
///
/// Game-thread-only: the registry is not `Send` (callbacks need not be) and takes no locks.
pub struct Registry<C> {
    scopes: ScopeTable,
    waiters: WaiterTable<C>,
    /// Waits found ready and not yet delivered, in the order found.
    ready: VecDeque<WaitId>,
    /// A callback is running: updates queue behind it instead of delivering.
    draining: bool,
    /// The wait registered by the outermost `wait_for_all` call, and whether it was delivered.
    watch: Option<(WaitId, bool)>,
    counters: Counters,
}

impl<C> Default for Registry<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C> fmt::Debug for Registry<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("scope_count", &self.scopes.len())
            .field("pending_wait_count", &self.waiters.len())
            .field("draining", &self.draining)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl<C> Registry<C> {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            scopes: ScopeTable::new(),
            waiters: WaiterTable::new(),
            ready: VecDeque::new(),
            draining: false,
            watch: None,
            counters: Counters::default(),
        }
    }

    // --- Scopes ---------------------------------------------------------------------------

    /// The current scope of `object` under `lifetime`, created if the object has none.
    ///
    /// Presenting the object again with the same lifetime returns the same token (same
    /// generation). Presenting it with a different lifetime first resets its old scope, exactly
    /// as [`Self::reset_scope`] does, and returns a token of a new generation.
    pub fn scope(&mut self, object: ObjectId, lifetime: ObjectId) -> ScopeToken {
        match self.scopes.scope(object, lifetime) {
            Scoped::Existing(token) | Scoped::Created(token) => token,
            Scoped::Replaced(token) => {
                // The new scope has no waits yet, so this retires only the old scope's.
                self.retire_waits_touching(object);
                token
            }
        }
    }

    /// The current token of `object`, if it has a scope. For queries; asynchronous work must
    /// keep the token it started with instead of asking for the current one when it completes.
    pub fn token(&self, object: ObjectId) -> Option<ScopeToken> {
        self.scopes.current(object)
    }

    /// Whether `token` still names its object's current scope.
    pub fn is_current(&self, token: ScopeToken) -> bool {
        self.scopes.is_current(token)
    }

    /// Retires the current scope of `object`: its generation, its facts, and every pending wait
    /// that the object owns, references in a requirement, or guards. No callback runs.
    ///
    /// Tokens of the retired scope are refused from now on; scoping the object again yields a
    /// new generation. Returns whether the object had a scope.
    pub fn reset_scope(&mut self, object: ObjectId) -> bool {
        self.retire_waits_touching(object);
        self.scopes.remove(object)
    }

    /// Retires every scope whose lifetime is `lifetime` (a world at teardown), as
    /// [`Self::reset_scope`] does for each. Scopes of other lifetimes are untouched, including
    /// scopes whose lifetime object is itself scoped under `lifetime`. Returns how many scopes
    /// were retired.
    pub fn reset_lifetime(&mut self, lifetime: ObjectId) -> usize {
        let members = self.scopes.take_lifetime(lifetime);
        for &object in &members {
            self.reset_scope(object);
        }
        members.len()
    }

    // --- Facts ----------------------------------------------------------------------------

    /// Publishes (`ready == true`) or closes (`ready == false`) `fact` on the scope `token`.
    ///
    /// Publishing wakes only the waits that reference this fact on this object and delivers
    /// those whose requirements now all hold, in registration order. Closing never runs a
    /// callback; the token stays current and the fact can be published again in the same
    /// generation.
    ///
    /// Returns `Ok(true)` when the cached value changed and `Ok(false)` for a duplicate
    /// notification, which wakes nothing.
    ///
    /// # Errors
    /// [`LifecycleError::StalePublisher`] when `token`'s scope has been reset: stale
    /// asynchronous work cannot open readiness on a replacement.
    pub fn set_ready(
        &mut self,
        token: ScopeToken,
        fact: GameplayTag,
        ready: bool,
        ctx: &mut C,
    ) -> Result<bool, LifecycleError> {
        if !ready {
            return self.clear(token, fact);
        }
        let changed = self.set_fact(token, fact, true)?;
        if changed {
            self.wake(token.object(), fact);
            self.drain(ctx);
        }
        Ok(changed)
    }

    /// Closes `fact` on the scope `token`: `set_ready(token, fact, false, ctx)` for callers that
    /// have no `ctx` at hand, since closing never runs a callback.
    ///
    /// # Errors
    /// [`LifecycleError::StalePublisher`] when `token`'s scope has been reset.
    pub fn clear(&mut self, token: ScopeToken, fact: GameplayTag) -> Result<bool, LifecycleError> {
        self.set_fact(token, fact, false)
    }

    /// Whether `requirement` holds now: its token is current and its fact ready.
    pub fn is_ready(&self, requirement: Requirement) -> bool {
        self.scopes.holds(&requirement)
    }

    /// Whether `fact` is ready on the current scope of `object`, whatever its generation.
    pub fn is_ready_on(&self, object: ObjectId, fact: GameplayTag) -> bool {
        self.scopes.has_fact(object, fact)
    }

    // --- Waits ----------------------------------------------------------------------------

    /// Registers a one-shot AND-gate: `callback` runs once, when every requirement holds.
    ///
    /// 1. The owner and every requirement token must be current, and there must be at least one
    ///    requirement; otherwise the wait is refused, nothing changes, and `callback` is dropped.
    /// 2. A pending wait of the same owner object and request name is replaced (dropped without
    ///    running). Different names are independent; a name whose wait was delivered may be
    ///    registered again.
    /// 3. If every requirement is already ready, the callback runs before this call returns
    ///    ([`WaitStatus::Delivered`]), or, from inside another callback, right after that one
    ///    returns ([`WaitStatus::Queued`]).
    ///
    /// The wait is retired without running when the owner's scope or any requirement's scope is
    /// reset. Requirements listed twice count once.
    ///
    /// # Errors
    /// [`LifecycleError::StaleOwner`], [`LifecycleError::StaleRequirement`] or
    /// [`LifecycleError::NoRequirements`].
    pub fn wait_for_all(
        &mut self,
        owner: ScopeToken,
        request: impl Into<RequestName>,
        requirements: &[Requirement],
        ctx: &mut C,
        callback: impl FnOnce(&mut Registry<C>, &mut C) + 'static,
    ) -> Result<WaitStatus, LifecycleError> {
        self.register(owner, request.into(), None, requirements, ctx, Callback::new(callback))
    }

    /// [`Self::wait_for_all`], also retired without running when the scope of `guard` (the
    /// listener whose validity the callback depends on) is reset.
    ///
    /// # Errors
    /// As [`Self::wait_for_all`], and [`LifecycleError::StaleGuard`] when `guard` is not current.
    pub fn wait_for_all_guarded(
        &mut self,
        owner: ScopeToken,
        request: impl Into<RequestName>,
        guard: ScopeToken,
        requirements: &[Requirement],
        ctx: &mut C,
        callback: impl FnOnce(&mut Registry<C>, &mut C) + 'static,
    ) -> Result<WaitStatus, LifecycleError> {
        self.register(
            owner,
            request.into(),
            Some(guard),
            requirements,
            ctx,
            Callback::new(callback),
        )
    }

    /// Removes the pending wait of `owner` named `request` without running it. Returns whether
    /// there was one; a wait being delivered right now is no longer pending.
    pub fn cancel(&mut self, owner: ObjectId, request: &str) -> bool {
        let Some(id) = self.waiters.id_named(owner, request) else {
            return false;
        };
        let cancelled = self.waiters.remove(id).is_some();
        if cancelled {
            self.counters.cancelled += 1;
        }
        cancelled
    }

    /// Whether `owner` has a pending wait named `request`.
    pub fn is_pending(&self, owner: ObjectId, request: &str) -> bool {
        self.waiters.id_named(owner, request).is_some()
    }

    /// The requirements of the pending wait of `owner` named `request` that are not ready now,
    /// in registration order; each names the fact and the scope it is awaited on. `None` when
    /// there is no such pending wait (never registered, delivered, cancelled or retired).
    pub fn blocking_facts(&self, owner: ObjectId, request: &str) -> Option<Vec<Requirement>> {
        let id = self.waiters.id_named(owner, request)?;
        self.waiters.get(id).map(|waiter| self.blocking(waiter))
    }

    // --- Introspection --------------------------------------------------------------------

    /// Every pending wait with what blocks it, in registration order.
    pub fn pending_waits(&self) -> impl Iterator<Item = PendingWait<'_>> + '_ {
        self.waiters.iter().map(|waiter| PendingWait {
            owner: waiter.owner,
            request: &waiter.request,
            guard: waiter.guard,
            requirements: &waiter.requirements,
            blocking: self.blocking(waiter),
        })
    }

    /// How many waits are pending.
    pub fn pending_wait_count(&self) -> usize {
        self.waiters.len()
    }

    /// How many objects have a current scope.
    pub fn scope_count(&self) -> usize {
        self.scopes.len()
    }

    /// Running totals since the registry was created.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    // --- Internals ------------------------------------------------------------------------

    fn set_fact(
        &mut self,
        token: ScopeToken,
        fact: GameplayTag,
        ready: bool,
    ) -> Result<bool, LifecycleError> {
        self.scopes.set_fact(token, fact, ready).map_err(|current| {
            self.counters.stale_rejections += 1;
            LifecycleError::StalePublisher { token, fact, current }
        })
    }

    /// Queues, in registration order, the waits on `fact` of `object` that now hold entirely.
    fn wake(&mut self, object: ObjectId, fact: GameplayTag) {
        for id in self.waiters.waiting_on(object, fact) {
            self.counters.examined += 1;
            let holds = self.waiters.get(id).is_some_and(|waiter| {
                waiter.requirements.iter().all(|requirement| self.scopes.holds(requirement))
            });
            if holds {
                self.ready.push_back(id);
            }
        }
    }

    fn register(
        &mut self,
        owner: ScopeToken,
        request: RequestName,
        guard: Option<ScopeToken>,
        requirements: &[Requirement],
        ctx: &mut C,
        callback: Callback<C>,
    ) -> Result<WaitStatus, LifecycleError> {
        let requirements = self.validate(owner, &request, guard, requirements)?;
        let holds = requirements.iter().all(|r| self.scopes.holds(r));
        let (id, replaced) =
            self.waiters.insert(Waiter { owner, request, guard, requirements, callback });
        if replaced.is_some() {
            self.counters.replaced += 1;
        }
        drop(replaced);
        if !holds {
            return Ok(WaitStatus::Pending);
        }
        self.ready.push_back(id);
        if self.draining {
            return Ok(WaitStatus::Queued);
        }
        self.watch = Some((id, false));
        self.drain(ctx);
        let delivered = self.watch.take().is_some_and(|(_, delivered)| delivered);
        Ok(if delivered {
            WaitStatus::Delivered
        } else {
            // Only reachable when a callback left queued by an earlier panic cancelled this
            // wait or closed one of its facts during the drain.
            WaitStatus::Pending
        })
    }

    /// Checks the tokens of a registration and returns its requirements without duplicates.
    fn validate(
        &mut self,
        owner: ScopeToken,
        request: &RequestName,
        guard: Option<ScopeToken>,
        requirements: &[Requirement],
    ) -> Result<Vec<Requirement>, LifecycleError> {
        let result = self.check_tokens(owner, request, guard, requirements);
        if matches!(
            result,
            Err(LifecycleError::StaleOwner { .. }
                | LifecycleError::StaleGuard { .. }
                | LifecycleError::StaleRequirement { .. })
        ) {
            self.counters.stale_rejections += 1;
        }
        result?;
        let mut unique = Vec::with_capacity(requirements.len());
        for requirement in requirements {
            if !unique.contains(requirement) {
                unique.push(*requirement);
            }
        }
        Ok(unique)
    }

    fn check_tokens(
        &self,
        owner: ScopeToken,
        request: &RequestName,
        guard: Option<ScopeToken>,
        requirements: &[Requirement],
    ) -> Result<(), LifecycleError> {
        if !self.scopes.is_current(owner) {
            return Err(LifecycleError::StaleOwner {
                request: request.clone(),
                token: owner,
                current: self.scopes.generation(owner.object()),
            });
        }
        if let Some(guard) = guard.filter(|g| !self.scopes.is_current(*g)) {
            return Err(LifecycleError::StaleGuard {
                request: request.clone(),
                token: guard,
                current: self.scopes.generation(guard.object()),
            });
        }
        if requirements.is_empty() {
            return Err(LifecycleError::NoRequirements {
                request: request.clone(),
                owner: owner.object(),
            });
        }
        match requirements.iter().find(|r| !self.scopes.is_current(r.token)) {
            Some(stale) => Err(LifecycleError::StaleRequirement {
                request: request.clone(),
                fact: stale.fact,
                token: stale.token,
                current: self.scopes.generation(stale.token.object()),
            }),
            None => Ok(()),
        }
    }

    fn blocking(&self, waiter: &Waiter<C>) -> Vec<Requirement> {
        waiter
            .requirements
            .iter()
            .filter(|requirement| !self.scopes.holds(requirement))
            .copied()
            .collect()
    }

    /// Drops, without running them, every pending wait that touches `object`.
    fn retire_waits_touching(&mut self, object: ObjectId) {
        self.counters.retired += self.waiters.remove_touching(object) as u64;
    }

    /// Delivers queued waits until none is left. Called from inside a callback, it returns at
    /// once: the outermost call is already draining and reaches the new entries after the
    /// running callback returns.
    ///
    /// For each queued wait:
    /// 1. skip it if it is gone (delivered, replaced, cancelled or retired since it was queued);
    /// 2. skip it if a requirement stopped holding since it was queued; it stays pending and is
    ///    queued again when that fact is published;
    /// 3. remove it from the table and every index;
    /// 4. run its callback with the registry and `ctx`.
    ///
    /// A panicking callback propagates; the registry stays usable and delivers what is still
    /// queued on the next call that drains.
    fn drain(&mut self, ctx: &mut C) {
        if self.draining {
            return;
        }
        self.draining = true;
        while let Some(id) = self.ready.pop_front() {
            let holds = self.waiters.get(id).is_some_and(|waiter| {
                waiter.requirements.iter().all(|requirement| self.scopes.holds(requirement))
            });
            if !holds {
                continue;
            }
            let Some(waiter) = self.waiters.remove(id) else {
                continue;
            };
            if let Some((watched, delivered)) = &mut self.watch
                && *watched == id
            {
                *delivered = true;
            }
            self.counters.delivered += 1;
            let outcome = catch_unwind(AssertUnwindSafe(|| waiter.callback.call(self, ctx)));
            if let Err(payload) = outcome {
                self.draining = false;
                self.watch = None;
                resume_unwind(payload);
            }
        }
        self.draining = false;
    }

    /// Checks the scope table, the waiter table and the invariant that joins them: every token
    /// held by a pending wait is current (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.scopes.check_invariants();
        self.waiters.check_invariants();
        for waiter in self.waiters.iter() {
            assert!(self.scopes.is_current(waiter.owner), "stale owner pending");
            assert!(waiter.guard.is_none_or(|g| self.scopes.is_current(g)));
            for requirement in &waiter.requirements {
                assert!(self.scopes.is_current(requirement.token));
            }
        }
        if !self.draining {
            for waiter in self.waiters.iter() {
                assert!(
                    !self.blocking(waiter).is_empty() || !self.ready.is_empty(),
                    "a wait whose requirements all hold is pending outside a drain"
                );
            }
        }
    }
}

//! Property test: the registry against a naive reference model over random operation sequences.
//!
//! The model stores waits in a plain list and finds them by scanning; the registry uses its
//! indexes. Both follow the delivery rules of docs/spec/gates.md (cached facts, one-shot,
//! replacement by name, retirement on reset, a FIFO pump that callbacks feed without re-entering
//! it). Callbacks in the generated sequences perform nested operations too, so the reentrancy rules
//! are compared as well. After every step the observable state must agree and the registry's
//! indexes must be consistent.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY,
    LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY,
};
use proptest::prelude::*;

use crate::{LifecycleError, ObjectId, Registry, Requirement, ScopeToken, WaitStatus};

const FACTS: [GameplayTag; 3] = [
    LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY,
    LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY,
    LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY,
];
const OBJECTS: u64 = 3;
const LIFETIMES: [u64; 2] = [0, 9];
const NAMES: [&str; 3] = ["n0", "n1", "n2"];
/// Nested registrations get the label of the wait whose callback made them, plus this.
const NESTED_LABEL: u64 = 1_000_000;
/// A callback logs its label when it starts and its label plus this when it returns, so that
/// anything delivered while it runs would show between the two.
const RETURNED: u64 = 10_000_000;

/// What a callback does, between logging its start and its return, when it is delivered.
#[derive(Debug, Clone)]
enum Action {
    Publish(u64, usize),
    Close(u64, usize),
    Cancel(u64, usize),
    Reset(u64),
    Register(u64, usize, Vec<(u64, usize)>),
}

/// A token as the test names it: an object and how many scopes back (0 = the latest one seen).
type TokenRef = (u64, usize);

#[derive(Debug, Clone)]
enum Op {
    Scope(u64, u64),
    /// Reset a scope, then (a respawn) scope the object again if asked.
    ResetScope(u64, bool),
    /// Reset a lifetime, then (a travel) scope its former members again if asked.
    ResetLifetime(u64, bool),
    SetReady(TokenRef, usize, bool),
    Wait {
        owner: TokenRef,
        name: usize,
        guard: Option<TokenRef>,
        requirements: Vec<(TokenRef, usize)>,
        actions: Vec<Action>,
    },
    Cancel(u64, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    StalePublisher,
    StaleOwner,
    StaleRequirement,
    StaleGuard,
    NoRequirements,
}

fn kind(error: &LifecycleError) -> ErrorKind {
    match error {
        LifecycleError::StalePublisher { .. } => ErrorKind::StalePublisher,
        LifecycleError::StaleOwner { .. } => ErrorKind::StaleOwner,
        LifecycleError::StaleRequirement { .. } => ErrorKind::StaleRequirement,
        LifecycleError::StaleGuard { .. } => ErrorKind::StaleGuard,
        LifecycleError::NoRequirements { .. } => ErrorKind::NoRequirements,
    }
}

// --- The reference model ---------------------------------------------------------------------

/// `(object, generation)`, numbered exactly as the registry numbers them.
type Tok = (u64, u64);

#[derive(Debug)]
struct ModelWait {
    id: u64,
    owner: Tok,
    name: usize,
    guard: Option<Tok>,
    requirements: Vec<(Tok, usize)>,
    label: u64,
    actions: Vec<Action>,
}

#[derive(Debug, Default)]
struct Model {
    next_generation: u64,
    next_id: u64,
    /// object -> (generation, lifetime, ready facts)
    scopes: BTreeMap<u64, (u64, u64, BTreeSet<usize>)>,
    waits: Vec<ModelWait>,
    queue: VecDeque<u64>,
    draining: bool,
    delivered: BTreeSet<u64>,
    fired: Vec<u64>,
}

impl Model {
    fn new() -> Self {
        Self { next_generation: 1, ..Self::default() }
    }

    fn current(&self, object: u64) -> Option<Tok> {
        self.scopes.get(&object).map(|s| (object, s.0))
    }

    fn is_current(&self, tok: Tok) -> bool {
        self.current(tok.0) == Some(tok)
    }

    fn holds(&self, (tok, fact): (Tok, usize)) -> bool {
        self.is_current(tok) && self.scopes[&tok.0].2.contains(&fact)
    }

    fn scope(&mut self, object: u64, lifetime: u64) -> Tok {
        if let Some(&(generation, old, _)) = self.scopes.get(&object) {
            if old == lifetime {
                return (object, generation);
            }
            self.reset_scope(object);
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        self.scopes.insert(object, (generation, lifetime, BTreeSet::new()));
        (object, generation)
    }

    fn reset_scope(&mut self, object: u64) -> bool {
        self.waits.retain(|w| {
            w.owner.0 != object
                && w.guard.is_none_or(|g| g.0 != object)
                && w.requirements.iter().all(|r| r.0.0 != object)
        });
        self.scopes.remove(&object).is_some()
    }

    fn reset_lifetime(&mut self, lifetime: u64) -> usize {
        let members: Vec<u64> =
            self.scopes.iter().filter(|(_, s)| s.1 == lifetime).map(|(o, _)| *o).collect();
        for object in &members {
            self.reset_scope(*object);
        }
        members.len()
    }

    fn set_ready(&mut self, tok: Tok, fact: usize, ready: bool) -> Result<bool, ErrorKind> {
        if !self.is_current(tok) {
            return Err(ErrorKind::StalePublisher);
        }
        let facts = &mut self.scopes.get_mut(&tok.0).expect("current").2;
        let changed = if ready { facts.insert(fact) } else { facts.remove(&fact) };
        if ready && changed {
            let woken: Vec<u64> = self
                .waits
                .iter()
                .filter(|w| w.requirements.iter().any(|r| r.0.0 == tok.0 && r.1 == fact))
                .filter(|w| w.requirements.iter().all(|r| self.holds(*r)))
                .map(|w| w.id)
                .collect();
            self.queue.extend(woken);
            self.drain();
        }
        Ok(changed)
    }

    fn wait(
        &mut self,
        owner: Tok,
        name: usize,
        guard: Option<Tok>,
        requirements: Vec<(Tok, usize)>,
        label: u64,
        actions: Vec<Action>,
    ) -> Result<WaitStatus, ErrorKind> {
        if !self.is_current(owner) {
            return Err(ErrorKind::StaleOwner);
        }
        if guard.is_some_and(|g| !self.is_current(g)) {
            return Err(ErrorKind::StaleGuard);
        }
        if requirements.is_empty() {
            return Err(ErrorKind::NoRequirements);
        }
        if requirements.iter().any(|r| !self.is_current(r.0)) {
            return Err(ErrorKind::StaleRequirement);
        }
        let mut unique = Vec::new();
        for r in requirements {
            if !unique.contains(&r) {
                unique.push(r);
            }
        }
        self.waits.retain(|w| !(w.owner.0 == owner.0 && w.name == name));
        let id = self.next_id;
        self.next_id += 1;
        let holds = unique.iter().all(|r| self.holds(*r));
        self.waits.push(ModelWait { id, owner, name, guard, requirements: unique, label, actions });
        if !holds {
            return Ok(WaitStatus::Pending);
        }
        self.queue.push_back(id);
        if self.draining {
            return Ok(WaitStatus::Queued);
        }
        self.drain();
        Ok(if self.delivered.contains(&id) { WaitStatus::Delivered } else { WaitStatus::Pending })
    }

    fn cancel(&mut self, owner: u64, name: usize) -> bool {
        let before = self.waits.len();
        self.waits.retain(|w| !(w.owner.0 == owner && w.name == name));
        self.waits.len() != before
    }

    fn drain(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        while let Some(id) = self.queue.pop_front() {
            let Some(index) = self.waits.iter().position(|w| w.id == id) else {
                continue;
            };
            if !self.waits[index].requirements.iter().all(|r| self.holds(*r)) {
                continue;
            }
            let wait = self.waits.remove(index);
            self.delivered.insert(id);
            self.fired.push(wait.label);
            for action in &wait.actions {
                self.apply(wait.label, action);
            }
            self.fired.push(wait.label + RETURNED);
        }
        self.draining = false;
    }

    fn apply(&mut self, label: u64, action: &Action) {
        match action {
            Action::Publish(object, fact) | Action::Close(object, fact) => {
                if let Some(tok) = self.current(*object) {
                    let ready = matches!(action, Action::Publish(..));
                    let _ = self.set_ready(tok, *fact, ready);
                }
            }
            Action::Cancel(owner, name) => {
                self.cancel(*owner, *name);
            }
            Action::Reset(object) => {
                self.reset_scope(*object);
            }
            Action::Register(owner, name, requirements) => {
                let Some(owner) = self.current(*owner) else {
                    return;
                };
                let requirements: Option<Vec<(Tok, usize)>> =
                    requirements.iter().map(|(o, f)| self.current(*o).map(|t| (t, *f))).collect();
                if let Some(requirements) = requirements {
                    let _ = self.wait(
                        owner,
                        *name,
                        None,
                        requirements,
                        label + NESTED_LABEL,
                        Vec::new(),
                    );
                }
            }
        }
    }

    fn blocking(&self, owner: u64, name: usize) -> Option<Vec<(Tok, usize)>> {
        let wait = self.waits.iter().find(|w| w.owner.0 == owner && w.name == name)?;
        Some(wait.requirements.iter().filter(|r| !self.holds(**r)).copied().collect())
    }
}

// --- Driving the registry --------------------------------------------------------------------

type Log = Vec<u64>;

fn fact_index(fact: GameplayTag) -> usize {
    FACTS.iter().position(|f| *f == fact).expect("only FACTS are used")
}

fn tok(token: ScopeToken) -> Tok {
    (token.object().get(), token.generation().get())
}

fn callback(
    label: u64,
    actions: Vec<Action>,
) -> impl FnOnce(&mut Registry<Log>, &mut Log) + 'static {
    move |registry: &mut Registry<Log>, log: &mut Log| {
        log.push(label);
        for action in &actions {
            apply(registry, log, label, action);
        }
        log.push(label + RETURNED);
    }
}

fn apply(registry: &mut Registry<Log>, log: &mut Log, label: u64, action: &Action) {
    let object = ObjectId::new;
    match action {
        Action::Publish(o, fact) | Action::Close(o, fact) => {
            if let Some(token) = registry.token(object(*o)) {
                let ready = matches!(action, Action::Publish(..));
                let _ = registry.set_ready(token, FACTS[*fact], ready, log);
            }
        }
        Action::Cancel(owner, name) => {
            registry.cancel(object(*owner), NAMES[*name]);
        }
        Action::Reset(o) => {
            registry.reset_scope(object(*o));
        }
        Action::Register(owner, name, requirements) => {
            let Some(owner) = registry.token(object(*owner)) else {
                return;
            };
            let requirements: Option<Vec<Requirement>> = requirements
                .iter()
                .map(|(o, f)| registry.token(object(*o)).map(|t| Requirement::new(t, FACTS[*f])))
                .collect();
            if let Some(requirements) = requirements {
                let _ = registry.wait_for_all(
                    owner,
                    NAMES[*name],
                    &requirements,
                    log,
                    callback(label + NESTED_LABEL, Vec::new()),
                );
            }
        }
    }
}

/// The registry, the model, and every token each has handed out per object, oldest first.
struct Harness {
    registry: Registry<Log>,
    log: Log,
    model: Model,
    history: HashMap<u64, Vec<ScopeToken>>,
    next_label: u64,
}

impl Harness {
    fn new() -> Self {
        Self {
            registry: Registry::new(),
            log: Vec::new(),
            model: Model::new(),
            history: HashMap::new(),
            next_label: 1,
        }
    }

    fn token(&self, (object, age): TokenRef) -> Option<ScopeToken> {
        let seen = self.history.get(&object)?;
        seen.get(seen.len() - 1 - age.min(seen.len() - 1)).copied()
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let object = ObjectId::new;
        match op {
            Op::Scope(o, lifetime) => {
                let real = self.registry.scope(object(*o), object(*lifetime));
                prop_assert_eq!(tok(real), self.model.scope(*o, *lifetime));
                let seen = self.history.entry(*o).or_default();
                if seen.last() != Some(&real) {
                    seen.push(real);
                }
            }
            Op::ResetScope(o, again) => {
                prop_assert_eq!(self.registry.reset_scope(object(*o)), self.model.reset_scope(*o));
                if *again {
                    self.step(&Op::Scope(*o, lifetime_of(*o, true)))?;
                }
            }
            Op::ResetLifetime(lifetime, again) => {
                prop_assert_eq!(
                    self.registry.reset_lifetime(object(*lifetime)),
                    self.model.reset_lifetime(*lifetime)
                );
                if *again {
                    for o in (0..OBJECTS).filter(|o| lifetime_of(*o, true) == *lifetime) {
                        self.step(&Op::Scope(o, *lifetime))?;
                    }
                }
            }
            Op::SetReady(token, fact, ready) => {
                let Some(token) = self.token(*token) else {
                    return Ok(());
                };
                let real = self
                    .registry
                    .set_ready(token, FACTS[*fact], *ready, &mut self.log)
                    .map_err(|e| kind(&e));
                prop_assert_eq!(real, self.model.set_ready(tok(token), *fact, *ready));
            }
            Op::Wait { owner, name, guard, requirements, actions } => {
                let Some(owner) = self.token(*owner) else {
                    return Ok(());
                };
                let guard = match guard {
                    Some(g) => match self.token(*g) {
                        Some(t) => Some(t),
                        None => return Ok(()),
                    },
                    None => None,
                };
                let Some(resolved) = requirements
                    .iter()
                    .map(|(t, f)| self.token(*t).map(|t| (t, *f)))
                    .collect::<Option<Vec<_>>>()
                else {
                    return Ok(());
                };
                let requirements: Vec<Requirement> =
                    resolved.iter().map(|(t, f)| Requirement::new(*t, FACTS[*f])).collect();
                let label = self.next_label;
                self.next_label += 1;
                let cb = callback(label, actions.clone());
                let real = match guard {
                    Some(g) => self.registry.wait_for_all_guarded(
                        owner,
                        NAMES[*name],
                        g,
                        &requirements,
                        &mut self.log,
                        cb,
                    ),
                    None => self.registry.wait_for_all(
                        owner,
                        NAMES[*name],
                        &requirements,
                        &mut self.log,
                        cb,
                    ),
                };
                let expected = self.model.wait(
                    tok(owner),
                    *name,
                    guard.map(tok),
                    resolved.iter().map(|(t, f)| (tok(*t), *f)).collect(),
                    label,
                    actions.clone(),
                );
                prop_assert_eq!(real.map_err(|e| kind(&e)), expected);
            }
            Op::Cancel(owner, name) => {
                prop_assert_eq!(
                    self.registry.cancel(object(*owner), NAMES[*name]),
                    self.model.cancel(*owner, *name)
                );
            }
        }
        self.compare()
    }

    fn compare(&self) -> Result<(), TestCaseError> {
        self.registry.check_invariants();
        prop_assert_eq!(&self.log, &self.model.fired, "delivery order");
        prop_assert_eq!(self.registry.pending_wait_count(), self.model.waits.len());
        prop_assert_eq!(self.registry.scope_count(), self.model.scopes.len());
        for o in 0..OBJECTS {
            prop_assert_eq!(self.registry.token(ObjectId::new(o)).map(tok), self.model.current(o));
            for (f, fact) in FACTS.iter().enumerate() {
                let model = self.model.scopes.get(&o).is_some_and(|s| s.2.contains(&f));
                prop_assert_eq!(self.registry.is_ready_on(ObjectId::new(o), *fact), model);
            }
            for (n, name) in NAMES.iter().enumerate() {
                let real = self.registry.blocking_facts(ObjectId::new(o), name).map(|b| {
                    b.iter().map(|r| (tok(r.token), fact_index(r.fact))).collect::<Vec<_>>()
                });
                prop_assert_eq!(real, self.model.blocking(o, n));
            }
        }
        Ok(())
    }
}

// --- Strategies ------------------------------------------------------------------------------

fn object() -> impl Strategy<Value = u64> {
    0..OBJECTS
}

/// Each object has a usual lifetime; presenting it with the other one resets its scope.
fn lifetime_of(object: u64, usual: bool) -> u64 {
    LIFETIMES[(object as usize + usize::from(!usual)) % LIFETIMES.len()]
}

fn token_ref() -> impl Strategy<Value = TokenRef> {
    (object(), prop_oneof![9 => Just(0usize), 1 => 1usize..3])
}

fn fact() -> impl Strategy<Value = usize> {
    0..FACTS.len()
}

fn name() -> impl Strategy<Value = usize> {
    0..NAMES.len()
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => (object(), fact()).prop_map(|(o, f)| Action::Publish(o, f)),
        2 => (object(), fact()).prop_map(|(o, f)| Action::Close(o, f)),
        1 => (object(), name()).prop_map(|(o, n)| Action::Cancel(o, n)),
        1 => object().prop_map(Action::Reset),
        2 => (object(), name(), prop::collection::vec((object(), fact()), 1..3))
            .prop_map(|(o, n, r)| Action::Register(o, n, r)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (object(), prop::bool::weighted(0.85))
            .prop_map(|(o, usual)| Op::Scope(o, lifetime_of(o, usual))),
        2 => (object(), prop::bool::weighted(0.7)).prop_map(|(o, a)| Op::ResetScope(o, a)),
        1 => (prop::sample::select(LIFETIMES.to_vec()), prop::bool::weighted(0.7))
            .prop_map(|(l, a)| Op::ResetLifetime(l, a)),
        10 => (token_ref(), fact(), prop::bool::weighted(0.75))
            .prop_map(|(t, f, r)| Op::SetReady(t, f, r)),
        8 => (
            token_ref(),
            name(),
            prop::option::weighted(0.2, token_ref()),
            prop_oneof![
                1 => Just(Vec::new()),
                19 => prop::collection::vec((token_ref(), fact()), 1..4),
            ],
            prop::collection::vec(action(), 0..3),
        )
            .prop_map(|(owner, name, guard, requirements, actions)| Op::Wait {
                owner,
                name,
                guard,
                requirements,
                actions,
            }),
        1 => (object(), name()).prop_map(|(o, n)| Op::Cancel(o, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// docs/spec/gates.md G1–G10: the indexed registry behaves as the naive model of the contract
    /// over any sequence of scopes, resets, publications, waits, cancellations and nested
    /// operations from callbacks.
    #[test]
    fn registry_matches_the_reference_model(ops in prop::collection::vec(op(), 1..80)) {
        let mut harness = Harness::new();
        for object in 0..OBJECTS {
            harness.step(&Op::Scope(object, lifetime_of(object, true)))?;
        }
        for op in &ops {
            harness.step(op)?;
        }
    }
}

//! The ability system of one player state: the kit latches (docs/spec/transitions.md T15, T16)
//! and the reset before a respawn (T13).
//!
//! It lives on the player state, not the pawn, so it outlives every pawn: death state, effects
//! and the kit-grant latches persist across a respawn. That cuts both ways, which is why
//! [`AbilityState::reset_for_respawn`] is the single place that clears death state and strips
//! finite-duration effects, and why the latches make a respawn never re-grant.
//!
//! A travel carries it to another server in its handoff save (docs/spec/travel.md V2, V4):
//! [`AbilityState::handoff`] reads it paused, times as what is left, and
//! [`AbilityState::from_handoff`] rebuilds it on the destination's clock.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::STATE_DEAD;

use crate::model::{HandoffDefect, HandoffDuration, HandoffEffect, HandoffState, KitLatches};

/// An active gameplay effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveEffect {
    pub(crate) tag: GameplayTag,
    pub(crate) duration: EffectDuration,
}

/// How long an effect lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EffectDuration {
    /// Equipment modifiers, kit passives, auras: they belong to the character, not the life.
    Infinite,
    /// Damage over time: `damage` every `tick` until `expires`.
    Finite { expires: Instant, next_tick: Instant, tick: Duration, damage: u32 },
}

/// What happened when effects were advanced to `now`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TickOutcome {
    /// Health changed.
    pub(crate) health_changed: bool,
    /// Health reached zero and `State.Dead` was added now.
    pub(crate) died: bool,
}

/// One player state's ability system.
#[derive(Debug, Clone)]
pub(crate) struct AbilityState {
    tags: BTreeSet<GameplayTag>,
    effects: Vec<ActiveEffect>,
    health: u32,
    max_health: u32,
    /// Startup kits granted this session (docs/spec/transitions.md T15); set at the first
    /// possession (`InitAbilityActorInfo`).
    startup_kits_granted: bool,
    /// Composed kits granted (docs/spec/transitions.md T15): the self-latch that makes the
    /// two entry points collapse to one grant.
    composed_kits_granted: bool,
    /// Every kit granted this session.
    granted: BTreeSet<GameplayTag>,
    /// Since when finite effects are paused (characters frozen, or the player away).
    paused_since: Option<Instant>,
}

impl AbilityState {
    /// A fresh ability state at full health (`max_health`), no tags, effects or kits.
    pub(crate) fn new(max_health: u32) -> Self {
        AbilityState {
            tags: BTreeSet::new(),
            effects: Vec::new(),
            health: max_health,
            max_health,
            startup_kits_granted: false,
            composed_kits_granted: false,
            granted: BTreeSet::new(),
            paused_since: None,
        }
    }

    /// Pauses every finite effect at `now` (a no-op while paused): no tick and no expiry until
    /// [`AbilityState::resume`].
    pub(crate) fn pause(&mut self, now: Instant) {
        self.paused_since.get_or_insert(now);
    }

    /// Resumes finite effects at `now` (a no-op unless paused): each tick and expiry moves on
    /// by the time paused, so an effect keeps exactly the time it had left.
    pub(crate) fn resume(&mut self, now: Instant) {
        let Some(since) = self.paused_since.take() else { return };
        let paused = now.saturating_duration_since(since);
        for effect in &mut self.effects {
            if let EffectDuration::Finite { expires, next_tick, .. } = &mut effect.duration {
                *expires += paused;
                *next_tick += paused;
            }
        }
    }

    /// Whether finite effects are paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused_since.is_some()
    }

    /// Whether `State.Dead` is held.
    pub(crate) fn is_dead(&self) -> bool {
        self.tags.contains(&STATE_DEAD)
    }

    /// Current health points.
    pub(crate) fn health(&self) -> u32 {
        self.health
    }

    /// Every tag held: states plus the tags of active effects.
    pub(crate) fn tags(&self) -> Vec<GameplayTag> {
        let mut all: BTreeSet<GameplayTag> = self.tags.clone();
        all.extend(self.effects.iter().map(|e| e.tag));
        all.into_iter().collect()
    }

    /// Whether an active effect carries `tag`.
    pub(crate) fn has_effect(&self, tag: GameplayTag) -> bool {
        self.effects.iter().any(|e| e.tag == tag)
    }

    /// Adds an effect (an equipment modifier, or a hazard's damage over time).
    pub(crate) fn apply(&mut self, effect: ActiveEffect) {
        self.effects.push(effect);
    }

    /// The next instant at which [`AbilityState::advance`] has work: a tick or an expiry.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        if self.is_paused() {
            return None;
        }
        self.effects
            .iter()
            .filter_map(|e| match e.duration {
                EffectDuration::Finite { expires, next_tick, .. } => Some(next_tick.min(expires)),
                EffectDuration::Infinite => None,
            })
            .min()
    }

    /// Applies every tick due at or before `now` and removes expired effects. Health reaching
    /// zero adds `State.Dead` (once).
    pub(crate) fn advance(&mut self, now: Instant) -> TickOutcome {
        let mut outcome = TickOutcome::default();
        if self.is_paused() {
            return outcome;
        }
        let dead = self.is_dead();
        for effect in &mut self.effects {
            if let EffectDuration::Finite { expires, next_tick, tick, damage } =
                &mut effect.duration
            {
                while *next_tick <= now && *next_tick <= *expires {
                    // Health 0 is death (it gets `State.Dead` below): later ticks change nothing.
                    if self.health > 0 {
                        self.health = self.health.saturating_sub(*damage);
                        outcome.health_changed = true;
                    }
                    *next_tick += *tick;
                }
            }
        }
        self.effects.retain(|e| match e.duration {
            EffectDuration::Finite { expires, .. } => expires > now,
            EffectDuration::Infinite => true,
        });
        if self.health == 0 && !dead {
            self.tags.insert(STATE_DEAD);
            outcome.died = true;
        }
        outcome
    }

    /// `ResetForRespawn`: the single place that removes `State.Dead` and strips
    /// finite-duration effects (the DoT that killed the player would otherwise resume on the
    /// fresh pawn). Infinite effects stay: they belong to the character, not the life. Health
    /// returns to its maximum.
    pub(crate) fn reset_for_respawn(&mut self) {
        self.tags.remove(&STATE_DEAD);
        self.effects.retain(|e| e.duration == EffectDuration::Infinite);
        self.health = self.max_health;
    }

    /// `InitAbilityActorInfo`, run on every possession: grants the startup kits once per
    /// session, then attempts the composed kits. Returns the kits granted now.
    pub(crate) fn init_ability_actor_info(
        &mut self,
        startup: &[GameplayTag],
        composed: Option<&[GameplayTag]>,
    ) -> Vec<GameplayTag> {
        let mut granted = Vec::new();
        if !self.startup_kits_granted {
            self.startup_kits_granted = true;
            granted.extend(self.grant(startup));
        }
        granted.extend(self.give_composed_kits(composed));
        granted
    }

    /// `InitializeProvider`, run when the preset resolves: grants the composed kits only if
    /// possession already happened (otherwise possession will). Returns the kits granted now.
    pub(crate) fn initialize_provider(&mut self, composed: &[GameplayTag]) -> Vec<GameplayTag> {
        if !self.startup_kits_granted {
            return Vec::new();
        }
        self.give_composed_kits(Some(composed))
    }

    /// `GiveComposedKits`: a no-op until the preset is known; then grants its kits and latches,
    /// even when it has none, so the grant runs on exactly one side, once.
    fn give_composed_kits(&mut self, composed: Option<&[GameplayTag]>) -> Vec<GameplayTag> {
        let Some(kits) = composed else { return Vec::new() };
        if self.composed_kits_granted {
            return Vec::new();
        }
        self.composed_kits_granted = true;
        self.grant(kits)
    }

    /// Every kit granted so far, in catalog order.
    pub(crate) fn granted_kits(&self) -> Vec<GameplayTag> {
        self.granted.iter().copied().collect()
    }

    /// Grants each of `kits` not granted yet; returns those granted now.
    fn grant(&mut self, kits: &[GameplayTag]) -> Vec<GameplayTag> {
        kits.iter().copied().filter(|k| self.granted.insert(*k)).collect()
    }

    /// What a handoff save carries of this state at `now` (docs/spec/travel.md V2): its own
    /// tags (not its effects'), every active effect in order, each finite one paused with the
    /// milliseconds left until its expiry and its next tick, counted from the pause if its
    /// effects are paused already (a frozen player's effects stand still), else from `now`, and
    /// the kit latches. A time already past counts as 0 (due at once); a part of a millisecond
    /// is dropped. Health is [`AbilityState::health`].
    pub(crate) fn handoff(
        &self,
        now: Instant,
    ) -> (BTreeSet<GameplayTag>, Vec<HandoffEffect>, KitLatches) {
        let from = self.paused_since.unwrap_or(now);
        let left = |at: Instant| millis(at.saturating_duration_since(from));
        let effects = self
            .effects
            .iter()
            .map(|effect| HandoffEffect {
                tag: effect.tag,
                duration: match effect.duration {
                    EffectDuration::Infinite => HandoffDuration::Infinite,
                    EffectDuration::Finite { expires, next_tick, tick, damage } => {
                        HandoffDuration::Finite {
                            left_ms: left(expires),
                            next_tick_ms: left(next_tick),
                            tick_ms: millis(tick),
                            damage,
                        }
                    }
                },
            })
            .collect();
        let kits = KitLatches {
            startup_granted: self.startup_kits_granted,
            composed_granted: self.composed_kits_granted,
            granted: self.granted.clone(),
        };
        (self.tags.clone(), effects, kits)
    }

    /// The ability state a handoff save carries, rebuilt at `now` on the destination
    /// (docs/spec/travel.md V4) in a world whose players have `max_health`: its tags, effects
    /// and kit latches as handed off (kits are never granted again, T16), health clamped to
    /// `max_health`. Each finite effect keeps the time it had left from `now`, and the state is
    /// paused at `now`, as a kept state is (S9): a traveller is frozen until its transition
    /// ends (T12), whose pause sync resumes it then. A dead player arrives dead (S11): with
    /// `State.Dead`, health 0; health 0 is death, as [`AbilityState::advance`] would find.
    ///
    /// # Errors
    /// The [`HandoffDefect`] [`HandoffState::check`] finds; nothing is built then.
    pub(crate) fn from_handoff(
        state: &HandoffState,
        max_health: u32,
        now: Instant,
    ) -> Result<AbilityState, HandoffDefect> {
        state.check()?;
        let effects = state
            .effects
            .iter()
            .map(|effect| ActiveEffect {
                tag: effect.tag,
                duration: match effect.duration {
                    HandoffDuration::Infinite => EffectDuration::Infinite,
                    HandoffDuration::Finite { left_ms, next_tick_ms, tick_ms, damage } => {
                        EffectDuration::Finite {
                            expires: after(now, left_ms),
                            next_tick: after(now, next_tick_ms),
                            tick: Duration::from_millis(tick_ms.min(LONGEST_MS)),
                            damage,
                        }
                    }
                },
            })
            .collect();
        let mut tags = state.tags.clone();
        let mut health = state.health.min(max_health);
        if tags.contains(&STATE_DEAD) || health == 0 {
            tags.insert(STATE_DEAD);
            health = 0;
        }
        Ok(AbilityState {
            tags,
            effects,
            health,
            max_health,
            startup_kits_granted: state.kits.startup_granted,
            composed_kits_granted: state.kits.composed_granted,
            granted: state.kits.granted.clone(),
            paused_since: Some(now),
        })
    }
}

/// The longest a handed-off time is taken to be, in milliseconds (ten years): a save's
/// milliseconds are any `u64`, and one past every clock's reach must not overflow an
/// `Instant`. Longer is as good as never on a server.
const LONGEST_MS: u64 = 10 * 365 * 24 * 60 * 60 * 1000;

/// `duration` in whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The instant `ms` milliseconds (at most [`LONGEST_MS`]) after `now`.
fn after(now: Instant, ms: u64) -> Instant {
    let wait = Duration::from_millis(ms.min(LONGEST_MS));
    // Ten years past any running clock fit every platform's `Instant`; `now` is the fallback
    // that cannot be reached.
    now.checked_add(wait).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interface::ConnectionId;
    use crate::players::Player;
    use gatehouse_protocol::TeamId;
    use gatehouse_tags::catalog::*;

    const STARTUP: &[GameplayTag] = &[KIT_STARTUP_MOVEMENT];
    const KITS: &[GameplayTag] = &[KIT_COMPOSED_VANGUARD];

    /// docs/spec/transitions.md T15: on a dedicated-server join the preset resolves before
    /// possession; the grant happens at possession.
    #[test]
    fn kits_are_granted_at_possession_when_the_preset_resolved_first() {
        let mut a = AbilityState::new(100);
        assert!(a.initialize_provider(KITS).is_empty(), "no possession yet: skip");
        let granted = a.init_ability_actor_info(STARTUP, Some(KITS));
        assert_eq!(granted, vec![KIT_STARTUP_MOVEMENT, KIT_COMPOSED_VANGUARD]);
    }

    /// T15: on a PlayPreset relaunch possession runs first with no preset; the provider
    /// performs the grant once the preset resolves.
    #[test]
    fn kits_are_granted_at_preset_resolution_when_possession_came_first() {
        let mut a = AbilityState::new(100);
        assert_eq!(a.init_ability_actor_info(STARTUP, None), vec![KIT_STARTUP_MOVEMENT]);
        assert_eq!(a.initialize_provider(KITS), vec![KIT_COMPOSED_VANGUARD]);
        assert!(a.initialize_provider(KITS).is_empty(), "latched");
    }

    /// T16: a respawn re-running InitAbilityActorInfo does not re-grant.
    #[test]
    fn a_respawn_never_re_grants() {
        let mut a = AbilityState::new(100);
        a.init_ability_actor_info(STARTUP, Some(KITS));
        assert!(a.init_ability_actor_info(STARTUP, Some(KITS)).is_empty());
    }

    /// T15: a preset with zero kits still latches.
    #[test]
    fn a_preset_with_zero_kits_still_latches() {
        let mut a = AbilityState::new(100);
        a.init_ability_actor_info(STARTUP, Some(&[]));
        assert!(a.initialize_provider(KITS).is_empty(), "the empty grant latched");
    }

    fn dot(now: Instant) -> ActiveEffect {
        ActiveEffect {
            tag: EFFECT_DAMAGE_OVER_TIME_POISON,
            duration: EffectDuration::Finite {
                expires: now + Duration::from_millis(2000),
                next_tick: now + Duration::from_millis(250),
                tick: Duration::from_millis(250),
                damage: 30,
            },
        }
    }

    /// T12: a finite effect rests while paused and keeps the time it had left.
    #[test]
    fn a_paused_effect_neither_ticks_nor_expires_and_resumes_with_its_time_left() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut a = AbilityState::new(100);
        a.apply(dot(t0));
        a.pause(t0 + ms(100));
        assert_eq!(a.next_event(), None);
        assert_eq!(a.advance(t0 + ms(10_000)), TickOutcome::default());
        assert_eq!(a.health(), 100);
        a.resume(t0 + ms(10_100));
        assert_eq!(a.next_event(), Some(t0 + ms(10_250)), "the first tick, 150 ms after resuming");
        a.advance(t0 + ms(10_900));
        assert_eq!(a.health(), 10, "three ticks (10 250, 10 500, 10 750)");
        assert!(a.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "expiry moved to 12 000");
    }

    #[test]
    fn damage_over_time_ticks_until_death_then_respawn_resets_only_finite_effects() {
        let t0 = Instant::now();
        let mut a = AbilityState::new(100);
        a.apply(ActiveEffect { tag: EFFECT_EQUIPMENT_ARMOR, duration: EffectDuration::Infinite });
        a.apply(dot(t0));
        assert_eq!(a.next_event(), Some(t0 + Duration::from_millis(250)));
        let out = a.advance(t0 + Duration::from_millis(750));
        assert_eq!((out.health_changed, out.died, a.health()), (true, false, 10));
        let out = a.advance(t0 + Duration::from_millis(1000));
        assert!(out.died && a.is_dead());
        assert!(
            a.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON),
            "the DoT that killed is still active"
        );
        a.reset_for_respawn();
        assert!(!a.is_dead());
        assert_eq!(a.health(), 100);
        assert!(a.has_effect(EFFECT_EQUIPMENT_ARMOR), "infinite effects survive");
        assert!(!a.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "finite effects are stripped");
        assert!(!a.advance(t0 + Duration::from_millis(1500)).health_changed, "nothing ticks after");
        assert_eq!(a.health(), 100);
    }

    /// A dead player's DoT still ticks until the restart strips it, and changes nothing: no
    /// health change and no second death (each would be a message to every client).
    #[test]
    fn a_dead_players_remaining_ticks_change_nothing() {
        let t0 = Instant::now();
        let mut a = AbilityState::new(100);
        a.apply(dot(t0));
        assert!(a.advance(t0 + Duration::from_millis(1000)).died);
        assert_eq!(a.advance(t0 + Duration::from_millis(1750)), TickOutcome::default());
        assert_eq!(a.health(), 0);
    }

    fn player(team: u8) -> Player {
        let id = gatehouse_protocol::PlayerId::new("traveller").unwrap();
        Player::new(id, ConnectionId(1), TeamId(team), 0, 100)
    }

    fn armor() -> ActiveEffect {
        ActiveEffect { tag: EFFECT_EQUIPMENT_ARMOR, duration: EffectDuration::Infinite }
    }

    /// `effects` as they stand `by` later: every finite instant moved on by it.
    fn shifted(effects: &[ActiveEffect], by: Duration) -> Vec<ActiveEffect> {
        let mut effects = effects.to_vec();
        for effect in &mut effects {
            if let EffectDuration::Finite { expires, next_tick, .. } = &mut effect.duration {
                *expires += by;
                *next_tick += by;
            }
        }
        effects
    }

    /// docs/spec/travel.md V2, V4: the destination places the player as it left the source:
    /// team, health, tags, effects with the time they had left, kit latches.
    #[test]
    fn a_handoff_round_trips_a_players_state() {
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        let mut source = player(2);
        source.abilities.init_ability_actor_info(STARTUP, Some(KITS));
        source.abilities.apply(armor());
        source.abilities.apply(dot(t0));
        source.abilities.advance(t0 + ms(300));
        assert_eq!(source.abilities.health(), 70, "one tick taken, the next at 500");
        let t = t0 + ms(300);
        let state = source.handoff(t);
        assert_eq!(
            state.effects[1].duration,
            HandoffDuration::Finite { left_ms: 1_700, next_tick_ms: 200, tick_ms: 250, damage: 30 }
        );

        let t2 = t + ms(60_000);
        let mut arrived = player(1);
        arrived.arrive(&state, 100, t2).unwrap();
        let (a, b) = (&source.abilities, &arrived.abilities);
        assert_eq!(arrived.team, TeamId(2));
        assert_eq!((&b.tags, b.health, b.max_health), (&a.tags, a.health, a.max_health));
        assert_eq!(
            (b.startup_kits_granted, b.composed_kits_granted, &b.granted),
            (a.startup_kits_granted, a.composed_kits_granted, &a.granted)
        );
        assert_eq!(b.effects, shifted(&a.effects, t2 - t), "the same time left, from t2");
        assert_eq!(b.paused_since, Some(t2), "frozen until its transition ends (T12)");
        assert_eq!(arrived.handoff(t2 + ms(5_000)), state, "paused: nothing moved meanwhile");

        let t3 = t2 + ms(1_000);
        arrived.abilities.resume(t3);
        assert_eq!(arrived.abilities.next_event(), Some(t3 + ms(200)), "the next tick's offset");
        assert!(arrived.abilities.init_ability_actor_info(STARTUP, Some(KITS)).is_empty());
    }

    /// V2: a frozen player's effects stand still from the pause; what they have left is counted
    /// from it, not from the handoff.
    #[test]
    fn a_handoff_of_paused_effects_counts_from_the_pause() {
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        let mut running = AbilityState::new(100);
        running.apply(dot(t0));
        let mut paused = running.clone();
        paused.pause(t0 + ms(100));
        let left =
            HandoffDuration::Finite { left_ms: 1_900, next_tick_ms: 150, tick_ms: 250, damage: 30 };
        assert_eq!(paused.handoff(t0 + ms(5_000)).1[0].duration, left, "from the pause at 100");
        assert_eq!(running.handoff(t0 + ms(100)).1[0].duration, left, "from now, unpaused");
    }

    /// V4, docs/spec/sessions.md S11: a dead player arrives dead, with the effect that killed
    /// it, and does not die again there; death and health 0 go together.
    #[test]
    fn a_dead_player_is_handed_off_dead() {
        let (t0, ms) = (Instant::now(), Duration::from_millis);
        let mut source = player(1);
        source.abilities.apply(dot(t0));
        assert!(source.abilities.advance(t0 + ms(1_000)).died);
        let state = source.handoff(t0 + ms(1_000));
        assert!(state.is_dead() && state.health == 0);

        let t2 = t0 + ms(10_000);
        let mut arrived = player(1);
        arrived.arrive(&state, 100, t2).unwrap();
        let a = &mut arrived.abilities;
        assert!(a.is_dead() && a.health() == 0);
        assert!(a.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "the poison that killed it");
        a.resume(t2);
        assert_eq!(a.advance(t2 + ms(5_000)), TickOutcome::default(), "no second death");

        let mut arrived = player(1);
        arrived.arrive(&HandoffState { health: 40, ..state.clone() }, 100, t2).unwrap();
        assert!(arrived.is_dead());
        assert_eq!(arrived.abilities.health(), 0, "State.Dead is health 0");
        let at_zero = HandoffState { tags: BTreeSet::new(), ..state };
        arrived.arrive(&at_zero, 100, t2).unwrap();
        assert!(arrived.is_dead(), "health 0 is death, as the core's advance finds");
    }

    /// V4: the maximum health is the destination world's, and no handoff exceeds it.
    #[test]
    fn a_handoff_above_the_worlds_max_health_is_clamped() {
        let now = Instant::now();
        let alive = HandoffState { tags: BTreeSet::new(), health: 150, ..HandoffState::sample() };
        let mut arrived = player(1);
        arrived.arrive(&alive, 100, now).unwrap();
        assert_eq!(arrived.abilities.health(), 100);
        arrived.arrive(&HandoffState { health: 80, ..alive }, 100, now).unwrap();
        assert_eq!(arrived.abilities.health(), 80, "below it, kept");
        arrived.abilities.reset_for_respawn();
        assert_eq!(arrived.abilities.health(), 100, "the destination's maximum");
    }

    /// V4: a handoff `HandoffState::check` refuses is an error, and the player stays as it was.
    #[test]
    fn an_invalid_handoff_is_refused_not_applied() {
        let now = Instant::now();
        let mut arrived = player(1);
        arrived.abilities.init_ability_actor_info(STARTUP, Some(KITS));
        arrived.abilities.apply(armor());
        let before = arrived.handoff(now);
        let no_team = HandoffState { team: TeamId(0), ..HandoffState::sample() };
        assert_eq!(arrived.arrive(&no_team, 100, now), Err(HandoffDefect::NoTeam));
        let mut zero_tick = HandoffState::sample();
        if let HandoffDuration::Finite { tick_ms, .. } = &mut zero_tick.effects[1].duration {
            *tick_ms = 0;
        }
        let refused = arrived.arrive(&zero_tick, 100, now);
        assert!(matches!(refused, Err(HandoffDefect::ZeroTick { effect: 1, .. })), "{refused:?}");
        assert_eq!(arrived.handoff(now), before, "nothing applied");
        assert!(!arrived.abilities.is_paused());
    }
}

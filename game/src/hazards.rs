//! Hazards, effect ticks and death: a finite-duration damage-over-time effect on the persistent
//! player state kills the player; at 0 health the ability state gains `State.Dead`.
//!
//! Every hazard periodically afflicts the next living pawn on its node that it is not already
//! afflicting (round robin, so runs are reproducible). Hazards rest while a transition is in
//! flight: characters are frozen. Effects already applied rest too: a player's finite effects
//! pause while its character is frozen (a transition in flight, or its own join) and resume on
//! release, so nobody dies behind a loading screen.
//!
//! [`Hazards`] owns each hazard's schedule; the effects themselves live on the player states
//! (`abilities.rs`). A death changes nothing a transition or the spawn queue waits for: the
//! advance pass after an effects step finds nothing new to do.

use std::time::Instant;

use gatehouse_protocol::{PlayerId, ServerMessage};

use super::Game;
use super::abilities::{ActiveEffect, EffectDuration};
use super::timers::Timer;
use crate::fields::OrNone;
use crate::world::WorldMap;

/// The schedule of one hazard from the world file.
#[derive(Debug, Clone)]
struct HazardState {
    next_exposure: Instant,
    /// Round-robin position among the candidates.
    cursor: usize,
}

/// The schedules of the world's hazards, in the world file's order.
#[derive(Debug)]
pub(crate) struct Hazards {
    schedules: Vec<HazardState>,
}

impl Hazards {
    /// Every hazard of `world`, first exposing one exposure period after `now`.
    pub(crate) fn new(world: &WorldMap, now: Instant) -> Self {
        let schedules = world
            .hazards
            .iter()
            .map(|h| HazardState { next_exposure: now + h.exposure, cursor: 0 })
            .collect();
        Hazards { schedules }
    }

    /// The hazards whose exposure is due at `now`, by index.
    fn due(&self, now: Instant) -> Vec<usize> {
        (0..self.schedules.len()).filter(|&i| self.schedules[i].next_exposure <= now).collect()
    }

    /// The earliest exposure of any hazard.
    fn next_exposure(&self) -> Option<Instant> {
        self.schedules.iter().map(|h| h.next_exposure).min()
    }

    /// Hazard `index` next exposes at `at`.
    fn reschedule(&mut self, index: usize, at: Instant) {
        if let Some(h) = self.schedules.get_mut(index) {
            h.next_exposure = at;
        }
    }

    /// The next of `candidates` hazard `index` afflicts, round robin.
    fn pick(&mut self, index: usize, candidates: &[PlayerId]) -> Option<PlayerId> {
        let state = self.schedules.get_mut(index)?;
        if candidates.is_empty() {
            return None;
        }
        let target = candidates[state.cursor % candidates.len()].clone();
        state.cursor = state.cursor.wrapping_add(1);
        Some(target)
    }
}

impl Game {
    /// Handles hazard exposures and effect ticks due at `now`, then re-arms the effects timer.
    pub(crate) fn handle_effects(&mut self, now: Instant) {
        for index in self.hazards.due(now) {
            self.expose(now, index);
        }
        for id in self.roster.effects_due(now) {
            self.advance_effects(now, &id);
        }
        self.rearm_effects_timer();
    }

    /// After every step: each player's finite effects are paused while its character is frozen
    /// (a transition in flight, or its own join) and resumed otherwise; the effects timer is
    /// re-armed when that changed anything.
    ///
    /// A transition starting or ending changes what every player should be: those two steps
    /// (once per transition) visit every player. Any other step can put only the players it
    /// touched out of step (a join started or ended, a login), so only those are visited: the
    /// sync costs what the step changed, not the number of players.
    pub(crate) fn sync_effect_pauses(&mut self, now: Instant) {
        let in_transition = self.transition.current().is_some();
        let mut touched = self.joins.take_touched();
        touched.extend(self.roster.take_logins());
        let changed = if in_transition != self.pauses_follow_transition {
            self.pauses_follow_transition = in_transition;
            self.sync_every_pause(now, in_transition)
        } else {
            let mut changed = false;
            for id in &touched {
                changed |= self.sync_pause(now, id, in_transition);
            }
            changed
        };
        if changed {
            // Something was paused or resumed: the next effect event moved.
            self.rearm_effects_timer();
        }
    }

    /// A transition started (everyone is frozen) or ended (only the joiners are): every
    /// player's pause is brought in step. Returns whether any changed.
    fn sync_every_pause(&mut self, now: Instant, in_transition: bool) -> bool {
        let mut changed = false;
        if in_transition {
            self.roster.change_each(|player| {
                changed |= !player.abilities.is_paused();
                player.abilities.pause(now);
            });
            return changed;
        }
        let resume: Vec<PlayerId> =
            self.roster.paused_players().filter(|id| !self.joins.contains(id)).cloned().collect();
        let pause: Vec<PlayerId> = self.joins.players().cloned().collect();
        for id in resume.iter().chain(&pause) {
            changed |= self.sync_pause(now, id, false);
        }
        changed
    }

    /// Pauses or resumes `id`'s finite effects to match whether its character is frozen.
    /// Returns whether that changed them.
    fn sync_pause(&mut self, now: Instant, id: &PlayerId, in_transition: bool) -> bool {
        let frozen = in_transition || self.joins.contains(id);
        let Some(mut player) = self.roster.player_mut(id) else { return false };
        match (frozen, player.abilities.is_paused()) {
            (true, false) => player.abilities.pause(now),
            (false, true) => player.abilities.resume(now),
            _ => return false,
        }
        true
    }

    /// Whether every player's effects are paused exactly when its character is frozen, by a
    /// walk of every player: the Harness checks it after every step.
    #[cfg(test)]
    pub(crate) fn effect_pauses_in_sync(&self) -> bool {
        let in_transition = self.transition.current().is_some();
        self.roster
            .players_unvisited()
            .all(|p| p.abilities.is_paused() == (in_transition || self.joins.contains(&p.id)))
    }

    /// Arms the effects timer at the earliest hazard exposure or effect event.
    pub(crate) fn rearm_effects_timer(&mut self) {
        let hazards = self.hazards.next_exposure();
        let effects = self.roster.next_effect_event();
        match hazards.into_iter().chain(effects).min() {
            Some(at) => self.timers.set(Timer::Effects, at),
            None => self.timers.stop(Timer::Effects),
        }
    }

    /// Hazard `index` is due: it is rescheduled, and afflicts one player on its node with its
    /// effect if that node is streamed and no transition runs.
    fn expose(&mut self, now: Instant, index: usize) {
        let Some(spec) = self.world.hazards.get(index).cloned() else { return };
        self.hazards.reschedule(index, now + spec.exposure);
        if self.transition.current().is_some() || self.streaming.streamed_node() != Some(&spec.node)
        {
            return;
        }
        let candidates: Vec<PlayerId> = self
            .roster
            .pawns()
            // A player's current pawn is alive exactly while the player is not dead (a restart
            // unpossesses the dead one), so the player's own state decides.
            .filter(|pawn| pawn.node == spec.node)
            .filter(|pawn| {
                self.roster.player(&pawn.owner).is_some_and(|p| {
                    p.pawn == Some(pawn.id) && !p.is_dead() && !p.abilities.has_effect(spec.effect)
                })
            })
            .map(|pawn| pawn.owner.clone())
            .collect();
        let Some(target) = self.hazards.pick(index, &candidates) else { return };
        let Some(mut player) = self.roster.player_mut(&target) else { return };
        player.abilities.apply(ActiveEffect {
            tag: spec.effect,
            duration: EffectDuration::Finite {
                expires: now + spec.duration,
                next_tick: now + spec.tick,
                tick: spec.tick,
                damage: spec.damage_per_tick,
            },
        });
        let tags = player.abilities.tags();
        drop(player);
        tracing::debug!(player = %target, effect = %spec.effect, "hazard afflicts");
        self.broadcast(ServerMessage::AbilityTagsChanged { player_id: target, tags });
    }

    /// Runs `id`'s effects up to `now`: tag changes are broadcast, and a death kills its pawn.
    fn advance_effects(&mut self, now: Instant, id: &PlayerId) {
        let Some(mut player) = self.roster.player_mut(id) else { return };
        let before = player.abilities.tags();
        let outcome = player.abilities.advance(now);
        let (tags, health, pawn) =
            (player.abilities.tags(), player.abilities.health(), player.pawn);
        drop(player);
        if outcome.health_changed {
            self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
        }
        if outcome.died {
            self.counters.deaths += 1;
            tracing::info!(player = %id, pawn = %OrNone(pawn), "player died");
            if let Some(pawn_id) = pawn {
                if let Some(p) = self.roster.pawn_mut(pawn_id) {
                    p.die();
                }
                self.broadcast(ServerMessage::PawnDied { pawn_id });
            }
        }
        if tags != before {
            self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
        }
    }
}

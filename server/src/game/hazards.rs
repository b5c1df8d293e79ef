//! Hazards, effect ticks and death (seed 001: a finite-duration damage-over-time effect on the
//! persistent player state kills the player; at 0 health the ability state gains `State.Dead`).
//!
//! Every hazard periodically afflicts the next living pawn on its node that it is not already
//! afflicting (round robin, so runs are reproducible). Hazards rest while a transition is in
//! flight: characters are frozen.

use std::time::Instant;

use gatehouse_protocol::{PlayerId, ServerMessage};

use super::Game;
use super::abilities::{ActiveEffect, EffectDuration};
use super::timers::Timer;

/// The schedule of one hazard from the world file.
#[derive(Debug, Clone)]
pub(crate) struct HazardState {
    pub(crate) next_exposure: Instant,
    /// Round-robin position among the candidates.
    pub(crate) cursor: usize,
}

impl Game {
    /// Handles hazard exposures and effect ticks due at `now`, then re-arms the effects timer.
    pub(crate) fn handle_effects(&mut self, now: Instant) {
        for index in 0..self.hazards.len() {
            if self.hazards[index].next_exposure <= now {
                self.expose(now, index);
            }
        }
        let due: Vec<PlayerId> = self
            .players
            .values()
            .filter(|p| p.abilities.next_event().is_some_and(|at| at <= now))
            .map(|p| p.id.clone())
            .collect();
        for id in due {
            self.advance_effects(now, &id);
        }
        self.rearm_effects_timer();
    }

    /// Arms the effects timer at the earliest hazard exposure or effect event.
    pub(crate) fn rearm_effects_timer(&mut self) {
        let hazards = self.hazards.iter().map(|h| h.next_exposure);
        let effects = self.players.values().filter_map(|p| p.abilities.next_event());
        match hazards.chain(effects).min() {
            Some(at) => self.timers.set(Timer::Effects, at),
            None => self.timers.stop(Timer::Effects),
        }
    }

    fn expose(&mut self, now: Instant, index: usize) {
        let spec = self.world.hazards[index].clone();
        self.hazards[index].next_exposure = now + spec.exposure;
        if self.transition.is_some() || self.streaming.streamed_node() != Some(&spec.node) {
            return;
        }
        let candidates: Vec<PlayerId> = self
            .pawns
            .values()
            .filter(|pawn| pawn.alive && pawn.node == spec.node)
            .filter(|pawn| {
                self.players.get(&pawn.owner).is_some_and(|p| {
                    p.pawn == Some(pawn.id) && !p.is_dead() && !p.abilities.has_effect(spec.effect)
                })
            })
            .map(|pawn| pawn.owner.clone())
            .collect();
        if candidates.is_empty() {
            return;
        }
        let state = &mut self.hazards[index];
        let target = candidates[state.cursor % candidates.len()].clone();
        state.cursor = state.cursor.wrapping_add(1);
        let Some(player) = self.players.get_mut(&target) else { return };
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
        tracing::debug!(player = %target, effect = %spec.effect, "hazard afflicts");
        self.broadcast(ServerMessage::AbilityTagsChanged { player_id: target, tags });
    }

    fn advance_effects(&mut self, now: Instant, id: &PlayerId) {
        let Some(player) = self.players.get_mut(id) else { return };
        let before = player.abilities.tags();
        let outcome = player.abilities.advance(now);
        let (tags, health, pawn) =
            (player.abilities.tags(), player.abilities.health(), player.pawn);
        if outcome.health_changed {
            self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
        }
        if outcome.died {
            self.counters.deaths += 1;
            tracing::info!(player = %id, pawn = ?pawn, "player died");
            if let Some(pawn_id) = pawn {
                if let Some(p) = self.pawns.get_mut(&pawn_id) {
                    p.alive = false;
                }
                self.broadcast(ServerMessage::PawnDied { pawn_id });
            }
        }
        if tags != before {
            self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
        }
    }
}

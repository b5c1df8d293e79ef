//! Hazards, effect ticks and death: a finite-duration damage-over-time effect on the persistent
//! player state kills the player; at 0 health the ability state gains `State.Dead`.
//!
//! Every hazard periodically afflicts the next living pawn on its node that it is not already
//! afflicting (round robin, so runs are reproducible). Hazards rest while a transition is in
//! flight: characters are frozen. Effects already applied rest too: a player's finite effects
//! pause while its character is frozen (a transition in flight, or its own join) and resume on
//! release, so nobody dies behind a loading screen.
//!
//! [`Effects`] owns each hazard's schedule and whether the pauses follow a transition; the
//! effects themselves live on the player states (`abilities.rs`), which it edits through the
//! roster it is lent. It returns what happened as [`EffectEvent`]s, which the game replicates
//! and counts. A death changes nothing a transition or the spawn queue waits for: the advance
//! pass after an effects step finds nothing new to do.

use std::time::Instant;

use gatehouse_protocol::{NodeId, PawnId, PlayerId};
use gatehouse_tags::GameplayTag;

use super::abilities::{ActiveEffect, EffectDuration};
use super::joins::Joins;
use super::roster::Roster;
use crate::world::WorldMap;

/// The schedule of one hazard from the world file.
#[derive(Debug, Clone)]
struct HazardState {
    next_exposure: Instant,
    /// Round-robin position among the candidates.
    cursor: usize,
}

/// What an effects step did to one player, in the order it happened: the game replicates each
/// to every client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EffectEvent {
    /// The player's ability tags changed (an effect applied, or one expired).
    Tags { player: PlayerId, tags: Vec<GameplayTag> },
    /// The player's health changed.
    Health { player: PlayerId, health: u32 },
    /// The player died; `pawn`, its possessed pawn if it had one, is dead now too.
    Died { player: PlayerId, pawn: Option<PawnId> },
}

/// The hazards' schedules, in the world file's order, and the effect pauses' sync state.
#[derive(Debug)]
pub(crate) struct Effects {
    schedules: Vec<HazardState>,
    /// Whether the pauses were last brought in step with a transition in flight: when this
    /// differs from now, every player's pause is synced.
    pauses_follow_transition: bool,
}

impl Effects {
    /// Every hazard of `world`, first exposing one exposure period after `now`.
    pub(crate) fn new(world: &WorldMap, now: Instant) -> Self {
        let schedules = world
            .hazards
            .iter()
            .map(|h| HazardState { next_exposure: now + h.exposure, cursor: 0 })
            .collect();
        Effects { schedules, pauses_follow_transition: false }
    }

    /// The earliest hazard exposure or effect event of any player in `roster`: when the
    /// effects timer is due.
    pub(crate) fn next_event(&self, roster: &Roster) -> Option<Instant> {
        let hazards = self.schedules.iter().map(|h| h.next_exposure).min();
        hazards.into_iter().chain(roster.next_effect_event()).min()
    }

    /// The effects timer at `now`: every due hazard exposes (none while `frozen`, a transition
    /// in flight, or off the `streamed` node), then every player's due effects run. Returns
    /// what happened, in order.
    pub(crate) fn run(
        &mut self,
        now: Instant,
        world: &WorldMap,
        roster: &mut Roster,
        frozen: bool,
        streamed: Option<&NodeId>,
    ) -> Vec<EffectEvent> {
        let mut events = Vec::new();
        let due: Vec<usize> =
            (0..self.schedules.len()).filter(|&i| self.schedules[i].next_exposure <= now).collect();
        for index in due {
            events.extend(self.expose(now, index, world, roster, frozen, streamed));
        }
        for id in roster.effects_due(now) {
            advance_effects(now, &id, roster, &mut events);
        }
        events
    }

    /// After every step: each player's finite effects are paused while its character is frozen
    /// (a transition in flight, or its own join) and resumed otherwise. Returns whether that
    /// changed anything (the effects timer must then be re-armed).
    ///
    /// A transition starting or ending changes what every player should be: those two steps
    /// (once per transition) visit every player. Any other step can put only the players it
    /// touched out of step (a join started or ended, a login), so only those are visited: the
    /// sync costs what the step changed, not the number of players.
    pub(crate) fn sync_pauses(
        &mut self,
        now: Instant,
        in_transition: bool,
        roster: &mut Roster,
        joins: &mut Joins,
    ) -> bool {
        let mut touched = joins.take_touched();
        touched.extend(roster.take_logins());
        if in_transition != self.pauses_follow_transition {
            self.pauses_follow_transition = in_transition;
            return sync_every_pause(now, in_transition, roster, joins);
        }
        let mut changed = false;
        for id in &touched {
            changed |= sync_pause(now, id, in_transition, roster, joins);
        }
        changed
    }

    /// Hazard `index` is due: it is rescheduled, and afflicts one player on its node with its
    /// effect if that node is `streamed` and the world is not `frozen`.
    fn expose(
        &mut self,
        now: Instant,
        index: usize,
        world: &WorldMap,
        roster: &mut Roster,
        frozen: bool,
        streamed: Option<&NodeId>,
    ) -> Option<EffectEvent> {
        let spec = world.hazards.get(index)?;
        let state = self.schedules.get_mut(index)?;
        state.next_exposure = now + spec.exposure;
        if frozen || streamed != Some(&spec.node) {
            return None;
        }
        let candidates: Vec<PlayerId> = roster
            .pawns()
            // A player's current pawn is alive exactly while the player is not dead (a restart
            // unpossesses the dead one), so the player's own state decides.
            .filter(|pawn| pawn.node == spec.node)
            .filter(|pawn| {
                roster.player(&pawn.owner).is_some_and(|p| {
                    p.pawn == Some(pawn.id) && !p.is_dead() && !p.abilities.has_effect(spec.effect)
                })
            })
            .map(|pawn| pawn.owner.clone())
            .collect();
        if candidates.is_empty() {
            return None;
        }
        // Round robin, so runs are reproducible.
        let target = candidates[state.cursor % candidates.len()].clone();
        state.cursor = state.cursor.wrapping_add(1);
        let mut player = roster.player_mut(&target)?;
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
        Some(EffectEvent::Tags { player: target, tags })
    }
}

/// A transition started (everyone is frozen) or ended (only the joiners are): every player's
/// pause is brought in step. Returns whether any changed.
fn sync_every_pause(now: Instant, in_transition: bool, roster: &mut Roster, joins: &Joins) -> bool {
    let mut changed = false;
    if in_transition {
        roster.change_each(|player| {
            changed |= !player.abilities.is_paused();
            player.abilities.pause(now);
        });
        return changed;
    }
    let resume: Vec<PlayerId> =
        roster.paused_players().filter(|id| !joins.contains(id)).cloned().collect();
    let pause: Vec<PlayerId> = joins.players().cloned().collect();
    for id in resume.iter().chain(&pause) {
        changed |= sync_pause(now, id, false, roster, joins);
    }
    changed
}

/// Pauses or resumes `id`'s finite effects to match whether its character is frozen. Returns
/// whether that changed them.
fn sync_pause(
    now: Instant,
    id: &PlayerId,
    in_transition: bool,
    roster: &mut Roster,
    joins: &Joins,
) -> bool {
    let frozen = in_transition || joins.contains(id);
    let Some(mut player) = roster.player_mut(id) else { return false };
    match (frozen, player.abilities.is_paused()) {
        (true, false) => player.abilities.pause(now),
        (false, true) => player.abilities.resume(now),
        _ => return false,
    }
    true
}

/// Whether every player's effects are paused exactly when its character is frozen, by a walk
/// of every player: the harness checks it after every step.
#[cfg(test)]
pub(crate) fn pauses_in_sync(roster: &Roster, joins: &Joins, in_transition: bool) -> bool {
    roster
        .players_unvisited()
        .all(|p| p.abilities.is_paused() == (in_transition || joins.contains(&p.id)))
}

/// Runs `id`'s effects up to `now`, appending what happened to `events`: its health, its death
/// (which kills its pawn), its tags.
fn advance_effects(
    now: Instant,
    id: &PlayerId,
    roster: &mut Roster,
    events: &mut Vec<EffectEvent>,
) {
    let Some(mut player) = roster.player_mut(id) else { return };
    let before = player.abilities.tags();
    let outcome = player.abilities.advance(now);
    let (tags, health, pawn) = (player.abilities.tags(), player.abilities.health(), player.pawn);
    drop(player);
    if outcome.health_changed {
        events.push(EffectEvent::Health { player: id.clone(), health });
    }
    if outcome.died {
        tracing::info!(player = %id, pawn = pawn.map(|p| p.0), "player died");
        if let Some(p) = pawn.and_then(|pawn_id| roster.pawn_mut(pawn_id)) {
            p.die();
        }
        events.push(EffectEvent::Died { player: id.clone(), pawn });
    }
    if tags != before {
        events.push(EffectEvent::Tags { player: id.clone(), tags });
    }
}

//! The UI subsystem (an Unreal game's `UTankUISubsystem`): one widget controller per player state,
//! each becoming ready asynchronously after a seeded random delay, and a tracking reset now and
//! then that rebuilds them all.
//!
//! Owns the controllers and their deadlines: driven sans-IO, with time passed in
//! ([`UiSubsystem::poll_timeout`], `UiSubsystem::handle_timeout`). It does not know of the
//! widget-controller fact, the registry or the router; the UI adapter mirrors it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gatehouse_protocol::PlayerId;
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

/// How the UI subsystem behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiConfig {
    /// Time to build one widget controller and its view models: uniformly between these bounds
    /// (inclusive).
    pub controller_delay: (Duration, Duration),
    /// Reset UI tracking (rebuild every controller) about this often, uniformly between half and
    /// one and a half times it, once logged in; `None`: only at travel.
    pub reset_every: Option<Duration>,
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            controller_delay: (Duration::from_millis(20), Duration::from_millis(250)),
            reset_every: Some(Duration::from_secs(6)),
        }
    }
}

/// One player state's widget controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    /// Being built; ready at this instant.
    Building { ready_at: Instant },
    /// Controller and view models ready.
    Ready,
}

/// What a `UiSubsystem::handle_timeout` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UiEvents {
    /// A tracking reset happened first: every controller is rebuilding.
    pub reset: bool,
    /// Controllers that became ready, in player order.
    pub ready: Vec<PlayerId>,
}

/// The UI subsystem.
#[derive(Debug)]
pub struct UiSubsystem {
    config: UiConfig,
    rng: SmallRng,
    controllers: BTreeMap<PlayerId, Controller>,
    next_reset: Option<Instant>,
}

impl UiSubsystem {
    /// A UI subsystem tracking nothing, drawing its delays from `seed`.
    pub fn new(config: UiConfig, seed: u64) -> UiSubsystem {
        UiSubsystem {
            config,
            rng: SmallRng::seed_from_u64(seed),
            controllers: BTreeMap::new(),
            next_reset: None,
        }
    }

    /// Whether `player`'s widget controller and view models are ready.
    pub fn is_ready(&self, player: &PlayerId) -> bool {
        self.controllers.get(player) == Some(&Controller::Ready)
    }

    /// Whether the subsystem tracks `player`.
    pub fn is_tracked(&self, player: &PlayerId) -> bool {
        self.controllers.contains_key(player)
    }

    /// When `UiSubsystem::handle_timeout` is next needed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let building = self.controllers.values().filter_map(|c| match c {
            Controller::Building { ready_at } => Some(*ready_at),
            Controller::Ready => None,
        });
        building.chain(self.next_reset).min()
    }

    /// Starts building `player`'s controller, unless it is tracked already.
    pub(crate) fn track(&mut self, now: Instant, player: &PlayerId) {
        if !self.controllers.contains_key(player) {
            let ready_at = now + self.draw_delay();
            self.controllers.insert(player.clone(), Controller::Building { ready_at });
        }
    }

    /// Stops tracking `player` (its player state is gone).
    pub(crate) fn untrack(&mut self, player: &PlayerId) {
        self.controllers.remove(player);
    }

    /// Resets tracking: every controller is built again, each with a new delay.
    pub(crate) fn rebuild(&mut self, now: Instant) {
        let players: Vec<PlayerId> = self.controllers.keys().cloned().collect();
        for player in players {
            let ready_at = now + self.draw_delay();
            self.controllers.insert(player, Controller::Building { ready_at });
        }
    }

    /// Arms the periodic tracking reset (from login on), if configured.
    pub(crate) fn arm_resets(&mut self, now: Instant) {
        if self.next_reset.is_none() {
            self.next_reset = self.draw_reset(now);
        }
    }

    /// Runs what is due at `now`: first a tracking reset, then every controller whose build
    /// finished.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> UiEvents {
        let mut events = UiEvents::default();
        if self.next_reset.is_some_and(|at| at <= now) {
            self.rebuild(now);
            self.next_reset = self.draw_reset(now);
            events.reset = true;
        }
        for (player, controller) in &mut self.controllers {
            if matches!(controller, Controller::Building { ready_at } if *ready_at <= now) {
                *controller = Controller::Ready;
                events.ready.push(player.clone());
            }
        }
        events
    }

    fn draw_delay(&mut self) -> Duration {
        let (lo, hi) = self.config.controller_delay;
        let lo = u64::try_from(lo.as_millis()).unwrap_or(u64::MAX);
        let hi = u64::try_from(hi.as_millis()).unwrap_or(u64::MAX).max(lo);
        Duration::from_millis(self.rng.random_range(lo..=hi))
    }

    fn draw_reset(&mut self, now: Instant) -> Option<Instant> {
        let every = self.config.reset_every?;
        let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(2);
        Some(now + Duration::from_millis(self.rng.random_range(ms / 2..=ms + ms / 2)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(ms: u64) -> UiConfig {
        UiConfig {
            controller_delay: (Duration::from_millis(ms), Duration::from_millis(ms)),
            reset_every: None,
        }
    }

    #[test]
    fn controllers_become_ready_at_their_deadline() {
        let t0 = Instant::now();
        let p = PlayerId::new("p").unwrap();
        let mut ui = UiSubsystem::new(fixed(100), 1);
        ui.track(t0, &p);
        assert!(!ui.is_ready(&p));
        assert_eq!(ui.poll_timeout(), Some(t0 + Duration::from_millis(100)));
        assert_eq!(ui.handle_timeout(t0 + Duration::from_millis(99)), UiEvents::default());
        let events = ui.handle_timeout(t0 + Duration::from_millis(100));
        assert_eq!(events.ready, vec![p.clone()]);
        assert!(ui.is_ready(&p));
        assert_eq!(ui.poll_timeout(), None);
    }

    #[test]
    fn a_reset_rebuilds_every_controller() {
        let t0 = Instant::now();
        let p = PlayerId::new("p").unwrap();
        let mut ui = UiSubsystem::new(
            UiConfig { reset_every: Some(Duration::from_secs(1)), ..fixed(10) },
            1,
        );
        ui.track(t0, &p);
        ui.handle_timeout(t0 + Duration::from_millis(10));
        assert_eq!(ui.poll_timeout(), None, "resets are armed from login on");
        ui.arm_resets(t0);
        let at = ui.poll_timeout().unwrap();
        assert!(at >= t0 + Duration::from_millis(500) && at <= t0 + Duration::from_millis(1500));
        let events = ui.handle_timeout(at);
        assert!(events.reset && events.ready.is_empty());
        assert!(!ui.is_ready(&p), "the reset closed the controller");
        let events = ui.handle_timeout(at + Duration::from_millis(10));
        assert_eq!(events.ready, vec![p]);
    }
}

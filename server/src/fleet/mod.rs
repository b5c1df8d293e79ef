//! Fleet orchestration: what the server tells the orchestrator that runs it (docs/operations.md,
//! "Under Agones").
//!
//! The core and the shell know only the [`Orchestrator`] trait: the server is ready, it is
//! healthy, a player connected or left, it has drained. [`Standalone`] (the default) tells no
//! one; with the `agones` cargo feature, `[fleet] orchestrator = "agones"` selects the Agones
//! implementation (`agones.rs`), which speaks to the SDK sidecar from a task of its own.
//!
//! This module owns the choice of orchestrator and the game task's bookkeeping for it
//! ([`FleetLink`]: when Ready is due, when the next Health ping is due, which players are
//! connected). It never touches the game core's state and never blocks: every [`Orchestrator`]
//! method but [`Orchestrator::shutdown`] returns at once.
//!
//! Order, as the game task and [`crate::Server::run`] call it:
//! 1. Health pings start with the game loop, every `fleet.health_interval_ms`, and go on
//!    through the boot travel and any long load (Agones starts counting after the fleet's
//!    `health.initialDelaySeconds`, whatever the state), so they come before Ready;
//! 2. Ready once the boot transition has ended, with the endpoint accepting;
//! 3. a player is connected from its first logged-in connection until its last one ends (a
//!    relaunch that logs in again before the old connection ends stays connected);
//! 4. at the drain, every player still connected leaves, the pings stop with the game loop, and
//!    Shutdown comes last, at the end of the drain.

#[cfg(feature = "agones")]
mod agones;
mod metrics;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::PlayerId;
use tokio::time::Instant;

use crate::config::{FleetConfig, OrchestratorKind};
use crate::game::ConnectionId;
pub use metrics::{FleetMetrics, SdkCall};

/// Why the orchestrator could not be reached at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// `[fleet] orchestrator` names an orchestrator this binary was built without.
    #[error(
        "`fleet.orchestrator = \"{0}\"` needs a gatehouse-server built with the `{0}` cargo \
         feature (cargo build -p gatehouse-server --features {0})"
    )]
    NotBuilt(&'static str),
    /// The Agones SDK sidecar did not answer (the message has the SDK's error).
    #[error("cannot reach the Agones SDK sidecar on localhost port {port}: {why}")]
    Agones {
        /// The port asked: `fleet.agones_sdk_port`, else `AGONES_SDK_GRPC_PORT`, else 9357.
        port: String,
        /// The SDK's error.
        why: String,
    },
}

/// What the server tells the orchestrator that runs it. Every method but
/// [`Orchestrator::shutdown`] must return at once, without I/O: the game loop calls them.
pub trait Orchestrator: Send + Sync + std::fmt::Debug {
    /// The server is ready for players: its boot transition has ended and the endpoint accepts.
    /// Called once.
    fn ready(&self);
    /// The game loop is alive; called from the loop itself every `fleet.health_interval_ms`, so
    /// a stalled loop stops the pings.
    fn health(&self);
    /// `player` logged in (its first connection at the moment).
    fn player_connected(&self, player: &PlayerId);
    /// `player`'s last logged-in connection ended.
    fn player_disconnected(&self, player: &PlayerId);
    /// The server has drained and is about to exit: told last, once. The future ends when the
    /// orchestrator was told or gave up (the implementation bounds it).
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// No orchestrator: a server run by hand, by a container runtime or under a supervisor that
/// uses the admin endpoint. Every method does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Standalone;

impl Orchestrator for Standalone {
    fn ready(&self) {}
    fn health(&self) {}
    fn player_connected(&self, _player: &PlayerId) {}
    fn player_disconnected(&self, _player: &PlayerId) {}
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

/// Starts the orchestrator `config` names: [`Standalone`], or the Agones SDK client (which
/// waits for its sidecar, up to the SDK's 30 s).
///
/// # Errors
/// [`FleetError::NotBuilt`] for an orchestrator left out of this build, [`FleetError::Agones`]
/// if the sidecar cannot be reached.
///
/// Its failed SDK calls are counted in `metrics` (docs/operations.md, "Metrics").
pub async fn connect(
    config: &FleetConfig,
    metrics: FleetMetrics,
) -> Result<Arc<dyn Orchestrator>, FleetError> {
    #[cfg(not(feature = "agones"))]
    let _ = metrics;
    match config.orchestrator {
        OrchestratorKind::None => Ok(Arc::new(Standalone)),
        #[cfg(feature = "agones")]
        OrchestratorKind::Agones => Ok(Arc::new(agones::Agones::connect(config, metrics).await?)),
        #[cfg(not(feature = "agones"))]
        OrchestratorKind::Agones => Err(FleetError::NotBuilt("agones")),
    }
}

/// The game task's side of the orchestrator: decides when to call it.
#[derive(Debug)]
pub(crate) struct FleetLink {
    orchestrator: Arc<dyn Orchestrator>,
    /// `None` for [`Standalone`]: no pings to time.
    health_every: Option<Duration>,
    next_health: Instant,
    ready_told: bool,
    /// Logged-in connections and their players.
    logged_in: HashMap<ConnectionId, PlayerId>,
    /// Logged-in connections per connected player (more than one only briefly, while a
    /// relaunch's old connection ends).
    connections: BTreeMap<PlayerId, usize>,
}

impl FleetLink {
    /// A link to `orchestrator`, pinging every `health_every` from now (`None`: never).
    pub(crate) fn new(orchestrator: Arc<dyn Orchestrator>, health_every: Option<Duration>) -> Self {
        FleetLink {
            orchestrator,
            health_every,
            next_health: Instant::now(),
            ready_told: false,
            logged_in: HashMap::new(),
            connections: BTreeMap::new(),
        }
    }

    /// When the next Health ping is due, if any are sent.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.health_every.map(|_| self.next_health)
    }

    /// Pings if one is due at `now`, and schedules the next.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let Some(every) = self.health_every else { return };
        if now >= self.next_health {
            self.orchestrator.health();
            self.next_health = now + every;
        }
    }

    /// After each wake: tells Ready the first time no transition is in flight (the boot
    /// transition the core starts at construction has ended).
    pub(crate) fn handle_step(&mut self, transition_in_flight: bool) {
        if !self.ready_told && !transition_in_flight {
            self.ready_told = true;
            tracing::info!("boot transition ended: ready for players");
            self.orchestrator.ready();
        }
    }

    /// `connection` logged in as `player`.
    pub(crate) fn handle_login(&mut self, connection: ConnectionId, player: &PlayerId) {
        if let Some(previous) = self.logged_in.insert(connection, player.clone()) {
            // A connection logs in once; should it ever again, count its old player out.
            self.leave(&previous);
        }
        let count = self.connections.entry(player.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.orchestrator.player_connected(player);
        }
    }

    /// `connection` ended; nothing if it never logged in.
    pub(crate) fn handle_disconnected(&mut self, connection: ConnectionId) {
        if let Some(player) = self.logged_in.remove(&connection) {
            self.leave(&player);
        }
    }

    /// The drain closed every connection: every player still connected has left.
    pub(crate) fn handle_drain(&mut self) {
        self.logged_in.clear();
        for player in std::mem::take(&mut self.connections).into_keys() {
            self.orchestrator.player_disconnected(&player);
        }
    }

    fn leave(&mut self, player: &PlayerId) {
        if let Some(count) = self.connections.get_mut(player) {
            *count -= 1;
            if *count == 0 {
                self.connections.remove(player);
                self.orchestrator.player_disconnected(player);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records calls as text.
    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
        fn push(&self, call: String) {
            self.0.lock().unwrap().push(call);
        }
    }

    impl Orchestrator for Recorder {
        fn ready(&self) {
            self.push("ready".into());
        }
        fn health(&self) {
            self.push("health".into());
        }
        fn player_connected(&self, player: &PlayerId) {
            self.push(format!("+{player}"));
        }
        fn player_disconnected(&self, player: &PlayerId) {
            self.push(format!("-{player}"));
        }
        fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
            self.push("shutdown".into());
            Box::pin(std::future::ready(()))
        }
    }

    fn recorded_link() -> (Arc<Recorder>, FleetLink) {
        let recorder = Arc::new(Recorder::default());
        (recorder.clone(), FleetLink::new(recorder, Some(Duration::from_secs(1))))
    }

    fn player(name: &str) -> PlayerId {
        PlayerId::new(name).unwrap()
    }

    /// Ready is told once, the first time no transition is in flight.
    #[test]
    fn ready_is_told_once_when_the_boot_transition_has_ended() {
        let (calls, mut link) = recorded_link();
        link.handle_step(true);
        assert!(calls.take().is_empty(), "not while the boot transition runs");
        link.handle_step(false);
        link.handle_step(true);
        link.handle_step(false);
        assert_eq!(calls.take(), ["ready"]);
    }

    /// A ping is due at once, then every interval, never twice for one deadline.
    #[test]
    fn health_pings_follow_the_interval() {
        let (calls, mut link) = recorded_link();
        let start = Instant::now();
        link.handle_timeout(start);
        link.handle_timeout(start + Duration::from_millis(500));
        assert_eq!(link.poll_timeout(), Some(start + Duration::from_secs(1)));
        link.handle_timeout(start + Duration::from_secs(1));
        assert_eq!(calls.take(), ["health", "health"]);
        let (calls, mut standalone) = recorded_link();
        standalone.health_every = None;
        standalone.handle_timeout(start);
        assert_eq!(standalone.poll_timeout(), None);
        assert!(calls.take().is_empty());
    }

    /// A relaunch that logs in again before its old connection ends stays in the list; a
    /// connection that never logged in changes nothing; the drain lets everyone leave.
    #[test]
    fn a_player_is_connected_from_its_first_login_to_its_last_disconnect() {
        let (calls, mut link) = recorded_link();
        link.handle_login(ConnectionId(1), &player("ada"));
        link.handle_login(ConnectionId(2), &player("ada"));
        link.handle_disconnected(ConnectionId(1));
        link.handle_disconnected(ConnectionId(9));
        assert_eq!(calls.take(), ["+ada"]);
        link.handle_disconnected(ConnectionId(2));
        link.handle_disconnected(ConnectionId(2));
        assert_eq!(calls.take(), ["-ada"]);
        link.handle_login(ConnectionId(3), &player("bo"));
        link.handle_login(ConnectionId(4), &player("cy"));
        link.handle_drain();
        assert_eq!(calls.take(), ["+bo", "+cy", "-bo", "-cy"]);
    }
}

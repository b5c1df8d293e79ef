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
//! 3. the first player to log in allocates the server (`fleet.allocation = "self"`), before it
//!    is counted connected;
//! 4. a player is connected from its first logged-in connection until its last one ends (a
//!    relaunch that logs in again before the old connection ends stays connected);
//! 5. once the last player has left and nobody has logged in for `fleet.empty_linger_ms`, the
//!    server is released (Ready again), drains and exits, or stays (`fleet.when_empty`);
//! 6. at the drain, every player still connected leaves, the pings stop with the game loop, and
//!    Shutdown comes last, at the end of the drain. A drain is never followed by a release.
//!
//! docs/operations.md, "Allocation", says why a server with players is never removed by a
//! scale-down or a rolling update.
//!
//! Where a travel to another server finds it is the fleet directory's ([`FleetDirectory`],
//! docs/spec/travel.md V12): a static list ([`StaticDirectory`]) or the Agones allocator
//! ([`AgonesAllocator`], V13), which needs no cargo feature (it speaks REST, not the SDK).
//! The servers of a fleet speak over the peer link ([`PeerLinks`], V14), on the game port.

#[cfg(feature = "agones")]
mod agones;
mod allocator;
mod directory;
mod metrics;
mod peer;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::PlayerId;
use tokio::time::Instant;

use crate::config::{Allocation, FleetConfig, OrchestratorKind, WhenEmpty};
use crate::game::ConnectionId;
pub use allocator::{AgonesAllocator, AllocatorSettings, GAME_PORT, NODE_LABEL};
pub use directory::{
    Candidate, CandidateFuture, DirectoryError, FleetDirectory, MAX_ADDRESS_LEN, StaticDirectory,
    StaticServer,
};
pub use metrics::{FleetMetrics, SdkCall};
pub use peer::{
    LINK_QUEUE, MAX_PEER_LINKS, PeerEvent, PeerLinks, PeerSendError, PeerSettings, offers_peer_link,
};

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
    /// The server has a player again and allocates itself (`fleet.allocation = "self"`): under
    /// Agones, Allocate, so no scale-down or rolling update removes it. Told before the
    /// player is.
    fn allocate(&self);
    /// The server has been empty for `fleet.empty_linger_ms` and goes back to the pool
    /// (`fleet.when_empty = "ready"`): under Agones, Ready again.
    fn release(&self);
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
    fn allocate(&self) {}
    fn release(&self) {}
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

/// Starts the orchestrator `config` names: [`Standalone`], or the Agones SDK client (which
/// waits for its sidecar, up to the SDK's 30 s, then publishes the certificate's `fingerprint`
/// when `fleet.publish_certificate_fingerprint` says so). Its failed SDK calls are counted in
/// `metrics` (docs/operations.md, "Metrics").
///
/// # Errors
/// [`FleetError::NotBuilt`] for an orchestrator left out of this build, [`FleetError::Agones`]
/// if the sidecar cannot be reached or refuses the fingerprint.
pub async fn connect(
    config: &FleetConfig,
    fingerprint: &str,
    metrics: FleetMetrics,
) -> Result<Arc<dyn Orchestrator>, FleetError> {
    #[cfg(not(feature = "agones"))]
    let _ = (metrics, fingerprint);
    match config.orchestrator {
        OrchestratorKind::None => Ok(Arc::new(Standalone)),
        #[cfg(feature = "agones")]
        OrchestratorKind::Agones => {
            Ok(Arc::new(agones::Agones::connect(config, fingerprint, metrics).await?))
        }
        #[cfg(not(feature = "agones"))]
        OrchestratorKind::Agones => Err(FleetError::NotBuilt("agones")),
    }
}

/// What the game task's [`FleetLink`] does, from `[fleet]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FleetPolicy {
    /// How often the game loop pings (`None`: no orchestrator, no pings).
    pub(crate) health_every: Option<Duration>,
    /// Whether the server allocates itself at its first login.
    pub(crate) allocation: Allocation,
    /// What an empty server does after the linger.
    pub(crate) when_empty: WhenEmpty,
    /// How long the server stays empty before `when_empty` applies.
    pub(crate) empty_linger: Duration,
}

impl FleetPolicy {
    /// The policy `config` sets: pings only under an orchestrator.
    pub(crate) fn from_config(config: &FleetConfig) -> Self {
        let health_every = match config.orchestrator {
            OrchestratorKind::None => None,
            OrchestratorKind::Agones => Some(config.health_interval),
        };
        FleetPolicy {
            health_every,
            allocation: config.allocation,
            when_empty: config.when_empty,
            empty_linger: config.empty_linger,
        }
    }
}

/// What the game task does after [`FleetLink::handle_timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum FleetStep {
    /// Go on serving.
    Serve,
    /// The server has been empty for the linger and `fleet.when_empty = "shutdown"`: drain
    /// and exit, as if asked to stop.
    Drain,
}

/// The game task's side of the orchestrator: decides when to call it.
#[derive(Debug)]
pub(crate) struct FleetLink {
    orchestrator: Arc<dyn Orchestrator>,
    policy: FleetPolicy,
    next_health: Instant,
    ready_told: bool,
    /// Whether the server allocated itself since it was last Ready.
    allocated: bool,
    /// When the empty server's linger ends (`None`: players are connected, the server never
    /// had any, it drained, or the linger already applied).
    empty_until: Option<Instant>,
    /// Logged-in connections and their players.
    logged_in: HashMap<ConnectionId, PlayerId>,
    /// Logged-in connections per connected player (more than one only briefly, while a
    /// relaunch's old connection ends).
    connections: BTreeMap<PlayerId, usize>,
}

impl FleetLink {
    /// A link to `orchestrator` under `policy`, pinging from `now`.
    pub(crate) fn new(
        orchestrator: Arc<dyn Orchestrator>,
        policy: FleetPolicy,
        now: Instant,
    ) -> Self {
        FleetLink {
            orchestrator,
            policy,
            next_health: now,
            ready_told: false,
            allocated: false,
            empty_until: None,
            logged_in: HashMap::new(),
            connections: BTreeMap::new(),
        }
    }

    /// When the link next has something to do: a Health ping or the end of the linger.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let health = self.policy.health_every.map(|_| self.next_health);
        match (health, self.empty_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pings if one is due at `now`, and schedules the next; applies `fleet.when_empty` if the
    /// linger has ended.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> FleetStep {
        if let Some(every) = self.policy.health_every
            && now >= self.next_health
        {
            self.orchestrator.health();
            self.next_health = now + every;
        }
        match self.empty_until {
            Some(until) if now >= until => {
                self.empty_until = None;
                self.empty()
            }
            _ => FleetStep::Serve,
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

    /// `connection` logged in as `player`. The server's first player allocates it (under
    /// `fleet.allocation = "self"`) before being counted connected; any login ends a linger.
    pub(crate) fn handle_login(
        &mut self,
        connection: ConnectionId,
        player: &PlayerId,
        now: Instant,
    ) {
        if let Some(previous) = self.logged_in.insert(connection, player.clone()) {
            // A connection logs in once; should it ever again, count its old player out.
            self.leave(&previous, now);
        }
        self.empty_until = None;
        if self.policy.allocation == Allocation::OnFirstLogin && !self.allocated {
            self.allocated = true;
            tracing::debug!(%player, "first player: allocating the server");
            self.orchestrator.allocate();
        }
        let count = self.connections.entry(player.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.orchestrator.player_connected(player);
        }
    }

    /// `connection` ended at `now`; nothing if it never logged in.
    pub(crate) fn handle_disconnected(&mut self, connection: ConnectionId, now: Instant) {
        if let Some(player) = self.logged_in.remove(&connection) {
            self.leave(&player, now);
        }
    }

    /// The drain closed every connection: every player still connected has left. No linger
    /// starts: a draining server is never released.
    pub(crate) fn handle_drain(&mut self) {
        self.logged_in.clear();
        self.empty_until = None;
        for player in std::mem::take(&mut self.connections).into_keys() {
            self.orchestrator.player_disconnected(&player);
        }
    }

    fn leave(&mut self, player: &PlayerId, now: Instant) {
        if let Some(count) = self.connections.get_mut(player) {
            *count -= 1;
            if *count == 0 {
                self.connections.remove(player);
                self.orchestrator.player_disconnected(player);
                if self.connections.is_empty() && self.policy.when_empty != WhenEmpty::Stay {
                    self.empty_until = Some(now + self.policy.empty_linger);
                }
            }
        }
    }

    /// The linger has ended with nobody logged in.
    fn empty(&mut self) -> FleetStep {
        let linger_ms = self.policy.empty_linger.as_millis();
        match self.policy.when_empty {
            WhenEmpty::Ready => {
                tracing::info!(linger_ms, "empty since the linger: back to the pool");
                self.allocated = false;
                self.orchestrator.release();
                FleetStep::Serve
            }
            WhenEmpty::Shutdown => {
                tracing::info!(linger_ms, "empty since the linger: draining (fleet.when_empty)");
                FleetStep::Drain
            }
            WhenEmpty::Stay => FleetStep::Serve,
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
        fn allocate(&self) {
            self.push("allocate".into());
        }
        fn release(&self) {
            self.push("release".into());
        }
        fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
            self.push("shutdown".into());
            Box::pin(std::future::ready(()))
        }
    }

    const LINGER: Duration = Duration::from_secs(60);

    fn policy(allocation: Allocation, when_empty: WhenEmpty) -> FleetPolicy {
        FleetPolicy {
            health_every: Some(Duration::from_secs(1)),
            allocation,
            when_empty,
            empty_linger: LINGER,
        }
    }

    fn link_with(policy: FleetPolicy, now: Instant) -> (Arc<Recorder>, FleetLink) {
        let recorder = Arc::new(Recorder::default());
        let mut link = FleetLink::new(recorder.clone(), policy, now);
        link.handle_step(false);
        assert_eq!(recorder.take(), ["ready"]);
        (recorder, link)
    }

    fn recorded_link() -> (Arc<Recorder>, FleetLink) {
        let recorder = Arc::new(Recorder::default());
        let policy = policy(Allocation::Matchmaker, WhenEmpty::Stay);
        (recorder.clone(), FleetLink::new(recorder, policy, Instant::now()))
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
        let _ = link.handle_timeout(start);
        let _ = link.handle_timeout(start + Duration::from_millis(500));
        assert_eq!(link.poll_timeout(), Some(start + Duration::from_secs(1)));
        let _ = link.handle_timeout(start + Duration::from_secs(1));
        assert_eq!(calls.take(), ["health", "health"]);
        let (calls, mut standalone) = recorded_link();
        standalone.policy.health_every = None;
        let _ = standalone.handle_timeout(start);
        assert_eq!(standalone.poll_timeout(), None);
        assert!(calls.take().is_empty());
    }

    /// A relaunch that logs in again before its old connection ends stays in the list; a
    /// connection that never logged in changes nothing; the drain lets everyone leave.
    #[test]
    fn a_player_is_connected_from_its_first_login_to_its_last_disconnect() {
        let (calls, mut link) = recorded_link();
        let now = Instant::now();
        link.handle_login(ConnectionId(1), &player("ada"), now);
        link.handle_login(ConnectionId(2), &player("ada"), now);
        link.handle_disconnected(ConnectionId(1), now);
        link.handle_disconnected(ConnectionId(9), now);
        assert_eq!(calls.take(), ["+ada"]);
        link.handle_disconnected(ConnectionId(2), now);
        link.handle_disconnected(ConnectionId(2), now);
        assert_eq!(calls.take(), ["-ada"]);
        link.handle_login(ConnectionId(3), &player("bo"), now);
        link.handle_login(ConnectionId(4), &player("cy"), now);
        link.handle_drain();
        assert_eq!(calls.take(), ["+bo", "+cy", "-bo", "-cy"]);
    }

    /// Under `allocation = "self"` the first player allocates the server, before it is
    /// counted; the second does not, nor does the first again while the server is allocated.
    #[test]
    fn the_first_player_allocates_the_server_before_it_is_counted() {
        let now = Instant::now();
        let (calls, mut link) = link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Stay), now);
        link.handle_login(ConnectionId(1), &player("ada"), now);
        link.handle_login(ConnectionId(2), &player("bo"), now);
        link.handle_disconnected(ConnectionId(1), now);
        link.handle_disconnected(ConnectionId(2), now);
        link.handle_login(ConnectionId(3), &player("ada"), now);
        assert_eq!(calls.take(), ["allocate", "+ada", "+bo", "-ada", "-bo", "+ada"]);
    }

    /// Under `allocation = "matchmaker"` the server never allocates itself.
    #[test]
    fn a_matchmaker_allocated_server_never_allocates_itself() {
        let now = Instant::now();
        let (calls, mut link) = link_with(policy(Allocation::Matchmaker, WhenEmpty::Ready), now);
        link.policy.health_every = None;
        link.handle_login(ConnectionId(1), &player("ada"), now);
        link.handle_disconnected(ConnectionId(1), now);
        let _ = link.handle_timeout(now + LINGER);
        link.handle_login(ConnectionId(2), &player("ada"), now + LINGER);
        assert_eq!(calls.take(), ["+ada", "-ada", "release", "+ada"]);
    }

    /// The last player's departure starts the linger; at its end the server goes back to the
    /// pool, once, and the next first player allocates it again.
    #[test]
    fn an_empty_server_is_released_after_the_linger_and_allocated_again_by_its_next_player() {
        let now = Instant::now();
        let (calls, mut link) = link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Ready), now);
        link.handle_login(ConnectionId(1), &player("ada"), now);
        let left = now + Duration::from_secs(5);
        link.handle_disconnected(ConnectionId(1), left);
        assert_eq!(link.poll_timeout(), Some(now), "the ping is due first");
        let _ = link.handle_timeout(now);
        assert_eq!(link.poll_timeout(), Some(now + Duration::from_secs(1)));
        link.policy.health_every = None;
        assert_eq!(link.poll_timeout(), Some(left + LINGER), "the linger's end is a deadline");
        assert_eq!(link.handle_timeout(left + LINGER - Duration::from_millis(1)), FleetStep::Serve);
        assert_eq!(calls.take(), ["allocate", "+ada", "-ada", "health"], "not before the linger");
        assert_eq!(link.handle_timeout(left + LINGER), FleetStep::Serve);
        assert_eq!(link.handle_timeout(left + LINGER * 2), FleetStep::Serve);
        assert_eq!(calls.take(), ["release"], "released once");
        assert_eq!(link.poll_timeout(), None);
        link.handle_login(ConnectionId(2), &player("bo"), left + LINGER * 2);
        assert_eq!(calls.take(), ["allocate", "+bo"]);
    }

    /// A login during the linger cancels it, in either order with a relaunch's old connection.
    #[test]
    fn a_login_during_the_linger_keeps_the_server_allocated() {
        let now = Instant::now();
        let (calls, mut link) = link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Ready), now);
        link.policy.health_every = None;
        link.handle_login(ConnectionId(1), &player("ada"), now);
        link.handle_disconnected(ConnectionId(1), now);
        link.handle_login(ConnectionId(2), &player("ada"), now + Duration::from_secs(30));
        assert_eq!(link.poll_timeout(), None, "the linger is cancelled");
        assert_eq!(link.handle_timeout(now + LINGER * 2), FleetStep::Serve);
        // A relaunch: the new connection logs in before the old one ends.
        link.handle_login(ConnectionId(3), &player("ada"), now + LINGER * 2);
        link.handle_disconnected(ConnectionId(2), now + LINGER * 2);
        assert_eq!(link.poll_timeout(), None, "ada is still connected");
        assert_eq!(calls.take(), ["allocate", "+ada", "-ada", "+ada"]);
    }

    /// `when_empty = "shutdown"`: the linger's end asks the game task to drain.
    #[test]
    fn an_empty_server_drains_after_the_linger_when_told_to_shut_down() {
        let now = Instant::now();
        let (calls, mut link) =
            link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Shutdown), now);
        link.policy.health_every = None;
        link.handle_login(ConnectionId(1), &player("ada"), now);
        link.handle_disconnected(ConnectionId(1), now);
        assert_eq!(link.handle_timeout(now + LINGER), FleetStep::Drain);
        assert_eq!(calls.take(), ["allocate", "+ada", "-ada"], "no release before a drain");
    }

    /// `when_empty = "stay"` starts no linger; a server that never had a player starts none
    /// either; a drain cancels one.
    #[test]
    fn no_linger_without_a_departure_under_stay_or_after_a_drain() {
        let now = Instant::now();
        let (_, mut stay) = link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Stay), now);
        stay.policy.health_every = None;
        stay.handle_login(ConnectionId(1), &player("ada"), now);
        stay.handle_disconnected(ConnectionId(1), now);
        assert_eq!(stay.poll_timeout(), None);
        let (_, mut fresh) = link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Ready), now);
        fresh.policy.health_every = None;
        assert_eq!(fresh.poll_timeout(), None, "never had a player");
        let (calls, mut drained) =
            link_with(policy(Allocation::OnFirstLogin, WhenEmpty::Ready), now);
        drained.policy.health_every = None;
        drained.handle_login(ConnectionId(1), &player("ada"), now);
        drained.handle_login(ConnectionId(2), &player("bo"), now);
        drained.handle_disconnected(ConnectionId(1), now);
        drained.handle_drain();
        assert_eq!(drained.poll_timeout(), None);
        assert_eq!(drained.handle_timeout(now + LINGER), FleetStep::Serve);
        assert_eq!(calls.take(), ["allocate", "+ada", "+bo", "-ada", "-bo"]);
    }
}

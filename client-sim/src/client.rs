//! One simulated game client below its transport: replication in, domain objects, feature
//! adapters, lifecycle gates, live checks; sans-IO, with time passed in.
//!
//! [`Client`] owns the router, the [`ClientCore`] it carries and the live checks' account. It is
//! where the layers are put together: it declares every layer's channels, attaches the adapters
//! and the checks, and its methods are the only entry points: each sets the time, changes the
//! domain through `replication` (which announces on the router), and returns once every
//! notification and gate dispatch it caused has been delivered. It is fed the library session's
//! events and the simulated streaming's reports ([`crate::session::ClientSession`] queues them);
//! which change each makes is the library's replication (`gatehouse_client::world`), and this
//! type decides nothing about the network.
//!
//! Data flow: session event → replicated world and the example game's UI and team cache →
//! router notification → adapters → registry facts
//! → gate callbacks → outbox → dispatch (delegate broadcast, gate tag, subscriptions) → live
//! checks → [`GateStats`].

use std::time::Instant;

use gatehouse_client::world::Replication;
use gatehouse_client::{Event, Load};
use gatehouse_lifecycle::{ObjectId, Registry, ScopeToken};
use gatehouse_messaging::{Channels, Lifetime, Router, RouterConfig};
use gatehouse_protocol::PawnId;
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{
    LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED,
    LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
};

use crate::adapters::{self, ClientCore, ClientState};
use crate::checks::{self, GateChecks};
use crate::domain::{Domain, UiConfig};
use crate::figures::GateStats;
use crate::gates::{self, GateError, GateFired, GateSubscription, pump};
use crate::ids::{self, pawn_object, world_object};
use crate::{notifications, replication};

/// How a simulated client's domain behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The UI subsystem's delays and resets.
    pub ui: UiConfig,
    /// Seed of the UI subsystem's random delays.
    pub seed: u64,
    /// Run the nameplate consumer (a public subscription per pawn generation).
    pub nameplates: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig { ui: UiConfig::default(), seed: 0, nameplates: true }
    }
}

/// One simulated client's game side: router, domain, adapters, gates and checks.
pub struct Client {
    router: Router<ClientCore>,
    core: ClientCore,
    /// The live checks' account (their listeners hold it too).
    checks: GateChecks,
    /// The game instance's listeners (world and login adapters, checks, nameplates).
    _game_instance: Lifetime,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("router", &self.router)
            .field("registry", &self.core.registry)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client before login: the game-instance adapters and checks listen, nothing is scoped.
    pub fn new(config: ClientConfig) -> Client {
        // The channel table is a fixed list of constants over catalog tags, each declared once;
        // `tests` below proves it declares. It cannot fail at run time.
        #[allow(clippy::expect_used)]
        let channels = channels().expect("the client's channels declare");
        let router = Router::new(RouterConfig::default(), channels);
        let domain = Domain::new(config.ui, config.seed);
        // A placeholder only: every entry point sets the time before anything reads it, and
        // nothing registered here reads it.
        let mut core = ClientCore::new(domain, Instant::now());
        let mut game_instance = Lifetime::new("game instance");
        adapters::attach_game_instance(&router, &mut core, &mut game_instance);
        let checks = GateChecks::default();
        checks::listen(&router, &mut core, &mut game_instance, &checks);
        if config.nameplates {
            checks::nameplates::listen(&router, &mut core, &mut game_instance, &checks);
        }
        let baseline = router.listener_count() as u64;
        let figures = &mut core.state.stats.router;
        figures.listeners_baseline = baseline;
        figures.listeners_max = baseline;
        Client { router, core, checks, _game_instance: game_instance }
    }

    /// Applies a session event to the replicated world, announcing each change as it lands.
    pub fn replicate(&mut self, now: Instant, event: &Event) {
        self.enter(now);
        replication::replicate(&self.router, &mut self.core, Replication::of(event));
        self.leave();
    }

    /// The game streamed `load`: a transition's destination world begins play.
    pub fn levels_streamed(&mut self, now: Instant, load: Load) {
        self.enter(now);
        replication::replicate(&self.router, &mut self.core, Replication::levels_streamed(load));
        self.leave();
    }

    /// Resets UI tracking now: every widget controller closes and rebuilds.
    pub fn reset_ui(&mut self, now: Instant) {
        self.enter(now);
        replication::reset_ui(&self.router, &mut self.core);
        self.leave();
    }

    /// When [`Client::handle_timeout`] is next needed (the UI subsystem's timers).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.core.state.domain.ui().poll_timeout()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.enter(now);
        replication::ui_timeout(&self.router, &mut self.core);
        self.leave();
    }

    /// Ends the login (the session ended without saying so: a relaunch, a lost connection).
    /// The world and its gates stay as they are.
    pub fn end_session(&mut self, now: Instant) {
        self.enter(now);
        replication::replicate(&self.router, &mut self.core, Replication::session_ended());
        self.leave();
    }

    /// The session's gate figures at `now`, with every wait still pending described and the
    /// RepNotifies still deferred counted. Changes nothing: generations still open count as ended
    /// by the session in the figures only.
    pub fn finish(&self, now: Instant) -> GateStats {
        let mut stats = self.checks.finish(now, &self.core.state.stats);
        stats.pending_waits = self.pending_waits();
        stats.rep_notifies_deferred_at_end = self.core.state.rep_notifies.deferred_count() as u64;
        let router = self.router.stats();
        let figures = &mut stats.router;
        figures.broadcasts = router.broadcasts;
        figures.deliveries = router.deliveries;
        figures.mismatches = router.mismatches;
        figures.refused = router.refused_broadcasts + router.refused_registrations;
        figures.listeners_at_end = self.router.listener_count() as u64;
        stats
    }

    /// Every pending wait, with the facts that block it, in readable form.
    pub fn pending_waits(&self) -> Vec<String> {
        let state = &self.core.state;
        self.core
            .registry
            .pending_waits()
            .map(|wait| {
                let blocking: Vec<String> = wait
                    .blocking
                    .iter()
                    .map(|r| format!("{} on {}", r.fact, state.describe(r.token.object())))
                    .collect();
                format!(
                    "{} of {} (generation {}) blocked on [{}]",
                    wait.request,
                    state.describe(wait.owner.object()),
                    wait.owner.generation().get(),
                    blocking.join(", ")
                )
            })
            .collect()
    }

    // --- Public gates ---------------------------------------------------------------------

    /// Subscribes `callback` to the public `gate` on `subject`'s current generation, guarded by
    /// `listener` (docs/spec/gates.md G12). One-shot; runs during this call if the gate is already
    /// open; retired without running when the subject's generation or the listener goes, or when
    /// cancelled.
    ///
    /// # Errors
    /// [`GateError`] for a tag that is not exactly a public gate, or a listener or subject with
    /// no current scope.
    pub fn register_for_gate(
        &mut self,
        listener: ObjectId,
        subject: ObjectId,
        gate: GameplayTag,
        callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
    ) -> Result<GateSubscription, GateError> {
        let ClientCore { registry, state, subscriptions } = &mut self.core;
        let result = subscriptions.subscribe(registry, state, listener, subject, gate, callback);
        pump(&self.router, &mut self.core);
        result
    }

    /// `WaitForCharacterInitGateOpened`: `callback` once `pawn`'s current generation has
    /// dispatched its character gate (local or remote), guarded by `listener`.
    ///
    /// # Errors
    /// As [`Client::register_for_gate`], except the tag check.
    pub fn wait_for_character_init_gate_opened(
        &mut self,
        listener: ObjectId,
        pawn: PawnId,
        callback: impl FnOnce(&mut ClientState, GateFired) + 'static,
    ) -> Result<GateSubscription, GateError> {
        let subject = pawn_object(pawn);
        let fact = LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED;
        let ClientCore { registry, state, subscriptions } = &mut self.core;
        let result =
            subscriptions.subscribe_to_fact(registry, state, listener, subject, fact, callback);
        pump(&self.router, &mut self.core);
        result
    }

    /// Cancels a pending subscription; false if it already ran or was retired.
    pub fn cancel_gate_subscription(&mut self, subscription: &GateSubscription) -> bool {
        gatehouse_client::gates::cancel(&mut self.core.registry, subscription)
    }

    /// Scopes a consumer's listener object under the current world (so it goes with the world),
    /// or returns its current scope. `None` without a world.
    pub fn scope_listener(&mut self, listener: ObjectId) -> Option<ScopeToken> {
        let world = self.core.state.world?;
        Some(self.core.registry.scope(listener, world_object(world.id)))
    }

    /// The listener object goes away: its subscriptions are pruned without running.
    pub fn retire_listener(&mut self, listener: ObjectId) -> bool {
        self.core.registry.reset_scope(listener)
    }

    /// `IsCharacterInitGateOpen`: whether `pawn`'s current generation dispatched its gate,
    /// latched before any delegate runs (see [`ClientCore::is_character_init_gate_open`]).
    pub fn is_character_init_gate_open(&self, pawn: PawnId) -> bool {
        self.core.is_character_init_gate_open(pawn)
    }

    /// `IsLocalPlayerWidgetControllerAndTeamReady`: the gate is cached on the current world.
    pub fn is_local_player_widget_controller_and_team_ready(&self) -> bool {
        self.core.state.world.is_some_and(|w| {
            self.core.registry.is_ready_on(
                world_object(w.id),
                LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
            )
        })
    }

    // --- Inspection -----------------------------------------------------------------------

    /// The domain objects.
    pub fn domain(&self) -> &Domain {
        &self.core.state.domain
    }

    /// The lifecycle registry (facts, pending waits, blocking facts).
    pub fn registry(&self) -> &Registry<ClientState> {
        &self.core.registry
    }

    /// The router (to listen to the client's notifications and gate delegates).
    pub fn router(&self) -> &Router<ClientCore> {
        &self.router
    }

    /// The registry and its caller state, to compose facts natively (the registry's own API,
    /// docs/spec/gates.md G2: `wait_for_all` over scopes the adapters created). Callbacks
    /// registered here must not expect the router; what they need dispatched, they record in their
    /// own state.
    pub fn registry_and_state(&mut self) -> (&mut Registry<ClientState>, &mut ClientState) {
        (&mut self.core.registry, &mut self.core.state)
    }

    /// The router and the state its callbacks receive, to register a listener.
    pub fn router_and_core(&mut self) -> (&Router<ClientCore>, &mut ClientCore) {
        (&self.router, &mut self.core)
    }

    /// The live checks' figures so far.
    pub fn gate_stats(&self) -> &GateStats {
        &self.core.state.stats
    }

    /// The object of the current world, if any.
    pub fn world_object(&self) -> Option<ObjectId> {
        self.core.state.world.map(|w| world_object(w.id))
    }

    /// The object of `player`'s player state, once it was scoped.
    pub fn player_state_object(&self, player: &gatehouse_protocol::PlayerId) -> Option<ObjectId> {
        self.core.state.player_state_object(player)
    }

    /// The local player object (the one local viewer).
    pub fn local_player_object(&self) -> ObjectId {
        ids::LOCAL_PLAYER
    }

    /// The character adapter's scope for `pawn`, if it has one now.
    pub fn pawn_generation(&self, pawn: PawnId) -> Option<ScopeToken> {
        self.core.state.characters.get(pawn).map(|record| record.token)
    }

    fn enter(&mut self, now: Instant) {
        self.core.state.now = now;
    }

    /// After every entry point: drain what is left, and note the listener high-water mark.
    fn leave(&mut self) {
        pump(&self.router, &mut self.core);
        let listeners = self.router.listener_count() as u64;
        let figures = &mut self.core.state.stats.router;
        figures.listeners_max = figures.listeners_max.max(listeners);
    }
}

/// Every channel of the client, each layer declaring its own: the domain's notifications, the
/// adapters' announcements, the gates' delegates.
fn channels() -> Result<Channels, gatehouse_messaging::Error> {
    let mut channels = Channels::new();
    notifications::declare_channels(&mut channels)?;
    adapters::declare_channels(&mut channels)?;
    gates::declare_channels(&mut channels)?;
    Ok(channels)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use gatehouse_client::WorldChange;
    use gatehouse_client::world::Notice;
    use gatehouse_messaging::{Listen, Match};
    use gatehouse_protocol::{CharacterDef, NodeId, PawnView, PlayerStateView};

    use gatehouse_protocol::{PlayerId, TeamId};

    use super::*;
    use crate::adapters::PAWN_TEAM_PRESENTATION;
    use crate::gates::announce;
    use crate::ids::pawn_of;
    use crate::notifications::{PawnNotice, UNPOSSESSED};

    #[test]
    fn every_channel_is_declared_once_in_the_catalog() {
        channels().unwrap();
    }

    fn player(name: &str) -> PlayerId {
        PlayerId::new(name).unwrap()
    }

    fn player_state(who: &str, team: u8) -> Event {
        Event::World(WorldChange::PlayerStateUpdated(PlayerStateView {
            player_id: player(who),
            team: Some(TeamId(team)),
            character_def: Some(CharacterDef::new("Vanguard").unwrap()),
        }))
    }

    fn spawn(pawn: u64, owner: &str) -> Event {
        Event::World(WorldChange::PawnSpawned(PawnView {
            pawn_id: PawnId(pawn),
            owner: player(owner),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: NodeId::new("harbor").unwrap(),
            alive: true,
        }))
    }

    /// Pawn team presentation: live local control is the final authority. Replication has
    /// unpossessed the viewer's pawn, and before that notification reaches the adapters (the same
    /// step) a cached fact wakes a request: it is refused, nothing is presented to the viewer that
    /// lost control, and the replacement pawn presents again.
    #[test]
    fn a_presentation_woken_after_the_viewer_lost_control_in_the_same_step_is_refused() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let delay = Duration::from_millis(100);
        let ui = UiConfig { controller_delay: (delay, delay), reset_every: None };
        let mut client = Client::new(ClientConfig { ui, seed: 1, nameplates: false });
        let log: Rc<RefCell<Vec<(u64, u64)>>> = Rc::default();
        let l = log.clone();
        let (router, core) = client.router_and_core();
        let on = Listen::channel(PAWN_TEAM_PRESENTATION, Match::Exact);
        let _listener = router
            .listen(core, on, move |_, n| {
                let viewer = pawn_of(n.viewer.object()).unwrap();
                l.borrow_mut().push((n.pawn.0, viewer.0));
            })
            .unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        client.replicate(
            t0,
            &Event::Welcomed { player: player("me"), node: harbor, max_frame_len: 65_536 },
        );
        client.replicate(t0, &player_state("me", 1));
        client.replicate(at(50), &player_state("carol", 2));
        client.handle_timeout(at(100));
        client.replicate(at(100), &spawn(1, "me"));
        client.replicate(at(100), &Event::Possessed { pawn: PawnId(1) });
        client.replicate(at(100), &spawn(3, "carol"));
        assert_eq!(*log.borrow(), [(1, 1)], "carol's widget controller is still building");

        // Replication applied the unpossession; its notification has not reached the adapters
        // when carol's widget controller completes and the cached facts wake pawn 3's request.
        let (_, core) = client.router_and_core();
        let mut unpossession = Replication::of(&Event::Unpossessed { pawn: PawnId(1) });
        let applied = unpossession.next(&mut core.state.domain.replica, at(150));
        assert_eq!(applied, Some(Notice::Unpossessed(PawnId(1))));
        client.handle_timeout(at(150));
        assert!(client.is_character_init_gate_open(PawnId(3)), "carol's gate did open");
        assert_eq!(*log.borrow(), [(1, 1)], "nothing presented to a viewer that lost control");
        assert_eq!(client.gate_stats().pawn_team_presentations_refused, 1);
        let (router, core) = client.router_and_core();
        announce(router, core, UNPOSSESSED, &PawnNotice { pawn: PawnId(1) });

        client.replicate(at(200), &spawn(4, "me"));
        client.replicate(at(200), &Event::Possessed { pawn: PawnId(4) });
        assert_eq!(*log.borrow(), [(1, 1), (3, 4), (4, 4)]);
        let stats = client.gate_stats();
        assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
    }
}

//! The test harness: a session on a simulated clock, scripted messages, and a log of what the
//! client's router delivered (gate delegates, team events, subscription callbacks).

#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gatehouse_client_sim::adapters::{
    ClientState, PAWN_TEAM_PRESENTATION, PawnTeamPresented, REMOTE_CHARACTER_REP_NOTIFY,
    RepNotifyKind, TEAM_PRESENTATION_CHANGED,
};
use gatehouse_client_sim::client::{Client, ClientConfig};
use gatehouse_client_sim::domain::UiConfig;
use gatehouse_client_sim::gates::{
    GateFired, LOCAL_CHARACTER_INIT_GATE_OPENED, LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY,
    REMOTE_CHARACTER_INIT_GATE_OPENED,
};
use gatehouse_client_sim::ids::pawn_object;
use gatehouse_client_sim::notifications::TEAM_CHANGED;
use gatehouse_client_sim::session::{ClientSession, SessionConfig};
use gatehouse_lifecycle::{ObjectId, ScopeToken};
use gatehouse_messaging::{Lifetime, Listen, Match};
use gatehouse_protocol::{
    CharacterDef, LevelName, NodeId, PawnId, PawnIdRuns, PawnView, PlayerId, PlayerStateView,
    ReplicatedChange, ServerMessage, SnapshotBuilder, SnapshotEntry, TeamId, TransitionId,
};
use gatehouse_tags::catalog::*;

/// The local player.
pub(crate) const ME: &str = "me";
/// Another player.
pub(crate) const BOB: &str = "bob";
/// A third player.
pub(crate) const CAROL: &str = "carol";

/// Every widget controller takes exactly this long.
pub(crate) const UI_MS: u64 = 100;
/// Every level streams in exactly this long.
pub(crate) const STREAM_MS: u64 = 100;

/// What the router (or a subscription) delivered, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// `OnLocalCharacterInitGateOpened` for a pawn.
    Local(u64),
    /// `OnRemoteCharacterInitGateOpened` for a pawn.
    Remote(u64),
    /// `OnLocalPlayerWidgetControllerAndTeamReady`.
    WidgetTeam,
    /// The raw team change.
    TeamRaw(String, Option<u8>),
    /// The presentation-only team change.
    Presented(String, Option<u8>),
    /// A subscription callback: its label and the subject pawn (0 for other subjects).
    Fired(&'static str, u64),
    /// A Blueprint RepNotify of a remote pawn: the pawn, what changed, whether replayed.
    Rep(u64, RepNotifyKind, bool),
    /// `DispatchTeamPresentation`: target pawn and team, viewer pawn and team.
    PawnTeam(u64, u8, u64, u8),
}

pub(crate) type Log = Rc<RefCell<Vec<Event>>>;

pub(crate) fn player(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap()
}

/// Pawn `pawn` of `owner`: a live Vanguard on `harbor`.
pub(crate) fn pawn_view(pawn: u64, owner: &str) -> PawnView {
    PawnView {
        pawn_id: PawnId(pawn),
        owner: player(owner),
        character_def: CharacterDef::new("Vanguard").unwrap(),
        node: NodeId::new("harbor").unwrap(),
        alive: true,
    }
}

/// A session on a simulated clock with fixed UI and stream delays, and a log of its events.
pub(crate) struct Sim {
    pub(crate) session: ClientSession,
    pub(crate) now: Instant,
    pub(crate) log: Log,
    /// Every pawn team presentation, whole (with its generations), once `log_pawn_team` ran.
    pub(crate) presented: Rc<RefCell<Vec<PawnTeamPresented>>>,
    _listeners: Lifetime,
}

impl Sim {
    /// A client without the nameplate consumer (so only the test's subscriptions exist).
    pub(crate) fn new() -> Sim {
        Sim::with(false, None)
    }

    /// A client with the nameplate consumer and the live checks' public subscriptions.
    pub(crate) fn with_nameplates() -> Sim {
        Sim::with(true, None)
    }

    pub(crate) fn with(nameplates: bool, ui_reset_every: Option<Duration>) -> Sim {
        let config = SessionConfig {
            stream_time: (Duration::from_millis(STREAM_MS), Duration::from_millis(STREAM_MS)),
            seed: 1,
            restart_after_death: None,
            full: true,
            misbehaviour: None,
            token: String::new(),
        };
        let ui = UiConfig {
            controller_delay: (Duration::from_millis(UI_MS), Duration::from_millis(UI_MS)),
            reset_every: ui_reset_every,
        };
        let now = Instant::now();
        let mut session =
            ClientSession::with_client(now, config, ClientConfig { ui, seed: 1, nameplates });
        let log: Log = Rc::default();
        let mut listeners = Lifetime::new("test");
        let (router, core) = session.client_mut().router_and_core();
        let l = log.clone();
        listeners.hold(
            router
                .listen(
                    core,
                    Listen::channel(LOCAL_CHARACTER_INIT_GATE_OPENED, Match::Exact),
                    move |_, n| l.borrow_mut().push(Event::Local(n.pawn.0)),
                )
                .unwrap(),
        );
        let l = log.clone();
        listeners.hold(
            router
                .listen(
                    core,
                    Listen::channel(REMOTE_CHARACTER_INIT_GATE_OPENED, Match::Exact),
                    move |_, n| l.borrow_mut().push(Event::Remote(n.pawn.0)),
                )
                .unwrap(),
        );
        let l = log.clone();
        listeners.hold(
            router
                .listen(
                    core,
                    Listen::channel(LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, Match::Exact),
                    move |_, _| l.borrow_mut().push(Event::WidgetTeam),
                )
                .unwrap(),
        );
        let l = log.clone();
        listeners.hold(
            router
                .listen(core, Listen::channel(TEAM_CHANGED, Match::Exact), move |_, n| {
                    l.borrow_mut().push(Event::TeamRaw(n.player.to_string(), n.new.map(|t| t.0)))
                })
                .unwrap(),
        );
        let l = log.clone();
        listeners.hold(
            router
                .listen(
                    core,
                    Listen::channel(TEAM_PRESENTATION_CHANGED, Match::Exact),
                    move |_, n| {
                        l.borrow_mut()
                            .push(Event::Presented(n.player.to_string(), n.new.map(|t| t.0)))
                    },
                )
                .unwrap(),
        );
        Sim { session, now, log, presented: Rc::default(), _listeners: listeners }
    }

    /// Also logs every Blueprint RepNotify of a remote pawn, in order with the gate events.
    pub(crate) fn log_rep_notifies(&mut self) {
        let l = self.log.clone();
        let (router, core) = self.session.client_mut().router_and_core();
        let listener = router
            .listen(
                core,
                Listen::channel(REMOTE_CHARACTER_REP_NOTIFY, Match::Exact),
                move |_, n| l.borrow_mut().push(Event::Rep(n.pawn.0, n.kind, n.replayed)),
            )
            .unwrap();
        self._listeners.hold(listener);
    }

    /// Also logs every pawn team presentation, in order with the gate events.
    pub(crate) fn log_pawn_team(&mut self) {
        let (l, presented) = (self.log.clone(), self.presented.clone());
        let (router, core) = self.session.client_mut().router_and_core();
        let listener = router
            .listen(core, Listen::channel(PAWN_TEAM_PRESENTATION, Match::Exact), move |_, n| {
                let viewer = gatehouse_client_sim::ids::pawn_of(n.viewer.object()).unwrap().0;
                l.borrow_mut().push(Event::PawnTeam(n.pawn.0, n.team.0, viewer, n.viewer_team.0));
                presented.borrow_mut().push(n.clone());
            })
            .unwrap();
        self._listeners.hold(listener);
    }

    pub(crate) fn client(&self) -> &Client {
        self.session.client()
    }

    pub(crate) fn client_mut(&mut self) -> &mut Client {
        self.session.client_mut()
    }

    /// The server sends `message`: the session handles it, then its game side's share runs, as
    /// the swarm runs it once the replies are written. A replicated change comes as a version 9
    /// server sends it, in a `Replicated` batch (docs/protocol.md 4.4): here a batch of one, so
    /// every script tests that form and keeps its own order.
    pub(crate) fn send(&mut self, message: ServerMessage) {
        let message = match ReplicatedChange::from_message(message) {
            Ok(change) => ServerMessage::Replicated { changes: vec![change] },
            Err(message) => message,
        };
        self.session.handle(self.now, message);
        self.session.run_game_side();
    }

    /// The server greets this client with `entries` (player, team, pawns) as a `WorldSnapshot`
    /// (docs/protocol.md 4.5): ready player states (CharacterDef Vanguard), each with its live
    /// pawns on `harbor`.
    pub(crate) fn greet(&mut self, entries: &[(&str, u8, &[u64])]) {
        let mut builder = SnapshotBuilder::new(65_536);
        for (who, team, pawns) in entries {
            let view = PlayerStateView {
                player_id: player(who),
                team: Some(TeamId(*team)),
                character_def: Some(CharacterDef::new("Vanguard").unwrap()),
            };
            let pawns: Vec<PawnView> = pawns.iter().map(|id| pawn_view(*id, who)).collect();
            builder.add(SnapshotEntry { player: &view, tags: &[], health: None, pawns: &pawns });
        }
        for snapshot in builder.finish() {
            self.send(ServerMessage::WorldSnapshot(Box::new(snapshot)));
        }
    }

    /// Advances the clock by `ms`, handling every deadline on the way at its own instant.
    pub(crate) fn after(&mut self, ms: u64) {
        let until = self.now + Duration::from_millis(ms);
        while let Some(at) = self.session.poll_timeout().filter(|at| *at <= until) {
            self.now = self.now.max(at);
            self.session.handle_timeout(self.now);
            self.session.run_game_side();
        }
        self.now = until;
        while self.session.poll_output().is_some() {}
    }

    /// Welcome as `me`, entering the world on `harbor` (it plays at once).
    pub(crate) fn welcome(&mut self) {
        self.send(ServerMessage::Welcome {
            player_id: player(ME),
            current_node: Some(NodeId::new("harbor").unwrap()),
            max_frame_len: 65_536,
        });
    }

    /// A later session of this game (the game side outlives it) is welcomed as `who` on
    /// `harbor`: its `Welcomed` reaches the game side directly.
    pub(crate) fn welcome_in_new_session(&mut self, who: &str) {
        let node = Some(NodeId::new("harbor").unwrap());
        let welcomed =
            gatehouse_client::Event::Welcomed { player: player(who), node, max_frame_len: 65_536 };
        let now = self.now;
        self.client_mut().replicate(now, &welcomed);
    }

    pub(crate) fn player_state(&mut self, who: &str, team: Option<u8>, def: Option<&str>) {
        self.send(ServerMessage::PlayerStateUpdated(PlayerStateView {
            player_id: player(who),
            team: team.map(TeamId),
            character_def: def.map(|d| CharacterDef::new(d).unwrap()),
        }));
    }

    /// A complete player state: team 1 or 2, CharacterDef Vanguard.
    pub(crate) fn ready_player_state(&mut self, who: &str, team: u8) {
        self.player_state(who, Some(team), Some("Vanguard"));
    }

    pub(crate) fn spawn(&mut self, pawn: u64, owner: &str) {
        self.spawn_as(pawn, owner, "Vanguard");
    }

    pub(crate) fn spawn_as(&mut self, pawn: u64, owner: &str, class: &str) {
        let view =
            PawnView { character_def: CharacterDef::new(class).unwrap(), ..pawn_view(pawn, owner) };
        self.send(ServerMessage::PawnSpawned(view));
    }

    pub(crate) fn possess(&mut self, pawn: u64) {
        self.send(ServerMessage::Possessed { pawn_id: PawnId(pawn) });
    }

    pub(crate) fn unpossess(&mut self, pawn: u64) {
        self.send(ServerMessage::Unpossessed { pawn_id: PawnId(pawn) });
    }

    pub(crate) fn destroy(&mut self, pawn: u64) {
        self.send(ServerMessage::PawnDestroyed { pawn_id: PawnId(pawn) });
    }

    pub(crate) fn health(&mut self, who: &str, health: u32) {
        self.send(ServerMessage::HealthChanged { player_id: player(who), health });
    }

    pub(crate) fn teleport(&mut self, pawn: u64, node: &str) {
        let node = NodeId::new(node).unwrap();
        self.send(ServerMessage::PawnsTeleported {
            node,
            pawn_ids: PawnIdRuns::from_ids([PawnId(pawn)]),
        });
    }

    pub(crate) fn ability_tags(&mut self, who: &str) {
        self.send(ServerMessage::AbilityTagsChanged { player_id: player(who), tags: vec![] });
    }

    /// Ability tags that say dead (`State.Dead`) or alive (none).
    pub(crate) fn ability_tags_dead(&mut self, who: &str, dead: bool) {
        let tags = if dead { vec![gatehouse_tags::catalog::STATE_DEAD] } else { vec![] };
        self.send(ServerMessage::AbilityTagsChanged { player_id: player(who), tags });
    }

    pub(crate) fn died(&mut self, pawn: u64) {
        self.send(ServerMessage::PawnDied { pawn_id: PawnId(pawn) });
    }

    /// Shows transition `id` to `marsh`: the client tears its world down and loads the next.
    pub(crate) fn travel(&mut self, id: u64) {
        self.send(ServerMessage::FreezeCharacters { transition_id: TransitionId(id) });
        self.send(ServerMessage::ShowTransition {
            transition_id: TransitionId(id),
            target_node: NodeId::new("marsh").unwrap(),
            levels: vec![LevelName::new("marsh_reeds").unwrap()],
            rooms: Vec::new(),
        });
    }

    /// The usual start: welcome, my and bob's player states, both widget controllers ready,
    /// my pawn 1 possessed and bob's pawn 2 spawned: both character gates open.
    pub(crate) fn ready_pair(&mut self) {
        self.welcome();
        self.ready_player_state(ME, 1);
        self.ready_player_state(BOB, 2);
        self.after(UI_MS);
        self.spawn(1, ME);
        self.possess(1);
        self.spawn(2, BOB);
    }

    pub(crate) fn events(&self) -> Vec<Event> {
        self.log.borrow().clone()
    }

    /// The gate events only (delegates and subscription callbacks), without team events.
    pub(crate) fn gate_events(&self) -> Vec<Event> {
        let gates = |e: &Event| !matches!(e, Event::TeamRaw(..) | Event::Presented(..));
        self.log.borrow().iter().filter(|e| gates(e)).cloned().collect()
    }

    /// The pawn team presentations logged, in order.
    pub(crate) fn pawn_team_events(&self) -> Vec<Event> {
        let log = self.log.borrow();
        log.iter().filter(|e| matches!(e, Event::PawnTeam(..))).cloned().collect()
    }

    /// The RepNotifies logged, in order.
    pub(crate) fn rep_events(&self) -> Vec<Event> {
        self.log.borrow().iter().filter(|e| matches!(e, Event::Rep(..))).cloned().collect()
    }

    pub(crate) fn clear_events(&self) {
        self.log.borrow_mut().clear();
    }

    /// The current generation of `pawn`, as the character adapter scoped it.
    pub(crate) fn generation(&self, pawn: u64) -> Option<ScopeToken> {
        self.client().pawn_generation(PawnId(pawn))
    }

    /// Subscribes to `gate` on `pawn` with the pawn itself as listener; the callback logs `label`.
    pub(crate) fn subscribe_pawn(
        &mut self,
        label: &'static str,
        pawn: u64,
        gate: gatehouse_tags::GameplayTag,
    ) -> gatehouse_client_sim::gates::GateSubscription {
        let subject = pawn_object(PawnId(pawn));
        self.subscribe(label, subject, subject, gate)
    }

    /// Subscribes to `gate` on `subject`, guarded by `listener`; the callback logs `label`.
    pub(crate) fn subscribe(
        &mut self,
        label: &'static str,
        listener: ObjectId,
        subject: ObjectId,
        gate: gatehouse_tags::GameplayTag,
    ) -> gatehouse_client_sim::gates::GateSubscription {
        let l = self.log.clone();
        self.client_mut().register_for_gate(listener, subject, gate, fired(l, label)).unwrap()
    }
}

/// A subscription callback that logs `label` and the subject pawn.
pub(crate) fn fired(
    log: Log,
    label: &'static str,
) -> impl FnOnce(&mut ClientState, GateFired) + 'static {
    move |_, fired| {
        let pawn = gatehouse_client_sim::ids::pawn_of(fired.subject.object()).map_or(0, |p| p.0);
        log.borrow_mut().push(Event::Fired(label, pawn));
    }
}

/// The character facts every test may name.
pub(crate) const LOCAL_READY: gatehouse_tags::GameplayTag = LIFECYCLE_GATE_CHARACTER_LOCAL_READY;
pub(crate) const REMOTE_READY: gatehouse_tags::GameplayTag = LIFECYCLE_GATE_CHARACTER_REMOTE_READY;

//! One simulated game client: a `gatehouse-client` session plus simulated streaming and a
//! simulated game, sans-IO.
//!
//! [`ClientSession`] adds nothing to the protocol: the library's [`Session`] carries out every
//! duty (the `Hello`, the answers to transitions and joins, the acknowledgements, the loading
//! screen's phases) and tells this client, as [`Event`]s, what a game must do. This client does
//! it the simulated way: streaming is a timer drawn from the seed, a death is restarted after a
//! delay, and a full client's game side (domain objects, router, adapters, gates; the example
//! game) is fed every event, and told when the simulated streaming finished. Around
//! that it keeps the figures of the run and feeds the live session checks every message with
//! what the client expected before it. A misbehaving client is the same session with its
//! outputs rewritten ([`Misbehaving`]).
//!
//! Driven like the server core: [`ClientSession::handle_on`] with `now` and the link the
//! message came on, drain [`ClientSession::poll_output`], wake at
//! [`ClientSession::poll_timeout`], and say when a link ends ([`ClientSession::link_lost`]).
//!
//! **Links: what a driver routes.** A session starts on the connection its driver opened,
//! [`LinkId::FIRST`]; a driver with one connection uses [`ClientSession::handle`]. A move to
//! another server (`TravelTo`, docs/spec/travel.md V3) is the library's, and reaches the driver
//! as outputs ([`Output`]), in order:
//! - `Output::Dial { link, dial }`: open a connection to `dial.address` (as `dial.server_name`,
//!   pinned to `dial.pin` if set, else trusted as the first), then feed every message that
//!   arrives on it to `handle_on(now, link, message)`; send what comes for `link` before it is
//!   open once it is. A driver that cannot open it says so at once with `link_lost(now, link,
//!   why)`: the session gives the move up on the source (`TravelAbandoned`) and stays there.
//! - `Output::Send { link, message }`: write `message` on `link`'s connection (the source's
//!   `TransitionShown` and `TravelAbandoned`, the destination's `Hello` with the ticket and
//!   every duty after).
//! - `Output::Close { link }`: finish and close that connection (after what was sent on it);
//!   the source's close with code 11 (`Travelled`) is the move's expected end, not an error.
//!
//! Whatever the links, one session is one player: its checks, its screen and its figures run
//! across the move (one loading screen across two servers), and it ends when the link it plays
//! on ends ([`ClientSession::is_closed`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use gatehouse_client::{Event, LinkId, Load, Output, Screen, Session, WorldChange, WorldEvents};
use gatehouse_protocol::{ClientMessage, NodeId, PawnId, PlayerId, ServerMessage};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

use crate::checks::session::{Expected, SessionChecks};
use crate::client::{Client, ClientConfig};
use crate::figures::{MarkKind, ScreenKind, ScreenTimes, SessionStats};
use crate::game_side::{GameSide, GameStep};
use crate::misbehaving::Misbehaving;
use crate::misbehaviour::Misbehaviour;

/// How a simulated client behaves.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Simulated stream time of each level: uniformly between these bounds (inclusive).
    pub stream_time: (Duration, Duration),
    /// Seed of this client's random choices.
    pub seed: u64,
    /// After dying, request a restart this long later; `None`: stay dead.
    pub restart_after_death: Option<Duration>,
    /// A full client runs the whole client lifecycle (domain, router, adapters, gates, checks);
    /// a thin one only its protocol duties and the session checks, which need no lifecycle
    /// (docs/simulator.md: most are thin).
    pub full: bool,
    /// How this client misbehaves, if it does; `None`: it follows the protocol. The session
    /// carries out the kinds that are wrong messages; for the others it says when they are due
    /// ([`ClientSession::take_transport_misbehaviour`]).
    pub misbehaviour: Option<Misbehaviour>,
    /// The session token its `Hello` carries (the harness in `tests/` verifies none).
    pub token: String,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            stream_time: (Duration::from_millis(50), Duration::from_millis(250)),
            seed: 0,
            restart_after_death: None,
            full: true,
            misbehaviour: None,
            token: String::new(),
        }
    }
}

/// The simulated game's streaming: one load at a time, done at a drawn instant.
#[derive(Debug)]
struct Streaming {
    rng: SmallRng,
    /// The load being streamed and when it is done.
    due: Option<(Load, Instant)>,
}

/// The simulated player's death and restart, as the report counts them.
#[derive(Debug, Default)]
struct Vitals {
    /// Its player holds `State.Dead`.
    dead: bool,
    /// When to request a restart, while dead.
    restart_at: Option<Instant>,
    /// A restart was requested and its new pawn has not arrived yet.
    respawning: bool,
    /// The link (the server) the death and the restart belong to: a move to another server,
    /// or back, voids a restart asked of the one left (docs/spec/travel.md V3, V7). None
    /// before the first event.
    link: Option<LinkId>,
}

/// The loading screen up, as the run's figures time it.
#[derive(Debug, Clone, Copy)]
struct ScreenFigure {
    kind: ScreenKind,
    /// When the screen went up (kept across supersedes).
    raised_at: Instant,
    /// When the load now on it was first seen.
    shown_at: Instant,
    ready_sent_at: Option<Instant>,
    /// When the own pawn was possessed (or teleported) for the load now on it.
    possessed_at: Option<Instant>,
}

impl ScreenFigure {
    fn times(&self, ended: Instant) -> ScreenTimes {
        ScreenTimes {
            kind: self.kind,
            shown: self.raised_at,
            ready_sent: self.ready_sent_at,
            possessed: self.possessed_at,
            ended: Some(ended),
        }
    }
}

/// A simulated client session.
#[derive(Debug)]
pub struct ClientSession {
    config: SessionConfig,
    /// The protocol: the library's session.
    session: Session,
    streaming: Streaming,
    vitals: Vitals,
    /// The pawn whose possession this client acknowledged on each link it holds (a
    /// never-acknowledging one has none): after a move that came back, the source's pawn is
    /// the one acknowledged there.
    acknowledged: Vec<(LinkId, PawnId)>,
    screen: Option<ScreenFigure>,
    /// The game side: domain objects, router, adapters, gates, checks, and the steps it has yet
    /// to run; `None` for a thin client.
    game: Option<GameSide>,
    /// The live checks of what the server promises this session.
    checks: SessionChecks,
    misbehaving: Option<Misbehaving>,
    outputs: VecDeque<Output>,
    stats: SessionStats,
    /// The close code and reason the server announced in `Closing`, if it did.
    closing: Option<(u32, String)>,
}

impl ClientSession {
    /// A session started at `now` (its `Hello` is the first output), with the default game
    /// side (seeded from `config.seed`) if `config.full`, else thin.
    pub fn new(now: Instant, config: SessionConfig) -> Self {
        let client =
            ClientConfig { seed: config.seed ^ 0x5EED_0F0E_11A1_C0DE, ..ClientConfig::default() };
        Self::with_client(now, config, client)
    }

    /// A session started at `now`, with the game side configured by `client` if
    /// `config.full`, else thin (no game side).
    pub fn with_client(now: Instant, config: SessionConfig, client: ClientConfig) -> Self {
        // A thin client keeps no world: the other players' changes, in every snapshot and
        // batch, need not become events it would drop.
        let world_events = if config.full { WorldEvents::All } else { WorldEvents::Own };
        let library = gatehouse_client::SessionConfig {
            world_events,
            ..gatehouse_client::SessionConfig::new(config.token.clone())
        };
        let mut session = ClientSession {
            session: Session::new(now, library),
            streaming: Streaming { rng: SmallRng::seed_from_u64(config.seed), due: None },
            vitals: Vitals::default(),
            acknowledged: Vec::new(),
            screen: None,
            game: config.full.then(|| GameSide::new(Client::new(client))),
            checks: SessionChecks::default(),
            misbehaving: config.misbehaviour.map(Misbehaving::new),
            outputs: VecDeque::new(),
            stats: SessionStats::default(),
            closing: None,
            config,
        };
        session.pump(now);
        session
    }

    /// Feeds one server message:
    /// 1. the session checks compare it with what the client expected before this message;
    /// 2. the library's session carries out its duties, and this client does what its events
    ///    say (streaming, figures);
    /// 3. each event's share of the game side is queued: the replicated world applies and
    ///    announces it when [`ClientSession::run_game_side`] runs, after the replies were
    ///    written.
    ///
    /// A `WorldSnapshot` or a `Replicated` batch goes through those steps as each message it
    /// stands for, in its order (docs/protocol.md 4.4, 4.5): the checks then judge each own
    /// pawn's placement with what the client knew right before it, as they would have had the
    /// messages come one by one.
    ///
    /// The message came on the first link ([`LinkId::FIRST`]): [`ClientSession::handle_on`]
    /// names the link, for a driver that carries server changes.
    pub fn handle(&mut self, now: Instant, message: ServerMessage) {
        self.handle_on(now, LinkId::FIRST, message);
    }

    /// [`ClientSession::handle`] for a message that came on `link` (module docs, "Links").
    pub fn handle_on(&mut self, now: Instant, link: LinkId, message: ServerMessage) {
        match message {
            ServerMessage::WorldSnapshot(snapshot) => {
                for message in snapshot.messages() {
                    self.handle_one(now, link, message, true);
                }
            }
            ServerMessage::Replicated { changes } => {
                for change in changes {
                    self.handle_one(now, link, ServerMessage::from(change), false);
                }
            }
            message => self.handle_one(now, link, message, false),
        }
    }

    /// `link` ended below the protocol, or could not be opened (module docs, "Links"): the
    /// library's session carries the move on, gives it up, or ends.
    pub fn link_lost(&mut self, now: Instant, link: LinkId, why: impl Into<String>) {
        self.session.link_lost(link, why);
        self.pump(now);
    }

    /// The link the session plays on: its messages drive the screen and the checks.
    pub fn link(&self) -> LinkId {
        self.session.link()
    }

    /// [`ClientSession::handle_on`] for a message that stands for itself alone, an entry of a
    /// newcomer's world snapshot if `in_snapshot`. Only a message of the server the session
    /// plays on is judged against what the client expected; one of the other server of a move
    /// only keeps the checks' account of that server.
    fn handle_one(
        &mut self,
        now: Instant,
        link: LinkId,
        message: ServerMessage,
        in_snapshot: bool,
    ) {
        let errors_before = self.stats.errors.len();
        let here = link == self.session.link();
        let placed_pawn = self.has_acknowledged_its_pawn();
        let screen = self.session.screen();
        let expected = here.then(|| Expected {
            player: self.session.player(),
            node: self.session.destination(),
            // A transition that ended, its screen held for the join that follows, is over.
            on_screen: match screen {
                Screen::Transition(screen) if !screen.has_ended() => Some(screen.transition()),
                _ => None,
            },
            on_join: match screen {
                Screen::Join(screen) => Some(screen.join()),
                _ => None,
            },
            streamed: self.session.streamed_node(),
            placed_pawn,
            in_snapshot,
        });
        self.checks.observe(link, &message, expected, &mut self.stats);
        if self.stats.errors.len() > errors_before {
            self.stats.marks.push((now, MarkKind::Error));
        }
        if let Some(misbehaving) = &mut self.misbehaving
            && here
        {
            misbehaving.observe(now, self.session.player(), &message);
        }
        self.session.handle_on(now, link, message);
        self.pump(now);
    }

    /// Whether the client possesses a pawn where it plays and acknowledged that possession.
    fn has_acknowledged_its_pawn(&self) -> bool {
        let link = self.session.link();
        self.session.pawn().is_some_and(|pawn| self.acknowledged.contains(&(link, pawn)))
    }

    /// A relaunch of a client whose previous session ended dead (or waiting for its respawn):
    /// the server kept that death, already counted, and this session restarts from it.
    pub fn continue_dead(&mut self, dead: bool) {
        self.vitals.dead = dead;
    }

    /// Handles the streaming, restart and game-side deadlines that passed (the game side's
    /// are queued, as [`ClientSession::handle`]'s share is).
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(game) = &mut self.game
            && game.client.poll_timeout().is_some_and(|at| at <= now)
        {
            game.queue(now, GameStep::Timers);
        }
        if let Some(misbehaving) = &mut self.misbehaving {
            let mut sent = VecDeque::new();
            misbehaving.handle_timeout(now, &mut sent);
            self.send_here(sent);
        }
        if self.vitals.restart_at.is_some_and(|at| at <= now) {
            self.vitals.restart_at = None;
            let restart =
                if self.vitals.dead { Some(self.session.request_restart()) } else { None };
            match restart {
                Some(Ok(())) => self.vitals.respawning = true,
                // Asked again later, once the move's destination let the client in (the
                // restart is the destination's) or the move was given up (the source's).
                Some(Err(gatehouse_client::InputError::Moving)) => {
                    self.vitals.restart_at = self.config.restart_after_death.map(|d| now + d);
                }
                _ => {}
            }
        }
        if let Some((load, _)) = self.streaming.due.filter(|(_, at)| *at <= now) {
            self.streaming.due = None;
            self.streamed(now, load);
        }
        self.session.handle_timeout(now);
        self.pump(now);
    }

    /// Leaves at `now`: the library's session sends `Leave` (take it from
    /// [`ClientSession::poll_output`]) and waits for the server's close.
    pub fn leave(&mut self, now: Instant) {
        self.session.leave(now);
        self.pump(now);
    }

    /// Counts how long this session's connection took from dialling to `Welcome` (the shell
    /// measures it: the session never sees the dialling).
    pub fn record_connect_to_welcome(&mut self, took: Duration) {
        self.stats.timings.connect_to_welcome.record(took);
    }

    /// Counts how long this session's connection took from dialling to its QUIC handshake done
    /// and control stream open (the shell measures it, as [`Self::record_connect_to_welcome`]).
    pub fn record_connect_to_handshake(&mut self, took: Duration) {
        self.stats.timings.connect_to_handshake.record(took);
    }

    /// The next thing to do for the session's links, in order: a message to send on a link, a
    /// link to open, a link to close (module docs, "Links").
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When [`ClientSession::handle_timeout`] is next needed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let streaming = self.streaming.due.map(|(_, at)| at);
        let client = self.game.as_ref().and_then(GameSide::poll_timeout);
        let misbehaviour = self.misbehaving.as_ref().and_then(Misbehaving::poll_timeout);
        [streaming, self.vitals.restart_at, client, misbehaviour, self.session.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// A transport misbehaviour (garbage or oversized frame, going silent) that is due at `now`:
    /// once the client is placed, or [`crate::misbehaviour::TRANSPORT_MISBEHAVIOUR_AFTER`]
    /// after `Welcome`. Returned once; the swarm carries it out on the connection.
    pub fn take_transport_misbehaviour(&mut self, now: Instant) -> Option<Misbehaviour> {
        let placed = self.is_placed();
        self.misbehaving.as_mut()?.take_transport(now, placed)
    }

    /// How this session misbehaves, if it does.
    pub fn misbehaviour(&self) -> Option<Misbehaviour> {
        self.config.misbehaviour
    }

    /// The player id the server welcomed this client as.
    pub fn player(&self) -> Option<&PlayerId> {
        self.session.player()
    }

    /// The close code and reason the server announced before closing (`Closing`), if it did:
    /// known even when a lossy path drops the CONNECTION_CLOSE.
    pub fn closing(&self) -> Option<(u32, &str)> {
        self.closing.as_ref().map(|(code, reason)| (*code, reason.as_str()))
    }

    /// Whether the library's session is over (the server's `Closing`, or no `Welcome` in time).
    pub fn is_closed(&self) -> bool {
        self.session.is_closed()
    }

    /// Placed: has a pawn whose possession it acknowledged, and no loading screen up.
    pub fn is_placed(&self) -> bool {
        self.has_acknowledged_its_pawn() && !self.is_loading()
    }

    /// The node this client streamed (its join's, or the transition's it reported ready for).
    pub fn streamed_node(&self) -> Option<&NodeId> {
        self.session.streamed_node()
    }

    /// Whether the loading screen is up for a join of its own.
    pub fn is_joining(&self) -> bool {
        matches!(self.session.screen(), Screen::Join(_))
    }

    /// Whether the player is dead or waiting for its respawn.
    pub fn is_dead_or_respawning(&self) -> bool {
        self.vitals.dead || self.vitals.respawning
    }

    /// The pawn possessed for this client.
    pub fn own_pawn(&self) -> Option<PawnId> {
        self.session.pawn()
    }

    /// Pawns this client knows of, owned by `player`: from its domain for a full client; a thin
    /// one knows only its own (spawned and not destroyed).
    pub fn pawns_owned_by(&self, player: &PlayerId) -> usize {
        match &self.game {
            Some(game) => game.client.domain().characters().owned_by(player).len(),
            None if self.player() == Some(player) => self.checks.own_pawns(self.session.link()),
            None => 0,
        }
    }

    /// The game side (domain objects, router, registry, gates); `None` for a thin client.
    pub fn game_side(&self) -> Option<&Client> {
        self.game.as_ref().map(|g| &g.client)
    }

    /// Runs the game side's share of what the session handled, in order, each step at the
    /// instant it was handled: call it after writing what [`ClientSession::poll_output`] gave,
    /// so no reply waits behind the game side's work. Nothing for a thin client.
    pub fn run_game_side(&mut self) {
        if let Some(game) = &mut self.game {
            game.run();
        }
    }

    /// Whether the game side has steps to run ([`ClientSession::run_game_side`]).
    pub fn has_game_side_work(&self) -> bool {
        self.game.as_ref().is_some_and(GameSide::has_pending)
    }

    /// The game side of a full session (domain objects, router, registry, gates).
    ///
    /// # Panics
    /// If the session is thin ([`SessionConfig::full`] false): asking a thin client for its
    /// lifecycle is a bug in the caller. [`ClientSession::game_side`] does not panic.
    pub fn client(&self) -> &Client {
        match &self.game {
            Some(game) => &game.client,
            None => panic!("a thin client session has no game side"),
        }
    }

    /// The game side of a full session, mutably (to subscribe to gates, reset the UI).
    ///
    /// # Panics
    /// If the session is thin, as [`ClientSession::client`].
    pub fn client_mut(&mut self) -> &mut Client {
        match &mut self.game {
            Some(game) => &mut game.client,
            None => panic!("a thin client session has no game side"),
        }
    }

    /// Whether this session runs the whole client lifecycle (see [`SessionConfig::full`]).
    pub fn is_full(&self) -> bool {
        self.game.is_some()
    }

    /// Whether the loading screen is up (for a transition or a join).
    pub fn is_loading(&self) -> bool {
        self.session.screen().is_up()
    }

    /// The loading screen up now, if any: its kind and when it went up (kept across
    /// supersedes).
    pub fn screen_up(&self) -> Option<(ScreenKind, Instant)> {
        self.screen.map(|s| (s.kind, s.raised_at))
    }

    /// Records that a reply of this client left `delay` after its cause (the swarm times it:
    /// from when the message it answers was readable, or when the deadline it follows was due).
    pub fn record_reply_delay(&mut self, delay: Duration) {
        self.stats.timings.reply_delay.record(delay);
    }

    /// What this client saw so far.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Closes the books at the end of a run: a screen still up counts toward the longest, and
    /// the game side reports its gates (generations still waiting count as ended by the session,
    /// and every pending wait is listed with its blocking facts).
    pub fn finish(&mut self, now: Instant) -> SessionStats {
        // A screen still up ends with the session (a relaunch, a lost connection, the run's end):
        // its bar stops here, and it counts in no timing.
        if let Some(screen) = self.screen.take() {
            let up = ms(now - screen.raised_at);
            self.stats.longest_loading_screen_ms = self.stats.longest_loading_screen_ms.max(up);
            self.stats.screens.push(screen.times(now));
        }
        self.run_game_side();
        if let Some(game) = &self.game {
            self.stats.gates = game.client.finish(now);
        }
        self.checks.finish(&mut self.stats);
        self.stats.clone()
    }

    /// Does what the library's session said, then passes its messages through the
    /// misbehaviour; a link it closes is forgotten by the checks.
    fn pump(&mut self, now: Instant) {
        while let Some(event) = self.session.poll_event() {
            self.on_event(now, event);
        }
        while let Some(output) = self.session.poll_output() {
            match output {
                Output::Send { link, message } => {
                    let mut sent = VecDeque::new();
                    match &mut self.misbehaving {
                        Some(misbehaving) => misbehaving.rewrite(message, &mut sent),
                        None => sent.push_back(message),
                    }
                    self.send_on(link, sent);
                }
                Output::Close { link } => {
                    self.checks.forget(link);
                    self.acknowledged.retain(|(acknowledged, _)| *acknowledged != link);
                    self.outputs.push_back(output);
                }
                output => self.outputs.push_back(output),
            }
        }
    }

    /// Queues `messages` for the server the session plays on.
    fn send_here(&mut self, messages: VecDeque<ClientMessage>) {
        self.send_on(self.session.link(), messages);
    }

    /// Queues `messages` for `link`. Acknowledged is what went out, whatever the misbehaviour
    /// made of it.
    fn send_on(&mut self, link: LinkId, messages: VecDeque<ClientMessage>) {
        let own = self.session.pawn();
        for message in messages {
            if let ClientMessage::PossessionAcknowledged { pawn_id } = &message
                && Some(*pawn_id) == own
            {
                self.acknowledged.retain(|(acknowledged, _)| *acknowledged != link);
                self.acknowledged.push((link, *pawn_id));
            }
            self.outputs.push_back(Output::Send { link, message });
        }
    }

    fn on_event(&mut self, now: Instant, event: Event) {
        // Played on another server now (a move, or back from one): a restart asked of the one
        // left is void, and one is asked here once this server says the player is dead (its
        // tags: a destination knows it once the traveller's save loaded, docs/spec/travel.md V4).
        // A respawn the server left already granted (the tags said alive) is counted at the
        // possession that follows, wherever it comes.
        let link = Some(self.session.link());
        if link != self.vitals.link {
            self.vitals.link = link;
            if self.vitals.dead {
                self.vitals.respawning = false;
                self.vitals.restart_at = None;
            }
        }
        // The game side's share: what the event changes in the replicated world.
        if let Some(game) = &mut self.game {
            game.queue(now, GameStep::Replicate(event.clone()));
        }
        match event {
            Event::TransitionStarted { superseded, .. } => {
                if superseded.is_some() {
                    self.stats.transitions_superseded += 1;
                }
                self.raise(now, ScreenKind::Transition);
            }
            Event::StreamLevels { load, levels, rooms, .. } => {
                let streaming = self.streaming_time(levels.len(), rooms.len());
                self.streaming.due = Some((load, now + streaming));
                match load {
                    // A newer destination: the game side travels (the world for it loads now).
                    Load::Transition(_) => {}
                    // A move's destination places the traveller by a join: not a late joiner.
                    Load::Join(_) if self.is_travelling() => {}
                    Load::Join(id) => {
                        self.stats.joins += 1;
                        self.raise(now, ScreenKind::Join);
                        let mut sent = VecDeque::new();
                        if let Some(misbehaving) = &mut self.misbehaving {
                            misbehaving.join_shown(id, &mut sent);
                        }
                        self.send_here(sent);
                    }
                }
            }
            // The library cancels only the load it had this client stream.
            Event::CancelStreaming { .. } => self.streaming.due = None,
            Event::TransitionFailed { .. } => self.stats.transitions_failed += 1,
            Event::Possessed { .. } => {
                // The respawn's possession comes after the tags that say alive; one while still
                // dead (a join's dead pawn, say) is not it, and the respawn is still to come.
                if self.vitals.respawning && !self.vitals.dead {
                    self.vitals.respawning = false;
                    self.stats.respawns += 1;
                    self.stats.marks.push((now, MarkKind::Respawn));
                }
                self.note_possessed(now);
            }
            Event::TransitionEnded { transition } => self.transition_ended(now, transition),
            Event::HideLoadingScreen { .. } => self.screen_down(now),
            // A kept pawn moved into the destination: it stands in for a possession.
            Event::World(WorldChange::PawnsTeleported { pawns, .. })
                if self.session.pawn().is_some_and(|own| pawns.contains(own)) =>
            {
                self.note_possessed(now);
            }
            Event::World(WorldChange::TagsChanged { player, tags })
                if self.session.player() == Some(&player) =>
            {
                self.own_tags(now, tags.contains(&gatehouse_tags::catalog::STATE_DEAD));
            }
            Event::Closed { reason: gatehouse_client::CloseReason::Server { code, reason } } => {
                self.closing = Some((code, reason));
            }
            // A move to another server: one loading screen across both (docs/spec/travel.md V3).
            Event::Travelling { .. } => {
                self.stats.travels += 1;
                self.raise(now, ScreenKind::Travel);
            }
            Event::ServerChanged { .. } => {
                self.stats.server_changes += 1;
                self.stats.marks.push((now, MarkKind::ServerChange));
            }
            Event::TravelAbandoned { .. } => self.stats.travels_abandoned += 1,
            // The replicated world lives in the game side, fed above; the rest is the checks'.
            _ => {}
        }
    }

    /// The simulated game finished streaming `load` at `now`: the library reports it (unless
    /// the screen moved on), and the destination's world begins play.
    fn streamed(&mut self, now: Instant, load: Load) {
        if self.session.levels_streamed(load).is_err() {
            return;
        }
        if let Some(screen) = &mut self.screen {
            screen.ready_sent_at = Some(now);
        }
        self.queue(now, GameStep::Streamed(load));
    }

    /// The own player's tags said dead or alive.
    fn own_tags(&mut self, now: Instant, dead: bool) {
        let vitals = &mut self.vitals;
        if dead && !vitals.dead {
            // Dead again before the possession of a respawn the server granted (its tags said
            // alive): back on a server whose state still holds a death, say a move that came
            // back. That grant was the earlier death's respawn; this death asks its own.
            if vitals.respawning {
                vitals.respawning = false;
                self.stats.respawns += 1;
                self.stats.marks.push((now, MarkKind::Respawn));
            }
            self.stats.deaths += 1;
            self.stats.marks.push((now, MarkKind::Death));
        }
        // A relaunch may start dead (the server kept its player state): it restarts as well,
        // once.
        if dead && vitals.restart_at.is_none() && !vitals.respawning {
            vitals.restart_at = self.config.restart_after_death.map(|d| now + d);
        }
        if !dead {
            vitals.restart_at = None;
            // Alive again with no restart of ours: the server lost the player state that held
            // the death (it restarted), so no respawn will come for it.
            if vitals.dead && !vitals.respawning {
                self.stats.deaths_forgotten_by_server += 1;
            }
        }
        vitals.dead = dead;
    }

    /// Whether the screen up is a move's (it stays one across both servers).
    fn is_travelling(&self) -> bool {
        self.screen.is_some_and(|s| s.kind == ScreenKind::Travel)
    }

    /// A load came on the screen at `now`: the screen goes up (or stays up, its figure kept). A
    /// screen that carried a move stays a move's screen to its end, whatever comes on it.
    fn raise(&mut self, now: Instant, kind: ScreenKind) {
        let raised_at = self.screen.map_or(now, |s| s.raised_at);
        let kind = if self.is_travelling() { ScreenKind::Travel } else { kind };
        self.screen = Some(ScreenFigure {
            kind,
            raised_at,
            shown_at: now,
            ready_sent_at: None,
            possessed_at: None,
        });
    }

    /// The transition on screen ended at `now`: its phases are timed, and the destination's
    /// world begins play.
    fn transition_ended(&mut self, now: Instant, id: gatehouse_protocol::TransitionId) {
        self.stats.transitions_ended.insert(id);
        if let Some(screen) = &self.screen {
            let timings = &mut self.stats.timings;
            timings.shown_to_ended.record_between(screen.shown_at, now);
            if let Some(ready) = screen.ready_sent_at {
                timings.shown_to_ready_sent.record_between(screen.shown_at, ready);
                if let Some(possessed) = screen.possessed_at {
                    timings.ready_to_possessed.record_between(ready, possessed);
                }
            }
            if let Some(possessed) = screen.possessed_at {
                timings.possessed_to_ended.record_between(possessed, now);
            }
        }
    }

    /// The loading screen came down at `now`: its bar is recorded for the run's picture.
    fn screen_down(&mut self, now: Instant) {
        let Some(screen) = self.screen.take() else { return };
        if screen.kind == ScreenKind::Travel {
            self.stats.timings.moved.record_between(screen.raised_at, now);
        }
        self.stats.screens.push(screen.times(now));
        let up = ms(now - screen.raised_at);
        self.stats.longest_loading_screen_ms = self.stats.longest_loading_screen_ms.max(up);
    }

    /// The own pawn was possessed (or, kept, teleported) now: the screen on which it happened
    /// notes the first such instant.
    fn note_possessed(&mut self, now: Instant) {
        if let Some(screen) = &mut self.screen {
            screen.possessed_at.get_or_insert(now);
        }
    }

    fn queue(&mut self, now: Instant, step: GameStep) {
        if let Some(game) = &mut self.game {
            game.queue(now, step);
        }
    }

    /// How long streaming `levels` levels and then `rooms` dungeon rooms takes: the levels
    /// load side by side, then the rooms they hold (none for a node that is not a dungeon).
    fn streaming_time(&mut self, levels: usize, rooms: usize) -> Duration {
        let mut streaming =
            (0..levels.max(1)).map(|_| self.draw_stream_time()).max().unwrap_or_default();
        if rooms > 0 {
            streaming += (0..rooms).map(|_| self.draw_stream_time()).max().unwrap_or_default();
        }
        streaming
    }

    fn draw_stream_time(&mut self) -> Duration {
        let (lo, hi) = self.config.stream_time;
        let (lo, hi) = (ms(lo), ms(hi).max(ms(lo)));
        Duration::from_millis(self.streaming.rng.random_range(lo..=hi))
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next message the session sends; these tests follow no server change but where they
    /// say so, so every output is a message.
    fn next_message(s: &mut ClientSession) -> Option<ClientMessage> {
        s.poll_output().map(|output| match output {
            Output::Send { message, .. } => message,
            other => panic!("not a message: {other:?}"),
        })
    }

    /// A session started at `t0`, its `Hello` taken.
    fn fresh(t0: Instant, config: SessionConfig) -> ClientSession {
        let mut s = ClientSession::new(t0, config);
        assert!(matches!(next_message(&mut s), Some(ClientMessage::Hello { .. })));
        s
    }
    use gatehouse_protocol::{
        CharacterDef, JoinId, LevelName, PawnIdRuns, PawnView, RejectReason, ReplicatedChange,
        SnapshotEntry, TransitionId,
    };

    use crate::misbehaviour::{RESTART_SPAM_EVERY, TRANSPORT_MISBEHAVIOUR_AFTER};

    /// `Welcome` for `player` on `node`, with the default frame limit.
    fn welcome(player: PlayerId, node: Option<NodeId>) -> ServerMessage {
        ServerMessage::Welcome { player_id: player, current_node: node, max_frame_len: 65_536 }
    }

    fn show(id: u64) -> ServerMessage {
        ServerMessage::ShowTransition {
            transition_id: TransitionId(id),
            target_node: NodeId::new("harbor").unwrap(),
            levels: vec![LevelName::new("harbor_docks").unwrap()],
            rooms: Vec::new(),
        }
    }

    /// `AbilityTagsChanged` for `me`: dead or alive.
    fn own_tags(me: &PlayerId, dead: bool) -> ServerMessage {
        ServerMessage::AbilityTagsChanged {
            player_id: me.clone(),
            tags: if dead { vec![gatehouse_tags::catalog::STATE_DEAD] } else { vec![] },
        }
    }

    /// A session that asks to restart 500 ms after each death.
    fn restarting_after_death() -> SessionConfig {
        SessionConfig {
            restart_after_death: Some(Duration::from_millis(500)),
            ..SessionConfig::default()
        }
    }

    /// A session that continues a death (a relaunch) but is told it is alive, with no restart
    /// of its own, counts the death as forgotten by the server; after its own restart it does
    /// not. Both keep the report's death balance.
    #[test]
    fn a_death_the_server_forgets_is_counted_apart_from_respawns() {
        let t0 = Instant::now();
        let me = PlayerId::new("sim-0000").unwrap();
        let tags = |dead: bool| own_tags(&me, dead);
        let config = restarting_after_death();

        let mut forgotten = fresh(t0, config.clone());
        forgotten.continue_dead(true);
        forgotten.handle(t0, welcome(me.clone(), None));
        forgotten.handle(t0, tags(false));
        assert_eq!(forgotten.stats().deaths_forgotten_by_server, 1);
        assert!(!forgotten.is_dead_or_respawning());

        let mut restarted = fresh(t0, config);
        restarted.handle(t0, welcome(me.clone(), None));
        restarted.handle(t0, tags(true));
        let restart = restarted.poll_timeout().unwrap();
        restarted.handle_timeout(restart);
        assert_eq!(next_message(&mut restarted), Some(ClientMessage::RestartRequest));
        restarted.handle(restart, tags(false));
        assert_eq!(restarted.stats().deaths, 1);
        assert_eq!(restarted.stats().deaths_forgotten_by_server, 0);
    }

    /// A possession that arrives while the client is still dead (a join placing it with a dead
    /// pawn while its restart is on the way) is not the respawn: the respawn is counted at the
    /// possession after the tags that say alive, so deaths stay balanced.
    #[test]
    fn a_possession_while_still_dead_is_not_counted_as_the_respawn() {
        let t0 = Instant::now();
        let me = PlayerId::new("sim-0000").unwrap();
        let tags = |dead: bool| own_tags(&me, dead);
        let config = restarting_after_death();
        let mut s = fresh(t0, config);
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, tags(true));
        let restart = s.poll_timeout().unwrap();
        s.handle_timeout(restart);
        assert_eq!(next_message(&mut s), Some(ClientMessage::RestartRequest));
        s.handle(restart, own_pawn(4, &me, "harbor"));
        s.handle(restart, ServerMessage::Possessed { pawn_id: PawnId(4) });
        assert_eq!(s.stats().respawns, 0, "still dead: not the respawn");
        s.handle(restart, tags(false));
        s.handle(restart, own_pawn(5, &me, "harbor"));
        s.handle(restart, ServerMessage::Possessed { pawn_id: PawnId(5) });
        let stats = s.stats();
        assert_eq!((stats.deaths, stats.respawns, stats.deaths_forgotten_by_server), (1, 1, 0));
    }

    /// Protocol version 5 (the response timeout of docs/spec/transitions.md T9): `ShowTransition`
    /// is answered at once, before any streaming, and only once per transition (a second
    /// `ShowTransition` of the same id is not answered again).
    #[test]
    fn it_answers_show_transition_at_once_before_streaming() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        assert_eq!(next_message(&mut s), None, "FreezeCharacters is not answered");
        s.handle(t0, show(1));
        assert_eq!(
            drain(&mut s),
            [ClientMessage::TransitionShown { transition_id: TransitionId(1) }]
        );
        s.handle(t0, show(2));
        assert_eq!(
            drain(&mut s),
            [ClientMessage::TransitionShown { transition_id: TransitionId(2) }]
        );
        s.handle(t0, show(1));
        assert_eq!(drain(&mut s), [], "a superseded transition is not answered");
    }

    #[test]
    fn it_reports_ready_for_the_shown_transition_after_streaming() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, welcome(PlayerId::new("me").unwrap(), None));
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(t0, show(1));
        assert_eq!(
            next_message(&mut s),
            Some(ClientMessage::TransitionShown { transition_id: TransitionId(1) })
        );
        let at = s.poll_timeout().unwrap();
        assert!(at >= t0 + Duration::from_millis(50) && at <= t0 + Duration::from_millis(250));
        s.handle_timeout(at);
        assert_eq!(
            next_message(&mut s),
            Some(ClientMessage::TransitionReady { transition_id: TransitionId(1) })
        );
    }

    /// A transition to a dungeon: the rooms stream after the levels, before the ready report
    /// (docs/protocol.md 5, `ShowTransition`).
    #[test]
    fn it_streams_a_transitions_rooms_after_its_levels_before_reporting_ready() {
        let t0 = Instant::now();
        let fixed = Duration::from_millis(100);
        let mut s =
            fresh(t0, SessionConfig { stream_time: (fixed, fixed), ..SessionConfig::default() });
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(
            t0,
            ServerMessage::ShowTransition {
                transition_id: TransitionId(1),
                target_node: NodeId::new("crypt").unwrap(),
                levels: vec![LevelName::new("crypt_gate").unwrap()],
                rooms: vec![LevelName::new("crypt_hall").unwrap()],
            },
        );
        assert_eq!(s.poll_timeout(), Some(t0 + 2 * fixed), "levels, then rooms");
    }

    #[test]
    fn a_supersede_keeps_the_screen_and_reports_only_the_new_id() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, welcome(PlayerId::new("me").unwrap(), None));
        s.handle(t0, show(1));
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(2) });
        assert!(s.is_loading());
        assert_eq!(s.poll_timeout(), None, "old streaming dropped");
        s.handle(t0, show(2));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert!(s.is_loading(), "a stale end never drops the newer screen");
        s.handle_timeout(t0 + Duration::from_secs(1));
        let shown = |id| ClientMessage::TransitionShown { transition_id: TransitionId(id) };
        assert_eq!(next_message(&mut s), Some(shown(1)));
        assert_eq!(next_message(&mut s), Some(shown(2)));
        assert_eq!(
            next_message(&mut s),
            Some(ClientMessage::TransitionReady { transition_id: TransitionId(2) })
        );
        assert_eq!(s.stats().transitions_superseded, 1);
    }

    /// `ended_before_placed` once transition 1 ended before the client was placed and `next`
    /// came after it (nothing is counted before `next`: a join of the client's own may follow).
    fn ended_before_placed_after(next: ServerMessage) -> u64 {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, show(1));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert_eq!(s.stats().ended_before_placed, 0, "a join of its own may follow");
        s.handle(t0, next);
        s.stats().ended_before_placed
    }

    #[test]
    fn an_end_before_the_pawn_was_acknowledged_is_counted() {
        assert_eq!(ended_before_placed_after(show(2)), 1, "no join of its own followed");
    }

    /// An end once placed, and a stale end of a superseded transition while not placed, are not
    /// ends before placement, whatever follows them.
    #[test]
    fn a_placed_end_and_a_stale_end_are_not_counted() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, show(1));
        s.handle_timeout(t0 + Duration::from_millis(100));
        s.handle(t0, own_pawn(3, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(3) });
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        s.handle(t0, show(2));
        s.handle(t0, show(3));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(2) });
        s.handle(t0, ServerMessage::PlayerLeft { player_id: PlayerId::new("other").unwrap() });
        assert_eq!(s.stats().ended_before_placed, 0);
    }

    /// The same when the end is the session's last message (found by review): the screen
    /// dropped with no pawn, and no join came before the session ended.
    #[test]
    fn an_end_before_placement_as_the_last_message_is_counted() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, show(1));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert_eq!(s.finish(t0 + Duration::from_secs(1)).ended_before_placed, 1);
    }

    /// docs/spec/sessions.md S7: a player who logged in while the transition waited for its clients
    /// is not waited for; the end is followed at once by a join of its own (docs/protocol.md 4.2).
    #[test]
    fn an_end_before_placement_followed_by_a_join_of_its_own_is_not_counted() {
        let join = ServerMessage::ShowJoin {
            join_id: JoinId(1),
            node: NodeId::new("harbor").unwrap(),
            levels: Vec::new(),
            rooms: Vec::new(),
        };
        assert_eq!(ended_before_placed_after(join), 0);
    }

    #[test]
    fn possession_is_acknowledged_and_the_client_is_placed_after_the_end() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, show(1));
        s.handle(
            t0,
            ServerMessage::PawnSpawned(PawnView {
                pawn_id: PawnId(5),
                owner: me.clone(),
                character_def: CharacterDef::new("Vanguard").unwrap(),
                node: NodeId::new("harbor").unwrap(),
                alive: true,
            }),
        );
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(5) });
        assert_eq!(
            drain(&mut s),
            [
                ClientMessage::TransitionShown { transition_id: TransitionId(1) },
                ClientMessage::PossessionAcknowledged { pawn_id: PawnId(5) }
            ]
        );
        assert!(!s.is_placed(), "screen still up");
        s.handle(
            t0 + Duration::from_millis(300),
            ServerMessage::EndTransition { transition_id: TransitionId(1) },
        );
        assert!(s.is_placed());
        assert_eq!(s.stats().ended_before_placed, 0);
        assert_eq!(s.stats().timings.shown_to_ended.summary().max_us / 1000, 300);
        assert!(s.has_game_side_work(), "the game side's share waits for run_game_side");
        s.run_game_side();
        assert!(!s.has_game_side_work());
        assert_eq!(s.pawns_owned_by(&me), 1);
    }

    fn own_pawn(pawn: u64, owner: &PlayerId, node: &str) -> ServerMessage {
        ServerMessage::PawnSpawned(PawnView {
            pawn_id: PawnId(pawn),
            owner: owner.clone(),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: NodeId::new(node).unwrap(),
            alive: true,
        })
    }

    /// The session checks see every message: an own pawn off the destination on screen, a second
    /// live pawn and a kit granted twice are counted, each with an error.
    #[test]
    fn broken_server_promises_are_counted_by_the_session_checks() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me.clone(), harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle_timeout(t0 + Duration::from_secs(1));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        assert_eq!((s.stats().spawns_at_stale_node, s.stats().double_pawns), (0, 0));
        assert_eq!(s.stats().pawns_on_unloaded_node, 0, "harbor was streamed in the join");
        s.handle(t0, show(1));
        s.handle(t0, own_pawn(2, &me, "crypt"));
        assert_eq!(s.stats().spawns_at_stale_node, 1, "the destination on screen is harbor");
        assert_eq!(s.stats().pawns_on_unloaded_node, 1, "and nothing is streamed for it yet");
        assert_eq!(s.stats().double_pawns, 1, "pawns 1 and 2 both live");
        let kit = gatehouse_tags::catalog::STATE_DEAD;
        s.handle(t0, ServerMessage::KitsGranted { kits: vec![kit] });
        s.handle(t0, ServerMessage::KitsGranted { kits: vec![kit] });
        assert_eq!(s.stats().double_grants, 1);
        assert_eq!(s.stats().errors.len(), 4, "{:?}", s.stats().errors);
    }

    /// `message` as a version 9 server sends it: in a `Replicated` batch (docs/protocol.md 4.4).
    fn batched(messages: impl IntoIterator<Item = ServerMessage>) -> ServerMessage {
        let changes = messages.into_iter().map(|m| ReplicatedChange::from_message(m).unwrap());
        ServerMessage::Replicated { changes: changes.collect() }
    }

    /// docs/protocol.md 4.4: the checks judge each change of a batch as its own message, with
    /// what the client knew right before it, thin or full: an own pawn off the destination on
    /// screen, a second live pawn and an own pawn teleported off it are counted; another
    /// player's pawn in the same batch is none of them.
    #[test]
    fn the_checks_judge_each_change_of_a_batch_as_its_own_message() {
        let t0 = Instant::now();
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        for full in [false, true] {
            let mut s = fresh(t0, SessionConfig { full, ..SessionConfig::default() });
            s.handle(t0, welcome(me.clone(), Some(NodeId::new("harbor").unwrap())));
            s.handle(t0, join(1, "harbor", 0));
            s.handle_timeout(t0 + Duration::from_secs(1));
            s.handle(t0, batched([own_pawn(1, &me, "harbor"), own_pawn(5, &you, "crypt")]));
            s.run_game_side();
            assert!(s.stats().errors.is_empty(), "{:?}", s.stats().errors);
            assert_eq!(s.pawns_owned_by(&me), 1, "full {full}");
            s.handle(t0, show(1));
            let crypt = NodeId::new("crypt").unwrap();
            let teleported = ServerMessage::PawnsTeleported {
                node: crypt,
                pawn_ids: PawnIdRuns::from_ids([PawnId(1)]),
            };
            s.handle(t0, batched([own_pawn(2, &me, "crypt"), teleported]));
            let stats = s.stats();
            assert_eq!(stats.spawns_at_stale_node, 2, "full {full}: pawn 2, then pawn 1 moved");
            assert_eq!(stats.double_pawns, 1, "full {full}: pawns 1 and 2 both live");
        }
    }

    /// docs/protocol.md 4.5: a snapshot is checked and observed as the messages it stands for:
    /// another player's pawn in it is the one a stale-ids client acknowledges wrongly.
    #[test]
    fn a_snapshot_is_observed_as_the_messages_it_stands_for() {
        let t0 = Instant::now();
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        let mut s = misbehaving(t0, Misbehaviour::StaleIds);
        s.handle(t0, welcome(me.clone(), None));
        let view = gatehouse_protocol::PlayerStateView {
            player_id: you.clone(),
            team: None,
            character_def: None,
        };
        let ServerMessage::PawnSpawned(pawn) = own_pawn(7, &you, "harbor") else { unreachable!() };
        let mut builder = gatehouse_protocol::SnapshotBuilder::new(65_536);
        let pawns = [pawn];
        builder.add(SnapshotEntry { player: &view, tags: &[], health: None, pawns: &pawns });
        for snapshot in builder.finish() {
            s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot)));
        }
        s.handle(t0, own_pawn(8, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(8) });
        let ack = |id| ClientMessage::PossessionAcknowledged { pawn_id: PawnId(id) };
        assert_eq!(drain(&mut s), [ack(7), ack(8 + (1 << 40)), ack(8)]);
    }

    /// docs/protocol.md 4.5: a relaunch within a replication interval finds its older
    /// connection's pawn in the snapshot it is greeted with, then that pawn's `PawnDestroyed`;
    /// it is the world as it stood, not a pawn landing before its level, and the pawn of the
    /// join that follows is the client's one live pawn.
    #[test]
    fn an_own_pawn_in_a_relaunchs_snapshot_is_no_landing() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        for full in [false, true] {
            let mut s = fresh(t0, SessionConfig { full, ..SessionConfig::default() });
            s.handle(t0, welcome(me.clone(), Some(NodeId::new("harbor").unwrap())));
            let view = gatehouse_protocol::PlayerStateView {
                player_id: me.clone(),
                team: None,
                character_def: None,
            };
            let ServerMessage::PawnSpawned(older) = own_pawn(7, &me, "harbor") else {
                unreachable!()
            };
            let mut builder = gatehouse_protocol::SnapshotBuilder::new(65_536);
            let pawns = [older];
            builder.add(SnapshotEntry { player: &view, tags: &[], health: None, pawns: &pawns });
            for snapshot in builder.finish() {
                s.handle(t0, ServerMessage::WorldSnapshot(Box::new(snapshot)));
            }
            s.handle(t0, batched([ServerMessage::PawnDestroyed { pawn_id: PawnId(7) }]));
            placed_by_join(&mut s, t0, &me, 2, 8);
            assert!(s.is_placed(), "full {full}");
            let stats = s.stats();
            assert_eq!((stats.pawns_on_unloaded_node, stats.double_pawns), (0, 0), "full {full}");
            assert!(stats.errors.is_empty(), "full {full}: {:?}", stats.errors);
            // The same pawn spawned live, not in a snapshot, before its level is counted.
            let mut s = fresh(t0, SessionConfig { full, ..SessionConfig::default() });
            s.handle(t0, welcome(me.clone(), Some(NodeId::new("harbor").unwrap())));
            s.handle(t0, own_pawn(7, &me, "harbor"));
            assert_eq!(s.stats().pawns_on_unloaded_node, 1, "full {full}");
        }
    }

    /// docs/client.md, "Events", 6: the own death in a batch reaches the figures and the restart,
    /// thin (its session gives only the own player's world events) or full.
    #[test]
    fn an_own_death_in_a_batch_reaches_the_figures_and_the_restart() {
        let t0 = Instant::now();
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        for full in [false, true] {
            let mut s = fresh(t0, SessionConfig { full, ..restarting_after_death() });
            s.handle(t0, welcome(me.clone(), None));
            s.handle(t0, batched([own_tags(&you, true), own_tags(&me, true)]));
            assert_eq!(s.stats().deaths, 1, "full {full}");
            let restart = t0 + Duration::from_millis(500);
            assert_eq!(s.poll_timeout(), Some(restart), "full {full}");
            s.handle_timeout(restart);
            assert_eq!(drain(&mut s), [ClientMessage::RestartRequest], "full {full}");
        }
    }

    /// docs/spec/travel.md V3, V4: a death follows the player to another server, counted once;
    /// its restart is asked of the server played on, and only once that server says the player
    /// is dead (a destination knows it once the traveller's save loaded), never of the one left.
    #[test]
    fn a_death_moves_with_the_player_and_its_restart_is_asked_where_it_plays() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        let mut s = fresh(t0, restarting_after_death());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, batched([own_tags(&me, true)]));
        assert_eq!(s.stats().deaths, 1);
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(t0, travel_to(1));
        let outputs: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        let destination = outputs.iter().find_map(|o| match o {
            Output::Dial { link, .. } => Some(*link),
            _ => None,
        });
        let destination = destination.expect("the destination dialled");
        let t1 = t0 + Duration::from_millis(100);
        s.handle_on(t1, destination, welcome(me.clone(), None));
        let sent: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        let restarts = |outputs: &[Output]| {
            outputs
                .iter()
                .filter(|o| {
                    matches!(o, Output::Send { message: ClientMessage::RestartRequest, .. })
                })
                .count()
        };
        assert_eq!(restarts(&sent), 0);
        // Nothing is asked before the destination says the player is dead.
        s.handle_timeout(t1 + Duration::from_secs(1));
        let early: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        assert_eq!(restarts(&early), 0, "the destination does not know the death yet");
        let t2 = t1 + Duration::from_secs(1);
        s.handle_on(t2, destination, batched([own_tags(&me, true)]));
        assert_eq!(s.stats().deaths, 1, "the same death, counted once");
        let restart = t2 + Duration::from_millis(500);
        assert_eq!(s.poll_timeout(), Some(restart));
        s.handle_timeout(restart);
        let asked: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        let on_destination = asked.iter().any(|o| {
            matches!(o, Output::Send { link, message: ClientMessage::RestartRequest } if *link == destination)
        });
        assert!(on_destination, "asked of the destination: {asked:?}");
    }

    /// `TravelTo` for transition `id`, to `isle` on 127.0.0.1:7778.
    fn travel_to(id: u64) -> ServerMessage {
        ServerMessage::TravelTo(Box::new(gatehouse_protocol::TravelTo {
            transition_id: TransitionId(id),
            node: NodeId::new("isle").unwrap(),
            address: "127.0.0.1:7778".into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            ticket: "a.b.c".into(),
            valid_ms: 10_000,
        }))
    }

    /// A player that died, moved, was granted its respawn at the destination but came back to
    /// the source (the destination closed) before that respawn's possession is dead again
    /// there: it asks the source for a restart, and every death has its respawn.
    #[test]
    fn a_respawn_granted_at_a_destination_left_before_its_possession_keeps_deaths_balanced() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        let mut s = fresh(t0, restarting_after_death());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, batched([own_tags(&me, true)]));
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(t0, travel_to(1));
        let destination = std::iter::from_fn(|| s.poll_output())
            .find_map(|o| match o {
                Output::Dial { link, .. } => Some(link),
                _ => None,
            })
            .expect("the destination dialled");
        let t1 = t0 + Duration::from_millis(100);
        s.handle_on(t1, destination, welcome(me.clone(), None));
        s.handle_on(t1, destination, batched([own_tags(&me, true)]));
        let asked_at = t1 + Duration::from_millis(500);
        s.handle_timeout(asked_at);
        // The destination grants it, then closes before the respawn's possession.
        s.handle_on(asked_at, destination, batched([own_tags(&me, false)]));
        let closing = ServerMessage::Closing {
            code: gatehouse_protocol::CloseCode::ShuttingDown as u32,
            reason: "bye".into(),
        };
        s.handle_on(asked_at, destination, closing);
        assert_eq!(s.stats().deaths, 2, "back at the source, the player is dead again");
        assert!(s.is_dead_or_respawning());
        let _: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        let again = s.poll_timeout().expect("a restart is asked of the source");
        s.handle_timeout(again);
        let asked: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
        let of_source = asked.iter().any(|o| {
            matches!(o, Output::Send { link, message: ClientMessage::RestartRequest } if *link == LinkId::FIRST)
        });
        assert!(of_source, "asked of the source: {asked:?}");
        s.handle(again, batched([own_tags(&me, false)]));
        s.handle(again, ServerMessage::Possessed { pawn_id: PawnId(9) });
        let stats = s.stats();
        assert_eq!(
            stats.deaths,
            stats.respawns + stats.deaths_forgotten_by_server,
            "every death has its respawn: {} deaths, {} respawns",
            stats.deaths,
            stats.respawns
        );
        assert!(!s.is_dead_or_respawning());
    }

    /// Join `join_id` on harbor from `now`: streamed, pawn `pawn` spawned and possessed, the
    /// join ended; returns when the client was placed.
    fn placed_by_join(
        s: &mut ClientSession,
        now: Instant,
        me: &PlayerId,
        join_id: u64,
        pawn: u64,
    ) -> Instant {
        s.handle(now, join(join_id, "harbor", 0));
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
        s.handle(at, own_pawn(pawn, me, "harbor"));
        s.handle(at, ServerMessage::Possessed { pawn_id: PawnId(pawn) });
        s.handle(at, ServerMessage::EndJoin { join_id: JoinId(join_id) });
        at
    }

    fn join(id: u64, node: &str, rooms: usize) -> ServerMessage {
        ServerMessage::ShowJoin {
            join_id: JoinId(id),
            node: NodeId::new(node).unwrap(),
            levels: vec![LevelName::new("harbor_docks").unwrap()],
            rooms: (0..rooms).map(|i| LevelName::new(format!("room_{i}")).unwrap()).collect(),
        }
    }

    /// docs/spec/sessions.md S5: a join raises the screen, streams its levels then its rooms,
    /// reports `JoinReady`, and drops the screen at its end, once the pawn is acknowledged; the
    /// pawn is on the node it streamed.
    #[test]
    fn a_join_streams_then_reports_and_its_end_drops_the_screen() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, join(4, "harbor", 1));
        assert!(s.is_loading() && s.is_joining());
        let at = s.poll_timeout().unwrap();
        assert!(at >= t0 + Duration::from_millis(100), "levels, then rooms");
        s.handle_timeout(at);
        assert_eq!(next_message(&mut s), Some(ClientMessage::JoinReady { join_id: JoinId(4) }));
        assert_eq!(s.streamed_node(), Some(&NodeId::new("harbor").unwrap()));
        s.handle(at, own_pawn(7, &me, "harbor"));
        s.handle(at, ServerMessage::Possessed { pawn_id: PawnId(7) });
        s.handle(at, ServerMessage::EndJoin { join_id: JoinId(4) });
        assert!(s.is_placed());
        assert_eq!(s.stats().pawns_on_unloaded_node, 0);
        assert_eq!(s.stats().ended_before_placed, 0);
        assert!(s.stats().errors.is_empty(), "{:?}", s.stats().errors);
    }

    /// A teleport of many pawns counts only the client's own pawn, and only when the node it
    /// lands on is not streamed: the others' pawns in the set are none of its business.
    #[test]
    fn an_own_pawn_teleported_among_others_before_its_level_is_counted_once() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), Some(NodeId::new("harbor").unwrap())));
        let at = placed_by_join(&mut s, t0, &me, 1, 7);
        let teleport =
            |node: &str, ids: std::ops::RangeInclusive<u64>| ServerMessage::PawnsTeleported {
                node: NodeId::new(node).unwrap(),
                pawn_ids: PawnIdRuns::from_ids(ids.map(PawnId)),
            };
        s.handle(at, teleport("harbor", 1..=4_000));
        assert_eq!(s.stats().pawns_on_unloaded_node, 0, "harbor is streamed");
        s.handle(at, teleport("forest", 8..=4_000));
        assert_eq!(s.stats().pawns_on_unloaded_node, 0, "only the others' pawns");
        s.handle(at, teleport("forest", 1..=4_000));
        assert_eq!(s.stats().pawns_on_unloaded_node, 1, "its own pawn, once");
    }

    /// A pawn possessed before the client streamed its node is counted: a pawn before its level.
    #[test]
    fn a_pawn_before_its_level_is_counted() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me.clone(), harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        assert_eq!(s.stats().pawns_on_unloaded_node, 1);
    }

    /// A stale end is ignored silently; an end for a transition never shown is an error and
    /// leaves the screen up.
    #[test]
    fn only_an_end_for_a_transition_never_shown_is_an_error() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, show(2));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert!(s.stats().errors.is_empty());
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(3) });
        assert!(s.is_loading());
        assert_eq!(s.stats().errors.len(), 1, "{:?}", s.stats().errors);
        assert!(s.stats().errors[0].contains("never shown"));
    }

    fn thin(t0: Instant) -> ClientSession {
        fresh(t0, SessionConfig { full: false, ..SessionConfig::default() })
    }

    /// A thin session has no game side and still does every protocol duty: it streams, reports
    /// ready, acknowledges its pawn and is placed at the end.
    #[test]
    fn a_thin_session_follows_a_transition_without_a_game_side() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        assert!(!s.is_full() && s.game_side().is_none());
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(t0, show(1));
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
        assert_eq!(
            drain(&mut s),
            [
                ClientMessage::TransitionShown { transition_id: TransitionId(1) },
                ClientMessage::TransitionReady { transition_id: TransitionId(1) }
            ]
        );
        s.handle(at, own_pawn(3, &me, "harbor"));
        s.handle(at, ServerMessage::Possessed { pawn_id: PawnId(3) });
        assert_eq!(
            next_message(&mut s),
            Some(ClientMessage::PossessionAcknowledged { pawn_id: PawnId(3) })
        );
        s.handle(at, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert!(s.is_placed());
        assert_eq!(s.pawns_owned_by(&me), 1);
        assert!(s.stats().problems().is_empty(), "{:?}", s.stats().problems());
    }

    /// The session checks keep their own account of the own pawns, so a thin client counts a
    /// second live pawn (and a dead one does not count as live).
    #[test]
    fn a_thin_session_counts_two_live_own_pawns() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me.clone(), harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle_timeout(t0 + Duration::from_secs(1));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        s.handle(t0, ServerMessage::PawnDied { pawn_id: PawnId(1) });
        s.handle(t0, own_pawn(2, &me, "harbor"));
        assert_eq!(s.stats().double_pawns, 0, "pawn 1 is dead");
        s.handle(t0, own_pawn(3, &me, "harbor"));
        assert_eq!(s.stats().double_pawns, 1, "pawns 2 and 3 both live");
        s.handle(t0, ServerMessage::PawnDestroyed { pawn_id: PawnId(1) });
        assert_eq!(s.pawns_owned_by(&me), 2);
    }

    /// Ids never go backwards. A transition id below one shown, a join id below one shown, and a
    /// new own pawn whose id is not above the last are each counted with an error; the same id
    /// again (`FreezeCharacters` then `ShowTransition`) is not.
    #[test]
    fn ids_going_backwards_are_counted() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, join(5, "harbor", 0));
        s.handle(t0, join(4, "harbor", 0));
        assert_eq!(s.stats().ids_backwards, 1, "join 4 after join 5");
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(3) });
        s.handle(t0, show(3));
        assert_eq!(s.stats().ids_backwards, 1, "the same transition twice is not backwards");
        s.handle(t0, show(2));
        assert_eq!(s.stats().ids_backwards, 2, "transition 2 after 3");
        s.handle(t0, own_pawn(9, &me, "harbor"));
        s.handle(t0, ServerMessage::PawnDestroyed { pawn_id: PawnId(9) });
        s.handle(t0, own_pawn(8, &me, "harbor"));
        assert_eq!(s.stats().ids_backwards, 3, "own pawn 8 after own pawn 9");
        assert!(s.stats().errors.iter().filter(|e| e.contains("backwards")).count() == 3);
    }

    /// Each phase of a transition is timed as the client sees it, in µs: shown -> ready sent,
    /// ready -> possessed, possessed -> ended and shown -> ended; the screen is kept for the run's
    /// picture with the same instants.
    #[test]
    fn the_phases_of_a_transition_are_timed_as_the_client_sees_them() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let config = SessionConfig { stream_time: (ms(100), ms(100)), ..SessionConfig::default() };
        let mut s = fresh(t0, SessionConfig { full: false, ..config });
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, ServerMessage::FreezeCharacters { transition_id: TransitionId(1) });
        s.handle(t0, show(1));
        s.handle_timeout(t0 + ms(100));
        s.handle(t0 + ms(150), own_pawn(3, &me, "harbor"));
        s.handle(t0 + ms(150), ServerMessage::Possessed { pawn_id: PawnId(3) });
        s.handle(t0 + ms(300), ServerMessage::EndTransition { transition_id: TransitionId(1) });
        let timings = &s.stats().timings;
        let millis = |m: &crate::figures::Micros| m.summary().p50_us / 1000;
        assert_eq!(millis(&timings.shown_to_ready_sent), 100);
        assert_eq!(millis(&timings.ready_to_possessed), 50);
        assert_eq!(millis(&timings.possessed_to_ended), 150);
        assert_eq!(millis(&timings.shown_to_ended), 300);
        let screens = &s.stats().screens;
        assert_eq!(screens.len(), 1);
        assert_eq!(screens[0].ready_sent, Some(t0 + ms(100)));
        assert_eq!(screens[0].possessed, Some(t0 + ms(150)));
        assert_eq!(screens[0].ended, Some(t0 + ms(300)));
    }

    /// A kept pawn teleported into the destination stands in for its possession in the timings.
    #[test]
    fn a_kept_pawns_teleport_times_its_placement() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let config = SessionConfig { stream_time: (ms(10), ms(10)), ..SessionConfig::default() };
        let mut s = fresh(t0, SessionConfig { full: false, ..config });
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me.clone(), harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle_timeout(t0 + ms(10));
        s.handle(t0 + ms(10), own_pawn(3, &me, "harbor"));
        s.handle(t0 + ms(10), ServerMessage::Possessed { pawn_id: PawnId(3) });
        s.handle(t0 + ms(10), ServerMessage::EndJoin { join_id: JoinId(1) });
        s.handle(t0 + ms(20), show(2));
        s.handle_timeout(t0 + ms(30));
        let teleport = ServerMessage::PawnsTeleported {
            node: NodeId::new("harbor").unwrap(),
            pawn_ids: PawnIdRuns::from_ids([PawnId(3)]),
        };
        s.handle(t0 + ms(50), teleport);
        s.handle(t0 + ms(60), ServerMessage::EndTransition { transition_id: TransitionId(2) });
        let timings = &s.stats().timings;
        assert_eq!(timings.ready_to_possessed.summary().p50_us / 1000, 20);
        assert_eq!(timings.possessed_to_ended.summary().p50_us / 1000, 10);
        assert_eq!(s.stats().screens.len(), 2, "the join's screen and the transition's");
        assert!(s.stats().problems().is_empty(), "{:?}", s.stats().problems());
    }

    /// A screen still up when the session ends (a relaunch, a lost connection, the run's end)
    /// stops there in the run's picture, and counts in no timing.
    #[test]
    fn a_screen_cut_by_the_sessions_end_stops_there() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        s.handle(t0, show(1));
        let end = t0 + Duration::from_secs(2);
        let stats = s.finish(end);
        assert_eq!(stats.screens.len(), 1);
        assert_eq!(stats.screens[0].ended, Some(end));
        assert_eq!(stats.timings.shown_to_ended.count(), 0);
    }

    /// The dial-to-handshake time the shell measures is counted apart from the dial-to-`Welcome`
    /// time, each in its own timing.
    #[test]
    fn the_handshake_time_the_shell_measures_is_counted_apart_from_the_welcome() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        s.record_connect_to_handshake(Duration::from_millis(7));
        s.record_connect_to_welcome(Duration::from_millis(12));
        let timings = &s.stats().timings;
        assert_eq!(timings.connect_to_handshake.summary().count, 1);
        assert_eq!(timings.connect_to_handshake.summary().p50_us / 1000, 7);
        assert_eq!(timings.connect_to_welcome.summary().p50_us / 1000, 12);
    }

    /// A message that records an error puts an error mark on the run's picture; one that
    /// records none does not. The dial-to-`Welcome` time the shell measures is counted.
    #[test]
    fn an_error_is_marked_for_the_picture_and_a_clean_message_is_not() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me, None));
        s.record_connect_to_welcome(Duration::from_millis(12));
        assert!(s.stats().marks.is_empty());
        assert_eq!(s.stats().timings.connect_to_welcome.summary().p50_us / 1000, 12);
        let later = t0 + Duration::from_millis(5);
        s.handle(later, ServerMessage::EndTransition { transition_id: TransitionId(3) });
        assert_eq!(s.stats().marks, [(later, MarkKind::Error)]);
    }

    /// A full session has a game side and says so; a thin one knows only its own pawns, so it
    /// counts none for another player.
    #[test]
    fn only_a_full_session_has_a_game_side() {
        let t0 = Instant::now();
        let full = fresh(t0, SessionConfig::default());
        assert!(full.is_full() && full.game_side().is_some());
        let mut s = thin(t0);
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        assert_eq!((s.pawns_owned_by(&me), s.pawns_owned_by(&you)), (1, 0));
    }

    /// An own pawn teleported onto a node other than the destination on screen is counted; a
    /// teleport of another player's pawn is none of this client's checks.
    #[test]
    fn only_an_own_pawns_teleport_is_checked() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me.clone(), harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle_timeout(t0 + Duration::from_secs(1));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        s.handle(t0, own_pawn(2, &you, "harbor"));
        s.handle(t0, show(2));
        let crypt = NodeId::new("crypt").unwrap();
        let teleported = |pawn| ServerMessage::PawnsTeleported {
            node: crypt.clone(),
            pawn_ids: PawnIdRuns::from_ids([PawnId(pawn)]),
        };
        s.handle(t0, teleported(2));
        assert_eq!(s.stats().spawns_at_stale_node, 0, "another player's pawn");
        s.handle(t0, teleported(1));
        assert_eq!(s.stats().spawns_at_stale_node, 1, "the own pawn, off the destination");
        let pawn_ids = PawnIdRuns::from_ids([PawnId(2), PawnId(1)]);
        let both = ServerMessage::PawnsTeleported { node: crypt, pawn_ids };
        s.handle(t0, both);
        assert_eq!(s.stats().spawns_at_stale_node, 2, "the own pawn found inside a batch");
    }

    /// A `Rejected` from the server is an error of the session, with its reason and detail.
    #[test]
    fn a_rejection_is_an_error_of_the_session() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let reason = gatehouse_protocol::RejectReason::ServerFull;
        s.handle(t0, ServerMessage::Rejected { reason, detail: "full up".into() });
        let errors = &s.stats().errors;
        assert!(
            errors.iter().any(|e| e.contains("ServerFull") && e.contains("full up")),
            "{errors:?}"
        );
    }

    /// docs/spec/sessions.md S5, from the client's side: a join's end names the join on screen and
    /// comes once the client is placed. An end before placement is counted; an end of a join that
    /// is no longer on screen (superseded) is stale and ignored, as is one while only a
    /// transition's screen is up; an end with nothing on screen is an error. The same join id shown
    /// again is not an id going backwards.
    #[test]
    fn join_ends_are_checked_against_the_join_on_screen() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        s.handle(t0, welcome(me, harbor));
        s.handle(t0, join(1, "harbor", 0));
        s.handle(t0, join(1, "harbor", 0));
        assert_eq!(s.stats().ids_backwards, 0, "the same join again is not backwards");
        s.handle(t0, join(2, "harbor", 0));
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(1) });
        assert_eq!(s.stats().ended_before_placed, 0, "join 1 is not the one on screen");
        assert!(s.stats().errors.is_empty(), "{:?}", s.stats().errors);
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(2) });
        assert_eq!(s.stats().ended_before_placed, 1, "join 2 ended before its pawn was placed");
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(2) });
        let errors = s.stats().errors.clone();
        assert!(
            errors.iter().any(|e| e.contains("EndJoin 2 with no join on screen")),
            "{errors:?}"
        );
        s.handle(t0, show(3));
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(2) });
        assert_eq!(s.stats().errors.len(), errors.len(), "a stale end under a transition's screen");
        assert_eq!(s.stats().ended_before_placed, 1);
    }

    /// A kit granted once is no double grant; a server `Error` is an error of the session.
    #[test]
    fn single_grants_pass_and_server_errors_are_counted() {
        let t0 = Instant::now();
        let mut s = thin(t0);
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me, None));
        let kit = gatehouse_tags::catalog::STATE_DEAD;
        s.handle(t0, ServerMessage::KitsGranted { kits: vec![kit] });
        assert_eq!(s.stats().double_grants, 0);
        assert!(s.stats().errors.is_empty());
        let code = gatehouse_protocol::ErrorCode::UnknownPawn;
        s.handle(t0, ServerMessage::Error { code, detail: "no such pawn".into() });
        let errors = &s.stats().errors;
        assert!(
            errors.iter().any(|e| e.contains("UnknownPawn") && e.contains("no such pawn")),
            "{errors:?}"
        );
    }

    fn misbehaving(t0: Instant, kind: Misbehaviour) -> ClientSession {
        let config = SessionConfig { full: false, misbehaviour: Some(kind), ..Default::default() };
        fresh(t0, config)
    }

    fn drain(s: &mut ClientSession) -> Vec<ClientMessage> {
        std::iter::from_fn(|| next_message(s)).collect()
    }

    /// A restart-spam client sends `RestartRequest` from its `Welcome` on, every 20 ms, alive as it
    /// is, and says when the next one is due.
    #[test]
    fn a_restart_spammer_requests_restarts_every_twenty_ms_while_alive() {
        let t0 = Instant::now();
        let mut s = misbehaving(t0, Misbehaviour::RestartSpam);
        let welcome_deadline = s.poll_timeout();
        assert!(welcome_deadline > Some(t0 + RESTART_SPAM_EVERY), "no spam before Welcome");
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me, None));
        assert_eq!(s.poll_timeout(), Some(t0));
        s.handle_timeout(t0);
        assert_eq!(s.poll_timeout(), Some(t0 + RESTART_SPAM_EVERY));
        s.handle_timeout(t0 + RESTART_SPAM_EVERY);
        assert_eq!(drain(&mut s), [ClientMessage::RestartRequest, ClientMessage::RestartRequest]);
    }

    /// A stale-ids client reports ready for the previous transition and for one never started,
    /// acknowledges another player's pawn and one never issued before its own, and reports a join
    /// never started; its own duties still follow.
    #[test]
    fn a_stale_ids_client_sends_wrong_ids_beside_its_duties() {
        let t0 = Instant::now();
        let mut s = misbehaving(t0, Misbehaviour::StaleIds);
        let (me, you) = (PlayerId::new("me").unwrap(), PlayerId::new("you").unwrap());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, join(4, "harbor", 0));
        assert_eq!(drain(&mut s), [ClientMessage::JoinReady { join_id: JoinId(1004) }]);
        s.handle(t0, show(1));
        let ready = |id| ClientMessage::TransitionReady { transition_id: TransitionId(id) };
        let shown = |id| ClientMessage::TransitionShown { transition_id: TransitionId(id) };
        assert_eq!(drain(&mut s), [shown(1), ready(1001)], "no transition before the first");
        s.handle(t0, show(2));
        assert_eq!(drain(&mut s), [shown(2), ready(1), ready(1002)]);
        s.handle_timeout(t0 + Duration::from_secs(1));
        assert_eq!(drain(&mut s), [ready(2)], "its own report");
        s.handle(t0, own_pawn(7, &you, "harbor"));
        s.handle(t0, own_pawn(8, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(8) });
        let ack = |id| ClientMessage::PossessionAcknowledged { pawn_id: PawnId(id) };
        assert_eq!(drain(&mut s), [ack(7), ack(8 + (1 << 40)), ack(8)]);
    }

    /// A client that never acknowledges sends nothing for its possession and is never placed.
    #[test]
    fn a_never_acknowledging_client_sends_no_acknowledgement() {
        let t0 = Instant::now();
        let mut s = misbehaving(t0, Misbehaviour::NeverAcknowledge);
        let me = PlayerId::new("me").unwrap();
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, own_pawn(3, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(3) });
        assert_eq!(drain(&mut s), []);
        assert!(!s.is_placed());
    }

    /// A transport misbehaviour is due once the client is placed, or 3 s after `Welcome`, and is
    /// handed out once; a well-behaved client never has one.
    #[test]
    fn a_transport_misbehaviour_is_due_once_placed_or_after_three_seconds() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        let harbor = Some(NodeId::new("harbor").unwrap());
        let welcome = welcome(me.clone(), harbor);
        let mut s = misbehaving(t0, Misbehaviour::GarbageFrame);
        assert_eq!(s.take_transport_misbehaviour(t0), None, "nothing before Welcome");
        s.handle(t0, welcome.clone());
        assert_eq!(s.take_transport_misbehaviour(t0), None);
        s.handle(t0, join(1, "harbor", 0));
        s.handle_timeout(t0 + Duration::from_secs(1));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(1) });
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(1) });
        assert!(s.is_placed());
        assert_eq!(s.take_transport_misbehaviour(t0), Some(Misbehaviour::GarbageFrame));
        assert_eq!(s.take_transport_misbehaviour(t0), None, "once");

        let mut s = misbehaving(t0, Misbehaviour::Silent);
        s.handle(t0, welcome.clone());
        assert_eq!(s.poll_timeout(), Some(t0 + TRANSPORT_MISBEHAVIOUR_AFTER));
        assert_eq!(s.take_transport_misbehaviour(t0 + Duration::from_secs(2)), None);
        let due = t0 + TRANSPORT_MISBEHAVIOUR_AFTER;
        assert_eq!(s.take_transport_misbehaviour(due), Some(Misbehaviour::Silent));

        let mut well = thin(t0);
        well.handle(t0, welcome);
        assert_eq!(well.take_transport_misbehaviour(t0 + Duration::from_secs(60)), None);
    }

    /// The figures and the restart follow the session's events: a join and a failed transition
    /// are counted, the server's close is kept, and only the own player's tags count: a death
    /// once, a restart at exactly its delay, and alive tags neither.
    #[test]
    fn the_events_reach_the_figures_and_the_restart() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        let mut s = fresh(t0, restarting_after_death());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, own_tags(&me, false));
        assert_eq!(s.stats().deaths, 0, "alive tags are no death");
        assert_eq!(s.poll_timeout(), None, "no restart due");
        s.handle(t0, own_tags(&PlayerId::new("other").unwrap(), true));
        assert_eq!(s.stats().deaths, 0, "another player's death is not ours");
        s.handle(t0, own_tags(&me, true));
        s.handle(t0 + Duration::from_millis(100), own_tags(&me, true));
        assert_eq!(s.stats().deaths, 1, "one death, told twice");
        let restart = Some(t0 + Duration::from_millis(500));
        assert_eq!(s.poll_timeout(), restart, "500 ms after the death, not after its repeat");
        s.handle(t0, join(3, "harbor", 0));
        assert_eq!(s.stats().joins, 1);
        let failed = ServerMessage::TransitionFailed {
            transition_id: TransitionId(9),
            reason: gatehouse_protocol::TransitionFailure::TimedOut,
            detail: String::new(),
        };
        s.handle(t0, failed);
        assert_eq!(s.stats().transitions_failed, 1);
        s.handle(t0, ServerMessage::Closing { code: 6, reason: "late".into() });
        assert_eq!(s.closing(), Some((6, "late")));
    }

    /// A teleport of another player's pawn during a transition is not this client's placement.
    #[test]
    fn only_the_own_pawns_teleport_times_the_placement() {
        let t0 = Instant::now();
        let me = PlayerId::new("me").unwrap();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, welcome(me.clone(), None));
        s.handle(t0, own_pawn(1, &me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(1) });
        s.handle(t0, show(1));
        let pawn_ids = PawnIdRuns::from_ids([PawnId(7)]);
        let node = NodeId::new("harbor").unwrap();
        s.handle(t0, ServerMessage::PawnsTeleported { node, pawn_ids });
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        let screen = s.stats().screens.last().copied().unwrap();
        assert_eq!(screen.possessed, None, "pawn 7 is not ours");
    }

    /// A transition that ended without placing the client is over even while its screen is
    /// held for the join: an `EndJoin` with no join on screen is an error then.
    #[test]
    fn a_held_screen_is_no_transition_on_screen_for_the_checks() {
        let t0 = Instant::now();
        let mut s = fresh(t0, SessionConfig::default());
        s.handle(t0, welcome(PlayerId::new("me").unwrap(), None));
        s.handle(t0, show(1));
        s.handle(t0, ServerMessage::EndTransition { transition_id: TransitionId(1) });
        assert!(s.is_loading(), "held for the join");
        let errors = s.stats().errors.len();
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(5) });
        assert_eq!(s.stats().errors.len(), errors + 1, "{:?}", s.stats().errors);
    }

    /// Only the transport kinds are ever due on the connection.
    #[test]
    fn a_message_misbehaviour_is_never_due_on_the_transport() {
        let t0 = Instant::now();
        for kind in [Misbehaviour::StaleIds, Misbehaviour::NeverAcknowledge] {
            let mut s = misbehaving(t0, kind);
            s.handle(t0, welcome(PlayerId::new("me").unwrap(), None));
            assert_eq!(s.take_transport_misbehaviour(t0 + Duration::from_secs(60)), None);
        }
    }

    /// A session placed on `harbor` at the source (link 0) through join 5, holding pawn 12 and
    /// kit `kit`, then sent transition 7's move to `crypt` (link 1): its outputs up to the
    /// move's, in order.
    fn moving(t0: Instant, full: bool, me: &PlayerId) -> (ClientSession, Vec<Output>) {
        let mut s = fresh(t0, SessionConfig { full, ..SessionConfig::default() });
        s.handle(t0, welcome(me.clone(), Some(NodeId::new("harbor").unwrap())));
        s.handle(t0, join(5, "harbor", 0));
        s.handle_timeout(t0 + Duration::from_secs(1));
        s.handle(t0, own_pawn(12, me, "harbor"));
        s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(12) });
        s.handle(
            t0,
            ServerMessage::KitsGranted { kits: vec![gatehouse_tags::catalog::STATE_DEAD] },
        );
        s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(5) });
        assert!(s.is_placed());
        while s.poll_output().is_some() {}
        let at = t0 + Duration::from_secs(2);
        s.handle(at, ServerMessage::FreezeCharacters { transition_id: TransitionId(7) });
        let travel = gatehouse_protocol::messages::TravelTo {
            transition_id: TransitionId(7),
            node: NodeId::new("crypt").unwrap(),
            address: "crypt-1.example:7777".into(),
            server_name: "crypt-1.example".into(),
            certificate_sha256: None,
            ticket: "ticket".into(),
            valid_ms: 10_000,
        };
        s.handle(at, ServerMessage::TravelTo(Box::new(travel)));
        let outputs = std::iter::from_fn(|| s.poll_output()).collect();
        (s, outputs)
    }

    /// docs/spec/travel.md V3: a move is one loading screen across two servers, in the figures
    /// and for the checks, thin or full. The destination's ids, pawns and kits are its own (its
    /// join 3 after the source's 5, its pawn 4 beside the source's live 12, the kits it tells
    /// once): nothing goes backwards, no double pawn or grant; its join ends the screen with the
    /// pawn acknowledged there; the source's `Travelled` close is the move's end, not an error.
    /// The screen is one bar, a move's, from the source's freeze to the destination's end, with
    /// the server change marked on it.
    #[test]
    fn a_move_is_one_loading_screen_across_two_servers_for_the_figures_and_the_checks() {
        let me = PlayerId::new("me").unwrap();
        let destination = LinkId(1);
        for full in [false, true] {
            let t0 = Instant::now();
            let (mut s, outputs) = moving(t0, full, &me);
            let shown = ClientMessage::TransitionShown { transition_id: TransitionId(7) };
            assert!(matches!(&outputs[..], [
                Output::Send { link: LinkId::FIRST, message },
                Output::Dial { link, .. },
                Output::Send { link: hello_link, message: ClientMessage::Hello { .. } },
            ] if *message == shown && *link == destination && *hello_link == destination));
            let at = t0 + Duration::from_secs(3);
            let welcome = welcome(me.clone(), Some(NodeId::new("crypt").unwrap()));
            s.handle_on(at, destination, welcome);
            assert_eq!(s.link(), destination);
            let kits =
                ServerMessage::KitsGranted { kits: vec![gatehouse_tags::catalog::STATE_DEAD] };
            s.handle_on(at, destination, kits);
            s.handle_on(at, destination, join(3, "crypt", 0));
            s.handle_timeout(at + Duration::from_secs(1));
            let ready = s.poll_output();
            let join_ready = ClientMessage::JoinReady { join_id: JoinId(3) };
            assert_eq!(ready, Some(Output::Send { link: destination, message: join_ready }));
            s.handle_on(at, destination, own_pawn(4, &me, "crypt"));
            s.handle_on(at, destination, ServerMessage::Possessed { pawn_id: PawnId(4) });
            assert!(!s.is_placed() && s.is_loading(), "the screen waits for the join's end");
            let ended = at + Duration::from_secs(2);
            s.handle_on(ended, destination, ServerMessage::EndJoin { join_id: JoinId(3) });
            assert!(s.is_placed());
            let travelled = ServerMessage::Closing { code: 11, reason: "travelled".into() };
            s.handle_on(ended, LinkId::FIRST, travelled);
            let rest: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
            assert!(rest.contains(&Output::Close { link: LinkId::FIRST }), "{rest:?}");
            assert!(!s.is_closed(), "the source's close is the move's end");
            s.run_game_side();
            let stats = s.finish(ended + Duration::from_secs(1));
            assert!(stats.problems().is_empty(), "full {full}: {:?}", stats.problems());
            assert_eq!(
                (stats.travels, stats.server_changes, stats.joins),
                (1, 1, 1),
                "full {full}"
            );
            let moves: Vec<&ScreenTimes> =
                stats.screens.iter().filter(|s| s.kind == ScreenKind::Travel).collect();
            assert_eq!(moves.len(), 1, "full {full}: one screen for the move");
            let up = t0 + Duration::from_secs(2);
            assert_eq!((moves[0].shown, moves[0].ended), (up, Some(ended)), "full {full}");
            assert_eq!(stats.timings.moved.count(), 1);
            assert!(
                stats
                    .marks
                    .iter()
                    .any(|(when, kind)| *kind == MarkKind::ServerChange && *when == at)
            );
        }
    }

    /// docs/spec/travel.md V3, V7: a move given up stays one screen: refused by the destination
    /// (`TravelAbandoned` on the source), or taken back by the source once the client was at
    /// the destination and acknowledged a pawn there; either way the source fails the move and
    /// places the player with its kept pawn by a transition of its own, whose end is no end
    /// before placement (the source's pawn is the one acknowledged there). One bar, no error.
    #[test]
    fn a_move_given_up_stays_one_screen_to_the_sources_follow_up() {
        let me = PlayerId::new("me").unwrap();
        for arrived in [false, true] {
            let t0 = Instant::now();
            let (mut s, _) = moving(t0, false, &me);
            let at = t0 + Duration::from_secs(3);
            if arrived {
                let welcome = welcome(me.clone(), Some(NodeId::new("crypt").unwrap()));
                s.handle_on(at, LinkId(1), welcome);
                s.handle_on(at, LinkId(1), join(3, "crypt", 0));
                s.handle_timeout(at + Duration::from_secs(1));
                s.handle_on(at, LinkId(1), own_pawn(4, &me, "crypt"));
                s.handle_on(at, LinkId(1), ServerMessage::Possessed { pawn_id: PawnId(4) });
            } else {
                let refused = ServerMessage::Rejected {
                    reason: RejectReason::TicketStale,
                    detail: String::new(),
                };
                s.handle_on(at, LinkId(1), refused);
                let abandoned = ClientMessage::TravelAbandoned { transition_id: TransitionId(7) };
                let outputs: Vec<Output> = std::iter::from_fn(|| s.poll_output()).collect();
                assert_eq!(
                    outputs,
                    [
                        Output::Close { link: LinkId(1) },
                        Output::Send { link: LinkId::FIRST, message: abandoned },
                    ]
                );
            }
            s.handle(
                at,
                ServerMessage::TransitionFailed {
                    transition_id: TransitionId(7),
                    reason: gatehouse_protocol::TransitionFailure::DestinationLost,
                    detail: String::new(),
                },
            );
            assert_eq!(s.link(), LinkId::FIRST, "arrived {arrived}: back on the source");
            s.handle(at, ServerMessage::FreezeCharacters { transition_id: TransitionId(8) });
            s.handle(at, show(8));
            s.handle_timeout(at + Duration::from_secs(2));
            let teleported = ServerMessage::PawnsTeleported {
                node: NodeId::new("harbor").unwrap(),
                pawn_ids: PawnIdRuns::from_ids([PawnId(12)]),
            };
            s.handle(at, teleported);
            let ended = at + Duration::from_secs(3);
            s.handle(ended, ServerMessage::EndTransition { transition_id: TransitionId(8) });
            assert!(s.is_placed(), "arrived {arrived}");
            let stats = s.finish(ended);
            assert!(stats.problems().is_empty(), "arrived {arrived}: {:?}", stats.problems());
            let (abandoned, changes) = (stats.travels_abandoned, stats.server_changes);
            let expected = if arrived { (0, 2) } else { (1, 0) };
            assert_eq!((abandoned, changes), expected, "arrived {arrived}");
            assert_eq!(stats.transitions_failed, 1);
            let moves = stats.screens.iter().filter(|s| s.kind == ScreenKind::Travel).count();
            assert_eq!(
                (moves, stats.screens.len()),
                (1, 2),
                "the join, then the move's one screen"
            );
        }
    }
}

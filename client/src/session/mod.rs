//! One client session as a sans-IO state machine: the protocol's duties, carried out; the rest
//! told to the game as [`Event`]s.
//!
//! Driven like quinn-proto's `Connection`: feed each server message to [`Session::handle_on`]
//! with `now` and the link it came on, then drain [`Session::poll_output`] (what to send, on
//! which link, and which links to open or close, in order) and [`Session::poll_event`] (what the
//! game must do), and call [`Session::handle_timeout`] at [`Session::poll_timeout`]. The shell
//! says when a link ends below the protocol ([`Session::link_lost`]). The game's own inputs are
//! [`Session::levels_streamed`], [`Session::request_restart`] and [`Session::leave`]. Nothing
//! here reads a clock, sleeps or touches a socket.
//!
//! The duties (docs/protocol.md 4 and 5): `Hello` first; at `ShowTransition`, `TransitionShown`
//! at once, before any streaming; `TransitionReady` or `JoinReady` once the game streamed the
//! load on screen, and never for a load the screen moved on from; `PossessionAcknowledged` for
//! every `Possessed`; the loading screen up from the first freeze or join to the end of the
//! load on it, whatever supersedes in between; a stale end never drops a newer screen.
//!
//! **Links.** A session plays on one server at a time, over one link (a connection:
//! [`LinkId`]); a shell that opened one connection uses [`Session::handle`] and
//! [`Session::connection_lost`], which name the first link. A `TravelTo` moves the player to
//! another server behind the same loading screen (docs/spec/travel.md V3): the session asks its
//! shell to open a second link ([`Output::Dial`]) and logs in there with the ticket, keeps the
//! first to hear of a failure, and closes whichever it is done with ([`Output::Close`]). The
//! session stays one object across the move, so no shell decides anything of it; the move's own
//! steps are in `travel`, what the session knows of each server in `known`.

mod known;
mod travel;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use gatehouse_protocol::{
    ClientMessage, JoinId, LevelName, NodeId, PROTOCOL_VERSION, PawnId, PlayerId, ServerMessage,
    TransitionId,
};
use gatehouse_tags::catalog::STATE_DEAD;

use crate::event::{CloseReason, Event, WorldChange};
use crate::link::{LinkId, Output};
use crate::screen::{JoinScreen, JoinStage, Load, Screen, TransitionScreen, TransitionStage};
use crate::timers::{Timer, TimerTable};
use known::Server;
use travel::Travel;

/// Longest a loading screen is held after a transition ended without placing this client,
/// waiting for the join of its own that the server sends right after the end (docs/protocol.md
/// 4.2): past it the screen drops, so no server can leave the player behind it for good.
pub const JOIN_AFTER_END: Duration = Duration::from_secs(2);

/// Longest the session keeps the link to the server a player moved from once the destination
/// placed it (its loading screen dropped there), waiting for that server's `Closing { 11 }`
/// (`Travelled`, docs/spec/travel.md V6): past it the session closes that link itself.
pub const SOURCE_RELEASE: Duration = Duration::from_secs(10);

/// How a session starts.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// The session token `Hello` carries (an HS256 JWT naming the player; docs/protocol.md 4,
    /// "Session tokens").
    pub token: String,
    /// How long to wait for `Welcome` (or `Rejected`) from the session's start before giving
    /// up with [`CloseReason::NoWelcome`]. Default 10 s: twice the server's default hello
    /// timeout.
    pub welcome_timeout: Duration,
    /// How long to wait for the server's close after [`Session::leave`] before closing with
    /// [`CloseReason::Left`] anyway. Default 2 s.
    pub leave_linger: Duration,
    /// How long a move's destination may take to admit the client, from the `TravelTo` to the
    /// destination's `Welcome` (dialling it included): past it the session gives the move up
    /// and sends `TravelAbandoned` to the server it was leaving (docs/spec/travel.md V3).
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// Which changes of the replicated world become [`Event::World`]s. Default
    /// [`WorldEvents::All`].
    pub world_events: WorldEvents,
}

/// Which changes of the replicated world a session gives the game as [`Event::World`]
/// (docs/client.md, "A client that keeps no world").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorldEvents {
    /// Every change: a game that shows the world keeps its copy from them.
    #[default]
    All,
    /// Only the changes about the own player (its player state, tags, health, its leaving) and
    /// the own pawns (spawned, moved, died, destroyed). The duties, the other events and what
    /// the session keeps (the own life, the controlled pawn) are the same as with `All`. For a
    /// client that keeps no copy of the world, such as the simulator's thin clients: a
    /// newcomer's snapshot and every replication batch name every player, and an event for
    /// each, queued only to be dropped, is about a quarter of what a 4,000-player snapshot
    /// costs the session (`client/benches/snapshot.rs`).
    Own,
}

impl SessionConfig {
    /// A config with the default timeouts and `token`.
    pub fn new(token: impl Into<String>) -> Self {
        SessionConfig {
            token: token.into(),
            welcome_timeout: Duration::from_secs(10),
            leave_linger: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(10),
            world_events: WorldEvents::All,
        }
    }
}

impl fmt::Debug for SessionConfig {
    // The token is a credential: never in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionConfig")
            .field("welcome_timeout", &self.welcome_timeout)
            .field("leave_linger", &self.leave_linger)
            .field("connect_timeout", &self.connect_timeout)
            .field("world_events", &self.world_events)
            .finish_non_exhaustive()
    }
}

/// The life of the client's own player, as the server's ability tags tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Life {
    /// Not dead (the state until the tags say otherwise).
    #[default]
    Alive,
    /// Its ability state holds `State.Dead`; no restart requested yet.
    Dead,
    /// Dead, and a `RestartRequest` was sent.
    Restarting,
}

/// A game input the session could not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// [`Session::levels_streamed`] for a load the screen is not streaming: it was replaced,
    /// its transition failed, it ended, or it was reported already. Nothing was sent; the game
    /// may drop that streaming.
    #[error("{load} is not being streamed (the loading screen moved on, or it was reported)")]
    NotStreaming {
        /// The load named.
        load: Load,
    },
    /// [`Session::request_restart`] while the player is not dead.
    #[error("a restart needs a dead player")]
    NotDead,
    /// [`Session::request_restart`] while a restart is on its way already.
    #[error("a restart was requested already")]
    RestartPending,
    /// The session has not been welcomed, or is leaving or closed.
    #[error("the session is not open")]
    NotOpen,
    /// [`Session::request_restart`] while the session dials a move's destination: the server
    /// it leaves is sent nothing but the move's answers (docs/spec/travel.md V3). Ask again once
    /// the destination let the client in ([`Event::ServerChanged`]) or the move was given up.
    #[error("a move to another server is in flight; ask again at its end")]
    Moving,
}

/// Where the session stands with the server it plays on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `Hello` sent, no `Welcome` yet.
    AwaitingWelcome,
    /// Welcomed.
    Open,
    /// `Leave` sent; waiting for the server's close.
    Leaving,
    /// Over: [`Event::Closed`] was given.
    Closed,
}

/// One client session (module docs).
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    state: State,
    /// The server the session plays on: its messages drive the screen and the game's world.
    here: Server,
    /// A move to another server in flight, holding the other server's link.
    travel: Option<Travel>,
    /// The link the next move opens.
    next_link: LinkId,
    screen: Screen,
    /// The node the game streamed and reported (its join's, or the transition's); forgotten
    /// when a newer load comes on screen.
    streamed: Option<NodeId>,
    life: Life,
    timers: TimerTable,
    outputs: VecDeque<Output>,
    events: VecDeque<Event>,
}

impl Session {
    /// A session starting at `now` on the link its shell opened ([`LinkId::FIRST`]): its
    /// `Hello` is the first output.
    pub fn new(now: Instant, config: SessionConfig) -> Session {
        let hello = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            token: config.token.clone(),
        };
        let mut timers = TimerTable::default();
        timers.set(Timer::Welcome, now + config.welcome_timeout);
        let link = LinkId::FIRST;
        Session {
            config,
            state: State::AwaitingWelcome,
            here: Server::new(link),
            travel: None,
            next_link: link.next(),
            screen: Screen::None,
            streamed: None,
            life: Life::Alive,
            timers,
            outputs: VecDeque::from([Output::Send { link, message: hello }]),
            events: VecDeque::new(),
        }
    }

    /// Handles one message that arrived at `now` on the first link, the one the shell opened
    /// before the session started: [`Session::handle_on`] with [`LinkId::FIRST`], for a shell
    /// that opens no other (it then carries no server change: the session gives each move up at
    /// its connect timeout and stays where it is).
    pub fn handle(&mut self, now: Instant, message: ServerMessage) {
        self.handle_on(now, LinkId::FIRST, message);
    }

    /// Handles one message from the server on `link`, received at `now`. Nothing is handled
    /// once the session is closed, nor on a link the session closed or never opened. A
    /// `WorldSnapshot` or a `Replicated` batch is handled as the messages it stands for, one
    /// after the other in its order (docs/protocol.md 4.4, 4.5): the game gets the same events
    /// as from those messages sent one by one.
    pub fn handle_on(&mut self, now: Instant, link: LinkId, message: ServerMessage) {
        if self.state == State::Closed {
            return;
        }
        match message {
            ServerMessage::WorldSnapshot(snapshot) => {
                for message in snapshot.messages() {
                    self.handle_on(now, link, message);
                }
            }
            ServerMessage::Replicated { changes } => {
                for change in changes {
                    self.handle_on(now, link, ServerMessage::from(change));
                }
            }
            message if link == self.here.link => self.on_here(now, message),
            message => self.on_other_link(now, link, message),
        }
    }

    /// The game streamed the levels (and rooms) of `load`, at `now`: the ready report is sent.
    ///
    /// # Errors
    /// [`InputError::NotStreaming`] if the screen is not streaming `load` (replaced, failed,
    /// ended, or reported already); [`InputError::NotOpen`] if the session is not open. Nothing
    /// is sent then.
    pub fn levels_streamed(&mut self, load: Load) -> Result<(), InputError> {
        self.check_open()?;
        if self.screen.streaming() != Some(load) {
            return Err(InputError::NotStreaming { load });
        }
        match &mut self.screen {
            Screen::Transition(screen) => {
                let stage =
                    std::mem::replace(&mut screen.stage, TransitionStage::AwaitingDestination);
                if let TransitionStage::Streaming { target } = stage {
                    self.streamed = Some(target.clone());
                    screen.stage = TransitionStage::Ready { target };
                }
                let transition_id = screen.transition;
                self.send(ClientMessage::TransitionReady { transition_id });
            }
            Screen::Join(screen) => {
                screen.stage = JoinStage::Ready;
                self.streamed = Some(screen.node.clone());
                let join_id = screen.join;
                self.send(ClientMessage::JoinReady { join_id });
            }
            Screen::None => {}
        }
        Ok(())
    }

    /// Asks the server to respawn the dead player (`RestartRequest`).
    ///
    /// # Errors
    /// [`InputError::NotDead`] if the player is alive, [`InputError::RestartPending`] if a
    /// restart is on its way, [`InputError::NotOpen`] if the session is not open,
    /// [`InputError::Moving`] while it dials a move's destination. Nothing is sent then: the
    /// server refuses a restart of a live player, and counts refusals.
    pub fn request_restart(&mut self) -> Result<(), InputError> {
        self.check_open()?;
        if self.is_dialling() {
            return Err(InputError::Moving);
        }
        match self.life {
            Life::Alive => Err(InputError::NotDead),
            Life::Restarting => Err(InputError::RestartPending),
            Life::Dead => {
                self.life = Life::Restarting;
                self.send(ClientMessage::RestartRequest);
                Ok(())
            }
        }
    }

    /// Leaves the world at `now`: `Leave` is sent and the session waits for the server's close
    /// (at most [`SessionConfig::leave_linger`]). Before `Welcome` the session just closes.
    /// During a move the other server is left too, and its link closed. Once leaving or
    /// closed, nothing happens.
    pub fn leave(&mut self, now: Instant) {
        match self.state {
            State::AwaitingWelcome => self.close(CloseReason::Left),
            State::Open => {
                self.end_travel_for_leave();
                self.state = State::Leaving;
                self.send(ClientMessage::Leave);
                self.timers.set(Timer::Leave, now + self.config.leave_linger);
            }
            State::Leaving | State::Closed => {}
        }
    }

    /// The first link is gone below the protocol (the shell saw it close): [`Session::link_lost`]
    /// of [`LinkId::FIRST`].
    pub fn connection_lost(&mut self, why: impl Into<String>) {
        self.link_lost(LinkId::FIRST, why);
    }

    /// `link` is gone below the protocol, or could not be opened (the shell saw it close, or
    /// its dial failed). The link the session plays on ends the session with
    /// [`CloseReason::Lost`] ([`CloseReason::Left`] if it was leaving), unless a move can still
    /// carry the player on: a destination that fails gives the player back to the server it
    /// was leaving, and a server left behind may go once the player reached the destination
    /// (docs/spec/travel.md V3, V10). A link the session does not hold changes nothing.
    pub fn link_lost(&mut self, link: LinkId, why: impl Into<String>) {
        if self.state == State::Closed {
            return;
        }
        let why = why.into();
        if link != self.here.link {
            self.other_link_lost(link, why);
            return;
        }
        if self.here_lost_during_travel(&why) {
            return;
        }
        match self.state {
            State::Closed => {}
            State::Leaving => self.close(CloseReason::Left),
            State::AwaitingWelcome | State::Open => self.close(CloseReason::Lost { why }),
        }
    }

    /// Handles the deadlines due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        for timer in self.timers.take_expired(now) {
            match timer {
                // Armed only until `Welcome` (which stops it) or the close.
                Timer::Welcome => self.close(CloseReason::NoWelcome),
                Timer::Leave => self.close(CloseReason::Left),
                Timer::JoinAfterEnd => self.drop_held_screen(now),
                Timer::Admission => self.admission_timed_out(),
                Timer::SourceRelease => self.release_source(),
            }
        }
    }

    /// When [`Session::handle_timeout`] is next needed, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next thing to do for the session's links, in order: a message to send on a link,
    /// a link to open to another server, a link to close ([`Output`]). Once the session is
    /// closed ([`Session::is_closed`]) nothing more comes: close every link still open.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next thing the game must do or know, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The player the server the session plays on welcomed this client as.
    pub fn player(&self) -> Option<&PlayerId> {
        self.here.player.as_ref()
    }

    /// The link to the server the session plays on: [`LinkId::FIRST`] until a move reaches
    /// another server.
    pub fn link(&self) -> LinkId {
        self.here.link
    }

    /// Whether a move to another server is in flight: the session holds a second link (to the
    /// destination it dials, or to the server it left, until that server lets the player go).
    pub fn is_moving(&self) -> bool {
        self.travel.is_some()
    }

    /// The loading screen now.
    pub fn screen(&self) -> &Screen {
        &self.screen
    }

    /// The node the own pawn belongs on now: the destination of the load on screen (`None`
    /// while a transition's is not known yet), else the world's current node.
    pub fn destination(&self) -> Option<&NodeId> {
        match self.screen {
            Screen::None => self.here.current_node.as_ref(),
            _ => self.screen.destination(),
        }
    }

    /// The node the game streamed and reported for the load on screen or the last one ended
    /// (forgotten when a newer load comes on screen).
    pub fn streamed_node(&self) -> Option<&NodeId> {
        self.streamed.as_ref()
    }

    /// The pawn this client controls (possessed, and neither unpossessed nor destroyed since)
    /// on the server it plays on.
    pub fn pawn(&self) -> Option<PawnId> {
        self.here.pawn
    }

    /// The life of the own player.
    pub fn life(&self) -> Life {
        self.life
    }

    /// Placed: controls a pawn, and no loading screen is up.
    pub fn is_placed(&self) -> bool {
        self.here.pawn.is_some() && !self.screen.is_up()
    }

    /// Whether the session is over ([`Event::Closed`] was given).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    fn check_open(&self) -> Result<(), InputError> {
        match self.state {
            State::Open => Ok(()),
            _ => Err(InputError::NotOpen),
        }
    }

    /// Queues `message` for the server the session plays on.
    fn send(&mut self, message: ClientMessage) {
        self.outputs.push_back(Output::Send { link: self.here.link, message });
    }

    /// One message from the server the session plays on (a batch's, one at a time).
    fn on_here(&mut self, now: Instant, message: ServerMessage) {
        if self.intercept_here(&message) {
            return;
        }
        match message {
            ServerMessage::Welcome { player_id, current_node, max_frame_len } => {
                self.on_welcome(player_id, current_node, max_frame_len)
            }
            ServerMessage::Rejected { reason, detail } => {
                self.events.push_back(Event::Rejected { reason, detail })
            }
            ServerMessage::FreezeCharacters { transition_id } => {
                self.see_transition(now, transition_id);
            }
            ServerMessage::ShowTransition { transition_id, target_node, levels, rooms } => {
                self.on_show_transition(now, transition_id, target_node, levels, rooms)
            }
            ServerMessage::TravelTo(travel) => self.on_travel_to(now, *travel),
            ServerMessage::EndTransition { transition_id } => {
                self.on_end_transition(now, transition_id)
            }
            ServerMessage::ShowJoin { join_id, node, levels, rooms } => {
                self.on_show_join(now, join_id, node, levels, rooms)
            }
            ServerMessage::EndJoin { join_id } => self.on_end(now, Load::Join(join_id)),
            ServerMessage::TransitionFailed { transition_id, reason, detail } => {
                self.on_failed(transition_id);
                let failed = Event::TransitionFailed { transition: transition_id, reason, detail };
                self.events.push_back(failed);
            }
            ServerMessage::Possessed { pawn_id } => {
                self.here.pawn = Some(pawn_id);
                self.send(ClientMessage::PossessionAcknowledged { pawn_id });
                self.events.push_back(Event::Possessed { pawn: pawn_id });
            }
            ServerMessage::Unpossessed { pawn_id } => {
                if self.here.pawn == Some(pawn_id) {
                    self.here.pawn = None;
                }
                self.events.push_back(Event::Unpossessed { pawn: pawn_id });
            }
            ServerMessage::KitsGranted { kits } => {
                self.events.push_back(Event::KitsGranted { kits })
            }
            ServerMessage::Error { code, detail } => {
                self.events.push_back(Event::Refused { code, detail })
            }
            // After a `Leave` too: the server's code (0, `Leave`) says the leave was taken.
            ServerMessage::Closing { code, reason } => {
                self.close(CloseReason::Server { code, reason })
            }
            world => {
                if let Some(change) = world_change(world) {
                    self.on_change(change);
                }
            }
        }
    }

    fn on_welcome(&mut self, player: PlayerId, node: Option<NodeId>, max_frame_len: u32) {
        if self.here.player.is_some() {
            return; // One `Welcome` per connection; a repeat changes nothing.
        }
        self.timers.stop(Timer::Welcome);
        if self.state == State::AwaitingWelcome {
            self.state = State::Open;
        }
        self.here.player = Some(player.clone());
        self.here.max_frame_len = max_frame_len;
        self.here.current_node = node.clone();
        self.events.push_back(Event::Welcomed { player, node, max_frame_len });
    }

    /// Puts transition `id` on the screen if it is newer than the one there (raising the
    /// screen, or keeping it up over a join or an older transition). True if `id` is the
    /// transition on screen afterwards; false for an older one, which changes nothing.
    fn see_transition(&mut self, now: Instant, id: TransitionId) -> bool {
        let (raised_at, superseded) = match &self.screen {
            // A move's screen, come to the destination, whose transitions have ids of their
            // own: the destination's first transition continues it.
            Screen::Transition(screen) if screen.is_travelling() && self.travel_arrived() => {
                (screen.raised_at, None)
            }
            Screen::Transition(screen) if id == screen.transition => return true,
            Screen::Transition(screen) if id < screen.transition => return false,
            // An ended transition held for a join is not replaced: it is over.
            Screen::Transition(screen) if screen.has_ended() => (screen.raised_at, None),
            Screen::Transition(screen) => (screen.raised_at, Some(screen.transition)),
            Screen::Join(screen) => (screen.raised_at, None),
            Screen::None => {
                self.events.push_back(Event::ShowLoadingScreen);
                (now, None)
            }
        };
        self.cancel_streaming();
        self.timers.stop(Timer::JoinAfterEnd);
        self.streamed = None;
        let stage = TransitionStage::AwaitingDestination;
        let screen = TransitionScreen { transition: id, raised_at, stage };
        self.screen = Screen::Transition(screen);
        self.events.push_back(Event::TransitionStarted { transition: id, superseded });
        true
    }

    fn on_show_transition(
        &mut self,
        now: Instant,
        id: TransitionId,
        target: NodeId,
        levels: Vec<LevelName>,
        rooms: Vec<LevelName>,
    ) {
        if !self.see_transition(now, id) {
            return;
        }
        let Screen::Transition(screen) = &mut self.screen else { return };
        if screen.stage != TransitionStage::AwaitingDestination {
            return; // Shown already: answered once.
        }
        screen.stage = TransitionStage::Streaming { target: target.clone() };
        // At once, before any streaming: the server sets aside a client that does not answer
        // within its response timeout (docs/protocol.md 5, `TransitionShown`).
        self.send(ClientMessage::TransitionShown { transition_id: id });
        let load = Load::Transition(id);
        self.events.push_back(Event::StreamLevels { load, node: target, levels, rooms });
    }

    fn on_show_join(
        &mut self,
        now: Instant,
        id: JoinId,
        node: NodeId,
        levels: Vec<LevelName>,
        rooms: Vec<LevelName>,
    ) {
        let raised_at = match &self.screen {
            // The join that follows a transition which ended without placing this client: on
            // the same screen.
            Screen::Transition(screen) if screen.has_ended() => {
                self.timers.stop(Timer::JoinAfterEnd);
                screen.raised_at
            }
            // The destination's join of a move: the move's screen continues (docs/spec/travel.md
            // V3).
            Screen::Transition(screen) if screen.is_travelling() && self.travel_arrived() => {
                screen.raised_at
            }
            // A transition supersedes a join; a join never replaces a transition in flight.
            Screen::Transition(_) => return,
            Screen::Join(screen) if screen.join == id => return,
            Screen::Join(screen) => screen.raised_at,
            Screen::None => {
                self.events.push_back(Event::ShowLoadingScreen);
                now
            }
        };
        self.cancel_streaming();
        self.streamed = None;
        let stage = JoinStage::Streaming;
        self.screen = Screen::Join(JoinScreen { join: id, node: node.clone(), raised_at, stage });
        self.events.push_back(Event::StreamLevels { load: Load::Join(id), node, levels, rooms });
    }

    /// `EndTransition` for the transition on screen (any other is stale and never drops a
    /// newer screen, and a move's transition ends at the destination, never here): the
    /// characters unfreeze, and the screen drops, unless this client controls no pawn: then the
    /// transition ended without placing it (it logged in while the transition waited for its
    /// players), and the join of its own that the server sends next comes on the same screen
    /// (docs/protocol.md 4.2).
    fn on_end_transition(&mut self, now: Instant, id: TransitionId) {
        let Screen::Transition(screen) = &self.screen else { return };
        if screen.transition != id || screen.has_ended() || screen.is_travelling() {
            return;
        }
        let target = screen.stage.target().cloned();
        if let Some(node) = &target {
            self.here.current_node = Some(node.clone());
        }
        // The server ended it without waiting for this client (docs/protocol.md 4.2): every
        // streaming is still answered once, here by its cancel.
        self.cancel_streaming();
        self.events.push_back(Event::TransitionEnded { transition: id });
        if self.here.pawn.is_some() {
            self.hide_screen(now, Load::Transition(id));
        } else if let Screen::Transition(screen) = &mut self.screen {
            screen.stage = TransitionStage::Ended { target };
            self.timers.set(Timer::JoinAfterEnd, now + JOIN_AFTER_END);
        }
    }

    /// `EndJoin` for the join on screen (any other is stale): the screen drops.
    fn on_end(&mut self, now: Instant, load: Load) {
        if self.screen.load() != Some(load) {
            return;
        }
        if let Some(node) = self.screen.destination() {
            self.here.current_node = Some(node.clone());
        }
        self.cancel_streaming();
        self.hide_screen(now, load);
    }

    /// No join came to the screen held after a transition's end: it drops.
    fn drop_held_screen(&mut self, now: Instant) {
        if let Screen::Transition(screen) = &self.screen
            && screen.has_ended()
        {
            let load = Load::Transition(screen.transition);
            self.hide_screen(now, load);
        }
    }

    /// The screen of `load` drops at `now`; at the end of a move, the server left behind has
    /// [`SOURCE_RELEASE`] to let the player go.
    fn hide_screen(&mut self, now: Instant, load: Load) {
        self.screen = Screen::None;
        self.events.push_back(Event::HideLoadingScreen { load });
        self.placed_at_destination(now);
    }

    /// `TransitionFailed`: the streaming of that transition is given up; the screen stays up
    /// for the recovery travel.
    fn on_failed(&mut self, id: TransitionId) {
        if let Screen::Transition(screen) = &self.screen
            && screen.transition == id
        {
            self.cancel_streaming();
            if let Screen::Transition(screen) = &mut self.screen {
                screen.stage = TransitionStage::AwaitingDestination;
            }
        }
    }

    /// One change of the world the session plays in: the server's account follows it, and the
    /// game is told of it if it wants it; the own player's tags tell its life.
    fn on_change(&mut self, change: WorldChange) {
        if self.here.take(&change, self.config.world_events) {
            self.tell(change);
        }
    }

    /// Tells the game of `change`; the own player's tags (`State.Dead` or not) move its life.
    fn tell(&mut self, change: WorldChange) {
        let dead = match &change {
            WorldChange::TagsChanged { player, tags } if self.here.is_me(player) => {
                Some(tags.contains(&STATE_DEAD))
            }
            _ => None,
        };
        self.events.push_back(Event::World(change));
        match (self.life, dead) {
            (Life::Alive, Some(true)) => {
                self.life = Life::Dead;
                self.events.push_back(Event::Died);
            }
            (Life::Dead | Life::Restarting, Some(false)) => {
                let restarted = self.life == Life::Restarting;
                self.life = Life::Alive;
                self.events.push_back(Event::Revived { restarted });
            }
            _ => {}
        }
    }

    /// Tells the game to stop the streaming on screen, if there is one.
    fn cancel_streaming(&mut self) {
        if let Some(load) = self.screen.streaming() {
            self.events.push_back(Event::CancelStreaming { load });
        }
    }

    fn close(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.travel = None;
        self.timers.stop_all();
        self.outputs.clear();
        self.events.push_back(Event::Closed { reason });
    }
}

/// The world change a replicated message stands for, if it is one (`AbilityTagsChanged`
/// included: the own player's tags tell its life).
fn world_change(message: ServerMessage) -> Option<WorldChange> {
    Some(match message {
        ServerMessage::PlayerStateUpdated(view) => WorldChange::PlayerStateUpdated(view),
        ServerMessage::PlayerLeft { player_id } => WorldChange::PlayerLeft { player: player_id },
        ServerMessage::PawnSpawned(view) => WorldChange::PawnSpawned(view),
        ServerMessage::PawnsTeleported { node, pawn_ids } => {
            WorldChange::PawnsTeleported { node, pawns: pawn_ids }
        }
        ServerMessage::PawnDied { pawn_id } => WorldChange::PawnDied { pawn: pawn_id },
        ServerMessage::PawnDestroyed { pawn_id } => WorldChange::PawnDestroyed { pawn: pawn_id },
        ServerMessage::AbilityTagsChanged { player_id, tags } => {
            WorldChange::TagsChanged { player: player_id, tags }
        }
        ServerMessage::HealthChanged { player_id, health } => {
            WorldChange::HealthChanged { player: player_id, health }
        }
        _ => return None,
    })
}

//! One client session as a sans-IO state machine: the protocol's duties, carried out; the rest
//! told to the game as [`Event`]s.
//!
//! Driven like quinn-proto's `Connection`: feed each server message to [`Session::handle`]
//! with `now`, then drain [`Session::poll_output`] (messages to send, in order) and
//! [`Session::poll_event`] (what the game must do), and call [`Session::handle_timeout`] at
//! [`Session::poll_timeout`]. The game's own inputs are [`Session::levels_streamed`],
//! [`Session::request_restart`] and [`Session::leave`]. Nothing here reads a clock, sleeps or
//! touches a socket.
//!
//! The duties (docs/protocol.md 4 and 5): `Hello` first; at `ShowTransition`, `TransitionShown`
//! at once, before any streaming; `TransitionReady` or `JoinReady` once the game streamed the
//! load on screen, and never for a load the screen moved on from; `PossessionAcknowledged` for
//! every `Possessed`; the loading screen up from the first freeze or join to the end of the
//! load on it, whatever supersedes in between; a stale end never drops a newer screen.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use gatehouse_protocol::{
    ClientMessage, JoinId, LevelName, NodeId, PROTOCOL_VERSION, PawnId, PlayerId, ReplicatedChange,
    ServerMessage, TransitionId, WorldSnapshot,
};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::STATE_DEAD;

use crate::event::{CloseReason, Event, WorldChange};
use crate::screen::{JoinScreen, JoinStage, Load, Screen, TransitionScreen, TransitionStage};
use crate::timers::{Timer, TimerTable};

/// Longest a loading screen is held after a transition ended without placing this client,
/// waiting for the join of its own that the server sends right after the end (docs/protocol.md
/// 4.2): past it the screen drops, so no server can leave the player behind it for good.
pub const JOIN_AFTER_END: Duration = Duration::from_secs(2);

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
}

/// Where the connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
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
    link: Link,
    /// The player `Welcome` named.
    player: Option<PlayerId>,
    /// The node the world is on for this client: `Welcome`'s, then each ended load's.
    current_node: Option<NodeId>,
    screen: Screen,
    /// The node the game streamed and reported (its join's, or the transition's); forgotten
    /// when a newer load comes on screen.
    streamed: Option<NodeId>,
    /// The pawn this client controls.
    pawn: Option<PawnId>,
    /// The own player's pawns, spawned and not destroyed (a dead one lingers beside its
    /// replacement): what makes a pawn's change the own one for [`WorldEvents::Own`].
    own_pawns: Vec<PawnId>,
    life: Life,
    timers: TimerTable,
    outputs: VecDeque<ClientMessage>,
    events: VecDeque<Event>,
}

impl Session {
    /// A session starting at `now`: its `Hello` is the first output.
    pub fn new(now: Instant, config: SessionConfig) -> Session {
        let hello = ClientMessage::Hello {
            protocol_version: PROTOCOL_VERSION,
            token: config.token.clone(),
        };
        let mut timers = TimerTable::default();
        timers.set(Timer::Welcome, now + config.welcome_timeout);
        Session {
            config,
            link: Link::AwaitingWelcome,
            player: None,
            current_node: None,
            screen: Screen::None,
            streamed: None,
            pawn: None,
            own_pawns: Vec::new(),
            life: Life::Alive,
            timers,
            outputs: VecDeque::from([hello]),
            events: VecDeque::new(),
        }
    }

    /// Handles one message from the server, received at `now`. Nothing is handled once the
    /// session is closed. A `WorldSnapshot` or a `Replicated` batch is handled as the messages
    /// it stands for, one after the other in its order (docs/protocol.md 4.4, 4.5): the game
    /// gets the same events as from those messages sent one by one.
    pub fn handle(&mut self, now: Instant, message: ServerMessage) {
        if self.link == Link::Closed {
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
            ServerMessage::EndTransition { transition_id } => {
                self.on_end_transition(now, transition_id)
            }
            ServerMessage::ShowJoin { join_id, node, levels, rooms } => {
                self.on_show_join(now, join_id, node, levels, rooms)
            }
            ServerMessage::EndJoin { join_id } => self.on_end(Load::Join(join_id)),
            ServerMessage::TransitionFailed { transition_id, reason, detail } => {
                self.on_failed(transition_id);
                let failed = Event::TransitionFailed { transition: transition_id, reason, detail };
                self.events.push_back(failed);
            }
            ServerMessage::Possessed { pawn_id } => {
                self.pawn = Some(pawn_id);
                self.outputs.push_back(ClientMessage::PossessionAcknowledged { pawn_id });
                self.events.push_back(Event::Possessed { pawn: pawn_id });
            }
            ServerMessage::Unpossessed { pawn_id } => {
                if self.pawn == Some(pawn_id) {
                    self.pawn = None;
                }
                self.events.push_back(Event::Unpossessed { pawn: pawn_id });
            }
            ServerMessage::AbilityTagsChanged { player_id, tags } => self.on_tags(player_id, tags),
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
            ServerMessage::WorldSnapshot(snapshot) => self.on_snapshot(now, &snapshot),
            ServerMessage::Replicated { changes } => self.on_replicated(now, changes),
            // Following a server change is docs/spec/travel.md V3, not written yet: the travel
            // is ignored, as a message this session has no duty for (no answer, no event). Its
            // source then sets this client aside at its response timeout and places it by a
            // join of its own there (V3, docs/protocol.md 5).
            ServerMessage::TravelTo { .. } => {}
            replicated => self.on_world(replicated),
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
                self.outputs.push_back(ClientMessage::TransitionReady { transition_id });
            }
            Screen::Join(screen) => {
                screen.stage = JoinStage::Ready;
                self.streamed = Some(screen.node.clone());
                self.outputs.push_back(ClientMessage::JoinReady { join_id: screen.join });
            }
            Screen::None => {}
        }
        Ok(())
    }

    /// Asks the server to respawn the dead player (`RestartRequest`).
    ///
    /// # Errors
    /// [`InputError::NotDead`] if the player is alive, [`InputError::RestartPending`] if a
    /// restart is on its way, [`InputError::NotOpen`] if the session is not open. Nothing is
    /// sent then: the server refuses a restart of a live player, and counts refusals.
    pub fn request_restart(&mut self) -> Result<(), InputError> {
        self.check_open()?;
        match self.life {
            Life::Alive => Err(InputError::NotDead),
            Life::Restarting => Err(InputError::RestartPending),
            Life::Dead => {
                self.life = Life::Restarting;
                self.outputs.push_back(ClientMessage::RestartRequest);
                Ok(())
            }
        }
    }

    /// Leaves the world at `now`: `Leave` is sent and the session waits for the server's close
    /// (at most [`SessionConfig::leave_linger`]). Before `Welcome` the session just closes.
    /// Once leaving or closed, nothing happens.
    pub fn leave(&mut self, now: Instant) {
        match self.link {
            Link::AwaitingWelcome => self.close(CloseReason::Left),
            Link::Open => {
                self.link = Link::Leaving;
                self.outputs.push_back(ClientMessage::Leave);
                self.timers.set(Timer::Leave, now + self.config.leave_linger);
            }
            Link::Leaving | Link::Closed => {}
        }
    }

    /// The connection is gone below the protocol (the shell saw it close): the session closes
    /// with [`CloseReason::Lost`], or [`CloseReason::Left`] if it was leaving.
    pub fn connection_lost(&mut self, why: impl Into<String>) {
        match self.link {
            Link::Closed => {}
            Link::Leaving => self.close(CloseReason::Left),
            Link::AwaitingWelcome | Link::Open => self.close(CloseReason::Lost { why: why.into() }),
        }
    }

    /// Handles the deadlines due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        for timer in self.timers.take_expired(now) {
            match timer {
                // Armed only until `Welcome` (which stops it) or the close.
                Timer::Welcome => self.close(CloseReason::NoWelcome),
                Timer::Leave => self.close(CloseReason::Left),
                Timer::JoinAfterEnd => self.drop_held_screen(),
            }
        }
    }

    /// When [`Session::handle_timeout`] is next needed, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next message to send, in order.
    pub fn poll_output(&mut self) -> Option<ClientMessage> {
        self.outputs.pop_front()
    }

    /// The next thing the game must do or know, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The player the server welcomed this client as.
    pub fn player(&self) -> Option<&PlayerId> {
        self.player.as_ref()
    }

    /// The loading screen now.
    pub fn screen(&self) -> &Screen {
        &self.screen
    }

    /// The node the own pawn belongs on now: the destination of the load on screen (`None`
    /// while a transition's is not known yet), else the world's current node.
    pub fn destination(&self) -> Option<&NodeId> {
        match self.screen {
            Screen::None => self.current_node.as_ref(),
            _ => self.screen.destination(),
        }
    }

    /// The node the game streamed and reported for the load on screen or the last one ended
    /// (forgotten when a newer load comes on screen).
    pub fn streamed_node(&self) -> Option<&NodeId> {
        self.streamed.as_ref()
    }

    /// The pawn this client controls (possessed, and neither unpossessed nor destroyed since).
    pub fn pawn(&self) -> Option<PawnId> {
        self.pawn
    }

    /// The life of the own player.
    pub fn life(&self) -> Life {
        self.life
    }

    /// Placed: controls a pawn, and no loading screen is up.
    pub fn is_placed(&self) -> bool {
        self.pawn.is_some() && !self.screen.is_up()
    }

    /// Whether the session is over ([`Event::Closed`] was given).
    pub fn is_closed(&self) -> bool {
        self.link == Link::Closed
    }

    fn check_open(&self) -> Result<(), InputError> {
        match self.link {
            Link::Open => Ok(()),
            _ => Err(InputError::NotOpen),
        }
    }

    fn on_welcome(&mut self, player: PlayerId, node: Option<NodeId>, max_frame_len: u32) {
        if self.player.is_some() {
            return; // One `Welcome` per connection; a repeat changes nothing.
        }
        self.timers.stop(Timer::Welcome);
        if self.link == Link::AwaitingWelcome {
            self.link = Link::Open;
        }
        self.player = Some(player.clone());
        self.current_node = node.clone();
        self.events.push_back(Event::Welcomed { player, node, max_frame_len });
    }

    /// Puts transition `id` on the screen if it is newer than the one there (raising the
    /// screen, or keeping it up over a join or an older transition). True if `id` is the
    /// transition on screen afterwards; false for an older one, which changes nothing.
    fn see_transition(&mut self, now: Instant, id: TransitionId) -> bool {
        let (raised_at, superseded) = match &self.screen {
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
        self.outputs.push_back(ClientMessage::TransitionShown { transition_id: id });
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
    /// newer screen): the characters unfreeze, and the screen drops, unless this client
    /// controls no pawn: then the transition ended without placing it (it logged in while the
    /// transition waited for its players), and the join of its own that the server sends next
    /// comes on the same screen (docs/protocol.md 4.2).
    fn on_end_transition(&mut self, now: Instant, id: TransitionId) {
        let Screen::Transition(screen) = &self.screen else { return };
        if screen.transition != id || screen.has_ended() {
            return;
        }
        let target = screen.stage.target().cloned();
        if let Some(node) = &target {
            self.current_node = Some(node.clone());
        }
        // The server ended it without waiting for this client (docs/protocol.md 4.2): every
        // streaming is still answered once, here by its cancel.
        self.cancel_streaming();
        self.events.push_back(Event::TransitionEnded { transition: id });
        if self.pawn.is_some() {
            self.screen = Screen::None;
            self.events.push_back(Event::HideLoadingScreen { load: Load::Transition(id) });
        } else if let Screen::Transition(screen) = &mut self.screen {
            screen.stage = TransitionStage::Ended { target };
            self.timers.set(Timer::JoinAfterEnd, now + JOIN_AFTER_END);
        }
    }

    /// `EndJoin` for the join on screen (any other is stale): the screen drops.
    fn on_end(&mut self, load: Load) {
        if self.screen.load() != Some(load) {
            return;
        }
        if let Some(node) = self.screen.destination() {
            self.current_node = Some(node.clone());
        }
        self.cancel_streaming();
        self.screen = Screen::None;
        self.events.push_back(Event::HideLoadingScreen { load });
    }

    /// No join came to the screen held after a transition's end: it drops.
    fn drop_held_screen(&mut self) {
        if let Screen::Transition(screen) = &self.screen
            && screen.has_ended()
        {
            let load = Load::Transition(screen.transition);
            self.screen = Screen::None;
            self.events.push_back(Event::HideLoadingScreen { load });
        }
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

    fn on_tags(&mut self, player: PlayerId, tags: Vec<GameplayTag>) {
        let own = self.player.as_ref() == Some(&player);
        let dead = own && tags.contains(&STATE_DEAD);
        if own || self.config.world_events == WorldEvents::All {
            self.events.push_back(Event::World(WorldChange::TagsChanged { player, tags }));
        }
        if !own {
            return;
        }
        match (self.life, dead) {
            (Life::Alive, true) => {
                self.life = Life::Dead;
                self.events.push_back(Event::Died);
            }
            (Life::Dead | Life::Restarting, false) => {
                let restarted = self.life == Life::Restarting;
                self.life = Life::Alive;
                self.events.push_back(Event::Revived { restarted });
            }
            _ => {}
        }
    }

    /// `WorldSnapshot` (docs/protocol.md 4.5): the messages it stands for, handled in its order
    /// as if each had come on its own, so the game sees the same events as from a server that
    /// sends them one by one, and the own player's tags in it count for its life.
    fn on_snapshot(&mut self, now: Instant, snapshot: &WorldSnapshot) {
        for message in snapshot.messages() {
            self.handle(now, message);
        }
    }

    /// `Replicated` (docs/protocol.md 4.4): each change handled as its own message, oldest
    /// first. An own death (tags), an own pawn destroyed, keep their effects on the session.
    fn on_replicated(&mut self, now: Instant, changes: Vec<ReplicatedChange>) {
        for change in changes {
            self.handle(now, ServerMessage::from(change));
        }
    }

    /// The replicated world's messages (and the ones the protocol has no duty for).
    fn on_world(&mut self, message: ServerMessage) {
        let change = match message {
            ServerMessage::PlayerStateUpdated(view) => WorldChange::PlayerStateUpdated(view),
            ServerMessage::PlayerLeft { player_id } => {
                WorldChange::PlayerLeft { player: player_id }
            }
            ServerMessage::PawnSpawned(view) => WorldChange::PawnSpawned(view),
            ServerMessage::PawnsTeleported { node, pawn_ids } => {
                WorldChange::PawnsTeleported { node, pawns: pawn_ids }
            }
            ServerMessage::PawnDied { pawn_id } => WorldChange::PawnDied { pawn: pawn_id },
            ServerMessage::PawnDestroyed { pawn_id } => {
                if self.pawn == Some(pawn_id) {
                    self.pawn = None;
                }
                WorldChange::PawnDestroyed { pawn: pawn_id }
            }
            ServerMessage::HealthChanged { player_id, health } => {
                WorldChange::HealthChanged { player: player_id, health }
            }
            // Every other message is handled in `handle`.
            _ => return,
        };
        let wanted = match self.config.world_events {
            WorldEvents::All => true,
            WorldEvents::Own => self.is_own(&change),
        };
        self.track_own_pawns(&change);
        if wanted {
            self.events.push_back(Event::World(change));
        }
    }

    /// Whether `change` is about the own player or one of its pawns (before
    /// [`Session::track_own_pawns`] took it into account: a destroyed pawn was own).
    fn is_own(&self, change: &WorldChange) -> bool {
        let me = |player: &PlayerId| self.player.as_ref() == Some(player);
        let mine = |pawn: &PawnId| self.own_pawns.contains(pawn);
        match change {
            WorldChange::PlayerStateUpdated(view) => me(&view.player_id),
            WorldChange::PawnSpawned(view) => me(&view.owner),
            WorldChange::PlayerLeft { player }
            | WorldChange::TagsChanged { player, .. }
            | WorldChange::HealthChanged { player, .. } => me(player),
            WorldChange::PawnDied { pawn } | WorldChange::PawnDestroyed { pawn } => mine(pawn),
            WorldChange::PawnsTeleported { pawns, .. } => {
                self.own_pawns.iter().any(|own| pawns.contains(*own))
            }
        }
    }

    /// Keeps [`Session::own_pawns`] up to date with a pawn spawned or destroyed.
    fn track_own_pawns(&mut self, change: &WorldChange) {
        match change {
            WorldChange::PawnSpawned(view)
                if self.player.as_ref() == Some(&view.owner)
                    && !self.own_pawns.contains(&view.pawn_id) =>
            {
                self.own_pawns.push(view.pawn_id);
            }
            WorldChange::PawnDestroyed { pawn } => self.own_pawns.retain(|own| own != pawn),
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
        self.link = Link::Closed;
        self.timers.stop_all();
        self.outputs.clear();
        self.events.push_back(Event::Closed { reason });
    }
}

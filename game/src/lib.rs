//! `gatehouse-game`: the authoritative game core of the gatehouse server, a sans-IO state
//! machine (docs/architecture.md). It depends on the wire protocol and the gameplay tags only:
//! no network, no store, no clock, no async runtime, and the compiler holds that line. The
//! server (`gatehouse-server`) feeds it and carries its outputs out.
//!
//! Besides [`Game`]: the world map it reads ([`world`]), the save model it asks the store for
//! ([`model`]), the token bucket its rate limits use ([`rate`]) and the log-field helpers its
//! logs use ([`fields`]), which the server shares.
//!
//! [`Game`] is driven in this order (the quinn-proto `Connection` habit):
//!
//! 1. feed it inputs with [`Game::handle`] (`now` is passed in: it never reads a clock);
//! 2. drain what it wants done with [`Game::poll_output`] until `None`;
//! 3. wake it at [`Game::poll_timeout`] with [`Game::handle_timeout`], then drain again.
//!
//! It never sleeps, spawns tasks or touches a socket, so every ordering of its inputs can be
//! tested deterministically with explicit time.
//!
//! # Layout: a coordinator over owned sub-states
//!
//! `Game` holds sixteen fields: the rules and the world map, one field per sub-state, the timer
//! table and the outbox. Each sub-state owns its collections and their indexes, which change
//! only through its own methods; it emits no output. The records a collection holds (a
//! `Player`, a `Pawn`) are plain data: the coordinator reads and edits their fields through
//! the roster's `player_mut`/`pawn_mut`, and names the repeated edits as methods on the record.
//!
//! - `Roster` (`roster.rs`): logged-in players and their player states (`players.rs`), the
//!   connection index, the pawns, pawn ids and save-load tickets, and how often each player id
//!   logged in lately (`logins.rs`);
//! - `SpawnQueue` (`spawn.rs`): pending spawn requests, and whether something woke the queue;
//! - `Transitions` (`transition.rs`): the transition in flight (its phase, its ready, excused
//!   and set-aside sets, when each player was shown it, its deadlines), transition ids, the
//!   route schedule, the last node a transition reached, and whether the world is unavailable;
//! - `Joins` (`joins.rs`): the joins in flight (a player who logs in while no transition runs
//!   streams its node before it gets a pawn) and the join ids;
//! - `Responses` (`responses.rs`): every answer awaited from clients, with its bound (the
//!   `ShowTransition` answers, the acknowledgements of possessions at the answer and the settle
//!   timeouts, the clients unresponsive since they were set aside) and the crowd rule;
//! - `WorldStreaming` (`streaming.rs`): what is streamed and streaming; the world-map gate;
//! - `Session` (`persistence.rs`): the session's node and save; the kept player states of
//!   recently departed players;
//! - `Effects` (`hazards.rs`): when each hazard next afflicts someone, and whether the effect
//!   pauses follow a transition (the effects themselves are on each player state's
//!   `AbilityState`, `abilities.rs`);
//! - `Seats` (`seats.rs`): the seats this server granted to other servers' travels, their
//!   deadlines, and which connection holds each (docs/spec/travel.md V9);
//! - `Inbound` (`inbound.rs`): the travellers here whose claim is not decided (V4, V5);
//! - `Outbound` (`outbound.rs`): this server's travel to another server, where each moving
//!   player stands in it, and the recalls that outlive it (V2, V7, V11);
//! - `Takes` (`presence.rs`): the takes of logins here of players another server held, awaiting
//!   the store, and how many each login made (V17);
//! - `TimerTable` (`timers.rs`): the named deadlines behind [`Game::poll_timeout`];
//! - `Outbox` (`outbox.rs`): outputs, observations and counters not yet taken by the shell.
//!
//! Where a room's work needs more than its own state, it borrows what it needs and returns
//! what happened as facts, which the coordinator replicates and counts: a spawn attempt is
//! `placement.rs`'s `Placement` over the roster, the streaming state and the world (`Attempt`,
//! `Spawned`); a save load is `persistence.rs`'s `apply_player_load` (`PlayerLoad`); an
//! effects step is `Effects::run` (`EffectEvent`s).
//!
//! The `impl Game` blocks are in six files. This one holds every public method, the step
//! dispatch, the advance pass and the output helpers; `inputs.rs` has one handler per input and
//! client message; `pass.rs` the steps of the pass, the start and end of a transition, the
//! timeouts and the client-ready policy; `travel.rs` the peer link's messages, the seat timer
//! and the source's steps of a travel to another server; `inbound.rs` the destination's
//! travellers (docs/spec/travel.md); `presence.rs` one server playing a player at a time: the
//! takes, the conflicts and `PlayerTaken` (V17). `snapshot.rs` is the operators' view; the public
//! boundary types (inputs, outputs, rules, counters) are in `interface.rs`.
//!
//! # One step: record, then advance
//!
//! Every input and every due timer is one step. Its handler only records facts (state changes
//! in the sub-states, and outputs) and never runs a re-check itself. The step then ends with
//! one pass, `Game::advance`, which moves the game on with the re-checks in this fixed order:
//!
//! 1. **resolve the destination**: Freezing → Loading once the session save and every
//!    player save in flight when the transition started settled (not those of later logins,
//!    so a stream of logins cannot hold it); stale spawn requests are discarded just before
//!    (docs/spec/transitions.md T4); a node another server hosts takes Freezing → Moving
//!    instead, and the travel asks for seats there (docs/spec/travel.md V2);
//! 2. **the all-ready check**: WaitingForClients → Completing once every present player
//!    reported ready or is excused; OnReadyToSpawn queues a request for every player;
//! 3. **process pending spawns**, if a step woke the queue (a queued request, a ready callback,
//!    a settled load, a client's ready report, OnReadyToSpawn, the retry timer) and no
//!    transition outside Completing owns spawning; a pawn is placed for a player only on the
//!    node its client reported streamed;
//! 4. **claim placed travellers, then release placed joiners**: a traveller from another
//!    server that acknowledged its pawn is claimed (docs/spec/travel.md V5), and a join ends
//!    (`EndJoin`) once its joiner is placed, a traveller's once its claim is decided;
//! 5. **try to finish the transition**: Completing ends once every player is placed, or at the
//!    settle deadline with none of its own loads in flight (the client-ready policy then
//!    handles the clients that never acknowledged their pawn); a load the transition waits for
//!    (its streaming, the save of a player it waits for; never an arrival's) pushes the
//!    deadline instead (docs/protocol.md 4.2, "Progress"); a travel to another server (Moving)
//!    ends once each of its moving players is placed there or sent back, and the players still
//!    here follow a transition to the node the server stands on (docs/spec/travel.md V2);
//! 6. **start a due route travel** once no transition is in flight.
//!
//! Each step can enable the next: a completion (2) queues the spawns (3) attempts, a spawn may
//! place the last player (5) waits for, an end frees a due route travel (6). Only step 6, and
//! the end of a move in step 5, can enable an earlier one: the transition either starts
//! resolves its destination (1) at once. The pass then runs a second round, and no third: the
//! new transition stays in flight, so step 6 cannot act again, and it cannot reach
//! WaitingForClients before its node streams, which is an input (a move's follow-up goes to the
//! node the server stands on, never a remote one). Last, finite effects pause or resume (they rest while a player's character is
//! frozen: a transition in flight, or its own join), and the deadlines (client-ready, settle,
//! the transition's hard maximum, effects) go into the timer table.
//! Steps 1, 2, 4 and 5 are checks that do nothing unless their condition holds, so running them
//! after every step changes nothing else; step 3 runs only when woken, so a spawn that waits
//! for a retry waits for its timer.
//!
//! Why one pass: no handler can forget a re-check, and the order in which a transition moves
//! on is written down once, here. Facts that arrive together are still separate steps, so
//! every re-check sees the world as it was after each one, in order: a login that replaces an
//! older connection of the same player is the old connection's departure, then the login; and
//! each due timer is its own step, in the timer table's order.

#![forbid(unsafe_code)]

mod abilities;
mod awaited;
mod hazards;
mod inbound;
mod inputs;
mod interface;
mod joins;
mod known;
mod logins;
mod observe;
mod outbound;
mod outbox;
mod pass;
mod persistence;
mod placement;
mod players;
mod presence;
mod responses;
mod roster;
mod seats;
mod snapshot;
mod spawn;
mod streaming;
mod timers;
mod transition;
mod travel;

pub mod fields;
pub mod model;
pub mod rate;
pub mod world;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use gatehouse_protocol::{NodeId, PlayerId, ServerMessage, TransitionId};

use crate::world::WorldMap;

pub use interface::{
    ClientReadyPolicy, ConnectionId, Counters, Departure, GameRules, HandoverOutcome, HandoverSide,
    Input, Output, StreamPart, StreamRequest, TicketedSeat,
};
pub use known::KnownWorld;
pub use observe::{LoginRefusal, Observation, SpawnRefusal, TransitionOutcome};
pub use snapshot::{GameSnapshot, PendingSpawn, PlayerSnapshot};
pub use spawn::SpawnKind;
pub use streaming::LoadId;
pub use transition::TransitionTiming;

use hazards::{EffectEvent, Effects};
use inbound::Inbound;
use joins::Joins;
use logins::LoginRate;
use outbound::Outbound;
use outbox::Outbox;
use persistence::Session;
use presence::Takes;
use responses::Responses;
use roster::Roster;
use seats::Seats;
use spawn::SpawnQueue;
use streaming::WorldStreaming;
use timers::{Timer, TimerTable};
use transition::{Destination, Transitions};

/// The authoritative game core. See the module documentation for how to drive it.
#[derive(Debug)]
pub struct Game {
    rules: GameRules,
    world: Arc<WorldMap>,
    /// Players, connections and pawns.
    roster: Roster,
    /// Pending spawn requests.
    spawns: SpawnQueue,
    /// The transition in flight and the route schedule.
    transition: Transitions,
    /// The joins in flight.
    joins: Joins,
    /// The answers awaited from clients, their bounds and the crowd rule
    /// (docs/spec/transitions.md T9).
    responses: Responses,
    /// Level streaming and the world-map gate.
    streaming: WorldStreaming,
    /// The session's node and save.
    session: Session,
    /// Hazard schedules and the effect pauses.
    effects: Effects,
    /// The seats granted to other servers' travels (docs/spec/travel.md V9).
    seats: Seats,
    /// The travellers here whose claim is not decided (docs/spec/travel.md V4, V5).
    inbound: Inbound,
    /// This server's travel to another server, and its recalls (docs/spec/travel.md V2, V7).
    outbound: Outbound,
    /// The takes of logins here awaiting the store (docs/spec/travel.md V17).
    takes: Takes,
    timers: TimerTable,
    /// Outputs, spawn and login observations (the transition sub-state keeps its own), and
    /// the counters.
    out: Outbox,
}

impl Game {
    /// A game on `world`, booting at `now`: it asks for the session save and starts the boot
    /// travel, which resolves its destination (the saved node, or the start node) once the
    /// session save settles.
    pub fn new(rules: GameRules, world: Arc<WorldMap>, now: Instant) -> Self {
        let mut game = Game {
            roster: Roster::new(LoginRate::new(rules.login_burst, rules.login_interval)),
            rules,
            streaming: WorldStreaming::new(world.governs_session),
            session: Session::new(world.start_node.clone()),
            effects: Effects::new(&world, now),
            world,
            spawns: SpawnQueue::default(),
            transition: Transitions::default(),
            joins: Joins::default(),
            responses: Responses::default(),
            seats: Seats::default(),
            inbound: Inbound::default(),
            outbound: Outbound::default(),
            takes: Takes::default(),
            timers: TimerTable::default(),
            out: Outbox::default(),
        };
        if let Some(route) = &game.world.travel {
            game.timers.set(Timer::RouteTravel, now + route.interval);
        }
        game.rearm_effects_timer();
        game.out.push(Output::LoadSession);
        game.start_transition(now, Destination::SessionNode);
        game.advance(now);
        game
    }

    /// Feeds one input: its handler records what happened, then the advance pass moves the
    /// game on (module documentation, "One step").
    pub fn handle(&mut self, now: Instant, input: Input) {
        // The caller's span (the server's: the connection's id and address), for the line a
        // login logs; every other line of the step is in the transition's. Taken for a login
        // only: the other inputs, thousands per transition, need not pay for it.
        let caller = match &input {
            Input::Login { .. } | Input::TravellerLogin { .. } => tracing::Span::current(),
            _ => tracing::Span::none(),
        };
        let span = self.transition.span();
        let _entered = span.enter();
        if let Input::Login { connection, player }
        | Input::TravellerLogin { connection, player, .. } = &input
            && !self.admit_login(now, *connection, player)
        {
            // Refused before it changed anything: an older connection of the player stays.
            return;
        }
        if let Input::Login { player, .. } = &input
            && let Some(old) = self.roster.connection_of(player)
        {
            // The older connection's departure is a step of its own, so whatever waited
            // for it moves on before the new login joins, as if it had disconnected first.
            self.replace_connection(now, old);
            self.advance(now);
        }
        match input {
            Input::Login { connection, player } => {
                self.handle_login(now, connection, player, &caller)
            }
            Input::Disconnected { connection, departure } => {
                self.handle_disconnect(now, connection, departure)
            }
            Input::Message { connection, message } => self.handle_message(now, connection, message),
            Input::Streamed { load } => self.handle_streamed(now, load),
            Input::SpawnPointsRegistered { load } => {
                if self.streaming.spawn_points_registered(load) {
                    // The event a waiting spawn needs: no retry poll (docs/spec/transitions.md T2).
                    self.spawns.wake();
                }
            }
            Input::Travel { node } => self.handle_travel(now, node),
            Input::PlayerLoaded { player, ticket, outcome } => {
                self.handle_player_loaded(now, &player, ticket, outcome)
            }
            Input::SessionLoaded { outcome } => self.handle_session_loaded(outcome),
            Input::Peer { from, message } => self.handle_peer(now, &from, message),
            Input::PeerLost { server } => self.handle_peer_lost(now, &server),
            Input::DestinationFound { transition, server } => {
                self.handle_destination_found(now, transition, server)
            }
            Input::HandoffSaved { player, ticket, version } => {
                self.handle_handoff_saved(&player, ticket, version)
            }
            Input::HandoverDecided { player, ticket, outcome } => {
                self.handle_handover_decided(now, &player, ticket, outcome)
            }
            Input::TravellerLogin { connection, player, seat } => {
                self.handle_traveller_login(now, connection, player, seat, &caller)
            }
            Input::PlayerSaveConflicted { player, found } => {
                self.handle_save_conflicted(now, &player, found)
            }
        }
        self.advance(now);
    }

    /// Handles every timer due at `now`. Call it when [`Game::poll_timeout`] has passed. Each
    /// due timer is one step, in the timer table's order, ending with the advance pass.
    pub fn handle_timeout(&mut self, now: Instant) {
        let span = self.transition.span();
        let _entered = span.enter();
        for timer in self.timers.take_expired(now) {
            match timer {
                Timer::SpawnRetry => self.spawns.wake(),
                // The pass's finish step reads the settle deadline itself.
                Timer::SpawnSettle => {}
                Timer::ClientReady => self.handle_client_ready_timeouts(now),
                Timer::RouteTravel => self.transition.route_came_due(),
                Timer::Effects => self.handle_effects(now),
                Timer::TransitionLimit => self.handle_transition_limit(now),
                Timer::PossessionAck => self.handle_acknowledgement_timeouts(now),
                Timer::ClientResponse => self.handle_response_timeouts(now),
                Timer::SeatHold => self.handle_seat_holds(now),
                Timer::Outbound => self.handle_outbound_timer(now),
            }
            self.advance(now);
        }
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.next_output()
    }

    /// The next observation for metrics, if any (docs/operations.md, "Metrics"): phase and
    /// transition durations, ready and spawn waits, refusals, each measured from the `now` the
    /// core was given. Drain it after each step; undrained, only the newest few thousand are
    /// kept.
    pub fn poll_observation(&mut self) -> Option<Observation> {
        self.transition.poll_observation().or_else(|| self.out.next_observation())
    }

    /// When the core next needs [`Game::handle_timeout`], if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// A snapshot of the current state, for operators and tests.
    pub fn snapshot(&self) -> GameSnapshot {
        snapshot::take(self)
    }

    /// The shutdown drain: save every player and the session. The shell then waits a bounded
    /// time for the store.
    pub fn drain(&mut self) {
        let node = self.current_spawn_node();
        tracing::info!(
            players = self.roster.len(),
            "draining: saving every player and the session"
        );
        self.save_all(node);
    }

    /// Decision counters.
    pub fn counters(&self) -> &Counters {
        &self.out.counters
    }

    /// Logged-in players.
    pub fn player_count(&self) -> usize {
        self.roster.len()
    }

    /// Players whose client acknowledged possession of its pawn (a scan of the roster: for
    /// scrapes, not per step).
    pub fn placed_player_count(&self) -> usize {
        self.roster.players().filter(|p| p.is_placed()).count()
    }

    /// Pending spawn requests.
    pub fn pending_spawn_count(&self) -> usize {
        self.spawns.len()
    }

    /// Streaming requests and save loads in flight (what the snapshot's `loads_in_flight`
    /// names).
    pub fn load_count(&self) -> usize {
        self.loads_in_flight().len()
    }

    /// The id of the transition in flight, if any.
    pub fn transition_id(&self) -> Option<TransitionId> {
        self.transition.current().map(|t| t.id)
    }

    /// The phase of the transition in flight (`Freezing`, `Loading`, `WaitingForClients`,
    /// `Completing`), or `None` between transitions: the snapshot's `phase`, without the rest of
    /// the snapshot (for scrapes: docs/operations.md, "Metrics").
    pub fn phase_name(&self) -> &'static str {
        self.transition.current().map_or("None", |t| t.phase.name())
    }

    /// The node whose levels are streamed now, if any (the snapshot's `streamed_node`).
    pub fn streamed_node(&self) -> Option<&NodeId> {
        self.streaming.streamed_node()
    }

    /// The advance pass that ends every step (module documentation, "One step"):
    ///
    /// 1. resolve the destination (Freezing → Loading);
    /// 2. the all-ready check (WaitingForClients → Completing);
    /// 3. process pending spawns, if woken;
    /// 4. claim placed travellers, release placed joiners;
    /// 5. try to finish the transition (Completing → none), or a move (Moving → none, and a
    ///    transition home for those still here);
    /// 6. start a due route travel; if one started here or in 5, once more from 1 (at most two
    ///    rounds);
    ///
    /// then pause or resume finite effects, and write the deadlines into the timer table.
    fn advance(&mut self, now: Instant) {
        for _round in 0..2 {
            let span = self.transition.span();
            let _entered = span.enter();
            self.resolve_destination(now);
            self.check_clients_ready(now);
            self.process_pending_spawns(now);
            self.claim_placed_travellers();
            self.release_placed_joiners();
            self.try_finish_transition(now);
            let moved_on = self.try_finish_move(now);
            if !self.start_due_route_travel(now) && !moved_on {
                break;
            }
        }
        let in_transition = self.transition.current().is_some();
        if self.effects.sync_pauses(now, in_transition, &mut self.roster, &mut self.joins) {
            // Something was paused or resumed: the next effect event moved.
            self.rearm_effects_timer();
        }
        self.arm_transition_timers();
        // Seats change with logins and departures too (a traveller's disconnect holds its seat
        // for a relaunch): both travel timers follow every step.
        self.rearm_seat_timer();
        self.rearm_outbound_timer();
    }

    /// The effects timer: due hazards expose and due effects run (`hazards.rs`); what happened
    /// is replicated to everyone and deaths are counted.
    fn handle_effects(&mut self, now: Instant) {
        let frozen = self.transition.current().is_some();
        let streamed = self.streaming.streamed_node();
        let events = self.effects.run(now, &self.world, &mut self.roster, frozen, streamed);
        for event in events {
            match event {
                EffectEvent::Tags { player, tags } => {
                    self.broadcast(ServerMessage::AbilityTagsChanged { player_id: player, tags })
                }
                EffectEvent::Health { player, health } => {
                    self.broadcast(ServerMessage::HealthChanged { player_id: player, health })
                }
                EffectEvent::Died { pawn, .. } => {
                    self.out.counters.deaths += 1;
                    if let Some(pawn_id) = pawn {
                        self.broadcast(ServerMessage::PawnDied { pawn_id });
                    }
                }
            }
        }
        self.rearm_effects_timer();
    }

    /// Arms the effects timer at the earliest hazard exposure or effect event.
    pub(crate) fn rearm_effects_timer(&mut self) {
        self.timers.arm(Timer::Effects, self.effects.next_event(&self.roster));
    }

    /// Whether every player's effects are paused exactly when its character is frozen (a walk
    /// of every player): the harness checks it after every step.
    #[cfg(test)]
    pub(crate) fn effect_pauses_in_sync(&self) -> bool {
        let in_transition = self.transition.current().is_some();
        hazards::pauses_in_sync(&self.roster, &self.joins, in_transition)
    }

    /// The node a spawn outside a transition goes to (`GetCurrentSpawnNodeID`): the streamed
    /// node, or the session's before anything streamed.
    fn current_spawn_node(&self) -> NodeId {
        self.streaming.streamed_node().cloned().unwrap_or_else(|| self.session.node().clone())
    }

    /// Every load in flight, described for operators: streaming, the session save, player
    /// saves.
    fn loads_in_flight(&self) -> Vec<String> {
        self.session.loads_in_flight(&self.roster, &self.streaming)
    }

    /// Saves a player at `node`, if its save loaded (a failed load is never saved over).
    fn save_player(&mut self, id: &PlayerId, node: Option<NodeId>) {
        if let Some(save) =
            persistence::player_save(&self.roster, id, node, self.rules.server.as_ref())
        {
            self.out.counters.saves_requested += 1;
            self.out.push(Output::SavePlayer(save));
        }
    }

    /// Saves every player and the session at the node the world stands on: the players' saves
    /// as one output, so ending a transition costs the game task one store request, not one
    /// per player. Nothing waits for them.
    fn save_all(&mut self, node: NodeId) {
        let (saves, session) =
            self.session.saves_at(&self.roster, &node, self.rules.server.as_ref());
        if !saves.is_empty() {
            self.out.counters.saves_requested += saves.len() as u64;
            self.out.push(Output::SavePlayers(saves));
        }
        if let Some(version) = session {
            self.out.push(Output::SaveSession { node, version });
        }
    }

    /// Queues `message` for `connection`.
    fn send(&mut self, connection: ConnectionId, message: ServerMessage) {
        self.out.push(Output::Send { connection, message });
    }

    /// Queues `message` for every logged-in player.
    fn broadcast(&mut self, message: ServerMessage) {
        self.out.push(Output::Broadcast { message });
    }
}

//! Replication into the replica: a session [`Event`] (or a game input) becomes a few changes,
//! and each change is applied to the [`Replica`] only once the notices of the one before it
//! were all handed out. So the game can announce each notice (and run whatever follows it)
//! before the next change lands, and a listener sees the world after its notice's change and
//! before the next.
//!
//! Which event changes what (docs/client.md, "The replicated world"): `Welcomed` logs in, then
//! creates the world the client enters and begins its play; `TransitionStarted` freezes the
//! characters; a transition's `StreamLevels` shows its destination and travels (the world is
//! torn down and the destination's created); the game's `levels_streamed` for the transition
//! whose world is current, or its `TransitionEnded`, begins the destination's play (after
//! unfreezing, for the end);
//! `Possessed`, `Unpossessed` and every `World` change apply as replicated; `Rejected` and
//! `Closed` end the login; `ServerChanged` ends the world of the server left (every character
//! destroyed, every player state removed, one change each, the freeze lifted) and creates the
//! new server's, which begins play. Every other event changes nothing here.

use std::collections::VecDeque;
use std::time::Instant;

use gatehouse_protocol::{NodeId, PawnId, PlayerId, TransitionId};

use super::{Notice, Replica, Spawned, World};
use crate::event::{Event, WorldChange};
use crate::screen::Load;

/// One change of the replica.
#[derive(Debug, Clone)]
enum Step {
    LogIn(PlayerId),
    LogOut,
    /// Another server: every character and player state of the one left goes, one change each
    /// (expanded when applied, as the replica holds them then), and the freeze is lifted.
    LeaveServer,
    /// Unfreeze every character without a notice: the server they belonged to is left.
    Thaw,
    /// Log in as `player` on another server, if the login names another player.
    Relogin(PlayerId),
    Travel {
        node: Option<NodeId>,
        transition: Option<TransitionId>,
    },
    BeginPlay,
    /// Begin play only if the current world is this transition's destination.
    BeginPlayOf(TransitionId),
    Shown(TransitionId),
    Freeze(TransitionId),
    Unfreeze(TransitionId),
    Possess(PawnId),
    Unpossess(PawnId),
    Change(WorldChange),
}

/// The changes one event (or input) makes to a [`Replica`], applied one at a time by
/// [`Replication::next`].
#[derive(Debug, Default)]
pub struct Replication {
    steps: VecDeque<Step>,
    /// The notices of the step applied last, not handed out yet.
    notices: VecDeque<Notice>,
}

impl Replication {
    /// What `event` changes.
    pub fn of(event: &Event) -> Replication {
        let steps = match event {
            Event::Welcomed { player, node, .. } => vec![
                Step::LogIn(player.clone()),
                Step::Travel { node: node.clone(), transition: None },
                Step::BeginPlay,
            ],
            Event::ServerChanged { player, node, .. } => vec![
                Step::LeaveServer,
                Step::Relogin(player.clone()),
                Step::Travel { node: node.clone(), transition: None },
                Step::BeginPlay,
            ],
            Event::Rejected { .. } | Event::Closed { .. } => vec![Step::LogOut],
            Event::TransitionStarted { transition, .. } => vec![Step::Freeze(*transition)],
            Event::StreamLevels { load: Load::Transition(id), node, .. } => vec![
                Step::Shown(*id),
                Step::Travel { node: Some(node.clone()), transition: Some(*id) },
            ],
            Event::TransitionEnded { transition } => {
                // The server may end a transition without waiting for a client that joined
                // during it: the client is in its destination world now, streamed or not.
                vec![Step::Unfreeze(*transition), Step::BeginPlay]
            }
            Event::Possessed { pawn } => vec![Step::Possess(*pawn)],
            Event::Unpossessed { pawn } => vec![Step::Unpossess(*pawn)],
            Event::World(change) => vec![Step::Change(change.clone())],
            _ => Vec::new(),
        };
        Replication { steps: steps.into(), notices: VecDeque::new() }
    }

    /// What the game's report that it streamed `load` changes: a transition's destination
    /// begins play, if it is the current world (a report for an older transition changes
    /// nothing; a join's world already plays).
    pub fn levels_streamed(load: Load) -> Replication {
        let steps = match load {
            Load::Transition(id) => vec![Step::BeginPlayOf(id)],
            Load::Join(_) => Vec::new(),
        };
        Replication { steps: steps.into(), notices: VecDeque::new() }
    }

    /// What the end of the session changes when no event said so (the connection was dropped,
    /// a relaunch): the login ends.
    pub fn session_ended() -> Replication {
        Replication { steps: VecDeque::from([Step::LogOut]), notices: VecDeque::new() }
    }

    /// The next notice, applying the next change to `replica` (at `now`) when the last one's
    /// notices are all out; `None` once every change is applied and announced.
    pub fn next(&mut self, replica: &mut Replica, now: Instant) -> Option<Notice> {
        while self.notices.is_empty() {
            let step = self.steps.pop_front()?;
            self.apply(replica, now, step);
        }
        self.notices.pop_front()
    }

    fn apply(&mut self, replica: &mut Replica, now: Instant, step: Step) {
        let notices = &mut self.notices;
        match step {
            Step::LogIn(player) => {
                if replica.log_in(player.clone()) {
                    notices.push_back(Notice::LoginSucceeded(player));
                } else {
                    // A repeated welcome: the client is in its world already.
                    self.steps.clear();
                }
            }
            Step::LogOut => notices.extend(replica.log_out().map(Notice::LoginEnded)),
            Step::LeaveServer => {
                let pawns = replica.characters.iter().map(|character| character.pawn());
                let destroyed = pawns.map(|pawn| WorldChange::PawnDestroyed { pawn });
                let players = replica.player_states.iter().map(|state| state.player().clone());
                let left = players.map(|player| WorldChange::PlayerLeft { player });
                let mut expanded: Vec<Step> = destroyed.chain(left).map(Step::Change).collect();
                expanded.push(Step::Thaw);
                for step in expanded.into_iter().rev() {
                    self.steps.push_front(step);
                }
            }
            Step::Thaw => replica.characters.set_frozen(false),
            Step::Relogin(player) => {
                if replica.log_in(player.clone()) {
                    notices.push_back(Notice::LoginSucceeded(player));
                }
            }
            Step::Travel { node, transition } => {
                let travelled = replica.travel(now, node, transition);
                notices.extend(travelled.torn_down.map(Notice::WorldTornDown));
                notices.push_back(Notice::WorldCreated(travelled.created));
            }
            Step::BeginPlay => notices.extend(replica.begin_play(now).map(Notice::WorldBeganPlay)),
            Step::BeginPlayOf(id) => {
                if replica.world().and_then(World::transition) == Some(id) {
                    notices.extend(replica.begin_play(now).map(Notice::WorldBeganPlay));
                }
            }
            Step::Shown(id) => notices.push_back(Notice::TransitionShown(id)),
            Step::Freeze(id) => {
                replica.characters.set_frozen(true);
                notices.push_back(Notice::CharactersFrozen(id));
            }
            Step::Unfreeze(id) => {
                replica.characters.set_frozen(false);
                notices.push_back(Notice::CharactersUnfrozen(id));
                notices.push_back(Notice::TransitionEnded(id));
            }
            Step::Possess(pawn) => {
                if replica.characters.possess(pawn) {
                    notices.push_back(Notice::Possessed(pawn));
                }
            }
            Step::Unpossess(pawn) => {
                if replica.characters.unpossess(pawn) {
                    notices.push_back(Notice::Unpossessed(pawn));
                }
            }
            Step::Change(change) => apply_change(replica, change, notices),
        }
    }
}

/// Applies one replicated change; a duplicate (nothing changed) makes no notice.
fn apply_change(replica: &mut Replica, change: WorldChange, notices: &mut VecDeque<Notice>) {
    match change {
        WorldChange::PlayerStateUpdated(view) => {
            let player = view.player_id.clone();
            let change = replica.player_states.apply(view);
            if !change.is_duplicate() {
                notices.push_back(Notice::PlayerStateChanged(player, change));
            }
        }
        WorldChange::PlayerLeft { player } => {
            if replica.player_states.remove(&player).is_some() {
                notices.push_back(Notice::PlayerStateRemoved(player));
            }
        }
        WorldChange::PawnSpawned(view) => {
            let pawn = view.pawn_id;
            let local = replica.local_player().cloned();
            let playing = replica.is_playing();
            if replica.characters.spawn(view, local.as_ref(), playing) == Spawned::New {
                notices.push_back(Notice::PawnSpawned(pawn));
            }
        }
        WorldChange::PawnsTeleported { node, pawns } => {
            // One replicated move per pawn, as if each had come alone.
            for pawn in pawns.iter() {
                if replica.characters.teleport(pawn, node.clone()) {
                    notices.push_back(Notice::PawnTeleported(pawn));
                }
            }
        }
        WorldChange::PawnDied { pawn } => {
            if replica.characters.die(pawn) {
                notices.push_back(Notice::PawnDied(pawn));
            }
        }
        WorldChange::PawnDestroyed { pawn } => {
            if replica.characters.destroy(pawn).is_some() {
                notices.push_back(Notice::PawnDestroyed(pawn));
            }
        }
        WorldChange::TagsChanged { player, tags } => {
            if replica.player_states.set_tags(&player, &tags) {
                notices.push_back(Notice::AbilityTagsChanged(player));
            }
        }
        WorldChange::HealthChanged { player, health } => {
            if replica.player_states.set_health(&player, health) {
                notices.push_back(Notice::HealthChanged(player));
            }
        }
    }
}

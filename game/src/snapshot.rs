//! A read-only view of the game for operators and tests (the admin endpoint's JSON).

use gatehouse_protocol::{NodeId, PawnId, PlayerId, TransitionId};
use serde::Serialize;

use super::spawn::SpawnKind;
use super::{Counters, Game, TransitionTiming};

/// The state of the game at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct GameSnapshot {
    /// The transition phase: `None`, `Freezing`, `Loading`, `WaitingForClients` or `Completing`.
    pub phase: &'static str,
    /// The transition in flight.
    pub transition_id: Option<TransitionId>,
    /// Where the transition in flight goes.
    pub transition_target: Option<NodeId>,
    /// The node whose levels are streamed now.
    pub streamed_node: Option<NodeId>,
    /// Whether world-map streaming or dungeon rooms are loading.
    pub load_in_flight: bool,
    /// What is loading: streaming requests (`load#N: node forest`, dungeon rooms), the session
    /// save and player saves being loaded.
    pub loads_in_flight: Vec<String>,
    /// Pending spawn requests, oldest first.
    pub pending_spawns: Vec<PendingSpawn>,
    /// Every logged-in player.
    pub players: Vec<PlayerSnapshot>,
    /// Players without an acknowledged pawn.
    pub unplaced_players: Vec<PlayerId>,
    /// The players whose ready report the transition in flight awaits, in id order: in
    /// WaitingForClients, who holds it. Once it waits for its clients this set only shrinks
    /// (docs/protocol.md 4.2, "Progress"). Empty with no transition in flight.
    pub awaited_reports: Vec<PlayerId>,
    /// The players whose placement a settle-hold would wait for (neither placed nor excused),
    /// in id order: in Completing, who holds it. Once the spawn window is open this set only
    /// shrinks (docs/protocol.md 4.2, "Progress").
    pub awaited_placements: Vec<PlayerId>,
    /// The players the last settle timeout ended a transition without.
    pub last_settle_timeout_unplaced: Vec<PlayerId>,
    /// How long each of the last 256 transitions that ended took on the server, oldest first: start
    /// → every client ready → ended, µs, from the core's own `now` (the load benchmark's "server:
    /// last ready → ended", docs/performance.md). A failed or superseded transition is not in it.
    /// Core time only: a transition that ends in the step of the last ready report (every player
    /// kept its pawn and was teleported) counts 0 from all ready to ended, whatever that step cost,
    /// and the shell gives one `now` to a whole batch of inputs.
    pub recent_transition_timings: Vec<TransitionTiming>,
    /// Decision counters.
    pub counters: Counters,
}

/// One pending spawn request.
#[derive(Debug, Clone, Serialize)]
pub struct PendingSpawn {
    /// Whose.
    pub player: PlayerId,
    /// What kind.
    pub kind: SpawnKind,
    /// For which node.
    pub node: NodeId,
}

/// One player.
#[derive(Debug, Clone, Serialize)]
pub struct PlayerSnapshot {
    /// The player.
    pub player: PlayerId,
    /// The pawn it possesses.
    pub pawn: Option<PawnId>,
    /// Every pawn it owns (a dead pawn lingers until its replacement exists).
    pub owned_pawns: usize,
    /// Whether its client acknowledged possession of its pawn.
    pub placed: bool,
    /// How many of its last possessed pawns an acknowledgement may still name: at most 8,
    /// however often it died, relaunched or travelled (docs/protocol.md 5, "Client → server").
    pub recent_pawns: usize,
    /// Whether it holds `State.Dead`.
    pub dead: bool,
    /// Whether it is in a join of its own (streaming before its first pawn).
    pub joining: bool,
}

/// The snapshot behind [`Game::snapshot`].
pub(super) fn take(game: &Game) -> GameSnapshot {
    let current = game.transition.current();
    let players: Vec<PlayerSnapshot> = game
        .roster
        .players()
        .map(|p| PlayerSnapshot {
            player: p.id.clone(),
            pawn: p.pawn,
            owned_pawns: game.roster.owned_pawn_count(&p.id),
            placed: p.is_placed(),
            recent_pawns: p.possessed.len(),
            dead: p.is_dead(),
            joining: game.joins.contains(&p.id),
        })
        .collect();
    GameSnapshot {
        phase: game.phase_name(),
        transition_id: current.map(|t| t.id),
        transition_target: current.map(|t| t.target.clone()),
        streamed_node: game.streamed_node().cloned(),
        load_in_flight: game.streaming.is_load_in_flight() || !game.session.settled(&game.roster),
        loads_in_flight: game.loads_in_flight(),
        pending_spawns: game
            .spawns
            .requests()
            .map(|r| PendingSpawn { player: r.player.clone(), kind: r.kind, node: r.node.clone() })
            .collect(),
        unplaced_players: players.iter().filter(|p| !p.placed).map(|p| p.player.clone()).collect(),
        awaited_reports: current.map(|t| t.owing().cloned().collect()).unwrap_or_default(),
        awaited_placements: game
            .roster
            .players()
            .filter(|p| !p.is_placed_or_excused())
            .map(|p| p.id.clone())
            .collect(),
        players,
        last_settle_timeout_unplaced: game.transition.last_unplaced().to_vec(),
        recent_transition_timings: game.transition.timings().cloned().collect(),
        counters: game.counters().clone(),
    }
}

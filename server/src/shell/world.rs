//! The world a game supplies, behind the [`World`] trait the game task calls
//! (docs/embedding.md).
//!
//! The game core decides *when* levels stream and pawns are placed; the world does the
//! streaming and owns the pawns' bodies. The game task asks it to stream a node's levels (or a
//! dungeon's rooms) and hands it a [`WorldReports`] to answer with: the levels are in, then the
//! node's spawn points can take pawns. It also tells the world every pawn that was spawned,
//! moved or destroyed, as the clients are told.
//!
//! [`SimulatedWorld`] is the default: streaming is a timer from `config/world.toml` (a level's
//! `stream_ms`, plus up to the node's `jitter_ms`), and spawn points register
//! `spawn_points_register_ms` after the levels are in.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::{NodeId, PawnId, PawnIdRuns, PlayerId, ServerMessage};
use rand::RngExt as _;
use tokio::sync::mpsc;

use super::ShellEvent;
use crate::config::WorldMap;
use crate::game::{Input, LoadId, StreamPart, StreamRequest};

/// The world of a game, as the game task drives it (docs/embedding.md). Every method runs on
/// the game task: start work and return, never block.
pub trait World: Send + 'static {
    /// Streams what `request` names. Report through `reports`: [`WorldReports::streamed`] once
    /// the levels are in, then, for a node's levels ([`StreamPart::Levels`]),
    /// [`WorldReports::spawn_points_registered`] once the node can take pawns. Until the
    /// first, no pawn is placed on the node; until the second, spawns there wait.
    ///
    /// A request may be superseded (a newer travel): reports for it are then ignored, so there
    /// is nothing to cancel. A world that never reports leaves the transition to its hard
    /// maximum (`game.transition_max_ms`), which fails it and travels back.
    fn stream(&mut self, request: StreamRequest, reports: WorldReports);

    /// A pawn was spawned for `player` on `node`. Nothing by default.
    fn pawn_spawned(&mut self, pawn: PawnId, player: &PlayerId, node: &NodeId) {
        let _ = (pawn, player, node);
    }

    /// Pawns were moved to `node` (a transition's teleports). Nothing by default.
    fn pawns_moved(&mut self, node: &NodeId, pawns: &PawnIdRuns) {
        let _ = (node, pawns);
    }

    /// A pawn was destroyed (its player left, or respawned). Nothing by default.
    fn pawn_destroyed(&mut self, pawn: PawnId) {
        let _ = pawn;
    }
}

/// Where a [`World`] reports back to the game task. Cheap to clone; send from any task.
#[derive(Debug, Clone)]
pub struct WorldReports {
    events: mpsc::Sender<ShellEvent>,
}

impl WorldReports {
    pub(super) fn new(events: mpsc::Sender<ShellEvent>) -> Self {
        WorldReports { events }
    }

    /// The levels of the request `load` are in. Returns false once the server has stopped
    /// (nobody listens any more).
    pub async fn streamed(&self, load: LoadId) -> bool {
        self.events.send(ShellEvent::Core(Input::Streamed { load })).await.is_ok()
    }

    /// The spawn points of the node that `load` streamed registered: pawns can be placed
    /// there. Returns false once the server has stopped.
    pub async fn spawn_points_registered(&self, load: LoadId) -> bool {
        self.events.send(ShellEvent::Core(Input::SpawnPointsRegistered { load })).await.is_ok()
    }
}

/// Tells `world` what a broadcast says happened to pawns.
pub(super) fn observe(world: &mut dyn World, message: &ServerMessage) {
    match message {
        ServerMessage::PawnSpawned(view) => {
            world.pawn_spawned(view.pawn_id, &view.owner, &view.node)
        }
        ServerMessage::PawnsTeleported { node, pawn_ids } => world.pawns_moved(node, pawn_ids),
        ServerMessage::PawnDestroyed { pawn_id } => world.pawn_destroyed(*pawn_id),
        _ => {}
    }
}

/// The default world: level streaming is a timer from the world map (a level's `stream_ms`,
/// the slowest of those streaming together, plus up to the node's `jitter_ms` at random), and
/// a node's spawn points register its `spawn_points_register_ms` after its levels are in.
#[derive(Debug, Clone)]
pub struct SimulatedWorld {
    map: Arc<WorldMap>,
}

/// How long the simulated world takes over one [`StreamRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTiming {
    /// The slowest of the levels streaming together (`stream_ms`).
    pub duration: Duration,
    /// Up to this much more, drawn uniformly at random (the node's `jitter_ms`).
    pub jitter: Duration,
    /// The spawn points register this long after the levels are in
    /// (`spawn_points_register_ms`); `None` for a dungeon's rooms.
    pub spawn_points_after: Option<Duration>,
}

impl SimulatedWorld {
    /// The simulated world of `map`.
    pub fn new(map: Arc<WorldMap>) -> Self {
        SimulatedWorld { map }
    }

    /// How long `request` takes, from the world map; `None` for a node the map lacks. (The
    /// deterministic test harness draws the jitter from its own seed with this.)
    pub fn timing(&self, request: &StreamRequest) -> Option<StreamTiming> {
        let node = self.map.node(&request.node)?;
        let (levels, spawn_points_after) = match request.part {
            StreamPart::Levels => (&node.levels, Some(node.spawn_points_register)),
            StreamPart::Rooms => (&node.rooms, None),
        };
        let duration = levels.iter().map(|l| l.stream).max().unwrap_or_default();
        Some(StreamTiming { duration, jitter: node.jitter, spawn_points_after })
    }
}

impl World for SimulatedWorld {
    fn stream(&mut self, request: StreamRequest, reports: WorldReports) {
        let Some(timing) = self.timing(&request) else {
            // The core travels only to nodes of this map.
            tracing::error!(node = %request.node, "streaming a node the world map lacks");
            return;
        };
        let jitter_ms = timing.jitter.as_millis() as u64;
        let extra = if jitter_ms > 0 { rand::rng().random_range(0..=jitter_ms) } else { 0 };
        let duration = timing.duration + Duration::from_millis(extra);
        let spawn_points_after = timing.spawn_points_after;
        tracing::debug!(load = request.load.0, what = %request.what,
            duration_ms = crate::fields::millis(duration), "streaming");
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            if !reports.streamed(request.load).await {
                return;
            }
            if let Some(after) = spawn_points_after {
                tokio::time::sleep(after).await;
                reports.spawn_points_registered(request.load).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::{CharacterDef, PawnView};

    use super::*;

    #[derive(Default)]
    struct Told(Vec<String>);

    impl World for Told {
        fn stream(&mut self, request: StreamRequest, _: WorldReports) {
            self.0.push(format!("stream {}", request.what));
        }
        fn pawn_spawned(&mut self, pawn: PawnId, player: &PlayerId, node: &NodeId) {
            self.0.push(format!("spawned {} of {player} on {node}", pawn.0));
        }
        fn pawns_moved(&mut self, node: &NodeId, pawns: &PawnIdRuns) {
            let ids: Vec<String> = pawns.iter().map(|p| p.0.to_string()).collect();
            self.0.push(format!("moved {} to {node}", ids.join(",")));
        }
        fn pawn_destroyed(&mut self, pawn: PawnId) {
            self.0.push(format!("destroyed {}", pawn.0));
        }
    }

    fn node(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    /// The world hears of every pawn a broadcast spawns, moves or destroys, and of nothing else.
    #[test]
    fn the_world_is_told_every_pawn_spawned_moved_and_destroyed() {
        let mut world = Told::default();
        let spawned = ServerMessage::PawnSpawned(PawnView {
            pawn_id: PawnId(4),
            owner: PlayerId::new("p1").unwrap(),
            character_def: CharacterDef::new("Vanguard").unwrap(),
            node: node("harbor"),
            alive: true,
        });
        observe(&mut world, &spawned);
        let pawn_ids = PawnIdRuns::from_ids([PawnId(4), PawnId(5), PawnId(9)]);
        observe(&mut world, &ServerMessage::PawnsTeleported { node: node("forest"), pawn_ids });
        observe(&mut world, &ServerMessage::PawnDestroyed { pawn_id: PawnId(5) });
        observe(&mut world, &ServerMessage::PawnDied { pawn_id: PawnId(4) });
        assert_eq!(
            world.0,
            ["spawned 4 of p1 on harbor", "moved 4,5,9 to forest", "destroyed 5"],
            "a death is not the world's business: the pawn stays"
        );
    }

    const MAP: &str = r#"
start_node = "crypt"
default_preset = "V"
[[preset]]
name = "V"
character_def = "Vanguard"
[[node]]
id = "crypt"
levels = [{ name = "gate", stream_ms = 400 }, { name = "stairs", stream_ms = 900 }]
rooms = [{ name = "hall", stream_ms = 1500 }, { name = "vault", stream_ms = 1200 }]
jitter_ms = 200
spawn_points_register_ms = 150
"#;

    fn request(node_id: &str, part: StreamPart) -> StreamRequest {
        StreamRequest {
            load: LoadId(1),
            node: node(node_id),
            part,
            levels: Vec::new(),
            what: String::new(),
        }
    }

    /// A node's levels take the slowest level's time and then register spawn points; its rooms
    /// take the slowest room's and register none; a node the map lacks has no timing.
    #[test]
    fn the_simulated_world_takes_the_slowest_level_and_registers_spawn_points_after_levels_only() {
        let world = SimulatedWorld::new(Arc::new(WorldMap::from_toml(MAP).unwrap()));
        let levels = world.timing(&request("crypt", StreamPart::Levels)).unwrap();
        assert_eq!(levels.duration, Duration::from_millis(900));
        assert_eq!(levels.jitter, Duration::from_millis(200));
        assert_eq!(levels.spawn_points_after, Some(Duration::from_millis(150)));
        let rooms = world.timing(&request("crypt", StreamPart::Rooms)).unwrap();
        assert_eq!(rooms.duration, Duration::from_millis(1500));
        assert_eq!(rooms.spawn_points_after, None);
        assert_eq!(world.timing(&request("atlantis", StreamPart::Levels)), None);
    }

    /// A report reaches the game task's queue as the core's input, and says false once
    /// nobody listens (the server stopped).
    #[tokio::test]
    async fn reports_reach_the_game_task_and_say_when_it_is_gone() {
        let (events, mut queue) = mpsc::channel(4);
        let reports = WorldReports::new(events);
        assert!(reports.streamed(LoadId(2)).await);
        assert!(reports.spawn_points_registered(LoadId(2)).await);
        let first = queue.try_recv().ok();
        let second = queue.try_recv().ok();
        assert!(
            matches!(first, Some(ShellEvent::Core(Input::Streamed { load: LoadId(2) }))),
            "{first:?}"
        );
        assert!(
            matches!(
                second,
                Some(ShellEvent::Core(Input::SpawnPointsRegistered { load: LoadId(2) }))
            ),
            "{second:?}"
        );
        drop(queue);
        assert!(!reports.streamed(LoadId(3)).await);
        assert!(!reports.spawn_points_registered(LoadId(3)).await);
    }

    /// The next event on the game task's queue, within 10 s of (paused) time.
    async fn next(queue: &mut mpsc::Receiver<ShellEvent>) -> Option<ShellEvent> {
        tokio::time::timeout(Duration::from_secs(10), queue.recv()).await.ok().flatten()
    }

    /// The simulated world reports a node's levels streamed after the slowest level's time,
    /// then its spawn points after their delay; rooms register none. (Time is paused: no
    /// jitter here, the map has none.)
    #[tokio::test(start_paused = true)]
    async fn the_simulated_world_reports_levels_then_spawn_points_on_time() {
        let map = MAP.replace("jitter_ms = 200\n", "");
        let mut world = SimulatedWorld::new(Arc::new(WorldMap::from_toml(&map).unwrap()));
        let (events, mut queue) = mpsc::channel(8);
        world.stream(request("crypt", StreamPart::Levels), WorldReports::new(events.clone()));
        let start = tokio::time::Instant::now();
        let streamed = next(&mut queue).await;
        assert!(matches!(streamed, Some(ShellEvent::Core(Input::Streamed { .. }))), "{streamed:?}");
        assert_eq!(start.elapsed(), Duration::from_millis(900), "the slowest level");
        let registered = next(&mut queue).await;
        assert!(
            matches!(registered, Some(ShellEvent::Core(Input::SpawnPointsRegistered { .. }))),
            "{registered:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_millis(1050), "150 ms after the levels");
        world.stream(request("crypt", StreamPart::Rooms), WorldReports::new(events));
        let rooms = next(&mut queue).await;
        assert!(matches!(rooms, Some(ShellEvent::Core(Input::Streamed { .. }))), "{rooms:?}");
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(queue.try_recv().is_err(), "rooms register no spawn points");
    }
}

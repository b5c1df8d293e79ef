//! Simulated level streaming and the world-map gate (docs/spec/transitions.md T1).
//!
//! The core does not stream anything itself: it asks the shell to ([`super::Output::Stream`])
//! and hears back by [`LoadId`]. A completion whose load is no longer the one in flight (its
//! travel was superseded) is recognised and ignored.

use std::fmt;

use gatehouse_protocol::NodeId;

/// Names one streaming request; never reused within a process.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoadId(pub u64);

impl fmt::Debug for LoadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "load#{}", self.0)
    }
}

impl fmt::Display for LoadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Dungeon rooms of the streamed node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rooms {
    /// The streamed node is not a dungeon (or nothing is streamed).
    NoDungeon,
    /// The rooms are streaming.
    Streaming(LoadId),
    /// Every room streamed.
    Ready,
}

/// The spawn points of the streamed node (docs/spec/transitions.md T2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpawnPoints {
    /// Not registered yet; their registration will be reported
    /// ([`super::Input::SpawnPointsRegistered`]), and that event wakes the spawn queue.
    Announced,
    /// Registered: spawns can find them.
    Registered,
    /// Not registered, and no event will say when: a spawn that needs them retries on the
    /// `spawn_retry` timer, the poll kept for what nothing announces. The simulated streamer
    /// announces every registration, so only the tests' hook makes spawn points unannounced; a
    /// level streamer that registers spawn points silently would too.
    #[cfg_attr(not(test), expect(dead_code, reason = "the simulated streamer announces all"))]
    Unannounced,
}

/// What a spawn attempt finds on a node (see [`WorldStreaming::spawn_points_on`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpawnPointsOn {
    /// The node is not streamed: a later ready callback processes the spawn.
    NotStreamed,
    /// Streamed, its spawn points in the given state.
    Streamed(SpawnPoints),
}

/// What is streamed and what is streaming.
#[derive(Debug)]
pub(crate) struct WorldStreaming {
    governs_session: bool,
    /// The node whose levels are in, and the load that streamed it.
    streamed: Option<(NodeId, LoadId)>,
    /// The streamed node's spawn points.
    spawn_points: SpawnPoints,
    pub(crate) rooms: Rooms,
    /// World-map streaming in flight: the load and its node.
    node_load: Option<(LoadId, NodeId)>,
    next_load: u64,
}

/// What a finished load was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Streamed {
    /// A node's levels: the node is streamed now.
    Node(NodeId),
    /// The dungeon rooms of the streamed node.
    Rooms,
    /// A load nobody waits for any more.
    Stale,
}

impl WorldStreaming {
    /// Nothing streamed yet; `governs_session` says whether the world-map gate applies.
    pub(crate) fn new(governs_session: bool) -> Self {
        WorldStreaming {
            governs_session,
            streamed: None,
            spawn_points: SpawnPoints::Announced,
            rooms: Rooms::NoDungeon,
            node_load: None,
            next_load: 1,
        }
    }

    /// A fresh load id.
    fn allocate(&mut self) -> LoadId {
        let id = LoadId(self.next_load);
        self.next_load += 1;
        id
    }

    /// Starts streaming `node`: the current level is unloaded, so nothing is streamed until
    /// the new load completes.
    pub(crate) fn begin_node(&mut self, node: NodeId) -> LoadId {
        let load = self.allocate();
        self.streamed = None;
        // Every node load asks the streamer to report its spawn points' registration.
        self.spawn_points = SpawnPoints::Announced;
        self.rooms = Rooms::NoDungeon;
        self.node_load = Some((load, node));
        load
    }

    /// Starts streaming the rooms of the streamed dungeon node.
    pub(crate) fn begin_rooms(&mut self) -> LoadId {
        let load = self.allocate();
        self.rooms = Rooms::Streaming(load);
        load
    }

    /// Records a finished load.
    pub(crate) fn complete(&mut self, load: LoadId) -> Streamed {
        if let Some((current, node)) = &self.node_load
            && *current == load
        {
            let node = node.clone();
            self.node_load = None;
            self.streamed = Some((node.clone(), load));
            return Streamed::Node(node);
        }
        if self.rooms == Rooms::Streaming(load) {
            self.rooms = Rooms::Ready;
            return Streamed::Rooms;
        }
        Streamed::Stale
    }

    /// Records that the spawn points of the node streamed by `load` registered. Returns whether
    /// that changed anything (false for a stale load or a repeated report): a change is what
    /// wakes the spawn queue.
    pub(crate) fn spawn_points_registered(&mut self, load: LoadId) -> bool {
        let current = self.streamed.as_ref().is_some_and(|(_, l)| *l == load);
        let changed = current && self.spawn_points != SpawnPoints::Registered;
        if changed {
            self.spawn_points = SpawnPoints::Registered;
        }
        changed
    }

    /// Test hook: the streamed node's spawn points unregister (as if its spawn-point actors
    /// were not registered yet), without any event.
    #[cfg(test)]
    pub(crate) fn forget_spawn_points(&mut self) {
        self.spawn_points = SpawnPoints::Unannounced;
    }

    /// The load that streamed the current node.
    #[cfg(test)]
    pub(crate) fn streamed_load(&self) -> Option<LoadId> {
        self.streamed.as_ref().map(|(_, l)| *l)
    }

    /// The node whose levels are in.
    pub(crate) fn streamed_node(&self) -> Option<&NodeId> {
        self.streamed.as_ref().map(|(n, _)| n)
    }

    /// Whether spawn points can be found on `node`: not when the node is not streamed at all,
    /// else in the state its spawn points are in.
    pub(crate) fn spawn_points_on(&self, node: &NodeId) -> SpawnPointsOn {
        if self.streamed_node() == Some(node) {
            SpawnPointsOn::Streamed(self.spawn_points)
        } else {
            SpawnPointsOn::NotStreamed
        }
    }

    /// `IsLevelReadyForSpawn` (docs/spec/transitions.md T1): may a pawn be placed on `node`?
    ///
    /// - an active dungeon is ready only when its rooms are;
    /// - with a world map governing the session: not while nothing is streamed (the boot travel
    ///   has not delivered a level), and a requested node only when the streamed node matches;
    /// - with no world map and no dungeon managing levels (a standalone map): ready.
    pub(crate) fn is_level_ready_for_spawn(&self, node: &NodeId) -> bool {
        match self.rooms {
            Rooms::Streaming(_) => return false,
            Rooms::Ready => return self.streamed_node() == Some(node),
            Rooms::NoDungeon => {}
        }
        if !self.governs_session {
            return true;
        }
        self.streamed_node() == Some(node)
    }

    /// `IsLoadInFlight` (docs/spec/transitions.md T7): world-map streaming in progress,
    /// or an active dungeon whose rooms are not ready.
    pub(crate) fn is_load_in_flight(&self) -> bool {
        self.node_load.is_some() || matches!(self.rooms, Rooms::Streaming(_))
    }

    /// The streaming loads in flight, described for operators.
    pub(crate) fn loads_in_flight(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((load, node)) = &self.node_load {
            out.push(format!("{load:?}: node {node}"));
        }
        if let Rooms::Streaming(load) = self.rooms {
            let node = self.streamed_node().map_or_else(String::new, |n| n.to_string());
            out.push(format!("{load:?}: dungeon rooms of {node}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load logs as `load#N`.
    #[test]
    fn a_load_id_logs_as_load_and_its_number() {
        assert_eq!(LoadId(7).to_string(), "load#7");
        assert_eq!(format!("{:?}", LoadId(7)), "load#7");
    }

    fn node(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    /// T1 (docs/spec/transitions.md): a world map governs the session, no dungeon is active and
    /// nothing is streamed yet: refused.
    #[test]
    fn the_gate_refuses_while_a_world_map_governs_and_nothing_is_streamed() {
        let s = WorldStreaming::new(true);
        assert!(!s.is_level_ready_for_spawn(&node("a")));
    }

    /// T1: a requested world-map node is ready only when the currently streamed node matches.
    #[test]
    fn the_gate_allows_only_the_streamed_node() {
        let mut s = WorldStreaming::new(true);
        let load = s.begin_node(node("a"));
        assert_eq!(s.complete(load), Streamed::Node(node("a")));
        assert!(s.is_level_ready_for_spawn(&node("a")));
        assert!(!s.is_level_ready_for_spawn(&node("b")));
    }

    /// T1: an active dungeon is ready only when its rooms are ready.
    #[test]
    fn an_active_dungeon_is_ready_only_when_its_rooms_are() {
        let mut s = WorldStreaming::new(true);
        let load = s.begin_node(node("crypt"));
        s.complete(load);
        let rooms = s.begin_rooms();
        assert!(!s.is_level_ready_for_spawn(&node("crypt")));
        assert!(s.is_load_in_flight());
        assert_eq!(s.complete(rooms), Streamed::Rooms);
        assert!(s.is_level_ready_for_spawn(&node("crypt")));
        assert!(!s.is_load_in_flight());
    }

    /// T1: with no world map or dungeon managing levels at all (a standalone test map), the gate
    /// is always ready.
    #[test]
    fn a_standalone_map_is_always_ready() {
        let s = WorldStreaming::new(false);
        assert!(s.is_level_ready_for_spawn(&node("a")));
    }

    #[test]
    fn a_superseded_load_is_stale() {
        let mut s = WorldStreaming::new(true);
        let old = s.begin_node(node("a"));
        let new = s.begin_node(node("b"));
        assert_eq!(s.complete(old), Streamed::Stale);
        assert_eq!(s.complete(new), Streamed::Node(node("b")));
    }

    #[test]
    fn spawn_points_of_an_old_load_do_not_register_on_the_new_node() {
        let mut s = WorldStreaming::new(true);
        let a = s.begin_node(node("a"));
        s.complete(a);
        let b = s.begin_node(node("b"));
        s.complete(b);
        assert!(!s.spawn_points_registered(a), "a stale report changes nothing");
        let streamed = |p| SpawnPointsOn::Streamed(p);
        assert_eq!(s.spawn_points_on(&node("b")), streamed(SpawnPoints::Announced));
        assert!(s.spawn_points_registered(b));
        assert!(!s.spawn_points_registered(b), "a repeated report changes nothing");
        assert_eq!(s.spawn_points_on(&node("b")), streamed(SpawnPoints::Registered));
        assert_eq!(s.spawn_points_on(&node("a")), SpawnPointsOn::NotStreamed);
    }
}

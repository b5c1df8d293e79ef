//! An example of a game's own world behind gatehouse's [`World`] trait (docs/embedding.md).
//!
//! Where the default world simulates streaming with a timer, this one does real work: when the
//! server asks it to stream a node, it reads each level's file from a directory
//! (`levels/<level>.toml`), parses it, and takes the node's spawn points from what it found. It
//! reports the levels streamed once every file is read, and the spawn points registered once
//! the node has at least one. A level file that is missing or does not parse is logged, and
//! the node is never reported streamed: the server's hard maximum on a transition then fails
//! it and travels back, as it would for a real world that cannot load a level.
//!
//! It also keeps the pawns the server told it of, as a real world keeps their bodies: which
//! node each stands on.
//!
//! The binary (`src/main.rs`) runs a server with this world and a swarm of simulated clients
//! against it, and checks the session as `gatehouse-sim --check` does.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gatehouse_protocol::{LevelName, NodeId, PawnId, PawnIdRuns, PlayerId};
use gatehouse_server::game::{StreamPart, StreamRequest};
use gatehouse_server::world::{World, WorldReports};
use serde::Deserialize;

/// One level file: what a real game's level holds, cut down to what the server needs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelFile {
    /// `[[spawn_point]]`: where pawns may be placed in this level.
    #[serde(default)]
    pub spawn_point: Vec<SpawnPoint>,
}

/// A spawn point of a level.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnPoint {
    /// Its name in the level.
    pub name: String,
    /// Where it stands, metres in the level's frame (x, y, z).
    pub position: [f64; 3],
}

/// Why a level could not be loaded: the file and what was wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum LevelError {
    /// The file could not be read.
    #[error("cannot read level file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a level.
    #[error("invalid level file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, on one line.
        message: String,
    },
}

/// Reads and parses the file of `level` in `dir`.
///
/// # Errors
/// [`LevelError`] naming the file.
pub fn read_level(dir: &Path, level: &LevelName) -> Result<LevelFile, LevelError> {
    let path = dir.join(format!("{level}.toml"));
    let text = std::fs::read_to_string(&path)
        .map_err(|source| LevelError::Read { path: path.clone(), source })?;
    toml::from_str(&text)
        .map_err(|e| LevelError::Parse { path, message: e.message().replace('\n', " ") })
}

/// What the world knows, shared with whoever wants to look (the binary's summary, tests).
#[derive(Debug, Default, Clone)]
pub struct WorldState {
    /// The spawn points of each node, as its level files gave them at its last streaming.
    pub spawn_points: BTreeMap<NodeId, Vec<SpawnPoint>>,
    /// Level files read and parsed so far.
    pub levels_read: usize,
    /// Level files that failed, with why.
    pub level_errors: Vec<String>,
    /// The pawns the server told of, and the node each stands on.
    pub pawns: BTreeMap<PawnId, (PlayerId, NodeId)>,
    /// Pawns spawned so far.
    pub pawns_spawned: usize,
    /// Pawns moved (teleported) so far.
    pub pawns_moved: usize,
    /// Pawns destroyed so far.
    pub pawns_destroyed: usize,
}

/// The world's state; a panic while holding the lock leaves plain counters behind, so they are
/// read on.
fn lock(state: &Mutex<WorldState>) -> std::sync::MutexGuard<'_, WorldState> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A world whose levels are files in a directory.
#[derive(Debug, Clone)]
pub struct LevelFiles {
    dir: PathBuf,
    state: Arc<Mutex<WorldState>>,
}

impl LevelFiles {
    /// A world reading its levels from `dir` (`dir/<level>.toml`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LevelFiles { dir: dir.into(), state: Arc::default() }
    }

    /// What the world knows now (a copy).
    pub fn state(&self) -> WorldState {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WorldState> {
        lock(&self.state)
    }
}

impl World for LevelFiles {
    fn stream(&mut self, request: StreamRequest, reports: WorldReports) {
        let (dir, state) = (self.dir.clone(), self.state.clone());
        tokio::spawn(async move {
            // Reading and parsing is blocking file work: off the async threads.
            let levels = request.levels.clone();
            let read = tokio::task::spawn_blocking(move || {
                levels.iter().map(|level| read_level(&dir, level)).collect::<Vec<_>>()
            })
            .await;
            let Ok(read) = read else { return };
            let mut points = Vec::new();
            let mut failed = false;
            {
                let mut state = lock(&state);
                for level in read {
                    match level {
                        Ok(level) => {
                            state.levels_read += 1;
                            points.extend(level.spawn_point);
                        }
                        Err(e) => {
                            tracing::error!(node = %request.node, error = %e, "level not loaded");
                            state.level_errors.push(e.to_string());
                            failed = true;
                        }
                    }
                }
                if !failed && request.part == StreamPart::Levels {
                    state.spawn_points.insert(request.node.clone(), points.clone());
                }
            }
            // A node with a level missing is not in: never report it (see the crate's doc).
            if failed || !reports.streamed(request.load).await {
                return;
            }
            if request.part != StreamPart::Levels {
                return;
            }
            if points.is_empty() {
                tracing::warn!(node = %request.node, "no spawn point in any level: spawns there wait");
            } else {
                reports.spawn_points_registered(request.load).await;
            }
        });
    }

    fn pawn_spawned(&mut self, pawn: PawnId, player: &PlayerId, node: &NodeId) {
        let mut state = self.lock();
        state.pawns.insert(pawn, (player.clone(), node.clone()));
        state.pawns_spawned += 1;
    }

    fn pawns_moved(&mut self, node: &NodeId, pawns: &PawnIdRuns) {
        let mut state = self.lock();
        for pawn in pawns.iter() {
            if let Some((_, at)) = state.pawns.get_mut(&pawn) {
                *at = node.clone();
            }
            state.pawns_moved += 1;
        }
    }

    fn pawn_destroyed(&mut self, pawn: PawnId) {
        let mut state = self.lock();
        state.pawns.remove(&pawn);
        state.pawns_destroyed += 1;
    }
}

/// What one session of simulated clients against a server on this world found.
#[derive(Debug)]
pub struct Session {
    /// The simulator's report (its [`problems`](gatehouse_client_sim::report::SwarmReport::problems)
    /// are what `gatehouse-sim --check` fails on).
    pub report: gatehouse_client_sim::report::SwarmReport,
    /// What the world knew at the end.
    pub world: WorldState,
}

/// Why a session could not run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The world map or the server config was refused.
    #[error(transparent)]
    Config(#[from] gatehouse_server::config::ConfigError),
    /// The server could not start, or stopped badly.
    #[error(transparent)]
    Server(#[from] gatehouse_server::ServerError),
    /// The simulator could not run.
    #[error(transparent)]
    Sim(#[from] gatehouse_client_sim::SimError),
    /// A temporary data directory or the bound address could not be had.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs a server on 127.0.0.1 (an ephemeral port, a temporary data dir, the development key)
/// with the world map `dir/world.toml` and a [`LevelFiles`] world on `dir/levels/`, then
/// `clients` simulated clients for `duration`, every one running the whole client lifecycle;
/// stops the server and returns what the simulator and the world saw.
///
/// # Errors
/// [`SessionError`]: the world map is refused, the server cannot start or stops badly, or the
/// simulator cannot run.
pub async fn run_session(
    dir: &Path,
    clients: usize,
    duration: std::time::Duration,
) -> Result<Session, SessionError> {
    use gatehouse_client_sim::swarm::{SwarmConfig, run_swarm};
    use gatehouse_server::config::{ServerConfig, load_world};

    let data = tempfile::tempdir()?;
    let mut config = ServerConfig::default();
    config.network.bind = ([127, 0, 0, 1], 0).into();
    config.admin.enabled = false;
    config.data_dir = data.path().to_owned();
    let map = load_world(&dir.join("world.toml"))?;
    let world = LevelFiles::new(dir.join("levels"));
    let server = gatehouse_server::Server::bind_with_world(&config, map, world.clone()).await?;
    let addr = server.local_addr()?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(server.run(shutdown.clone()));
    let cert = data.path().join("dev-cert.der");
    let swarm = SwarmConfig::new(addr, cert, clients, duration);
    let report = run_swarm(swarm).await;
    shutdown.cancel();
    let stopped = running.await.map_err(|e| std::io::Error::other(e.to_string()))?;
    let report = report?;
    stopped?;
    Ok(Session { report, world: world.state() })
}

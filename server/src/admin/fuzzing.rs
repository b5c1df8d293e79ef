//! The admin routes for the fuzz target (`fuzz/fuzz_targets/admin_requests.rs`), behind the
//! `fuzzing` feature.

use std::sync::Arc;

use axum::Router;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{AdminContext, AdminToken, Probes, router};
use crate::GameHandle;
use crate::config::{AuthConfig, GameConfig, NetworkConfig, parse_world};
use crate::game::{Game, Input};
use crate::metrics::Metrics;
use crate::shell::{ShellEvent, sample};

/// The world the routes' game plays: the test suite's small one.
const WORLD: &str = include_str!("../../../tests/worlds/quick.toml");

/// The admin routes over a game task of their own (a fresh game on a small world, answering
/// pings, snapshots, samples and travels as the server's game task does), with `token`
/// configured if given. Call it inside a tokio runtime, which runs the game task.
///
/// # Errors
/// The token or the world refused, as text.
pub fn routes(token: Option<&str>) -> Result<Router, String> {
    let token = token.map(AdminToken::parse).transpose()?;
    let world =
        parse_world(std::path::Path::new("fuzz-world.toml"), WORLD).map_err(|e| e.to_string())?;
    let nodes = world.nodes.iter().map(|n| n.id.clone()).collect();
    let network = NetworkConfig { max_players: 8, ..NetworkConfig::default() };
    let rules = crate::config::game_rules(
        &GameConfig::default(),
        &AuthConfig::default(),
        &network,
        &crate::config::FleetConfig::default(),
    );
    let mut game = Game::new(rules, Arc::new(world), std::time::Instant::now());
    let (events, mut rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            match event {
                ShellEvent::Ping(reply) => drop(reply.send(())),
                ShellEvent::Snapshot(reply) => drop(reply.send(game.snapshot())),
                ShellEvent::Sample(reply) => drop(reply.send(sample(&game))),
                ShellEvent::Travel { node } => {
                    game.handle(std::time::Instant::now(), Input::Travel { node });
                    // Nobody carries the outputs: dropped, so nothing piles up.
                    while game.poll_output().is_some() {}
                }
                ShellEvent::Core(_)
                | ShellEvent::Store(_)
                | ShellEvent::DestinationFound { .. } => {}
            }
        }
    });
    let probes = Probes::default();
    probes.mark_listening();
    probes.set_store_open(true);
    let context = AdminContext {
        game: GameHandle { events },
        nodes,
        metrics: Metrics::new(),
        probes: Arc::new(probes),
        draining: CancellationToken::new(),
    };
    Ok(router(context, token))
}

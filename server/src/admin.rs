//! The admin HTTP endpoint, bound to loopback by default: health, state, metrics, travel.
//!
//! | route | answer |
//! |---|---|
//! | `GET /health` | `200 ok` while the game task runs, `503` once it stopped |
//! | `GET /state` | the game snapshot as JSON: phase, transition, pending spawns with kind and node, players with pawn / placed / dead, unplaced players, in-flight loads, counters |
//! | `GET /metrics` | the decision counters in the Prometheus text format |
//! | `POST /travel/{node}` | starts a travel to `node`: `202`, or `404` naming an unknown node |
//!
//! It only reads snapshots and sends travel requests to the game task; it holds no game state.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_protocol::NodeId;
use tokio_util::sync::CancellationToken;

use crate::GameHandle;
use crate::game::Counters;

/// What the handlers share.
#[derive(Debug, Clone)]
struct AdminState {
    game: GameHandle,
    nodes: Arc<BTreeSet<NodeId>>,
}

/// Binds the admin endpoint.
///
/// # Errors
/// The OS error if `addr` cannot be bound.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves the admin endpoint on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    game: GameHandle,
    nodes: BTreeSet<NodeId>,
    shutdown: CancellationToken,
) {
    let state = AdminState { game, nodes: Arc::new(nodes) };
    let app = Router::new()
        .route("/health", get(health))
        .route("/state", get(state_json))
        .route("/metrics", get(metrics))
        .route("/travel/{node}", post(travel))
        .with_state(state);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "admin endpoint listening");
    }
    let served =
        axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await;
    if let Err(e) = served {
        tracing::warn!(error = %e, "admin endpoint stopped");
    }
}

async fn health(State(s): State<AdminState>) -> Response {
    match s.game.snapshot().await {
        Some(_) => (StatusCode::OK, "ok\n").into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response(),
    }
}

async fn state_json(State(s): State<AdminState>) -> Response {
    match s.game.snapshot().await {
        Some(snapshot) => axum::Json(snapshot).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response(),
    }
}

async fn metrics(State(s): State<AdminState>) -> Response {
    match s.game.snapshot().await {
        Some(snapshot) => {
            let mut text = prometheus_counters(&snapshot.counters);
            text.push_str(
                "# HELP gatehouse_players Logged-in players.\n# TYPE gatehouse_players gauge\n",
            );
            text.push_str(&format!("gatehouse_players {}\n", snapshot.players.len()));
            text.push_str("# HELP gatehouse_pending_spawns Pending spawn requests.\n# TYPE gatehouse_pending_spawns gauge\n");
            text.push_str(&format!("gatehouse_pending_spawns {}\n", snapshot.pending_spawns.len()));
            ([("content-type", "text/plain; version=0.0.4")], text).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response(),
    }
}

async fn travel(State(s): State<AdminState>, Path(node): Path<String>) -> Response {
    let node = match NodeId::new(node) {
        Ok(node) if s.nodes.contains(&node) => node,
        Ok(node) => {
            return (StatusCode::NOT_FOUND, format!("no node {node} in this world\n"))
                .into_response();
        }
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    if s.game.travel(node.clone()).await {
        (StatusCode::ACCEPTED, format!("travelling to {node}\n")).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response()
    }
}

/// Every counter as a Prometheus counter named `gatehouse_<field>_total`.
fn prometheus_counters(counters: &Counters) -> String {
    let mut out = String::new();
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(counters) {
        for (name, value) in fields {
            out.push_str(&format!(
                "# TYPE gatehouse_{name}_total counter\ngatehouse_{name}_total {value}\n"
            ));
        }
    }
    out
}

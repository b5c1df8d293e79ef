//! The admin HTTP endpoint, bound to loopback by default: health, state, metrics, travel.
//!
//! | route | answer |
//! |---|---|
//! | `GET /health` | `200 ok` while the game task runs, `503` once it stopped |
//! | `GET /state` | the game snapshot as JSON: phase, transition, pending spawns with kind and node, players with pawn / placed / dead, unplaced players, in-flight loads, counters, and `recent_transition_timings`: the last 256 transitions that ended, each with `transition_id`, `players`, `started_to_all_ready_us`, `all_ready_to_ended_us`, `whole_us`, `settle_timed_out` |
//! | `GET /metrics` | the decision counters in the Prometheus text format |
//! | `POST /travel/{node}` | starts a travel to `node`: `202`, or `404` naming an unknown node; `401` without the admin token when one is configured |
//!
//! The read-only routes are open. A route that changes the game needs `Authorization: Bearer
//! TOKEN` whenever an [`AdminToken`] is configured, and one must be whenever the endpoint binds
//! beyond loopback ([`bind`] refuses otherwise): on a shared network, anyone who can reach the
//! port could otherwise move every player.
//!
//! It only reads snapshots and sends travel requests to the game task; it holds no game state.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_protocol::NodeId;
use tokio_util::sync::CancellationToken;

use crate::GameHandle;
use crate::config::AdminConfig;
use crate::game::Counters;

/// The bearer token that routes changing the game (`POST /travel`) require: `admin.token` in
/// the config file, or `GATEHOUSE_ADMIN_TOKEN` (never a command-line flag, which other users
/// can read). At least [`AdminToken::MIN_LEN`] printable ASCII characters; `Debug` never shows
/// it.
///
/// Read from the config file as it is and checked by [`AdminToken::check`] with the other keys,
/// so a refused token is never quoted back in a parse error.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct AdminToken(String);

impl AdminToken {
    /// The shortest token accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A checked token (see [`AdminToken::check`]).
    ///
    /// # Errors
    /// What is wrong with it, without quoting it.
    pub fn parse(token: &str) -> Result<AdminToken, String> {
        let token = AdminToken(token.to_owned());
        token.check()?;
        Ok(token)
    }

    /// Checks the token: at least [`Self::MIN_LEN`] bytes, printable ASCII without spaces (it
    /// travels in an HTTP header).
    ///
    /// # Errors
    /// What is wrong with it, without quoting it.
    pub fn check(&self) -> Result<(), String> {
        if self.0.len() < Self::MIN_LEN {
            return Err(format!(
                "must be at least {} bytes long, found {}",
                Self::MIN_LEN,
                self.0.len()
            ));
        }
        if !self.0.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be printable ASCII without spaces".into());
        }
        Ok(())
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    fn accepts(&self, presented: &[u8]) -> bool {
        use sha2::Digest as _;
        // Comparing digests hides the token's length and where a guess goes wrong.
        let want = sha2::Sha256::digest(self.0.as_bytes());
        let got = sha2::Sha256::digest(presented);
        want.iter().zip(got.iter()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// A bound admin endpoint, with the token its changing routes require.
#[derive(Debug)]
pub struct AdminListener {
    listener: tokio::net::TcpListener,
    token: Option<AdminToken>,
}

impl AdminListener {
    /// The bound address (useful with port 0).
    ///
    /// # Errors
    /// The OS error if the socket address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
struct AdminState {
    game: GameHandle,
    nodes: Arc<BTreeSet<NodeId>>,
    token: Option<Arc<AdminToken>>,
}

/// Binds the admin endpoint at `config.bind`.
///
/// # Errors
/// `PermissionDenied`, naming `admin.token`, if the address is beyond loopback and no token is
/// configured (see [`AdminConfig::check_exposure`]); the OS error if it cannot be bound.
pub async fn bind(config: &AdminConfig) -> std::io::Result<AdminListener> {
    config
        .check_exposure()
        .map_err(|why| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why))?;
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    Ok(AdminListener { listener, token: config.token.clone() })
}

/// Serves the admin endpoint on `listener` until `shutdown`.
pub async fn serve(
    listener: AdminListener,
    game: GameHandle,
    nodes: BTreeSet<NodeId>,
    shutdown: CancellationToken,
) {
    let AdminListener { listener, token } = listener;
    let state = AdminState { game, nodes: Arc::new(nodes), token: token.map(Arc::new) };
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

/// `None` if the request may change the game: no token is configured, or it carries
/// `Authorization: Bearer TOKEN`; otherwise the `401` to answer.
fn refuse_unauthorized(s: &AdminState, headers: &HeaderMap) -> Option<Response> {
    let token = s.token.as_ref()?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    if token.accepts(presented) {
        return None;
    }
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this route needs the admin token: Authorization: Bearer TOKEN\n",
        )
            .into_response(),
    )
}

async fn travel(
    State(s): State<AdminState>,
    headers: HeaderMap,
    Path(node): Path<String>,
) -> Response {
    // Before looking at the node, so an unauthenticated caller learns nothing about the world.
    if let Some(refusal) = refuse_unauthorized(&s, &headers) {
        return refusal;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_accepts_only_itself() {
        let token = AdminToken::parse("0123456789abcdef-soak").unwrap();
        assert!(token.accepts(b"0123456789abcdef-soak"));
        assert!(!token.accepts(b"0123456789abcdef-soaK"));
        assert!(!token.accepts(b""));
    }

    #[test]
    fn a_short_or_spaced_token_is_refused_without_quoting_it() {
        let short = AdminToken::parse("hunter2").unwrap_err();
        assert!(short.contains("at least 16") && !short.contains("hunter2"), "{short}");
        let spaced = AdminToken::parse("correct horse battery staple").unwrap_err();
        assert!(spaced.contains("without spaces") && !spaced.contains("horse"), "{spaced}");
    }

    #[test]
    fn the_debug_output_never_shows_the_token() {
        let token = AdminToken::parse("0123456789abcdef-soak").unwrap();
        assert!(!format!("{token:?}").contains("0123"));
    }
}

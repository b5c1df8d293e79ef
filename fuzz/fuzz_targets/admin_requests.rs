//! Fuzz target: the admin endpoint's handlers, on requests whoever reaches the port controls.
//!
//! The input is a request (a method, a path, headers, a body) sent through the admin routes of
//! a real game (the server's `fuzzing` feature), with the admin token configured or not.
//! Checked:
//! - nothing panics, and no request is answered 500;
//! - with a token configured, `GET /state` and `POST /travel/...` are never answered 2xx
//!   without `Authorization: Bearer` and that token;
//! - without one, `POST /travel/...` is never answered 2xx unless the `Host` names loopback.

#![no_main]
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt as _;

const TOKEN: &str = "fuzzing-admin-token-0123";

#[derive(Debug, Arbitrary)]
enum Method {
    Get,
    Post,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Path {
    Health,
    Ready,
    State,
    Metrics,
    Travel(String),
    Other(String),
}

#[derive(Debug, Arbitrary)]
struct Case {
    with_token: bool,
    method: Method,
    path: Path,
    /// A `Host`: loopback by name, by address, or anything.
    host: Option<String>,
    /// `Authorization`: the token, a wrong one, or none.
    authorization: Option<Option<String>>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// The runtime the routes' game tasks run on, and the routes with and without a token.
fn world() -> &'static (tokio::runtime::Runtime, Router, Router) {
    static WORLD: OnceLock<(tokio::runtime::Runtime, Router, Router)> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the fuzz target");
        let (open, guarded) = runtime.block_on(async {
            let open = gatehouse_server::admin::fuzzing::routes(None).expect("the open routes");
            let guarded =
                gatehouse_server::admin::fuzzing::routes(Some(TOKEN)).expect("the guarded routes");
            (open, guarded)
        });
        (runtime, open, guarded)
    })
}

fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(name, _)| name),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fuzz_target!(|case: Case| {
    let (runtime, open, guarded) = world();
    let method = match &case.method {
        Method::Get => "GET".to_owned(),
        Method::Post => "POST".to_owned(),
        Method::Other(m) => m.clone(),
    };
    let path = match &case.path {
        Path::Health => "/health".to_owned(),
        Path::Ready => "/ready".to_owned(),
        Path::State => "/state".to_owned(),
        Path::Metrics => "/metrics".to_owned(),
        Path::Travel(node) => format!("/travel/{node}"),
        Path::Other(p) => p.clone(),
    };
    let mut request = Request::builder().method(method.as_str()).uri(path.as_str());
    if let Some(host) = &case.host {
        request = request.header("host", host.as_str());
    }
    let presents_token = match &case.authorization {
        Some(Some(value)) => {
            request = request.header("authorization", format!("Bearer {value}"));
            value == TOKEN
        }
        Some(None) => {
            request = request.header("authorization", format!("Bearer {TOKEN}"));
            true
        }
        None => false,
    };
    for (name, value) in &case.headers {
        if name.eq_ignore_ascii_case("host") || name.eq_ignore_ascii_case("authorization") {
            continue;
        }
        request = request.header(name.as_str(), value.as_str());
    }
    // A request the http crate refuses to build never reaches a server either.
    let Ok(request) = request.body(Body::from(case.body.clone())) else { return };
    let routes = if case.with_token { guarded.clone() } else { open.clone() };
    // The router's error type is Infallible.
    let Ok(response) = runtime.block_on(routes.oneshot(request));
    let status = response.status();
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{case:?}");
    if !status.is_success() {
        return;
    }
    let guarded_route = path == "/state" || (method == "POST" && path.starts_with("/travel/"));
    if case.with_token && guarded_route {
        assert!(presents_token, "{path} answered {status} without the token: {case:?}");
    }
    if !case.with_token && method == "POST" && path.starts_with("/travel/") {
        let host = case.host.as_deref().unwrap_or_default();
        assert!(loopback_host(host), "a travel answered {status} for Host {host:?}: {case:?}");
    }
});

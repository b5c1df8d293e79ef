//! `gatehouse-server probe [--post] [PATH]`: one HTTP/1.1 request to the admin endpoint of a
//! running server, over hyper's client, for a container that has no shell and no curl: a GET for
//! its health check and its state, a POST to start a travel (`/travel/{node}`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;

use crate::config::ServerConfig;

/// The largest answer a probe reads, bytes: far above any `/state`, and a bound on a peer that
/// never stops talking.
pub const PROBE_MAX_BYTES: usize = 16 << 20;

/// The request a probe sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeMethod {
    /// `GET`: the read-only routes (`/health`, `/ready`, `/state`, `/metrics`).
    Get,
    /// `POST` with an empty body: `/travel/{node}` starts a travel.
    Post,
}

impl ProbeMethod {
    fn hyper(self) -> hyper::Method {
        match self {
            ProbeMethod::Get => hyper::Method::GET,
            ProbeMethod::Post => hyper::Method::POST,
        }
    }
}

/// What the admin endpoint answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeAnswer {
    /// The HTTP status code.
    pub status: u16,
    /// The body, as text (invalid UTF-8 replaced).
    pub body: String,
}

/// Why a probe got no answer it could read. Each message starts with `probe:` and names the
/// address or path at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The config turns the admin endpoint off.
    #[error("probe: the admin endpoint is off (admin.enabled = false or --admin-bind off)")]
    AdminOff,
    /// The path is not one the request line can carry as is.
    #[error("probe: expected a path such as /health or /state, found {0:?}")]
    BadPath(String),
    /// Nothing answered in time, or the connection failed.
    #[error("probe: no answer from the admin endpoint at {addr}: {why}")]
    NoAnswer {
        /// Where the probe asked.
        addr: SocketAddr,
        /// What went wrong, in words.
        why: String,
    },
}

/// Sends `method path` to the admin endpoint of the server `config` describes, all within
/// `timeout` (connecting and reading together). A wildcard bind is asked on loopback; the admin token, if
/// the config has one, goes along as a bearer token (`/state` needs it).
///
/// Returns the answer whatever its status: the caller decides what a non-`200` means.
///
/// # Errors
/// [`ProbeError`]: the endpoint is off, the path is not a plain absolute path, or nothing
/// answered within `timeout` (the message says why).
pub fn probe(
    config: &ServerConfig,
    method: ProbeMethod,
    path: &str,
    timeout: Duration,
) -> Result<ProbeAnswer, ProbeError> {
    if !config.admin.enabled {
        return Err(ProbeError::AdminOff);
    }
    // The request line is ours to write: a path must not smuggle in another header.
    if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ProbeError::BadPath(path.to_owned()));
    }
    let addr = probe_addr(config.admin.bind);
    let token = config.admin.token.as_ref().map(|t| t.bearer().to_owned());
    let no_answer = |why: String| ProbeError::NoAnswer { addr, why };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| no_answer(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        match tokio::time::timeout(timeout, ask(addr, method, path, token.as_deref())).await {
            Ok(answer) => answer.map_err(no_answer),
            Err(_) => Err(no_answer(format!("timed out after {} ms", timeout.as_millis()))),
        }
    })
}

/// `method path` with an empty body on a fresh connection to `addr`: the status and the body,
/// at most [`PROBE_MAX_BYTES`] of it.
async fn ask(
    addr: SocketAddr,
    method: ProbeMethod,
    path: &str,
    token: Option<&str>,
) -> Result<ProbeAnswer, String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    // The connection is driven beside the request; it ends when the answer has been read.
    let driver = tokio::spawn(connection);
    let mut request = hyper::Request::builder()
        .method(method.hyper())
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .header(hyper::header::CONNECTION, "close");
    if let Some(token) = token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), PROBE_MAX_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    driver.abort();
    Ok(ProbeAnswer { status, body: String::from_utf8_lossy(&body).into_owned() })
}

/// Where to reach an endpoint bound at `bind`: a wildcard address is reached on loopback.
pub fn probe_addr(bind: SocketAddr) -> SocketAddr {
    let ip = match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bind.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_of_a_wildcard_bind_asks_loopback() {
        let probe = |s: &str| probe_addr(s.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:7778"), "127.0.0.1:7778");
        assert_eq!(probe("[::]:7778"), "[::1]:7778");
        assert_eq!(probe("10.1.2.3:7778"), "10.1.2.3:7778");
        assert_eq!(probe("[2001:db8::1]:7778"), "[2001:db8::1]:7778");
    }

    /// Serves one canned answer on an ephemeral loopback port; returns the address and the
    /// request it read.
    fn serve_once(answer: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<String>) {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                request.push(byte[0]);
            }
            stream.write_all(answer).unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
        (addr, served)
    }

    fn config_at(addr: SocketAddr) -> ServerConfig {
        let mut config = ServerConfig::default();
        config.admin.enabled = true;
        config.admin.bind = addr;
        config
    }

    #[test]
    fn a_probe_reads_a_plain_answer_and_sends_no_token_without_one() {
        let (addr, served) =
            serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n");
        let answer =
            probe(&config_at(addr), ProbeMethod::Get, "/health", Duration::from_secs(10)).unwrap();
        assert_eq!(answer, ProbeAnswer { status: 200, body: "ok\n".to_owned() });
        let request = served.join().unwrap();
        assert!(request.starts_with("GET /health HTTP/1.1\r\n"), "{request}");
        assert!(!request.to_ascii_lowercase().contains("authorization"), "{request}");
    }

    #[test]
    fn a_probe_reads_a_chunked_failure_with_its_status() {
        let (addr, served) = serve_once(
            b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\nconnection: close\r\n\r\n4\r\ngame\r\n9\r\n stopped\n\r\n0\r\n\r\n",
        );
        let answer =
            probe(&config_at(addr), ProbeMethod::Get, "/ready", Duration::from_secs(10)).unwrap();
        assert_eq!(answer, ProbeAnswer { status: 503, body: "game stopped\n".to_owned() });
        served.join().unwrap();
    }

    #[test]
    fn a_probe_sends_the_admin_token_as_a_bearer_token() {
        let (addr, served) =
            serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
        let mut config = config_at(addr);
        config.admin.token =
            Some(crate::admin::AdminToken::parse("a-long-enough-admin-token-0123456789").unwrap());
        probe(&config, ProbeMethod::Get, "/state", Duration::from_secs(10)).unwrap();
        let request = served.join().unwrap();
        assert!(
            request.contains("authorization: Bearer a-long-enough-admin-token-0123456789\r\n"),
            "{request}"
        );
    }

    /// An operator travel from a container without curl: `probe --post /travel/{node}` sends a
    /// POST with an empty body and the admin token, and reads the `202`.
    #[test]
    fn a_post_probe_sends_a_post_with_the_token_and_reads_its_status() {
        let (addr, served) = serve_once(
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 20\r\nconnection: close\r\n\r\ntravelling to isle\n\n",
        );
        let mut config = config_at(addr);
        config.admin.token =
            Some(crate::admin::AdminToken::parse("a-long-enough-admin-token-0123456789").unwrap());
        let answer =
            probe(&config, ProbeMethod::Post, "/travel/isle", Duration::from_secs(10)).unwrap();
        assert_eq!(answer.status, 202);
        assert_eq!(answer.body, "travelling to isle\n\n");
        let request = served.join().unwrap();
        assert!(request.starts_with("POST /travel/isle HTTP/1.1\r\n"), "{request}");
        assert!(
            request.contains("authorization: Bearer a-long-enough-admin-token-0123456789\r\n"),
            "{request}"
        );
    }

    #[test]
    fn a_probe_refuses_a_path_that_could_carry_a_header_and_an_endpoint_that_is_off() {
        let config = config_at("127.0.0.1:9".parse().unwrap());
        let bad =
            probe(&config, ProbeMethod::Get, "/x\r\nEvil: 1", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(bad, ProbeError::BadPath(_)), "{bad}");
        assert!(matches!(
            probe(&config, ProbeMethod::Get, "health", Duration::from_secs(1)),
            Err(ProbeError::BadPath(_))
        ));
        let mut off = config;
        off.admin.enabled = false;
        assert!(matches!(
            probe(&off, ProbeMethod::Get, "/health", Duration::from_secs(1)),
            Err(ProbeError::AdminOff)
        ));
    }

    #[test]
    fn a_probe_of_a_port_nobody_listens_on_names_the_address() {
        // Bound and dropped: nothing listens there now.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let error = probe(&config_at(addr), ProbeMethod::Get, "/health", Duration::from_secs(10))
            .unwrap_err();
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}

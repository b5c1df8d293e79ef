//! The fleet directory under Agones: a `GameServerAllocation` through the allocator service's
//! REST endpoint, over mutual TLS (docs/spec/travel.md V13).
//!
//! Each [`FleetDirectory::candidate`] is one `POST /gameserverallocation` on a fresh
//! connection, bounded by the settings' timeout, at most `attempts` a travel. The request is
//! Agones' `AllocationRequest` in proto3 JSON (`allocation.proto`; the agones test reads what
//! it is sent against that file, strictly): two selectors, the node's servers already
//! allocated first (they have players; Packed keeps the fleet small), then Ready ones. The
//! answer's `gameServerName`, `address` and the port named [`GAME_PORT`] make the candidate.
//! The allocator reports no annotations, so a candidate's certificate fingerprint is unknown
//! here (the peer link tells it, V14).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_protocol::{NodeId, ServerId};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::Deserialize;
use serde_json::json;

use super::directory::{Candidate, CandidateFuture, DirectoryError, FleetDirectory};
use crate::config::{DirectoryKind, FleetConfig};
use crate::net::tls::{read_chain, read_key};

/// The name of the GameServer port clients dial, in the Fleet's template (deploy/agones).
pub const GAME_PORT: &str = "game";

/// The label every Fleet of gatehouse sets in its template to the node its servers host.
pub const NODE_LABEL: &str = "gatehouse.dev/node";

/// The largest allocator answer read, bytes: an allocation is a few hundred.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Where the allocator is and how to reach it (docs/spec/travel.md V13).
#[derive(Debug, Clone)]
pub struct AllocatorSettings {
    /// `fleet.allocator_url`: `https://host[:port][/prefix]`; the request goes to
    /// `{url}/gameserverallocation`.
    pub url: String,
    /// `fleet.allocator_namespace`: the namespace of the Fleets to allocate from.
    pub namespace: String,
    /// `fleet.allocator_labels`: labels every selector matches beside [`NODE_LABEL`] (e.g.
    /// `agones.dev/fleet`).
    pub labels: BTreeMap<String, String>,
    /// `fleet.allocator_certificate`: the client certificate chain, PEM or DER.
    pub certificate: PathBuf,
    /// `fleet.allocator_private_key`: its private key, PEM or DER (PKCS #8).
    pub private_key: PathBuf,
    /// `fleet.allocator_ca`: the certificate the allocator's is checked against, PEM or DER.
    pub ca: PathBuf,
    /// `fleet.allocator_timeout_ms`: the bound on one call, connection and TLS included.
    pub timeout: Duration,
    /// `fleet.allocation_attempts`: allocations one travel may ask for, at most.
    pub attempts: u32,
}

/// A [`FleetDirectory`] that allocates a GameServer of the node's Fleet for each candidate.
pub struct AgonesAllocator {
    settings: AllocatorSettings,
    tls: tokio_rustls::TlsConnector,
    host: String,
    port: u16,
    server_name: ServerName<'static>,
    path: String,
}

impl AllocatorSettings {
    /// The settings `[fleet]` gives, when `directory` is `agones` and every key they need is
    /// set (the config's checks refuse it otherwise).
    pub fn from_config(fleet: &FleetConfig) -> Option<Self> {
        if fleet.directory != DirectoryKind::Agones {
            return None;
        }
        Some(AllocatorSettings {
            url: fleet.allocator_url.clone()?,
            namespace: fleet.allocator_namespace.clone(),
            labels: fleet.allocator_labels.clone(),
            certificate: fleet.allocator_certificate.clone()?,
            private_key: fleet.allocator_private_key.clone()?,
            ca: fleet.allocator_ca.clone()?,
            timeout: fleet.allocator_timeout,
            attempts: fleet.allocation_attempts,
        })
    }
}

impl std::fmt::Debug for AgonesAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The TLS connector holds the private key: only the settings are shown.
        f.debug_struct("AgonesAllocator").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl AgonesAllocator {
    /// Reads the credentials and checks the URL.
    ///
    /// # Errors
    /// [`DirectoryError::AllocatorSettings`] naming the setting: a URL that is not
    /// `https://host...`, a certificate, key or CA file unreadable or not one, a label that is
    /// not a Kubernetes label.
    pub fn new(settings: AllocatorSettings) -> Result<Self, DirectoryError> {
        let wrong = DirectoryError::AllocatorSettings;
        let url = url::Url::parse(&settings.url)
            .map_err(|e| wrong(format!("fleet.allocator_url {:?}: {e}", settings.url)))?;
        if !url.username().is_empty() || url.password().is_some() {
            // Not quoted: it may hold a password.
            let why = "carries a user name or password; the allocator knows this server by its                        client certificate (fleet.allocator_certificate)";
            return Err(wrong(format!("fleet.allocator_url: {why}")));
        }
        if url.scheme() != "https"
            || url.query().is_some()
            || url.fragment().is_some()
            || url.port() == Some(0)
        {
            let why = "is not https://host[:port][/prefix]";
            return Err(wrong(format!("fleet.allocator_url {:?} {why}", settings.url)));
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => {
                return Err(wrong(format!("fleet.allocator_url {:?} has no host", settings.url)));
            }
        };
        let port = url.port_or_known_default().unwrap_or(443);
        let server_name = ServerName::try_from(host.clone())
            .map_err(|e| wrong(format!("fleet.allocator_url: its host {host:?}: {e}")))?;
        let path = format!("{}/gameserverallocation", url.path().trim_end_matches('/'));
        for (key, value) in &settings.labels {
            check_label_key(key)
                .and_then(|()| check_label_value(value))
                .map_err(|why| wrong(format!("fleet.allocator_labels: label {key:?}: {why}")))?;
        }
        let file = |key: &str, e: crate::net::NetError| wrong(format!("fleet.{key}: {e}"));
        let chain =
            read_chain(&settings.certificate).map_err(|e| file("allocator_certificate", e))?;
        let key = read_key(&settings.private_key).map_err(|e| file("allocator_private_key", e))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in read_chain(&settings.ca).map_err(|e| file("allocator_ca", e))? {
            roots.add(ca).map_err(|e| wrong(format!("fleet.allocator_ca: {e}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| wrong(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| wrong(format!("fleet.allocator_private_key does not fit: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config));
        Ok(Self { settings, tls, host, port, server_name, path })
    }

    /// Allocates one GameServer of `node`'s Fleet with room for `seats` players.
    async fn allocate(&self, node: &NodeId, seats: u32) -> Result<Candidate, DirectoryError> {
        let url = &self.settings.url;
        check_label_value(node.as_str()).map_err(|why| DirectoryError::AllocatorRefused {
            url: url.clone(),
            status: 0,
            message: format!("node {node} cannot be the label {NODE_LABEL}: {why}"),
        })?;
        let body = allocation_request(&self.settings, node, seats);
        let timeout = self.settings.timeout;
        let (status, answer) = tokio::time::timeout(timeout, self.post(body))
            .await
            .map_err(|_| DirectoryError::AllocatorTimeout {
                url: url.clone(),
                ms: timeout.as_millis(),
            })?
            .map_err(|why| DirectoryError::AllocatorUnreachable { url: url.clone(), why })?;
        let candidate = read_answer(status, &answer).map_err(|refusal| match refusal {
            Refusal::NoGameServer(message) => {
                DirectoryError::NoGameServer { url: url.clone(), node: node.clone(), message }
            }
            Refusal::Other(message) => {
                DirectoryError::AllocatorRefused { url: url.clone(), status, message }
            }
        })?;
        tracing::info!(
            node = %node,
            seats,
            server = %candidate.server,
            address = %candidate.address,
            "allocated a destination"
        );
        Ok(candidate)
    }

    /// `POST`s `body` on a fresh connection; the status and at most [`MAX_ANSWER_BYTES`] of
    /// the answer.
    async fn post(&self, body: Vec<u8>) -> Result<(u16, Bytes), String> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| e.to_string())?;
        let tls = self
            .tls
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        // The connection is driven beside the request; it ends when the answer has been read.
        let driver = tokio::spawn(connection);
        let authority = match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        };
        let request = hyper::Request::post(self.path.as_str())
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::CONNECTION, "close")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let answer = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        driver.abort();
        Ok((status, answer))
    }
}

impl FleetDirectory for AgonesAllocator {
    fn candidate<'a>(&'a self, node: &'a NodeId, seats: u32, asked: u32) -> CandidateFuture<'a> {
        Box::pin(async move {
            if asked >= self.settings.attempts {
                return Ok(None);
            }
            self.allocate(node, seats).await.map(Some)
        })
    }
}

/// The `AllocationRequest` for `seats` players on `node`, in proto3 JSON.
fn allocation_request(settings: &AllocatorSettings, node: &NodeId, seats: u32) -> Vec<u8> {
    let mut labels = settings.labels.clone();
    labels.insert(NODE_LABEL.to_owned(), node.to_string());
    // proto3 JSON writes a uint64 as a string. The upper bound is Agones' own default for an
    // unset one (the largest int64), written out rather than left to a default.
    let players =
        json!({ "minAvailable": seats.to_string(), "maxAvailable": i64::MAX.to_string() });
    let selector = |state: &str| json!({ "matchLabels": labels, "gameServerState": state, "players": players });
    let request = json!({
        "namespace": settings.namespace,
        "scheduling": "Packed",
        "gameServerSelectors": [selector("ALLOCATED"), selector("READY")],
    });
    request.to_string().into_bytes()
}

/// Agones' `AllocationResponse`, the fields read (any other is ignored: newer Agones adds some).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllocationResponse {
    #[serde(default)]
    game_server_name: String,
    #[serde(default)]
    ports: Vec<ResponsePort>,
    #[serde(default)]
    address: String,
}

/// `AllocationResponse.GameServerStatusPort`.
#[derive(Debug, Deserialize)]
struct ResponsePort {
    #[serde(default)]
    name: String,
    #[serde(default)]
    port: i32,
}

/// A gRPC gateway's error body: `{"code": 8, "message": "..."}`.
#[derive(Debug, Deserialize)]
struct GatewayError {
    #[serde(default)]
    message: String,
}

/// Why an answer is not an allocation.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// No GameServer matched (HTTP 429).
    NoGameServer(String),
    /// Anything else, in words.
    Other(String),
}

/// The candidate an allocator's answer names.
fn read_answer(status: u16, answer: &[u8]) -> Result<Candidate, Refusal> {
    if status != 200 {
        let message = serde_json::from_slice::<GatewayError>(answer)
            .map(|e| e.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(answer).into_owned());
        let message: String =
            message.chars().take(200).collect::<String>().escape_debug().to_string();
        return Err(match status {
            429 => Refusal::NoGameServer(message),
            _ => Refusal::Other(message),
        });
    }
    let other = |why: String| Refusal::Other(why);
    let response: AllocationResponse = serde_json::from_slice(answer)
        .map_err(|e| other(format!("not an AllocationResponse: {e}")))?;
    let server = ServerId::new(response.game_server_name.as_str())
        .map_err(|e| other(format!("gameServerName: {e}")))?;
    let port = response
        .ports
        .iter()
        .find(|p| p.name == GAME_PORT)
        .ok_or_else(|| other(format!("{server} has no port named {GAME_PORT:?}")))?;
    let port = u16::try_from(port.port)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| other(format!("{server}'s port {GAME_PORT:?} is {}", port.port)))?;
    let host = response.address.as_str();
    let address = match host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{host}]:{port}"),
        Err(_) => format!("{host}:{port}"),
    };
    crate::config::check_address(&address).map_err(|why| other(format!("address: {why}")))?;
    Ok(Candidate { server, address, server_name: host.to_owned(), certificate_sha256: None })
}

/// Checks `key` can be a Kubernetes label key: a name (a label value's rule, not empty),
/// optionally after a prefix and `/`, the prefix a DNS subdomain of at most 253 characters.
fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                let ends =
                    |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                ends(part.bytes().next())
                    && ends(part.bytes().last())
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    if !prefix_ok || name.is_empty() || check_label_value(name).is_err() {
        return Err(format!(
            "{key:?} is not a label key (a name of 63 characters at most: letters, digits, '-', \
             '_', '.', a letter or digit at each end; optionally after a DNS prefix and '/')"
        ));
    }
    Ok(())
}

/// Checks `value` can be a Kubernetes label value: at most 63 characters, alphanumerics, `-`,
/// `_` and `.`, beginning and ending with an alphanumeric.
fn check_label_value(value: &str) -> Result<(), String> {
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    let ok = value.len() <= 63
        && ends(value.bytes().next())
        && ends(value.bytes().last())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{value:?} is not a label value (63 characters at most: letters, digits, '-', '_', \
             '.', a letter or digit at each end)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AllocatorSettings {
        AllocatorSettings {
            url: "https://allocator.agones-system:443".into(),
            namespace: "games".into(),
            labels: BTreeMap::from([("agones.dev/fleet".to_owned(), "crypt".to_owned())]),
            certificate: "/nonexistent/client.pem".into(),
            private_key: "/nonexistent/client.key".into(),
            ca: "/nonexistent/ca.pem".into(),
            timeout: Duration::from_secs(3),
            attempts: 3,
        }
    }

    #[test]
    fn the_request_selects_the_nodes_allocated_servers_then_its_ready_ones() {
        let node = NodeId::new("crypt").unwrap();
        let body = allocation_request(&settings(), &node, 12);
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let labels = json!({ "agones.dev/fleet": "crypt", "gatehouse.dev/node": "crypt" });
        let players = json!({ "minAvailable": "12", "maxAvailable": "9223372036854775807" });
        let expected = json!({
            "namespace": "games",
            "scheduling": "Packed",
            "gameServerSelectors": [
                { "matchLabels": labels, "gameServerState": "ALLOCATED", "players": players },
                { "matchLabels": labels, "gameServerState": "READY", "players": players },
            ],
        });
        assert_eq!(request, expected);
    }

    #[test]
    fn an_allocation_names_the_game_port_at_the_servers_address() {
        let answer =
            br#"{"gameServerName":"crypt-x7k2p-4bq9z","ports":[{"name":"metrics","port":9100},
            {"name":"game","port":7654}],"address":"10.1.2.3","nodeName":"n1","source":"local"}"#;
        let candidate = read_answer(200, answer).unwrap();
        assert_eq!(candidate.server.as_str(), "crypt-x7k2p-4bq9z");
        assert_eq!(candidate.address, "10.1.2.3:7654");
        assert_eq!(candidate.server_name, "10.1.2.3");
        assert_eq!(candidate.certificate_sha256, None);
        let v6 = br#"{"gameServerName":"a","ports":[{"name":"game","port":7654}],"address":"2001:db8::7"}"#;
        assert_eq!(read_answer(200, v6).unwrap().address, "[2001:db8::7]:7654");
    }

    #[test]
    fn an_allocation_without_a_game_port_is_refused_naming_it() {
        let answer =
            br#"{"gameServerName":"a","ports":[{"name":"default","port":7654}],"address":"h"}"#;
        let err = read_answer(200, answer).unwrap_err();
        assert_eq!(err, Refusal::Other("a has no port named \"game\"".into()));
        let zero = br#"{"gameServerName":"a","ports":[{"name":"game","port":0}],"address":"h"}"#;
        assert_eq!(
            read_answer(200, zero).unwrap_err(),
            Refusal::Other("a's port \"game\" is 0".into())
        );
        let nameless = br#"{"ports":[{"name":"game","port":1}],"address":"h"}"#;
        assert!(
            matches!(read_answer(200, nameless), Err(Refusal::Other(m)) if m.starts_with("gameServerName"))
        );
        let addressless = br#"{"gameServerName":"a","ports":[{"name":"game","port":1}]}"#;
        assert!(
            matches!(read_answer(200, addressless), Err(Refusal::Other(m)) if m.starts_with("address"))
        );
    }

    #[test]
    fn no_game_server_to_allocate_is_told_from_a_refusal() {
        let full =
            br#"{"code":8,"message":"there is no available GameServer to allocate","details":[]}"#;
        assert_eq!(
            read_answer(429, full).unwrap_err(),
            Refusal::NoGameServer("there is no available GameServer to allocate".into())
        );
        let denied = b"forbidden\n";
        assert_eq!(read_answer(403, denied).unwrap_err(), Refusal::Other("forbidden\\n".into()));
    }

    #[test]
    fn a_node_that_cannot_be_a_label_is_refused() {
        assert!(check_label_value("crypt-2.b_c").is_ok());
        assert!(check_label_value(&"a".repeat(63)).is_ok());
        for bad in ["", "-crypt", "crypt-", "a:b", &"a".repeat(64)] {
            assert!(check_label_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_allocators_settings_are_checked_naming_the_key() {
        let new = |s: AllocatorSettings| AgonesAllocator::new(s).unwrap_err().to_string();
        let err = new(AllocatorSettings { url: "http://allocator".into(), ..settings() });
        assert!(err.contains("fleet.allocator_url \"http://allocator\" is not https"), "{err}");
        let err = new(AllocatorSettings { url: "not a url".into(), ..settings() });
        assert!(err.contains("fleet.allocator_url \"not a url\""), "{err}");
        let labels = BTreeMap::from([("agones.dev/fleet".to_owned(), "a b".to_owned())]);
        let err = new(AllocatorSettings { labels, ..settings() });
        assert!(err.contains("fleet.allocator_labels: label \"agones.dev/fleet\""), "{err}");
        for key in ["bad key", "", "Agones.dev/fleet", "agones.dev/", "/fleet", "a/b/c"] {
            let labels = BTreeMap::from([(key.to_owned(), "crypt".to_owned())]);
            let err = new(AllocatorSettings { labels, ..settings() });
            assert!(err.contains("is not a label key"), "{key:?}: {err}");
        }
        let secret = "https://user:hunter2@allocator:443";
        let err = new(AllocatorSettings { url: secret.into(), ..settings() });
        assert!(err.contains("user name or password") && !err.contains("hunter2"), "{err}");
        for url in ["https://allocator#frag", "https://allocator:0", "https://allocator?a=1"] {
            let err = new(AllocatorSettings { url: url.into(), ..settings() });
            assert!(err.contains("is not https://host[:port][/prefix]"), "{url}: {err}");
        }
        let err = new(AllocatorSettings { url: "https://-bad-".into(), ..settings() });
        assert!(err.contains("fleet.allocator_url: its host \"-bad-\""), "{err}");
        let err = new(settings());
        assert!(
            err.contains("fleet.allocator_certificate") && err.contains("/nonexistent/client.pem"),
            "{err}"
        );
    }
}

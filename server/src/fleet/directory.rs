//! The fleet directory: where a travel to a node hosted by another server finds that server
//! (docs/spec/travel.md V12). The travel knows only [`FleetDirectory`]; a compose or local
//! fleet lists its servers in config ([`StaticDirectory`]), a fleet under Agones allocates one
//! ([`AgonesAllocator`](super::allocator::AgonesAllocator), V13).
//!
//! A directory only names servers to ask. Whether one has room is its seat answer's to say, so
//! a directory is asked again, for the next candidate, after a refusal.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use gatehouse_protocol::{NodeId, ServerId};

pub use crate::config::{MAX_ADDRESS_LEN, StaticServer};
use crate::config::{ServerEntryError, check_servers};

/// A server a travel may ask for seats (docs/spec/travel.md V12): what its clients dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its id in the fleet: `fleet.server_id`, under Agones the GameServer's name.
    pub server: ServerId,
    /// Where its game port is, `host:port` (a bracketed IPv6 host), at most
    /// [`MAX_ADDRESS_LEN`] bytes.
    pub address: String,
    /// The name its certificate is checked against (TLS SNI).
    pub server_name: String,
    /// The SHA-256 of its certificate, for clients that pin it; `None` when the directory does
    /// not know it (the peer link tells it then, V14).
    pub certificate_sha256: Option<[u8; 32]>,
}

/// The future a [`FleetDirectory`] answers with.
pub type CandidateFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Candidate>, DirectoryError>> + Send + 'a>>;

/// Where destinations come from (docs/spec/travel.md V12).
pub trait FleetDirectory: Send + Sync + fmt::Debug {
    /// The server to ask next for `seats` seats on `node`, `asked` servers having refused
    /// already in this travel (0 for the first ask); `None` when there is no other to ask.
    ///
    /// # Errors
    /// [`DirectoryError`] when the directory could not answer (an allocator unreachable,
    /// refusing, or silent past its timeout); the travel may ask again, as for a refusal.
    fn candidate<'a>(&'a self, node: &'a NodeId, seats: u32, asked: u32) -> CandidateFuture<'a>;

    /// The server `server` by its id, for a message outside a travel (`PlayerTaken`,
    /// docs/spec/travel.md V17); `None` when this directory cannot name a server by its id (the
    /// default: an Agones allocator allocates by labels, and knows no server by name).
    fn locate(&self, server: &ServerId) -> Option<Candidate> {
        let _ = server;
        None
    }
}

/// Why a directory could not name a server, or could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirectoryError {
    /// A `[[fleet.servers]]` entry is wrong.
    #[error(transparent)]
    StaticServer(ServerEntryError),
    /// The allocator's settings are wrong (a file unreadable, a URL malformed).
    #[error("the Agones allocator's settings: {0}")]
    AllocatorSettings(String),
    /// The allocator could not be reached, or the TLS handshake with it failed.
    #[error("cannot reach the Agones allocator at {url}: {why}")]
    AllocatorUnreachable {
        /// `fleet.allocator_url`.
        url: String,
        /// The connection's or TLS's error.
        why: String,
    },
    /// The allocator did not answer within `fleet.allocator_timeout_ms`.
    #[error("the Agones allocator at {url} did not answer within {ms} ms")]
    AllocatorTimeout {
        /// `fleet.allocator_url`.
        url: String,
        /// The bound, milliseconds.
        ms: u128,
    },
    /// The allocator found no GameServer matching the selectors (HTTP 429, gRPC
    /// `ResourceExhausted`): the fleet has no room for now.
    #[error("the Agones allocator at {url} has no GameServer for node {node}: {message}")]
    NoGameServer {
        /// `fleet.allocator_url`.
        url: String,
        /// The node asked for.
        node: NodeId,
        /// The allocator's message.
        message: String,
    },
    /// The allocator refused the request, or answered something that is not an allocation.
    #[error("the Agones allocator at {url} answered {status}: {message}")]
    AllocatorRefused {
        /// `fleet.allocator_url`.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The allocator's message, or what is wrong with its answer.
        message: String,
    },
}

/// A directory read from config: the servers listed, in order, that host the node, skipping
/// this server itself (docs/spec/travel.md V12).
#[derive(Debug, Clone)]
pub struct StaticDirectory {
    servers: Vec<(Candidate, Vec<NodeId>)>,
}

impl StaticDirectory {
    /// The directory of `servers` for the server `own` (which is never offered).
    ///
    /// # Errors
    /// [`DirectoryError::StaticServer`] naming the first entry with a bad id, address, server
    /// name, fingerprint or node, no node, or an id listed before.
    pub fn new(own: &ServerId, servers: &[StaticServer]) -> Result<Self, DirectoryError> {
        let checked = check_servers(own, servers).map_err(DirectoryError::StaticServer)?;
        let servers = checked
            .into_iter()
            .map(|entry| {
                let candidate = Candidate {
                    server: entry.server,
                    address: entry.address,
                    server_name: entry.server_name,
                    certificate_sha256: entry.certificate_sha256,
                };
                (candidate, entry.nodes)
            })
            .collect();
        Ok(Self { servers })
    }
}

impl FleetDirectory for StaticDirectory {
    fn candidate<'a>(&'a self, node: &'a NodeId, _seats: u32, asked: u32) -> CandidateFuture<'a> {
        let found = self
            .servers
            .iter()
            .filter(|(_, nodes)| nodes.contains(node))
            .nth(asked as usize)
            .map(|(candidate, _)| candidate.clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn locate(&self, server: &ServerId) -> Option<Candidate> {
        let listed = self.servers.iter().find(|(candidate, _)| candidate.server == *server);
        listed.map(|(candidate, _)| candidate.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, address: &str, nodes: &[&str]) -> StaticServer {
        StaticServer {
            id: id.into(),
            address: address.into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    fn ask(directory: &StaticDirectory, node: &str, asked: u32) -> Option<String> {
        let node = NodeId::new(node).unwrap();
        let answer = futures_now(directory.candidate(&node, 10, asked)).unwrap();
        answer.map(|c| c.server.to_string())
    }

    /// Polls a future that is ready at once (a static directory never waits).
    fn futures_now<T>(future: Pin<Box<dyn Future<Output = T> + Send + '_>>) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(future)
    }

    #[test]
    fn a_static_directory_offers_the_nodes_servers_in_order() {
        let own = ServerId::new("hub-1").unwrap();
        let servers = [
            entry("dungeon-1", "10.0.0.2:7777", &["crypt", "caves"]),
            entry("hub-1", "10.0.0.1:7777", &["crypt", "town"]),
            entry("arena-1", "10.0.0.3:7777", &["arena"]),
            entry("dungeon-2", "[2001:db8::4]:7777", &["crypt"]),
        ];
        let directory = StaticDirectory::new(&own, &servers).unwrap();
        assert_eq!(ask(&directory, "crypt", 0).as_deref(), Some("dungeon-1"));
        assert_eq!(ask(&directory, "crypt", 1).as_deref(), Some("dungeon-2"), "itself skipped");
        assert_eq!(ask(&directory, "crypt", 2), None, "no third server hosts the crypt");
        assert_eq!(ask(&directory, "arena", 0).as_deref(), Some("arena-1"));
        assert_eq!(ask(&directory, "town", 0), None, "only this server hosts the town");
        assert_eq!(ask(&directory, "nowhere", 0), None);
    }

    /// docs/spec/travel.md V17: a `PlayerTaken` reaches any listed server by its id, whatever
    /// node it hosts; an id not listed (or this server's own) is not found.
    #[test]
    fn a_static_directory_locates_a_listed_server_by_its_id() {
        let own = ServerId::new("hub-1").unwrap();
        let servers = [
            entry("dungeon-1", "10.0.0.2:7777", &["crypt"]),
            entry("arena-1", "10.0.0.3:7777", &["arena"]),
        ];
        let directory = StaticDirectory::new(&own, &servers).unwrap();
        let found = directory.locate(&ServerId::new("arena-1").unwrap());
        assert_eq!(found.map(|c| c.address).as_deref(), Some("10.0.0.3:7777"));
        assert_eq!(directory.locate(&ServerId::new("nobody").unwrap()), None);
        assert_eq!(directory.locate(&own), None);
    }

    #[test]
    fn a_static_server_listed_twice_is_refused_naming_its_place() {
        let own = ServerId::new("hub-1").unwrap();
        let servers =
            [entry("a", "10.0.0.2:7777", &["crypt"]), entry("a", "10.0.0.3:7777", &["crypt"])];
        let err = StaticDirectory::new(&own, &servers).unwrap_err().to_string();
        assert_eq!(err, "fleet.servers[1] (id \"a\"): listed twice");
    }

    #[test]
    fn a_static_server_with_a_bad_entry_is_refused_naming_the_key() {
        let own = ServerId::new("hub-1").unwrap();
        let refused = |server: StaticServer| {
            StaticDirectory::new(&own, &[entry("ok", "h:1", &["n"]), server])
                .unwrap_err()
                .to_string()
        };
        let err = refused(entry("b", "10.0.0.2", &["crypt"]));
        assert!(err.starts_with("fleet.servers[1] (id \"b\"): address:"), "{err}");
        let err = refused(entry("b", "10.0.0.2:0", &["crypt"]));
        assert!(err.contains("not a port"), "{err}");
        let err = refused(entry("b", "2001:db8::1:7777", &["crypt"]));
        assert!(err.contains("not a host"), "{err}");
        let err = refused(entry("b", &format!("{}:1", "h".repeat(260)), &["crypt"]));
        assert!(err.contains("above 255"), "{err}");
        let longest = format!("{}:7777", "h".repeat(MAX_ADDRESS_LEN - 5));
        assert_eq!(longest.len(), MAX_ADDRESS_LEN);
        assert!(
            StaticDirectory::new(&own, &[entry("b", &longest, &["n"])]).is_ok(),
            "at the bound"
        );
        let err = refused(entry("b", &format!("h{longest}"), &["crypt"]));
        assert!(err.contains("256 bytes, above 255"), "{err}");
        let err = refused(entry("b", "h:1", &[]));
        assert!(err.ends_with("hosts no node (nodes = [])"), "{err}");
        let err = refused(entry("b", "h:1", &["bad node"]));
        assert!(err.contains("nodes:"), "{err}");
        let err = refused(entry("", "h:1", &["n"]));
        assert!(err.starts_with("fleet.servers[1] (id \"\")"), "{err}");
        let err = refused(StaticServer { server_name: String::new(), ..entry("b", "h:1", &["n"]) });
        assert!(err.ends_with("server_name is empty"), "{err}");
        let err = refused(StaticServer {
            server_name: "not a dns name!".into(),
            ..entry("b", "h:1", &["n"])
        });
        assert!(err.contains("server_name \"not a dns name!\" is not a DNS name"), "{err}");
        let err = refused(StaticServer {
            certificate_sha256: Some("AB:CD".into()),
            ..entry("b", "h:1", &["n"])
        });
        assert!(err.contains("certificate_sha256: \"AB:CD\" is not 32 bytes of hex"), "{err}");
        let err = refused(StaticServer {
            certificate_sha256: Some("zz".repeat(32)),
            ..entry("b", "h:1", &["n"])
        });
        assert!(err.contains("is not hex"), "{err}");
    }

    #[test]
    fn a_static_servers_fingerprint_is_read_with_or_without_colons() {
        let own = ServerId::new("hub-1").unwrap();
        let hex: String = (0u8..32).map(|b| format!("{b:02X}")).collect();
        let colons: String = (0u8..32).map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        for written in [hex, colons] {
            let server =
                StaticServer { certificate_sha256: Some(written), ..entry("b", "h:1", &["n"]) };
            let directory = StaticDirectory::new(&own, &[server]).unwrap();
            let node = NodeId::new("n").unwrap();
            let found = futures_now(directory.candidate(&node, 1, 0)).unwrap().unwrap();
            let expected: Vec<u8> = (0u8..32).collect();
            assert_eq!(found.certificate_sha256.map(|d| d.to_vec()), Some(expected));
            assert_eq!(found.address, "h:1");
            assert_eq!(found.server_name, "localhost");
        }
    }
}

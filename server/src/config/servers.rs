//! `[[fleet.servers]]`: the servers of a static fleet directory (docs/spec/travel.md V12), as
//! written and as checked. The fleet builds its directory on the checked entries
//! (`crate::fleet::StaticDirectory`).

use gatehouse_protocol::{NodeId, ServerId};
use serde::{Deserialize, Serialize};

/// The longest `address` an entry may have, in bytes (`TravelTo.address`,
/// docs/spec/travel.md V15).
pub const MAX_ADDRESS_LEN: usize = 255;

/// One `[[fleet.servers]]` entry of a static directory (docs/spec/travel.md V12).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StaticServer {
    /// `id`: the server's `fleet.server_id`.
    pub id: String,
    /// `address`: its game port, `host:port`.
    pub address: String,
    /// `server_name`: the name its certificate is checked against.
    pub server_name: String,
    /// `certificate_sha256`: its certificate's SHA-256, 64 hex digits, colons between bytes
    /// allowed (as the server logs it); unset, clients trust it as their first connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_sha256: Option<String>,
    /// `nodes`: the world-map nodes it hosts.
    pub nodes: Vec<String>,
}

/// A `[[fleet.servers]]` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedServer {
    /// Its id.
    pub server: ServerId,
    /// Its game port, `host:port`.
    pub address: String,
    /// The name its certificate is checked against.
    pub server_name: String,
    /// Its certificate's SHA-256, when given.
    pub certificate_sha256: Option<[u8; 32]>,
    /// The nodes it hosts.
    pub nodes: Vec<NodeId>,
}

/// A wrong `[[fleet.servers]]` entry; `index` counts from 0, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fleet.servers[{index}] (id {server:?}): {why}")]
pub struct ServerEntryError {
    /// Its place in the list.
    pub index: usize,
    /// Its `id` as written.
    pub server: String,
    /// What is wrong.
    pub why: String,
}

/// Checks every entry of `servers`, in order, and returns them without `own` (a server never
/// travels to itself).
///
/// # Errors
/// [`ServerEntryError`] naming the first entry with a bad id, address, server name,
/// fingerprint or node, no node, or an id listed before.
pub fn check_servers(
    own: &ServerId,
    servers: &[StaticServer],
) -> Result<Vec<CheckedServer>, ServerEntryError> {
    let mut read: Vec<CheckedServer> = Vec::with_capacity(servers.len());
    for (index, entry) in servers.iter().enumerate() {
        let wrong = |why: String| ServerEntryError { index, server: entry.id.clone(), why };
        let server = ServerId::new(entry.id.as_str()).map_err(|e| wrong(e.to_string()))?;
        if read.iter().any(|known| known.server == server) {
            return Err(wrong("listed twice".into()));
        }
        check_address(&entry.address).map_err(|why| wrong(format!("address: {why}")))?;
        if entry.server_name.is_empty() {
            return Err(wrong("server_name is empty".into()));
        }
        if rustls::pki_types::ServerName::try_from(entry.server_name.as_str()).is_err() {
            let why = "is not a DNS name or an IP address a certificate can be checked against";
            return Err(wrong(format!("server_name {:?} {why}", entry.server_name)));
        }
        let certificate_sha256 = entry
            .certificate_sha256
            .as_deref()
            .map(parse_sha256)
            .transpose()
            .map_err(|why| wrong(format!("certificate_sha256: {why}")))?;
        if entry.nodes.is_empty() {
            return Err(wrong("hosts no node (nodes = [])".into()));
        }
        let nodes = entry
            .nodes
            .iter()
            .map(|node| NodeId::new(node.as_str()).map_err(|e| wrong(format!("nodes: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        read.push(CheckedServer {
            server,
            address: entry.address.clone(),
            server_name: entry.server_name.clone(),
            certificate_sha256,
            nodes,
        });
    }
    read.retain(|checked| &checked.server != own);
    Ok(read)
}

/// Checks `address` is `host:port`: a host, a port 1 to 65535, at most [`MAX_ADDRESS_LEN`]
/// bytes, an IPv6 host in brackets.
///
/// # Errors
/// What is wrong, in words.
pub fn check_address(address: &str) -> Result<(), String> {
    if address.len() > MAX_ADDRESS_LEN {
        return Err(format!("{} bytes, above {MAX_ADDRESS_LEN}", address.len()));
    }
    let (host, port) =
        address.rsplit_once(':').ok_or_else(|| format!("{address:?} is not host:port"))?;
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let host_ok = match bare {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        }
    };
    if !host_ok {
        return Err(format!("{address:?}: {host:?} is not a host name or address"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{address:?}: {port:?} is not a port (1 to 65535)")),
    }
}

/// Reads a SHA-256 written as 64 hex digits, colons between bytes allowed, either case.
fn parse_sha256(text: &str) -> Result<[u8; 32], String> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b':').collect();
    if digits.len() != 64 {
        return Err(format!("{text:?} is not 32 bytes of hex ({} digits)", digits.len()));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| format!("{text:?} is not hex"))?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| format!("{text:?} is not hex"))?;
    }
    Ok(out)
}

//! The QUIC endpoint: its transport parameters, TLS configuration and UDP socket.

use std::net::SocketAddr;
use std::sync::Arc;

use quinn::crypto::rustls::QuicServerConfig;

use super::{NetError, tls};
use crate::config::NetworkConfig;

/// The transport parameters of a game server: short idle timeout with keep-alive, one
/// bidirectional stream, no unidirectional streams, bounded windows.
pub fn transport_config(network: &NetworkConfig) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    // The idle timeout is checked at config load to be in range; fall back to none on overflow.
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(network.idle_timeout).ok());
    transport.keep_alive_interval(Some(network.keep_alive));
    transport.max_concurrent_bidi_streams(1u32.into());
    transport.max_concurrent_uni_streams(0u32.into());
    transport.stream_receive_window(network.stream_receive_window.into());
    transport.receive_window(network.connection_receive_window.into());
    transport.send_window(u64::from(network.connection_receive_window) * 2);
    transport.datagram_receive_buffer_size(None);
    // Segmentation offload (`network.gso_segments`) costs no memory per connection here: the
    // driver builds every connection's datagrams in one shared buffer.
    transport
}

/// Builds the QUIC server configuration: TLS 1.3 only, ALPN `gatehouse/1`, and beside it the
/// peer link's `gatehouse-fleet/1` when `offer_peer_link` (a server in a fleet: its directory is
/// not `none`; docs/spec/travel.md V14). A dialler that offers only an ALPN not listed fails the
/// handshake.
///
/// # Errors
/// [`NetError::Tls`] when rustls refuses the certificate or key.
pub fn server_config(
    identity: tls::ServerIdentity,
    network: &NetworkConfig,
    offer_peer_link: bool,
) -> Result<quinn::ServerConfig, NetError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let origin = identity.origin;
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| NetError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| NetError::Certificate {
            path: origin,
            why: format!("refused with its key: {e}"),
        })?;
    crypto.alpn_protocols = vec![gatehouse_protocol::ALPN.to_vec()];
    if offer_peer_link {
        crypto.alpn_protocols.push(gatehouse_protocol::fleet::PEER_ALPN.to_vec());
    }
    let crypto = QuicServerConfig::try_from(crypto).map_err(|e| NetError::Tls(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(network)));
    Ok(config)
}

/// Binds a UDP socket with explicit send and receive buffers: with the kernel default, a burst
/// of a few hundred client replies overflows the socket and stalls every client for a
/// retransmission timeout.
///
/// # Errors
/// [`NetError::Bind`].
pub fn bind_socket(addr: SocketAddr, buffer_bytes: usize) -> Result<std::net::UdpSocket, NetError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let err = |source| NetError::Bind { addr, source };
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(err)?;
    if addr.is_ipv6() {
        // Accept IPv4-mapped traffic on an unspecified IPv6 bind too; ignore where unsupported.
        let _ = socket.set_only_v6(false);
    }
    socket.set_send_buffer_size(buffer_bytes).map_err(err)?;
    socket.set_recv_buffer_size(buffer_bytes).map_err(err)?;
    let (send, recv) =
        (socket.send_buffer_size().unwrap_or(0), socket.recv_buffer_size().unwrap_or(0));
    if send < buffer_bytes || recv < buffer_bytes {
        tracing::warn!(
            requested = buffer_bytes,
            send,
            recv,
            "the kernel capped the UDP socket buffers; raise net.core.rmem_max and net.core.wmem_max"
        );
    } else {
        tracing::debug!(send, recv, "UDP socket buffers set");
    }
    socket.bind(&addr.into()).map_err(err)?;
    Ok(socket.into())
}

/// Bytes in a connection id the server hands out: all random.
pub const CONNECTION_ID_LEN: usize = 8;

/// The endpoint-wide QUIC configuration: every connection id the server hands out (a
/// connection's, or a stateless retry's) is [`CONNECTION_ID_LEN`] random bytes.
///
/// Why not quinn's default: its ids hold 3 random bytes (the rest a keyed hash that lets it drop
/// forged ids cheaply), 16.7 million values. With a thousand connections, several ids each, a
/// retry's new id meets a live connection's about once in 3,000 handshakes; the client's next
/// `Initial` is then routed to that connection, which drops it, until the client gives up. That
/// was the "connect timed out" loss at 1,000 and 2,000 clients (docs/performance.md).
pub fn endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    config.cid_generator(connection_id_generator);
    config
}

/// The generator of [`endpoint_config`]'s connection ids.
fn connection_id_generator() -> Box<dyn quinn::ConnectionIdGenerator> {
    Box::new(quinn_proto::RandomConnectionIdGenerator::new(CONNECTION_ID_LEN))
}

#[cfg(test)]
mod tests {
    /// The server's connection ids do not meet. 200,000 ids of 3 random bytes (quinn's
    /// default) would hold about a thousand repeats; of 8 random bytes, none.
    #[test]
    fn connection_ids_are_random_enough_not_to_meet_among_many_connections() {
        let mut generator = super::connection_id_generator();
        assert_eq!(generator.cid_len(), super::CONNECTION_ID_LEN);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200_000 {
            let id = generator.generate_cid();
            assert_eq!(id.len(), super::CONNECTION_ID_LEN);
            assert!(seen.insert(id.to_vec()), "connection id {id} handed out twice");
        }
    }

    use super::*;
    use crate::config::TlsConfig;

    #[test]
    fn a_certificate_rustls_refuses_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.der"), dir.path().join("key.der"));
        std::fs::write(&cert, b"not a certificate").unwrap();
        std::fs::write(&key, b"not a key").unwrap();
        let tls = TlsConfig { certificate: Some(cert.clone()), private_key: Some(key) };
        let identity = tls::load_identity(&tls, dir.path()).unwrap();
        let err =
            server_config(identity, &NetworkConfig::default(), false).unwrap_err().to_string();
        assert!(err.contains(&cert.display().to_string()), "{err}");
    }
}

//! QUIC plumbing for endpoints that hold many connections: the endpoint configuration every
//! gatehouse client endpoint uses, and a quinn runtime that drives QUIC on a tokio runtime of
//! its own (the simulator's swarm and the floor benchmark run thousands of connections on one
//! endpoint).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A quinn runtime that runs every endpoint and connection driver, timer and socket on a tokio
/// runtime of its own, whatever runtime the caller is on, so the QUIC side keeps being driven
/// while the sessions' thread is busy.
#[derive(Debug, Clone)]
pub struct DriverRuntime {
    handle: tokio::runtime::Handle,
}

impl DriverRuntime {
    /// Drives QUIC on the runtime of `handle`.
    pub fn new(handle: tokio::runtime::Handle) -> Self {
        DriverRuntime { handle }
    }
}

impl quinn::Runtime for DriverRuntime {
    fn new_timer(&self, at: std::time::Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        // A tokio timer belongs to the runtime it is made in.
        let _inside = self.handle.enter();
        quinn::TokioRuntime.new_timer(at)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.handle.spawn(future);
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        // The socket registers with the I/O driver of the runtime it is wrapped in.
        let _inside = self.handle.enter();
        quinn::TokioRuntime.wrap_udp_socket(socket)
    }
}

/// The endpoint-wide QUIC configuration of client endpoints (and the floor benchmark's server
/// alike): connection ids of 8 random bytes, as the server's. quinn's default ids hold 3 random
/// bytes, so among many connections a new id can meet a live one and its packets go astray.
pub fn endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    config.cid_generator(|| Box::new(quinn_proto::RandomConnectionIdGenerator::new(8)));
    config
}

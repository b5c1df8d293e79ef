//! The QUIC drivers' own thread (issue 12 item 6: admission must read the socket as fast as
//! datagrams come).
//!
//! quinn does its socket I/O, packet assembly, acknowledgements and timers in driver tasks (one
//! for the endpoint, one per connection) on whatever runtime it is given. On the server's main
//! runtime those drivers queue behind the game task and a thousand connection tasks; while they
//! wait, the UDP receive queue fills, handshakes and `Hello`s are dropped and retransmitted, and
//! players miss the hello deadline. Here they get a thread and a runtime of their own, so the
//! kernel shares the cores between the network and the game. Everything else (the accept loop,
//! the connection tasks that read and write streams, the game) stays on the main runtime.
//!
//! The socket it hands quinn offers at most `network.gso_segments` datagrams per send (issue 12
//! item 7): every connection keeps a send buffer as large as one send can be, for as long as it
//! lives, so quinn's own most, 10, costs about 14 KiB per idle client where a handful of
//! datagrams per send is most of the saving in system calls.

use std::fmt;
use std::future::Future;
use std::io;
use std::io::IoSliceMut;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncTimer, AsyncUdpSocket, Runtime, TokioRuntime, UdpPoller};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::NetError;

/// A thread running a current-thread tokio runtime for quinn's drivers. Dropping it stops the
/// runtime (its thread ends after the tasks still on it are dropped); drop it after the
/// endpoint is idle.
pub struct DriverThread {
    handle: Handle,
    /// Dropping (or sending on) it ends the runtime's `block_on`.
    _stop: oneshot::Sender<()>,
}

impl fmt::Debug for DriverThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverThread").finish_non_exhaustive()
    }
}

impl DriverThread {
    /// Starts the thread (named `quic-driver`).
    ///
    /// # Errors
    /// [`NetError::DriverThread`] when the runtime or the thread cannot be created.
    pub fn start() -> Result<Self, NetError> {
        let (stop, stopped) = oneshot::channel::<()>();
        let (started, handle) = std::sync::mpsc::sync_channel(1);
        // The runtime is built and dropped on its own thread: dropping one inside the caller's
        // async context would panic.
        std::thread::Builder::new()
            .name("quic-driver".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                match runtime {
                    Ok(runtime) => {
                        let _ = started.send(Ok(runtime.handle().clone()));
                        // Either a send or the sender's drop ends it.
                        let _ = runtime.block_on(stopped);
                    }
                    Err(e) => {
                        let _ = started.send(Err(e));
                    }
                }
            })
            .map_err(NetError::DriverThread)?;
        let handle = handle
            .recv()
            .map_err(|_| NetError::DriverThread(std::io::Error::other("the thread ended")))?
            .map_err(NetError::DriverThread)?;
        Ok(DriverThread { handle, _stop: stop })
    }

    /// A quinn runtime whose drivers, timers and socket live on this thread, whichever runtime
    /// creates the endpoint or accepts its connections; its sockets send at most
    /// `gso_segments` datagrams at once (at least 1).
    pub fn runtime(&self, gso_segments: usize) -> Arc<dyn Runtime> {
        Arc::new(OnDriverThread { handle: self.handle.clone(), gso_segments: gso_segments.max(1) })
    }
}

/// quinn's tokio runtime, pinned to one runtime handle: `TokioRuntime` spawns on (and registers
/// timers and sockets with) the runtime of the caller, which for a connection accepted by a
/// connection task would be the main runtime.
#[derive(Debug)]
struct OnDriverThread {
    handle: Handle,
    gso_segments: usize,
}

impl Runtime for OnDriverThread {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn AsyncTimer>> {
        let _entered = self.handle.enter();
        TokioRuntime.new_timer(at)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.handle.spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        let _entered = self.handle.enter();
        let inner = TokioRuntime.wrap_udp_socket(socket)?;
        Ok(Arc::new(FewerSegments { inner, most: self.gso_segments }))
    }

    fn now(&self) -> Instant {
        let _entered = self.handle.enter();
        TokioRuntime.now()
    }
}

/// A socket that offers quinn at most `most` datagrams per send (segmentation offload), and
/// otherwise is the one it wraps.
#[derive(Debug)]
struct FewerSegments {
    inner: Arc<dyn AsyncUdpSocket>,
    most: usize,
}

impl AsyncUdpSocket for FewerSegments {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments().min(self.most)
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What quinn spawns through the runtime runs on the driver thread, not the caller's.
    #[tokio::test]
    async fn spawned_drivers_run_on_the_driver_thread() {
        let thread = DriverThread::start().unwrap();
        let (tx, rx) = oneshot::channel();
        thread.runtime(1).spawn(Box::pin(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        }));
        let name = tokio::time::timeout(std::time::Duration::from_secs(5), rx).await;
        assert_eq!(name.unwrap().unwrap().as_deref(), Some("quic-driver"));
    }

    /// Issue 12 item 7: the wrapped socket offers at most the configured datagrams per send
    /// (never more than the kernel's, never fewer than 1), and receives as the kernel's does.
    #[test]
    fn the_socket_offers_at_most_the_configured_datagrams_per_send() {
        let thread = DriverThread::start().unwrap();
        let bare = || std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let kernel = {
            let _entered = thread.handle.enter();
            TokioRuntime.wrap_udp_socket(bare()).unwrap()
        };
        for (asked, expected) in [
            (1, 1),
            (2, kernel.max_transmit_segments().min(2)),
            (usize::MAX, kernel.max_transmit_segments()),
            (0, 1),
        ] {
            let socket = thread.runtime(asked).wrap_udp_socket(bare()).unwrap();
            assert_eq!(socket.max_transmit_segments(), expected, "asked for {asked}");
            assert_eq!(socket.max_receive_segments(), kernel.max_receive_segments());
            assert!(socket.local_addr().unwrap().ip().is_loopback());
        }
    }

    /// The thread shows up by name in a `Debug` of the server.
    #[test]
    fn the_driver_thread_debugs_by_name() {
        let thread = DriverThread::start().unwrap();
        assert_eq!(format!("{thread:?}"), "DriverThread { .. }");
    }

    /// A timer made through the runtime fires, though no caller runtime drives it.
    #[test]
    fn timers_fire_on_the_driver_thread() {
        let thread = DriverThread::start().unwrap();
        let runtime = thread.runtime(1);
        let (tx, rx) = std::sync::mpsc::channel();
        let timer_runtime = runtime.clone();
        runtime.spawn(Box::pin(async move {
            let at = Instant::now() + std::time::Duration::from_millis(10);
            let mut timer = timer_runtime.new_timer(at);
            std::future::poll_fn(|cx| timer.as_mut().poll(cx)).await;
            let _ = tx.send(());
        }));
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    }
}

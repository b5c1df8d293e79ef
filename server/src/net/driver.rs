//! The network's own thread (admission must read the socket as fast as datagrams come).
//!
//! The network driver ([`super::network`]) does the socket I/O, the QUIC state machines, their
//! timers and every connection's stream, for every connection, in one task. On the server's main
//! runtime it would queue behind the game task; while it waited, the UDP receive queue would
//! fill, handshakes and `Hello`s would be dropped and retransmitted, and players would miss the
//! hello deadline. Here it gets a thread and a runtime of its own, so the kernel shares the cores
//! between the network and the game.

use std::fmt;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::NetError;

/// A thread running a current-thread tokio runtime for the network driver. Dropping it stops the
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

    /// The thread's runtime: spawn the driver on it, and create its socket inside it.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is spawned on the handle runs on the driver thread, not the caller's.
    #[tokio::test]
    async fn spawned_tasks_run_on_the_driver_thread() {
        let thread = DriverThread::start().unwrap();
        let task = thread.handle().spawn(async move {
            // A timer fires there though no caller runtime drives it.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            std::thread::current().name().map(str::to_owned)
        });
        let name = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        assert_eq!(name.unwrap().unwrap().as_deref(), Some("quic-driver"));
    }

    /// The thread shows up by name in a `Debug` of the server.
    #[test]
    fn the_driver_thread_debugs_by_name() {
        let thread = DriverThread::start().unwrap();
        assert_eq!(format!("{thread:?}"), "DriverThread { .. }");
    }
}

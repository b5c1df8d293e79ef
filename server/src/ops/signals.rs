//! The process's signals: the first SIGTERM or Ctrl-C drains, a second exits at once.

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on the first SIGTERM or Ctrl-C (the drain); a second one exits the
/// process at once, with code 1, for an operator who will not wait. Spawn it before the server
/// binds, so a signal while it starts stops it cleanly.
pub async fn stop_on_signal(shutdown: CancellationToken) {
    next_signal().await;
    tracing::info!("shutdown requested; a second signal stops at once");
    shutdown.cancel();
    next_signal().await;
    tracing::warn!("second signal: exiting without finishing the drain");
    std::process::exit(1);
}

/// Waits for the next SIGTERM or Ctrl-C.
async fn next_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

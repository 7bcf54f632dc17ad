//! Signals: the first SIGTERM/SIGINT starts a graceful shutdown, a second one exits at once.

use tokio_util::sync::CancellationToken;

pub(super) async fn handle_signals(shutdown: CancellationToken) {
    let Some(first) = next_signal().await else {
        return;
    };
    tracing::info!(
        signal = first,
        "shutting down: stopping controllers, then releasing the lease"
    );
    shutdown.cancel();
    if let Some(second) = next_signal().await {
        tracing::error!(signal = second, "second signal: exiting immediately");
        std::process::exit(130);
    }
}

#[cfg(unix)]
async fn next_signal() -> Option<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; stop the process with SIGKILL");
        return None;
    };
    tokio::select! {
        _ = term.recv() => Some("SIGTERM"),
        _ = int.recv() => Some("SIGINT"),
    }
}

#[cfg(not(unix))]
async fn next_signal() -> Option<&'static str> {
    tokio::signal::ctrl_c().await.ok().map(|()| "Ctrl-C")
}

//! The stop signal, heard from the moment `tessera run` starts.
//!
//! In a container the host is PID 1, and the kernel ignores a signal PID 1 has no handler
//! for: a host that listened only once it led would sit out a standby's (or a start-up's)
//! SIGTERM until the kubelet's SIGKILL, 30 s later by default, on every rollout and
//! uninstall.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Whether SIGTERM or SIGINT came; cheap to clone, every clone hears the same signal.
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Handle SIGTERM and SIGINT from now on. Call within a Tokio runtime.
    pub fn listen() -> std::io::Result<Self> {
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let signal = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            tracing::info!(signal, "stop signal received");
            let _ = tx.send(true);
        });
        Ok(Self(rx))
    }

    /// Resolves once a stop signal came (at once if one already did).
    pub async fn requested(&self) {
        let mut rx = self.0.clone();
        // The sender only goes away after sending `true`.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Resolves `grace` after the stop signal.
    pub(crate) async fn after(&self, grace: std::time::Duration) {
        self.requested().await;
        tokio::time::sleep(grace).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_before_anyone_waits_is_not_missed() {
        let stop = Stop::listen().unwrap();
        let waiting = stop.clone();
        // SAFETY: raising a signal this process handles.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting.requested())
            .await
            .expect("the stop was heard");
        // A later waiter hears it too.
        tokio::time::timeout(std::time::Duration::from_secs(1), stop.requested())
            .await
            .expect("heard again");
    }
}

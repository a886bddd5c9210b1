use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use super::Metrics;

/// Liveness and readiness as the endpoints report them.
#[derive(Debug, Default)]
pub(crate) struct Health {
    ready: AtomicBool,
}

impl Health {
    /// Ready: connected to the API server and either leading or standing by.
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    health: Arc<Health>,
}

/// Bind `addr` and serve the endpoints until the process ends; returns the bound address
/// (useful with port 0).
pub(crate) async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    health: Arc<Health>,
) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
        .with_state(AppState { metrics, health });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    Ok(bound)
}

async fn metrics_handler(State(state): State<AppState>) -> String {
    state.metrics.render()
}

/// Live unless a controller has work waiting that it stopped moving (the kubelet then
/// restarts the host); the body names the controller and the object.
async fn live_handler(State(state): State<AppState>) -> (StatusCode, String) {
    let stalled = state.metrics.stalls.problems();
    if stalled.is_empty() {
        (StatusCode::OK, "ok".into())
    } else {
        let body = format!("stalled: {}\n", stalled.join("\n"));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

/// Ready when connected and no dependency the host cannot work without is down; the body
/// names what is missing.
async fn ready_handler(State(state): State<AppState>) -> (StatusCode, String) {
    if !state.health.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: starting".into(),
        );
    }
    let problems = state.metrics.dependencies.problems();
    if problems.is_empty() {
        (StatusCode::OK, "ok".into())
    } else {
        let body = format!("not ready: {}\n", problems.join("\n"));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

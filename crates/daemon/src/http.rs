//! The HTTP status server on `--status-listen`: `/metrics` (Prometheus text), `/status`
//! (JSON), `/healthz` (`ok`, or 503 `stopping` once a shutdown began).

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::daemon::Daemon;

/// The routes.
pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/healthz", get(healthz))
        .with_state(daemon)
}

async fn metrics(axum::extract::State(d): axum::extract::State<Arc<Daemon>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&d.metrics),
    )
}

async fn status(axum::extract::State(d): axum::extract::State<Arc<Daemon>>) -> impl IntoResponse {
    let body = serde_json::to_string_pretty(&crate::status::status_json(&d))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    ([(header::CONTENT_TYPE, "application/json")], body + "\n")
}

async fn healthz(axum::extract::State(d): axum::extract::State<Arc<Daemon>>) -> impl IntoResponse {
    if d.is_accepting() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopping\n")
    }
}

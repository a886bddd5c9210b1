//! The pass-through proxy and the two requests Gardener answers itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use kube::api::{Api, DynamicObject};
use serde_json::json;

use super::Sim;

const SHOOTS: &str = "/apis/core.gardener.cloud/v1beta1/namespaces/";

/// `(namespace, name, subresource)` of a Shoot path.
fn shoot_path(path: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = path.strip_prefix(SHOOTS)?;
    let mut parts = rest.split('/');
    let ns = parts.next()?;
    if parts.next()? != "shoots" {
        return None;
    }
    let name = parts.next()?;
    Some((ns, name, parts.next()))
}

pub async fn serve(sim: Arc<Sim>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(sim.config.listen).await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(handle).with_state(sim);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    (
        code,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `<needle>/<code>`: answer requests containing `needle` (only Shoot API requests when
/// `shoots_only`) with `code` (0: end).
fn set_outage(sim: &Sim, rest: &str, shoots_only: bool) -> Response {
    let Some((needle, code)) = rest.split_once('/') else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "want <needle>/<code>".into(),
        );
    };
    let code: u16 = code.parse().unwrap_or(0);
    let mut outages = sim.outages.lock().expect("outages lock");
    match code {
        0 => outages.remove(needle),
        code => outages.insert(needle.to_string(), (code, shoots_only)),
    };
    (StatusCode::OK, "ok").into_response()
}

/// An outage "code" that holds requests until the outage ends, then serves them (a cluster
/// that hangs rather than fails).
const HANG: u16 = 999;

/// The status a simulated outage answers `request` with ([`HANG`]: hold it).
fn outage(sim: &Sim, request: &Request) -> Option<u16> {
    let uri = request.uri().to_string();
    let shoots = uri.contains("/apis/core.gardener.cloud/");
    let outages = sim.outages.lock().expect("outages lock");
    let (code, _) = outages
        .iter()
        .find(|(needle, (_, shoots_only))| {
            uri.contains(needle.as_str()) && (shoots || !shoots_only)
        })?
        .1;
    Some(*code)
}

async fn handle(State(sim): State<Arc<Sim>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    if path == "/_sim/stats" {
        let s = &sim.stats;
        let body = json!({
            "requests": s.requests.load(Ordering::Relaxed),
            "writes": s.writes.load(Ordering::Relaxed),
            "leaseRequests": s.lease_requests.load(Ordering::Relaxed),
            "watches": s.watches.load(Ordering::Relaxed),
            "adminKubeconfigs": s.admin_kubeconfigs.load(Ordering::Relaxed),
            "byObject": *s.by_object.lock().expect("stats lock"),
        });
        return ([("content-type", "application/json")], body.to_string()).into_response();
    }
    if let Some(rest) = path.strip_prefix("/_sim/outage/") {
        return set_outage(&sim, rest, true);
    }
    if let Some(rest) = path.strip_prefix("/_sim/outage-any/") {
        return set_outage(&sim, rest, false);
    }
    while outage(&sim, &request) == Some(HANG) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    if let Some(code) = outage(&sim, &request).and_then(|c| StatusCode::from_u16(c).ok()) {
        let (reason, message) = match code.as_u16() {
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            422 => (
                "Invalid",
                "Shoot.core.gardener.cloud is invalid: spec.provider: refused",
            ),
            _ => ("InternalError", "an error on the server"),
        };
        return status(code, reason, format!("{message} (simulated outage)"));
    }
    count(&sim, &request);
    if let Some((ns, name, sub)) = shoot_path(&path) {
        if request.method() == Method::POST && sub == Some("adminkubeconfig") {
            sim.stats.admin_kubeconfigs.fetch_add(1, Ordering::Relaxed);
            tally(&sim.stats, &format!("shoot/{name}"), "adminKubeconfigs");
            let body = axum::body::to_bytes(request.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            return admin_kubeconfig(&sim, ns, name, &body).await;
        }
        if request.method() == Method::DELETE && sub.is_none() {
            let api: Api<DynamicObject> =
                Api::namespaced_with(sim.client.clone(), ns, &tessera::gardener::shoot_resource());
            if let Ok(Some(shoot)) = api.get_opt(name).await {
                let confirmed = shoot
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("confirmation.gardener.cloud/deletion"))
                    .is_some_and(|v| v == "true");
                if !confirmed {
                    return status(
                        StatusCode::FORBIDDEN,
                        "Forbidden",
                        format!(
                            "shoots.core.gardener.cloud \"{name}\" is forbidden: must have a \"confirmation.gardener.cloud/deletion\" annotation to delete"
                        ),
                    );
                }
            }
        }
    }
    forward(&sim, request).await
}

fn count(sim: &Sim, request: &Request) {
    let s = &sim.stats;
    s.requests.fetch_add(1, Ordering::Relaxed);
    if let Some((_, name, _)) = shoot_path(request.uri().path()) {
        arrived(s, &format!("shoot/{name}"));
    }
    if request
        .uri()
        .path()
        .starts_with("/apis/coordination.k8s.io/")
    {
        s.lease_requests.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let query = request.uri().query().unwrap_or("");
    if query.contains("watch=true") || query.contains("watch=1") {
        s.watches.fetch_add(1, Ordering::Relaxed);
    }
    if !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        s.writes.fetch_add(1, Ordering::Relaxed);
        let path = request.uri().path();
        let key = match shoot_path(path) {
            Some((_, name, _)) => Some(format!("shoot/{name}")),
            None => path
                .split_once("/namespaces/")
                .and_then(|(_, rest)| rest.split('/').next())
                .map(|ns| format!("namespace/{ns}")),
        };
        if let Some(key) = key {
            tally(s, &key, "writes");
        }
    }
}

/// Note when a request about `key` arrived (`arrivals`, milliseconds since the epoch), so
/// that a test can see the pace of a host's requests to Gardener.
fn arrived(s: &super::Stats, key: &str) {
    let now = jiff::Timestamp::now().as_millisecond();
    let mut by = s.by_object.lock().expect("stats lock");
    let entry = by.entry(key.to_string()).or_insert_with(|| json!({}));
    match entry["arrivals"].as_array_mut() {
        Some(times) => times.push(json!(now)),
        None => entry["arrivals"] = json!([now]),
    }
}

/// Count one `what` for `key` in `Stats::by_object`.
fn tally(s: &super::Stats, key: &str, what: &str) {
    let mut by = s.by_object.lock().expect("stats lock");
    let entry = by.entry(key.to_string()).or_insert_with(|| json!({}));
    entry[what] = json!(entry[what].as_u64().unwrap_or(0) + 1);
}

async fn admin_kubeconfig(sim: &Sim, ns: &str, name: &str, body: &[u8]) -> Response {
    let api: Api<DynamicObject> =
        Api::namespaced_with(sim.client.clone(), ns, &tessera::gardener::shoot_resource());
    let shoot = match api.get_opt(name).await {
        Ok(Some(shoot)) => shoot,
        Ok(None) => {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("shoots.core.gardener.cloud \"{name}\" not found"),
            );
        }
        Err(e) => return status(StatusCode::BAD_GATEWAY, "InternalError", e.to_string()),
    };
    let succeeded_once = shoot.data["status"]["lastOperation"]["type"] != "Create"
        || shoot.data["status"]["lastOperation"]["state"] == "Succeeded";
    if shoot.data["status"]["lastOperation"].is_null() || !succeeded_once {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("shoot {name} has no control plane yet"),
        );
    }
    let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600);
    let tokens = &sim.config.runtime_tokens;
    let token = &tokens[sim.next_token.fetch_add(1, Ordering::Relaxed) % tokens.len()];
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: {name}-admin\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}-admin}}\ncurrent-context: {name}\n",
        sim.config.runtime_server
    );
    let expiry = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": "AdminKubeconfigRequest",
        "spec": { "expirationSeconds": seconds },
        "status": {
            "kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig),
            "expirationTimestamp": expiry.round(jiff::Unit::Second).unwrap_or(expiry).to_string(),
        },
    });
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn forward(sim: &Sim, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    let uri = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut builder = http::Request::builder().method(parts.method).uri(uri);
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "authorization" | "content-length" | "connection"
        ) {
            builder = builder.header(name, value);
        }
    }
    let outgoing = match builder.body(kube::client::Body::from(bytes.to_vec())) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    match sim.client.send(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            parts.headers.remove("transfer-encoding");
            parts.headers.remove("connection");
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => status(StatusCode::BAD_GATEWAY, "InternalError", e.to_string()),
    }
}

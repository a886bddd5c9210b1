//! The pass-through proxy (with the caller's credentials), the simulator's own endpoints
//! and the subresource Gardener answers itself (`adminkubeconfig`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
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

pub(super) fn status(code: StatusCode, reason: &str, message: String) -> Response {
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

/// An outage "code" that serves each request after [`SLOW_BY`] (a busy API server).
const SLOW: u16 = 998;
const SLOW_BY: std::time::Duration = std::time::Duration::from_millis(500);

/// The status a simulated outage answers `request` with ([`HANG`]: hold it).
fn outage(sim: &Sim, request: &Request) -> Option<u16> {
    outage_of(sim, &request.uri().to_string())
}

/// The status a simulated outage answers a request for `uri` with.
fn outage_of(sim: &Sim, uri: &str) -> Option<u16> {
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
            "gardenerRequests": s.gardener_requests.load(Ordering::Relaxed),
            "watches": s.watches.load(Ordering::Relaxed),
            "adminKubeconfigs": s.admin_kubeconfigs.load(Ordering::Relaxed),
            "byObject": *s.by_object.lock().expect("stats lock"),
            "byKind": *s.by_kind.lock().expect("stats lock"),
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
    if outage(&sim, &request) == Some(SLOW) {
        tokio::time::sleep(SLOW_BY).await;
    }
    let failing = outage(&sim, &request).filter(|c| *c != SLOW);
    if let Some(code) = failing.and_then(|c| StatusCode::from_u16(c).ok()) {
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
    if let Some((ns, name, Some("adminkubeconfig"))) = shoot_path(&path)
        && request.method() == Method::POST
    {
        sim.stats.admin_kubeconfigs.fetch_add(1, Ordering::Relaxed);
        tally(&sim.stats, &format!("shoot/{name}"), "adminKubeconfigs");
        let (ns, name) = (ns.to_string(), name.to_string());
        return super::admin_kubeconfig::handle(&sim, &ns, &name, request).await;
    }
    forward(sim, request).await
}

fn count(sim: &Sim, request: &Request) {
    let s = &sim.stats;
    s.requests.fetch_add(1, Ordering::Relaxed);
    count_kind(s, request);
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
    let watch = query.contains("watch=true") || query.contains("watch=1");
    if watch {
        s.watches.fetch_add(1, Ordering::Relaxed);
    }
    if gardener_side(request.uri().path()) {
        s.gardener_requests.fetch_add(1, Ordering::Relaxed);
    }
    // A read of one Shoot (not a list, watch or subresource): what the Shoot cache saves.
    if let Some((_, name, None)) = shoot_path(request.uri().path())
        && *request.method() == Method::GET
        && !watch
    {
        tally(s, &format!("shoot/{name}"), "reads");
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
        // Writes of the Shoot object itself (not adminkubeconfig, binding, …).
        if let Some((_, name, None)) = shoot_path(path) {
            tally(s, &format!("shoot/{name}"), "objectWrites");
        }
    }
}

/// One more request of its kind in `Stats::by_kind`.
fn count_kind(s: &super::Stats, request: &Request) {
    let uri = request.uri();
    let kind = request_kind(request.method(), uri.path(), uri.query());
    *s.by_kind
        .lock()
        .expect("stats lock")
        .entry(kind)
        .or_default() += 1;
}

/// `"<verb> <resource>[/<subresource>]"` of a request, the verb as the API server's audit
/// log names it (`"discovery"` for the group and version documents).
fn request_kind(method: &Method, path: &str, query: Option<&str>) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let skip = match segments.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => return format!("{} {path}", method.as_str().to_lowercase()),
    };
    let mut rest = segments.get(skip..).unwrap_or_default();
    // `namespaces/<ns>/<resource>…`, not a Namespace's own subresource.
    if rest.first() == Some(&"namespaces")
        && rest.len() > 2
        && !matches!(rest[2], "status" | "finalize")
    {
        rest = &rest[2..];
    }
    let Some(resource) = rest.first() else {
        return "discovery".into();
    };
    let named = rest.len() > 1;
    let watch = query.is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    let verb = match (method.as_str(), named) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => return format!("{} {resource}", other.to_lowercase()),
    };
    match rest.get(2) {
        Some(sub) => format!("{verb} {resource}/{sub}"),
        None => format!("{verb} {resource}"),
    }
}

/// Whether a request is Gardener's to answer on a real landscape (the local garden API
/// server also serves the control plane): Gardener's API groups and the project
/// namespaces (`garden-*`).
fn gardener_side(path: &str) -> bool {
    path.contains(".gardener.cloud/") || path.contains("/namespaces/garden-")
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

async fn forward(sim: Arc<Sim>, request: Request) -> Response {
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
    let watch = uri.contains("watch=true") || uri.contains("watch=1");
    let mut builder = http::Request::builder().method(parts.method).uri(&uri);
    for (name, value) in &parts.headers {
        // The caller's own credentials go through: the API server authorizes the caller.
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            builder = builder.header(name, value);
        }
    }
    let outgoing = match builder.body(kube::client::Body::from(bytes.to_vec())) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    match sim.forward.send(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            parts.headers.remove("transfer-encoding");
            parts.headers.remove("connection");
            let body = match watch {
                true => cut_on_outage(sim, uri, Body::new(body)),
                false => Body::new(body),
            };
            Response::from_parts(parts, body)
        }
        Err(e) => status(StatusCode::BAD_GATEWAY, "InternalError", e.to_string()),
    }
}

/// A watch through the simulator ends when an outage starts that covers it (one that
/// fails or hangs requests), as a connection Gardener drops: the client must watch again, and meets the outage.
fn cut_on_outage(sim: Arc<Sim>, uri: String, body: Body) -> Body {
    use futures::StreamExt;
    let data = body.into_data_stream();
    let stream = futures::stream::unfold((data, sim, uri), |(mut data, sim, uri)| async move {
        loop {
            tokio::select! {
                chunk = data.next() => return chunk.map(|c| (c, (data, sim, uri))),
                _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {
                    // A slow server keeps its watches.
                    if outage_of(&sim, &uri).is_some_and(|c| c != SLOW) {
                        return None;
                    }
                }
            }
        }
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_by_verb_and_resource() {
        let rt = "/apis/infrastructuremanager.kyma-project.io/v1/namespaces/kcp/runtimes";
        let cases = [
            (format!("GET {rt}"), "list runtimes"),
            (format!("GET {rt}?watch=true&a=b"), "watch runtimes"),
            (format!("PATCH {rt}/rt/status"), "patch runtimes/status"),
            ("GET /api/v1/namespaces/kcp/secrets/s".into(), "get secrets"),
            ("POST /api/v1/namespaces/kcp/events".into(), "create events"),
            ("GET /api/v1/namespaces/kcp".into(), "get namespaces"),
            (
                "PUT /api/v1/namespaces/kcp/finalize".into(),
                "update namespaces/finalize",
            ),
            (
                "DELETE /api/v1/namespaces/kcp/secrets".into(),
                "deletecollection secrets",
            ),
            ("GET /apis/coordination.k8s.io/v1".into(), "discovery"),
            ("GET /version".into(), "get /version"),
        ];
        for (request, want) in cases {
            let (method, uri) = request.split_once(' ').expect("method and path");
            let (path, query) = uri
                .split_once('?')
                .map_or((uri, None), |(p, q)| (p, Some(q)));
            let method = Method::from_bytes(method.as_bytes()).expect("a method");
            assert_eq!(request_kind(&method, path, query), want, "{request}");
        }
    }
}

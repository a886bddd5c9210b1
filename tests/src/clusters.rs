//! Many clusters from one real API server, for the benchmarks and tests that need N
//! distinct target clusters. Cluster `i` is its own HTTPS address on loopback with its own
//! bearer token: a proxy that ends TLS there (so a client of each cluster makes its own TLS
//! sessions), refuses any other token, and passes requests on to the API server as its
//! administrator. To a host each is a cluster of its own: its own server URL, client,
//! connections and drift watches.
//!
//! One thing real clusters do that a shared API server does not: each shows only its own
//! objects. When asked to narrow, lists and watches of module-managed objects (label
//! `modules.tessera.dev/module`) through cluster `i` see only objects labelled
//! `bench.tessera.dev/cluster=c<i>`, which is what the benchmark's modules label theirs
//! with; without it every cluster's drift watch would list and follow the objects of all of
//! them (N clusters, N² objects).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use crate::certs::Ca;
use crate::cluster::Cluster;
use crate::gardener_sim::webhook::{TlsListener, tls_acceptor};

/// The clusters; their proxies stop when this is dropped.
pub struct Clusters {
    /// One kubeconfig per cluster: inline CA and token.
    pub kubeconfigs: Vec<String>,
    proxies: Vec<tokio::task::AbortHandle>,
}

/// What the proxy of one cluster knows.
struct Proxy {
    /// Narrow selectors of module-managed objects to `c<index>`.
    narrow: Option<usize>,
    token: String,
    upstream: kube::Client,
}

impl Clusters {
    /// Serve `cluster` as `n` clusters, narrowing lists and watches of module objects when
    /// `narrow`. Runs in a tokio runtime: the proxies are its tasks.
    pub async fn serve(cluster: &Cluster, n: usize, narrow: bool) -> Result<Self, String> {
        let upstream = upstream(cluster).await?;
        let ca = Ca::new("clusters-ca")?;
        let serving = ca.serving("clusters", &["127.0.0.1".to_string()])?;
        let acceptor = tls_acceptor(&serving).map_err(|e| e.to_string())?;
        let mut out = Self {
            kubeconfigs: Vec::with_capacity(n),
            proxies: Vec::with_capacity(n),
        };
        for index in 0..n {
            let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cluster {index}: {e}"))?;
            let port = tcp.local_addr().map_err(|e| e.to_string())?.port();
            let listener = TlsListener {
                tcp,
                acceptor: acceptor.clone(),
            };
            let token = format!("cluster-{index}-{:016x}", fastrand::u64(..));
            out.kubeconfigs
                .push(kubeconfig(index, port, &ca.cert, &token));
            let proxy = Arc::new(Proxy {
                narrow: narrow.then_some(index),
                token,
                upstream: upstream.clone(),
            });
            let app = axum::Router::new().fallback(handle).with_state(proxy);
            let task = tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            out.proxies.push(task.abort_handle());
        }
        Ok(out)
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        for proxy in &self.proxies {
            proxy.abort();
        }
    }
}

/// The API server's administrator, with no read timeout (watches stream through) and no
/// retries (a request passed on is the caller's to retry).
async fn upstream(cluster: &Cluster) -> Result<kube::Client, String> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(&cluster.kubeconfig).map_err(|e| e.to_string())?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    config.read_timeout = None;
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

async fn handle(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let bearer = format!("Bearer {}", proxy.token);
    if request.headers().get("authorization").map(|v| v.as_bytes()) != Some(bearer.as_bytes()) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return (StatusCode::BAD_REQUEST, "body").into_response();
    };
    let uri = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = http::Request::builder()
        .method(parts.method)
        .uri(match proxy.narrow {
            Some(index) => narrowed(uri, index),
            None => uri.to_string(),
        });
    for (name, value) in &parts.headers {
        // The upstream client authenticates as the administrator.
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "connection" | "authorization"
        ) {
            builder = builder.header(name, value);
        }
    }
    let Ok(outgoing) = builder.body(kube::client::Body::from(bytes.to_vec())) else {
        return (StatusCode::BAD_REQUEST, "request").into_response();
    };
    match proxy.upstream.send(outgoing).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            parts.headers.remove("transfer-encoding");
            parts.headers.remove("connection");
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// `uri` with a selector of module-managed objects narrowed to cluster `index`'s.
fn narrowed(uri: &str, index: usize) -> String {
    const MODULE: &str = "labelSelector=modules.tessera.dev%2Fmodule";
    match uri.find(MODULE) {
        Some(at) => {
            let end = at + MODULE.len();
            format!(
                "{}%2Cbench.tessera.dev%2Fcluster%3Dc{index}{}",
                &uri[..end],
                &uri[end..]
            )
        }
        None => uri.to_string(),
    }
}

/// A kubeconfig for cluster `i` at `127.0.0.1:port`, verifying the proxy with `ca`.
fn kubeconfig(i: usize, port: u16, ca: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster-{i}\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority-data: {ca}\nusers:\n- name: cluster-{i}\n  user:\n    token: {token}\ncontexts:\n- name: cluster-{i}\n  context: {{cluster: cluster-{i}, user: cluster-{i}}}\ncurrent-context: cluster-{i}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_of_module_objects_are_narrowed_to_the_cluster() {
        let watch = "/api/v1/configmaps?labelSelector=modules.tessera.dev%2Fmodule&watch=true";
        assert_eq!(
            narrowed(watch, 7),
            "/api/v1/configmaps?labelSelector=modules.tessera.dev%2Fmodule%2Cbench.tessera.dev%2Fcluster%3Dc7&watch=true"
        );
        let other = "/api/v1/namespaces/a/configmaps/b";
        assert_eq!(narrowed(other, 7), other);
    }
}

//! Kubeconfigs that come from Secrets are data, never programs. Whoever can write a Secret
//! in a namespace the host reads could otherwise make the host run a command (`exec`, an
//! auth provider), read its own files (`tokenFile`, certificate paths — its service account
//! token among them) or reach anything through a proxy. One sanitizer, used everywhere a
//! kubeconfig comes from a Secret: inline credentials only, unless the operator allows
//! more; optionally only API servers the operator lists. Errors name the Secret and the
//! field, never a value.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::limit::RateLimitLayer;

use crate::fence::Fence;
use crate::pattern::glob;

/// What a kubeconfig from a Secret may use.
#[derive(Debug, Clone, Default)]
pub struct KubeconfigPolicy {
    /// Allow `exec` credential plugins, auth providers, file paths and proxies (off: inline
    /// credentials only).
    pub allow_external: bool,
    /// API server URLs (`*` matches any characters) kubeconfigs may point at; empty: any.
    pub servers: Vec<String>,
}

/// A kubeconfig the host refuses or cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct KubeconfigError {
    /// `Secret <namespace>/<name> key <key>`.
    pub source_name: String,
    pub message: String,
}

/// Why no client could be built from a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("no kubeconfig found (not in a cluster, no $KUBECONFIG or ~/.kube/config): {0}")]
    NoKubeconfig(String),
    #[error("unusable kubeconfig: no current context, cluster or user it names ({0})")]
    Unusable(String),
    #[error("cannot build a client from it (TLS settings): {0}")]
    Tls(String),
}

/// The one way the host builds a client: from `kubeconfig` (`None`: in-cluster or
/// `$KUBECONFIG`), writing through `fence` when given. Returns the API server URL too, for
/// messages. Kubeconfigs from Secrets pass [`KubeconfigPolicy`] first.
pub async fn build_client(
    kubeconfig: Option<Kubeconfig>,
    fence: Option<&Arc<Fence>>,
) -> Result<(Client, String), ClientError> {
    build_limited_client(kubeconfig, fence, None).await
}

/// A client as [`build_client`] makes it that sends at most `per_second` requests each
/// second, one every `1/per_second` s (`None`: no limit). The budget is the client's,
/// shared by every clone of it: requests beyond it wait their turn (a watch counts once,
/// when it starts). Such a client does not retry by itself (kube's retry layer sits inside
/// any layer added, so its retries would bypass the budget): a 429 or 503 reaches the
/// caller, whose backoff retries it through the budget.
pub async fn build_limited_client(
    kubeconfig: Option<Kubeconfig>,
    fence: Option<&Arc<Fence>>,
    per_second: Option<NonZeroU32>,
) -> Result<(Client, String), ClientError> {
    let mut config = match kubeconfig {
        Some(k) => Config::from_custom_kubeconfig(k, &KubeConfigOptions::default())
            .await
            .map_err(|e| ClientError::Unusable(e.to_string()))?,
        None => Config::infer()
            .await
            .map_err(|e| ClientError::NoKubeconfig(e.to_string()))?,
    };
    let server = config.cluster_url.to_string();
    config.default_retry &= per_second.is_none();
    let builder = ClientBuilder::try_from(config).map_err(|e| ClientError::Tls(e.to_string()))?;
    // Evenly spaced: a window of N requests per second would let 2N leave within
    // milliseconds across a window's edge.
    let budget = per_second.map(|n| RateLimitLayer::new(1, Duration::from_secs(1) / n.get()));
    // The fence is outermost: a write it refuses spends nothing of the budget.
    let client = match (fence, budget) {
        (Some(fence), Some(budget)) => builder
            .with_layer(&budget)
            .with_layer(&fence.layer())
            .build(),
        (Some(fence), None) => builder.with_layer(&fence.layer()).build(),
        (None, Some(budget)) => builder.with_layer(&budget).build(),
        (None, None) => builder.build(),
    };
    Ok((client, server))
}

const EXTERNAL: &str = "the host runs no programs, reads no files and uses no proxies for kubeconfigs from Secrets (an operator can allow it with --allow-external-kubeconfigs)";

impl KubeconfigPolicy {
    /// The fields of `kubeconfig` this policy refuses, in words (empty: usable).
    pub fn refusals(&self, kubeconfig: &Kubeconfig) -> Vec<String> {
        let mut out = Vec::new();
        for (i, user) in kubeconfig.auth_infos.iter().enumerate() {
            let Some(auth) = &user.auth_info else {
                continue;
            };
            let fields = [
                ("exec", auth.exec.is_some()),
                ("auth-provider", auth.auth_provider.is_some()),
                ("tokenFile", auth.token_file.is_some()),
                ("client-certificate", auth.client_certificate.is_some()),
                ("client-key", auth.client_key.is_some()),
            ];
            for (field, set) in fields {
                if set && !self.allow_external {
                    out.push(format!("users[{i}].user.{field}"));
                }
            }
        }
        for (i, cluster) in kubeconfig.clusters.iter().enumerate() {
            let Some(c) = &cluster.cluster else { continue };
            let fields = [
                ("certificate-authority", c.certificate_authority.is_some()),
                ("proxy-url", c.proxy_url.is_some()),
            ];
            for (field, set) in fields {
                if set && !self.allow_external {
                    out.push(format!("clusters[{i}].cluster.{field}"));
                }
            }
            let server = c.server.as_deref().unwrap_or_default();
            if !self.servers.is_empty() && !self.servers.iter().any(|p| glob(p, server)) {
                out.push(format!(
                    "clusters[{i}].cluster.server (not among the API servers the operator allows)"
                ));
            }
        }
        out
    }

    /// Parse and check a kubeconfig read from `source_name`.
    pub fn parse(&self, text: &str, source_name: &str) -> Result<Kubeconfig, KubeconfigError> {
        let fail = |message: String| KubeconfigError {
            source_name: source_name.to_string(),
            message,
        };
        // The parser's own message may quote the document (and its credentials).
        let kubeconfig = Kubeconfig::from_yaml(text)
            .map_err(|_| fail("not a kubeconfig (YAML with clusters, users, contexts)".into()))?;
        let refused = self.refusals(&kubeconfig);
        if !refused.is_empty() {
            return Err(fail(format!(
                "refused: {} ({EXTERNAL})",
                refused.join(", ")
            )));
        }
        Ok(kubeconfig)
    }

    /// A client for the kubeconfig under `key` of `secret`, writing through `fence`, and
    /// its server URL.
    pub async fn client(
        &self,
        secret: &Secret,
        key: &str,
        fence: &Arc<Fence>,
    ) -> Result<(Client, String), KubeconfigError> {
        let source_name = format!(
            "Secret {}/{} key {key}",
            secret.metadata.namespace.as_deref().unwrap_or_default(),
            secret.metadata.name.as_deref().unwrap_or_default()
        );
        let fail = |message: &str| KubeconfigError {
            source_name: source_name.clone(),
            message: message.to_string(),
        };
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .ok_or_else(|| fail("no such key"))?;
        let text = std::str::from_utf8(&bytes.0).map_err(|_| fail("not UTF-8"))?;
        let kubeconfig = self.parse(text, &source_name)?;
        // The kubeconfig's own error text may quote its values: name the failure only.
        build_client(Some(kubeconfig), Some(fence))
            .await
            .map_err(|e| match e {
                ClientError::Tls(_) => fail("cannot build a client from it (TLS settings)"),
                _ => fail("unusable kubeconfig: no current context, cluster or user it names"),
            })
    }
}

/// Clients for kubeconfigs from Secrets, one per Secret version: a reconcile gets the
/// client it got before unless the Secret changed (a rotation, a replaced Secret with the
/// same name), so connections are reused and never outlive the credentials they were
/// built from. Clients nobody asked for in a while are dropped ([`ClientCache::sweep`]) and
/// built again on demand, so that a host serving thousands of clusters keeps only the
/// busy ones.
#[derive(Default)]
pub struct ClientCache {
    /// (namespace, name, key) → the client of the Secret's current version.
    entries: std::sync::Mutex<std::collections::HashMap<(String, String, String), CachedClient>>,
    /// Set to how many clients are held after every change (`None`: not counted).
    held: Option<prometheus::IntGauge>,
}

/// A client, the Secret version (uid, resourceVersion) it was built from and its last use.
struct CachedClient {
    uid: String,
    resource_version: String,
    client: Client,
    server: String,
    used: std::time::Instant,
}

impl ClientCache {
    /// A cache that keeps `held` at the number of clients it holds.
    pub fn counted(held: prometheus::IntGauge) -> Self {
        Self {
            entries: Default::default(),
            held: Some(held),
        }
    }

    /// Entries held now; tell the gauge.
    fn count(
        &self,
        entries: &std::collections::HashMap<(String, String, String), CachedClient>,
    ) -> usize {
        if let Some(held) = &self.held {
            held.set(entries.len() as i64);
        }
        entries.len()
    }

    /// The client for the kubeconfig under `key` of `secret`, checked by `policy`.
    pub async fn client(
        &self,
        policy: &KubeconfigPolicy,
        secret: &Secret,
        key: &str,
        fence: &Arc<Fence>,
    ) -> Result<(Client, String), KubeconfigError> {
        let meta = &secret.metadata;
        let id = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            key.to_string(),
        );
        let uid = meta.uid.clone().unwrap_or_default();
        let resource_version = meta.resource_version.clone().unwrap_or_default();
        if let Some(entry) = self.entries.lock().expect("clients lock").get_mut(&id)
            && (&entry.uid, &entry.resource_version) == (&uid, &resource_version)
        {
            entry.used = std::time::Instant::now();
            return Ok((entry.client.clone(), entry.server.clone()));
        }
        let (client, server) = policy.client(secret, key, fence).await?;
        let entry = CachedClient {
            uid,
            resource_version,
            client: client.clone(),
            server: server.clone(),
            used: std::time::Instant::now(),
        };
        let mut entries = self.entries.lock().expect("clients lock");
        entries.insert(id, entry);
        self.count(&entries);
        Ok((client, server))
    }

    /// Forget the clients of a Secret that is gone, or whose user is done with them.
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut entries = self.entries.lock().expect("clients lock");
        entries.retain(|(ns, n, _), _| !(ns == namespace && n == name));
        self.count(&entries);
    }

    /// Drop the clients not asked for within `idle` (their pooled connections close when
    /// the last request using them ends); how many are left.
    pub fn sweep(&self, idle: std::time::Duration) -> usize {
        let mut entries = self.entries.lock().expect("clients lock");
        entries.retain(|_, e| e.used.elapsed() < idle);
        self.count(&entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INLINE: &str = "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443', certificate-authority-data: Zm9v}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
";

    #[test]
    fn inline_credentials_pass() {
        let policy = KubeconfigPolicy::default();
        assert!(policy.parse(INLINE, "Secret a/b key config").is_ok());
    }

    #[test]
    fn programs_files_and_proxies_are_refused_without_their_values() {
        let policy = KubeconfigPolicy::default();
        let exec = INLINE.replace(
            "user: {token: secret-token}",
            "user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: ['-c', 'touch /tmp/pwned']}}",
        );
        let err = policy.parse(&exec, "Secret a/b key config").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Secret a/b key config: refused: users[0].user.exec"),
            "{err}"
        );
        assert!(!err.to_string().contains("pwned"), "{err}");
        let files = INLINE
            .replace(
                "user: {token: secret-token}",
                "user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}",
            )
            .replace(
                "certificate-authority-data: Zm9v",
                "certificate-authority: /etc/ca.crt, proxy-url: 'http://evil:3128'",
            );
        let err = policy.parse(&files, "s").unwrap_err().message;
        for field in [
            "users[0].user.tokenFile",
            "clusters[0].cluster.certificate-authority",
            "clusters[0].cluster.proxy-url",
        ] {
            assert!(err.contains(field), "{err}");
        }
        assert!(!err.contains("serviceaccount"), "{err}");
        let allowed = KubeconfigPolicy {
            allow_external: true,
            ..Default::default()
        };
        assert!(allowed.parse(&exec, "s").is_ok());
    }

    #[test]
    fn servers_can_be_limited_and_garbage_is_not_echoed() {
        let policy = KubeconfigPolicy {
            servers: vec!["https://*.shoots.example.com".into()],
            ..Default::default()
        };
        let err = policy.parse(INLINE, "s").unwrap_err().message;
        assert!(err.contains("clusters[0].cluster.server"), "{err}");
        let ok = INLINE.replace("https://10.0.0.1:6443", "https://api.c1.shoots.example.com");
        assert!(policy.parse(&ok, "s").is_ok());
        let err = policy.parse("token: hunter2: [", "s").unwrap_err().message;
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[tokio::test]
    async fn held_clients_are_counted_until_forgotten() {
        let http = INLINE.replace(
            "{server: 'https://10.0.0.1:6443', certificate-authority-data: Zm9v}",
            "{server: 'http://127.0.0.1:1'}",
        );
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("kubeconfig-rt".into()),
                namespace: Some("kcp".into()),
                uid: Some("u1".into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            data: Some(
                [(
                    "config".to_string(),
                    k8s_openapi::ByteString(http.into_bytes()),
                )]
                .into(),
            ),
            ..Default::default()
        };
        let held = prometheus::IntGauge::new("held", "held").expect("gauge");
        let cache = ClientCache::counted(held.clone());
        let (policy, fence) = (KubeconfigPolicy::default(), Fence::open());
        cache
            .client(&policy, &secret, "config", &fence)
            .await
            .expect("a client");
        cache
            .client(&policy, &secret, "config", &fence)
            .await
            .expect("the same");
        assert_eq!(held.get(), 1);
        cache.forget("kcp", "kubeconfig-rt");
        assert_eq!(held.get(), 0);
    }
}

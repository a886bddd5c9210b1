//! Target clusters of ModuleSets, cached per kubeconfig Secret version so that discovery
//! and connections are reused between reconciles. A ModuleSet reaches only what its
//! namespace may: a Tessera kubeconfig Secret of its own namespace (one a RuntimeKubeconfig
//! there wrote), a Secret the operator lists (`--module-target`), or — without a target —
//! the host's own cluster where the operator allows it (`--local-modules`). Kubeconfigs are
//! data (see `crate::kubeconfig`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};

use crate::controllers::labels;
use crate::crd::moduleset::Target as TargetSpec;
use crate::crd::{RuntimeAccess, RuntimeKubeconfig};
use crate::fence::Fence;
use crate::kubeconfig::{ClientCache, KubeconfigPolicy};
use crate::modules::Target;
use crate::pattern::glob;

/// (namespace, Secret name) → the target of the Secret's current version.
type RemoteCache = HashMap<(String, String), Remote>;

/// A target, the Secret resourceVersion it was built from and when a pass last asked for it.
struct Remote {
    version: String,
    target: Arc<Target>,
    used: Instant,
}

/// Which targets ModuleSets may use.
#[derive(Debug, Clone, Default)]
pub(crate) struct TargetRules {
    /// Secrets (`namespace/name`, `*` globs) allowed besides Tessera's kubeconfig Secrets.
    pub(crate) secrets: Vec<String>,
    /// Namespaces (`*` globs) whose sets may install into the host's own cluster.
    pub(crate) local_namespaces: Vec<String>,
    pub(crate) kubeconfigs: KubeconfigPolicy,
}

/// The cache.
pub(crate) struct Targets {
    control: Client,
    fence: Arc<Fence>,
    /// The host's one client per kubeconfig Secret version.
    clusters: Arc<ClientCache>,
    rules: TargetRules,
    /// (namespace, secret) → (resourceVersion, target)
    remote: Mutex<RemoteCache>,
    local: tokio::sync::OnceCell<Arc<Target>>,
}

impl Targets {
    pub(crate) fn new(
        control: Client,
        fence: Arc<Fence>,
        clusters: Arc<ClientCache>,
        rules: TargetRules,
    ) -> Self {
        Self {
            control,
            fence,
            clusters,
            rules,
            remote: Mutex::new(HashMap::new()),
            local: tokio::sync::OnceCell::new(),
        }
    }

    /// Why `secret` may not be the target of a set in `namespace`, if it may not.
    async fn refused(&self, namespace: &str, secret: &Secret) -> Result<Option<String>, String> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        if self.rules.secrets.iter().any(|p| glob(p, &key)) {
            return Ok(None);
        }
        let labelled = secret.labels().get(labels::KUBECONFIG).map(String::as_str) == Some("true");
        let owner = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "RuntimeKubeconfig");
        if self.access_secret(namespace, secret).await? {
            return Ok(None);
        }
        if let (true, Some(owner)) = (labelled, owner) {
            let rkcs: Api<RuntimeKubeconfig> = Api::namespaced(self.control.clone(), namespace);
            let rkc = rkcs
                .get_opt(&owner.name)
                .await
                .map_err(|e| format!("RuntimeKubeconfig {namespace}/{}: {e}", owner.name))?;
            if rkc.is_some_and(|k| {
                k.uid().as_deref() == Some(owner.uid.as_str()) && k.spec.secret.name == name
            }) {
                return Ok(None);
            }
        }
        Ok(Some(format!(
            "Secret {key} is neither a kubeconfig Secret Tessera wrote for a Runtime or a RuntimeAccess of this namespace nor one the operator allows as a module target (--module-target)"
        )))
    }

    /// Whether `secret` is the kubeconfig Secret of a RuntimeAccess of `namespace` (its
    /// controller, uid label and `status.secretName` agree).
    async fn access_secret(&self, namespace: &str, secret: &Secret) -> Result<bool, String> {
        let Some(owner) = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "RuntimeAccess")
        else {
            return Ok(false);
        };
        if secret.labels().get(labels::ACCESS_UID) != Some(&owner.uid) {
            return Ok(false);
        }
        let accesses: Api<RuntimeAccess> = Api::namespaced(self.control.clone(), namespace);
        let access = accesses
            .get_opt(&owner.name)
            .await
            .map_err(|e| format!("RuntimeAccess {namespace}/{}: {e}", owner.name))?;
        Ok(access.is_some_and(|a| {
            a.uid().as_deref() == Some(owner.uid.as_str())
                && a.status.and_then(|s| s.secret_name) == secret.metadata.name
        }))
    }

    /// The host's own cluster, connected once.
    async fn local(&self) -> Result<Arc<Target>, String> {
        self.local
            .get_or_try_init(|| async {
                let target = Target::connect(self.control.clone(), "local".into(), None, None)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(Arc::new(target))
            })
            .await
            .cloned()
    }

    /// The target of a ModuleSet in `namespace`; `Err` says why it cannot be reached.
    pub(crate) async fn get(
        &self,
        namespace: &str,
        spec: Option<&TargetSpec>,
    ) -> Result<Arc<Target>, Unreachable> {
        let Some(spec) = spec else {
            if !self
                .rules
                .local_namespaces
                .iter()
                .any(|p| glob(p, namespace))
            {
                return Err(format!(
                    "spec.target is required: ModuleSets in namespace {namespace} may not install into the host's own cluster (the operator allows it per namespace with --local-modules)"
                ).into());
            }
            return Ok(self.local().await?);
        };
        let secrets: Api<Secret> = Api::namespaced(self.control.clone(), namespace);
        let name = &spec.secret_name;
        let secret = secrets
            .get_opt(name)
            .await
            .map_err(|e| format!("Secret {namespace}/{name}: {e}"))?
            .ok_or_else(|| {
                self.clusters.forget(namespace, name);
                Unreachable {
                    message: format!("Secret {namespace}/{name} does not exist"),
                    gone: true,
                }
            })?;
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (namespace.to_string(), name.clone());
        // Cached only once accepted; the Secret's owner and labels are part of its version.
        if let Some(target) = self.cached(&key, &version) {
            return Ok(target);
        }
        if let Some(why) = self.refused(namespace, &secret).await? {
            return Err(format!("spec.target.secretName: {why}").into());
        }
        let field = spec.key.as_deref().unwrap_or("config");
        let (client, server) = self
            .clusters
            .client(&self.rules.kubeconfigs, &secret, field, &self.fence)
            .await
            .map_err(|e| e.to_string())?;
        let target = Target::connect(client, server, spec.provider.clone(), spec.region.clone())
            .await
            .map_err(|e| format!("cluster of Secret {namespace}/{name}: {e}"))?;
        Ok(self.hold(key, version, target))
    }

    /// The target of the Secret version `version`, when held (it counts as used).
    fn cached(&self, key: &(String, String), version: &str) -> Option<Arc<Target>> {
        let mut remote = self.remote.lock().expect("targets lock");
        let held = remote.get_mut(key).filter(|r| r.version == version)?;
        held.used = Instant::now();
        Some(held.target.clone())
    }

    /// Keep `target` as the one of the Secret version `version`.
    fn hold(&self, key: (String, String), version: String, target: Target) -> Arc<Target> {
        let target = Arc::new(target);
        let remote = Remote {
            version,
            target: target.clone(),
            used: Instant::now(),
        };
        self.remote
            .lock()
            .expect("targets lock")
            .insert(key, remote);
        target
    }

    /// Target clusters held now.
    pub(crate) fn len(&self) -> usize {
        self.remote.lock().expect("targets lock").len()
    }

    /// Drop the targets (client, discovery) no pass asked for within `idle`, and the
    /// host's idle clients with them; the next pass of one of their sets connects again.
    /// Returns the API servers no target is left for (their drift watches can go) and how
    /// many targets are left.
    pub(crate) fn sweep(&self, idle: Duration) -> (Vec<String>, usize) {
        let mut remote = self.remote.lock().expect("targets lock");
        let mut dropped: Vec<String> = Vec::new();
        remote.retain(|_, r| {
            let keep = r.used.elapsed() < idle;
            if !keep {
                dropped.push(r.target.server.clone());
            }
            keep
        });
        dropped.retain(|server| !remote.values().any(|r| &r.target.server == server));
        dropped.sort();
        dropped.dedup();
        let left = remote.len();
        drop(remote);
        self.clusters.sweep(idle);
        (dropped, left)
    }
}

/// Why a set's target cannot be reached; `gone`: its Secret does not exist (not an outage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    pub(crate) message: String,
    pub(crate) gone: bool,
}

impl From<String> for Unreachable {
    fn from(message: String) -> Self {
        Self {
            message,
            gone: false,
        }
    }
}

//! The cluster modules are installed on: a client, the cluster facts plugins receive, and a
//! discovery cache (kind → resource) so that applying a known kind costs no extra request.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use tessera_sdk::ClusterFacts;

use super::error::ModuleError;
use crate::api;

/// A resolved kind: how to address it and whether it lives in namespaces.
#[derive(Debug, Clone)]
pub(crate) struct Kind {
    pub(crate) resource: ApiResource,
    pub(crate) namespaced: bool,
}

/// A target cluster.
pub struct Target {
    pub(crate) client: Client,
    /// The API server URL, which identifies the cluster for drift watches.
    pub(crate) server: String,
    pub(crate) facts: ClusterFacts,
    kinds: Mutex<HashMap<(String, String), Kind>>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("server", &self.server)
            .finish()
    }
}

impl Target {
    /// Connect: read the server version for the cluster facts.
    pub async fn connect(
        client: Client,
        server: String,
        provider: Option<String>,
        region: Option<String>,
    ) -> Result<Self, ModuleError> {
        let version = client.apiserver_version().await?;
        Ok(Self {
            client,
            server,
            facts: ClusterFacts {
                kubernetes_version: Some(version.git_version.trim_start_matches('v').to_string()),
                provider,
                region,
            },
            kinds: Mutex::new(HashMap::new()),
        })
    }

    /// How to address `api_version`/`kind`; `None` when the cluster does not serve it (yet).
    pub(crate) async fn kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Kind>, ModuleError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.lock().expect("kinds lock").get(&key) {
            return Ok(Some(found.clone()));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match pinned_kind(&self.client, &gvk).await {
            Ok((resource, caps)) => {
                let found = Kind {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                };
                self.kinds
                    .lock()
                    .expect("kinds lock")
                    .insert(key, found.clone());
                Ok(Some(found))
            }
            Err(e) if api::is_not_found(&e) => Ok(None),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// An API for `kind` in `namespace` (ignored for cluster-scoped kinds).
    pub(crate) fn api(&self, kind: &Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        match (kind.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            _ => Api::all_with(self.client.clone(), &kind.resource),
        }
    }
}

#[cfg(test)]
impl Target {
    /// A target on `client` that knows `kinds` (`(apiVersion, kind)` → how to address it)
    /// already, so that tests see no discovery requests.
    pub(crate) fn knowing(client: Client, kinds: Vec<((&str, &str), Kind)>) -> Self {
        let kinds = kinds
            .into_iter()
            .map(|((v, k), kind)| ((v.to_string(), k.to_string()), kind))
            .collect();
        Self {
            client,
            server: "https://target.test".into(),
            facts: ClusterFacts::default(),
            kinds: Mutex::new(kinds),
        }
    }
}

/// A client and server URL from a kubeconfig (`None`: in-cluster or `$KUBECONFIG`).
pub async fn connect_kubeconfig(
    kubeconfig: Option<kube::config::Kubeconfig>,
) -> Result<(Client, String), String> {
    crate::kubeconfig::build_client(kubeconfig, None)
        .await
        .map_err(|e| e.to_string())
}

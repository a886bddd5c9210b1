//! Target clusters of ModuleSets, cached per kubeconfig Secret version so that discovery
//! and connections are reused between reconciles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use kube::config::Kubeconfig;

use crate::crd::moduleset::Target as TargetSpec;
use crate::modules::Target;
use crate::modules::target::connect_kubeconfig;

/// (namespace, Secret name) → (the Secret's resourceVersion, its target).
type RemoteCache = HashMap<(String, String), (String, Arc<Target>)>;

/// The cache.
pub struct Targets {
    control: Client,
    /// (namespace, secret) → (resourceVersion, target)
    remote: Mutex<RemoteCache>,
    local: tokio::sync::OnceCell<Arc<Target>>,
}

impl Targets {
    pub fn new(control: Client) -> Self {
        Self {
            control,
            remote: Mutex::new(HashMap::new()),
            local: tokio::sync::OnceCell::new(),
        }
    }

    /// The target of a ModuleSet in `namespace`; `Err` says why it cannot be reached.
    pub async fn get(
        &self,
        namespace: &str,
        spec: Option<&TargetSpec>,
    ) -> Result<Arc<Target>, String> {
        let Some(spec) = spec else {
            return self
                .local
                .get_or_try_init(|| async {
                    let target = Target::connect(self.control.clone(), "local".into(), None, None)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok::<_, String>(Arc::new(target))
                })
                .await
                .cloned();
        };
        let secrets: Api<Secret> = Api::namespaced(self.control.clone(), namespace);
        let name = &spec.secret_name;
        let secret = secrets
            .get_opt(name)
            .await
            .map_err(|e| format!("Secret {namespace}/{name}: {e}"))?
            .ok_or_else(|| format!("Secret {namespace}/{name} does not exist"))?;
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (namespace.to_string(), name.clone());
        if let Some((v, target)) = self.remote.lock().expect("targets lock").get(&key)
            && *v == version
        {
            return Ok(target.clone());
        }
        let field = spec.key.as_deref().unwrap_or("config");
        let bytes = secret
            .data
            .and_then(|d| d.get(field).cloned())
            .ok_or_else(|| format!("Secret {namespace}/{name} has no key {field}"))?;
        let text = String::from_utf8(bytes.0)
            .map_err(|_| format!("Secret {namespace}/{name} key {field} is not UTF-8"))?;
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| {
            format!("Secret {namespace}/{name} key {field}: invalid kubeconfig: {e}")
        })?;
        let (client, server) = connect_kubeconfig(Some(kubeconfig)).await?;
        let target = Target::connect(client, server, spec.provider.clone(), spec.region.clone())
            .await
            .map_err(|e| format!("cluster of Secret {namespace}/{name}: {e}"))?;
        let target = Arc::new(target);
        self.remote
            .lock()
            .expect("targets lock")
            .insert(key, (version, target.clone()));
        Ok(target)
    }
}

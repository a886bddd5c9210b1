//! `kubernetes-version`: the Runtime's Kubernetes version or the configured default, never
//! below what the Shoot already runs (Gardener auto-updates patch versions); and KIM's
//! kube-apiserver and kubelet settings (`apiserver`).

mod apiserver;

use std::cmp::Ordering;

use serde::Deserialize;
use tessera_sdk::util::compare_versions;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct KubernetesVersion;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub default_version: String,
    /// KIM's `kubernetes.kubeApiServer` converter configuration.
    pub kube_api_server: apiserver::KubeApiServerConfig,
    /// KIM's `kubernetes.kubelet` converter configuration.
    pub kubelet: apiserver::KubeletConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_version: "1.33".into(),
            kube_api_server: Default::default(),
            kubelet: Default::default(),
        }
    }
}

fn valid(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

impl ShootExtension for KubernetesVersion {
    const NAME: &'static str = "kubernetes-version";
    const DESCRIPTION: &'static str =
        "Kubernetes version (never downgraded), token expiration, feature gates, runtime config";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let desired = input
            .runtime
            .spec
            .shoot
            .kubernetes
            .version
            .clone()
            .unwrap_or_else(|| input.config.default_version.clone());
        if !valid(&desired) {
            return Err(PluginError::invalid_input(
                "spec.shoot.kubernetes.version",
                format!("{desired:?} is not a Kubernetes version like 1.33 or 1.33.2"),
            ));
        }
        let current = input
            .current
            .as_ref()
            .and_then(|s| s.spec.kubernetes.version.clone());
        let mut warnings = Vec::new();
        let version = match current {
            Some(cur) if compare_versions(&cur, &desired) == Ordering::Greater => {
                if !cur.starts_with(&format!("{desired}.")) {
                    warnings.push(format!(
                        "the Shoot already runs Kubernetes {cur}; not downgrading to {desired}"
                    ));
                }
                cur
            }
            _ => desired,
        };
        let mut shoot = input.draft;
        shoot.spec.kubernetes.version = Some(version);
        let config = &input.config;
        apiserver::extend(
            &mut shoot,
            &config.kube_api_server,
            &config.kubelet,
            input.operation,
            input.current.as_ref(),
        )?;
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

tessera_sdk::export_shoot_extension!(KubernetesVersion);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(KubernetesVersion);

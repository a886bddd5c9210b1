use std::collections::BTreeMap;

use serde::Deserialize;

/// Configuration of the `provider` plugin; defaults are KIM's.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Provider type → machine image used when a pool names none.
    pub machine_images: BTreeMap<String, ImageDefault>,
    pub aws: AwsConfig,
    pub openstack: OpenStackConfig,
    /// Google Distributed Cloud Hosted (KIM's `provider.gdch`).
    pub gdch: GdchConfig,
    /// Disable SSH access to worker nodes (`workersSettings.sshAccess.enabled: false`).
    pub disable_ssh_access: bool,
    /// Machine-controller-manager defaults for pools that set none (KIM's
    /// `provider.worker`).
    pub worker: WorkerConfig,
}

/// KIM's `WorkerConfig`; both are strings there, empty meaning KIM's default.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerConfig {
    /// `machineControllerManager.machineDrainTimeout`, a Go duration; empty: `15m`.
    #[cfg_attr(test, schemars(regex(pattern = r"^([0-9]+[hms])*$")))]
    pub default_machine_drain_timeout: String,
    /// `machineControllerManager.maxEvictRetries`, a whole number as text; empty: `2`.
    #[cfg_attr(test, schemars(regex(pattern = r"^[0-9]*$")))]
    pub default_max_evict_retries: String,
}

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageDefault {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsConfig {
    /// Require IMDSv2 on worker instances.
    pub enable_imdsv2: bool,
}

/// The network a gdch Shoot's nodes join (KIM's `provider.gdch.parentReference*`).
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct GdchConfig {
    pub parent_reference_name: String,
    /// Empty: the project namespace of the service account (gdch's default).
    pub parent_reference_namespace: String,
    /// Empty: `SingleSubnet` (gdch's default).
    pub parent_reference_type: String,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenStackConfig {
    pub floating_pool_name: String,
    pub load_balancer_provider: String,
}

impl Default for Config {
    fn default() -> Self {
        let gardenlinux = ImageDefault {
            name: "gardenlinux".into(),
            version: Some("1592.9.0".into()),
        };
        Self {
            machine_images: ["aws", "azure", "gcp", "openstack", "alicloud", "gdch"]
                .into_iter()
                .map(|p| (p.to_string(), gardenlinux.clone()))
                .collect(),
            aws: AwsConfig::default(),
            openstack: OpenStackConfig::default(),
            gdch: GdchConfig::default(),
            disable_ssh_access: true,
            worker: WorkerConfig::default(),
        }
    }
}

impl Default for AwsConfig {
    fn default() -> Self {
        Self {
            enable_imdsv2: true,
        }
    }
}

impl Default for OpenStackConfig {
    fn default() -> Self {
        Self {
            floating_pool_name: "FloatingIP-external-kyma-01".into(),
            load_balancer_provider: "f5".into(),
        }
    }
}

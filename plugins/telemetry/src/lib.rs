//! `telemetry`: a telemetry gateway (ConfigMap, Deployment, Service) plus a `Pipeline`
//! custom resource. The `Pipeline` CRD belongs to another module (`requires`, default
//! `telemetry-crds`): the plugin asks the host for that CRD and waits, reporting
//! Processing, until it is established, then renders everything.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::{ModuleInput, ModuleOutput, ModuleReconciler, PluginError, Selector};

/// The CRD this module needs.
pub const PIPELINE_CRD: &str = "pipelines.telemetry.tessera.dev";

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub namespace: String,
    /// Where the gateway sends data.
    pub endpoint: String,
    pub replicas: u32,
    /// Gateway image.
    pub image: String,
    /// Modules that must be Ready first (the one that serves the Pipeline CRD).
    pub requires: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace: "kyma-system".into(),
            endpoint: String::new(),
            replicas: 1,
            image: "otel/opentelemetry-collector:0.114.0".into(),
            requires: vec!["telemetry-crds".into()],
        }
    }
}

pub struct Telemetry;

fn crd_selector() -> Selector {
    Selector::named(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        PIPELINE_CRD,
    )
}

fn established(crd: &Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

impl ModuleReconciler for Telemetry {
    const NAME: &'static str = "telemetry";
    const DESCRIPTION: &'static str =
        "Telemetry gateway; waits for the Pipeline CRD of another module";
    type Config = Config;

    fn dependencies(config: &Config) -> Vec<String> {
        config.requires.clone()
    }

    fn reconcile(input: ModuleInput<Config>) -> Result<ModuleOutput, PluginError> {
        let config = &input.config;
        if config.endpoint.is_empty() {
            return Err(PluginError::invalid_input(
                "config.endpoint",
                "set the endpoint the gateway exports to",
            ));
        }
        let Some(crds) = input.observed(&crd_selector()) else {
            return Ok(ModuleOutput::require(vec![crd_selector()]));
        };
        if !crds.iter().any(established) {
            return Ok(ModuleOutput::processing(
                vec![],
                format!("waiting for CRD {PIPELINE_CRD}"),
                5,
            ));
        }
        let ns = config.namespace.as_str();
        let labels = json!({"app.kubernetes.io/name": "telemetry-gateway"});
        let pipeline = format!(
            "exporters:\n  otlp:\n    endpoint: {}\nservice:\n  pipelines:\n    traces: {{exporters: [otlp]}}\n",
            config.endpoint
        );
        Ok(ModuleOutput::ready(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "telemetry-gateway", "namespace": ns},
                "data": {"collector.yaml": pipeline},
            }),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "telemetry-gateway", "namespace": ns},
                "spec": {
                    "replicas": config.replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{
                            "name": "collector",
                            "image": config.image,
                            "args": ["--config=/conf/collector.yaml"],
                            "volumeMounts": [{"name": "conf", "mountPath": "/conf"}],
                        }],
                        "volumes": [{"name": "conf", "configMap": {"name": "telemetry-gateway"}}]},
                    },
                },
            }),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "telemetry-gateway", "namespace": ns},
                "spec": {"selector": labels, "ports": [{"name": "otlp", "port": 4317, "protocol": "TCP"}]},
            }),
            json!({
                "apiVersion": "telemetry.tessera.dev/v1alpha1", "kind": "Pipeline",
                "metadata": {"name": "default", "namespace": ns},
                "spec": {"endpoint": config.endpoint},
            }),
        ]))
    }
}

tessera_sdk::export_module_reconciler!(Telemetry);
tessera_sdk::declare_requests!("requests.yaml");

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_sdk::{ClusterFacts, ModuleState, Observed};

    fn input(observed: Vec<Observed>) -> ModuleInput<Config> {
        ModuleInput {
            module: "telemetry".into(),
            version: "1.0.0".into(),
            config: serde_json::from_value(json!({"endpoint": "otlp.example:4317"})).unwrap(),
            cluster: ClusterFacts::default(),
            observed,
        }
    }

    #[test]
    fn asks_for_the_crd_then_waits_then_renders() {
        let first = Telemetry::reconcile(input(vec![])).unwrap();
        assert_eq!(first.requirements, vec![crd_selector()]);
        let missing = Observed {
            selector: crd_selector(),
            objects: vec![],
        };
        let waiting = Telemetry::reconcile(input(vec![missing])).unwrap();
        assert_eq!(waiting.state, ModuleState::Processing);
        assert!(waiting.desired.is_empty());
        let ready = Observed {
            selector: crd_selector(),
            objects: vec![
                json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}}),
            ],
        };
        let out = Telemetry::reconcile(input(vec![ready])).unwrap();
        assert_eq!(out.state, ModuleState::Ready);
        assert_eq!(out.desired.len(), 5);
        assert!(
            out.desired[1]["data"]["collector.yaml"]
                .as_str()
                .unwrap()
                .contains("otlp.example")
        );
    }

    #[test]
    fn endpoint_is_required() {
        let mut i = input(vec![]);
        i.config.endpoint.clear();
        assert_eq!(
            Telemetry::reconcile(i).unwrap_err().field.as_deref(),
            Some("config.endpoint")
        );
    }

    #[test]
    fn depends_on_the_crd_module() {
        assert_eq!(
            Telemetry::dependencies(&Config::default()),
            vec!["telemetry-crds"]
        );
    }
}

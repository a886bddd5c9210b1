//! `telemetry`: a telemetry gateway (ConfigMap, Deployment, Service) plus a `Pipeline`
//! custom resource. The `Pipeline` CRD belongs to another module (`requires`, default
//! `telemetry-crds`): the plugin asks the host for that CRD and waits, reporting
//! Processing, until it is established, then renders everything.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::objects::{Object, config_file, config_map, namespace};
use tessera_sdk::{ModuleInput, ModuleOutput, ModuleReconciler, PluginError, Selector};

/// The CRD this module needs.
pub const PIPELINE_CRD: &str = "pipelines.telemetry.tessera.dev";

/// Name of the gateway's ConfigMap, Deployment and Service.
const GATEWAY: &str = "telemetry-gateway";

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Namespace of the gateway.
    pub namespace: String,
    /// Where the gateway sends data.
    pub endpoint: String,
    /// Gateway replicas.
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
    Object::from_value(crd).is_ok_and(|crd| crd.is_condition_true("Established"))
}

/// The collector's configuration file: built as data, so an endpoint cannot change its
/// structure.
fn collector_config(endpoint: &str) -> String {
    config_file(&json!({
        "exporters": {"otlp": {"endpoint": endpoint}},
        "service": {"pipelines": {"traces": {"exporters": ["otlp"]}}},
    }))
}

fn gateway(config: &Config) -> Vec<Value> {
    let ns = config.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": GATEWAY});
    let deployment = Object::namespaced("apps/v1", "Deployment", ns, GATEWAY).with(
        "spec",
        json!({
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
                "volumes": [{"name": "conf", "configMap": {"name": GATEWAY}}]},
            },
        }),
    );
    let service = Object::namespaced("v1", "Service", ns, GATEWAY).with(
        "spec",
        json!({"selector": labels, "ports": [{"name": "otlp", "port": 4317, "protocol": "TCP"}]}),
    );
    let pipeline = Object::namespaced("telemetry.tessera.dev/v1alpha1", "Pipeline", ns, "default")
        .with("spec", json!({"endpoint": config.endpoint}));
    vec![
        namespace(ns).into(),
        config_map(
            ns,
            GATEWAY,
            [("collector.yaml", collector_config(&config.endpoint))],
        )
        .into(),
        deployment.into(),
        service.into(),
        pipeline.into(),
    ]
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
        if input.config.endpoint.is_empty() {
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
        Ok(ModuleOutput::ready(gateway(&input.config)))
    }
}

tessera_sdk::export_module_reconciler!(Telemetry);
tessera_sdk::module_golden_tests!(Telemetry);
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::declare_config_schema!(Config, "config.schema.json");

// The golden cases in `cases/` cover the requirements loop and the rendered objects.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_on_the_crd_module() {
        assert_eq!(
            Telemetry::dependencies(&Config::default()),
            vec!["telemetry-crds"]
        );
    }
}

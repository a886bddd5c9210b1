//! A module reconciler written against the raw `module-reconciler` world, to prove the
//! contract end to end before the SDK and the ModuleSet controller use it. It asks for the
//! cluster-info ConfigMap, then renders one ConfigMap from its config and the cluster facts.

#[cfg(target_family = "wasm")]
mod guest {
    wit_bindgen::generate!({ path: "../../../wit", world: "module-reconciler" });

    use exports::tessera::plugin::module_reconciler_api::{
        DeleteOutput, Guest, ModuleState, ObjectSelector, PluginError, PluginInfo, ReconcileInput,
        ReconcileOutput,
    };
    use tessera::plugin::types::ErrorKind;

    fn cluster_info() -> ObjectSelector {
        ObjectSelector {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("kube-system".into()),
            name: Some("cluster-info".into()),
            label_selector: None,
        }
    }

    struct Example;

    impl Guest for Example {
        fn info() -> PluginInfo {
            PluginInfo {
                name: "module-example".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                contract_version: "0.1.0".into(),
                description: "renders a ConfigMap after observing cluster-info".into(),
            }
        }

        fn dependencies(_config: String) -> Vec<String> {
            vec!["base".into()]
        }

        fn reconcile(input: ReconcileInput) -> Result<ReconcileOutput, PluginError> {
            let config: serde_json::Value =
                serde_json::from_str(&input.config).map_err(|e| PluginError {
                    kind: ErrorKind::InvalidInput,
                    message: e.to_string(),
                    field: Some("config".into()),
                })?;
            if input.observed.is_empty() {
                return Ok(ReconcileOutput {
                    desired: vec![],
                    state: ModuleState::Processing,
                    message: Some("waiting for cluster-info".into()),
                    requeue_after_seconds: None,
                    requirements: vec![cluster_info()],
                });
            }
            let object = serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": input.module, "namespace": "kyma-system"},
                "data": {
                    "greeting": config["greeting"],
                    "kubernetes": input.cluster.kubernetes_version,
                    "clusterInfoObjects": input.observed[0].objects.len().to_string(),
                },
            });
            Ok(ReconcileOutput {
                desired: vec![object.to_string()],
                state: ModuleState::Ready,
                message: None,
                requeue_after_seconds: Some(300),
                requirements: vec![],
            })
        }

        fn delete(_input: ReconcileInput) -> Result<DeleteOutput, PluginError> {
            Ok(DeleteOutput {
                remove: vec![],
                state: ModuleState::Ready,
                message: None,
                requirements: vec![],
            })
        }
    }

    export!(Example);
}

//! The module-reconciler world works end to end: a component built from `wit/` loads under
//! the same sandbox and checks, and its requirements → observed → desired loop round-trips.

use tessera::wasm::module_api::{ClusterFacts, ModuleState, ObservedObjects, ReconcileInput};
use tessera::wasm::{Limits, LoadError};
use tessera_tests::{plugin_dir, runtime, test_plugin_dir};

fn bytes() -> Vec<u8> {
    std::fs::read(test_plugin_dir().join("module-example.wasm")).unwrap()
}

#[test]
fn module_reconciler_round_trip() {
    let rt = runtime();
    let module = rt
        .load_module(&bytes(), "module-example.wasm")
        .expect("loads");
    assert_eq!(module.info.name, "module-example");
    assert_eq!(module.inspection.contract.as_deref(), Some("0.1.0"));
    let limits = Limits::default();
    assert_eq!(
        module.dependencies(rt, "{}", &limits).unwrap(),
        vec!["base".to_string()]
    );

    let mut input = ReconcileInput {
        module: "example".into(),
        version: "1.0.0".into(),
        config: r#"{"greeting": "hello"}"#.into(),
        cluster: ClusterFacts {
            kubernetes_version: Some("1.33.2".into()),
            provider: Some("aws".into()),
            region: Some("eu-central-1".into()),
        },
        observed: vec![],
    };
    let first = module.reconcile(rt, &input, &limits).unwrap();
    assert_eq!(first.state, ModuleState::Processing);
    assert_eq!(first.requirements.len(), 1);
    assert_eq!(first.requirements[0].name.as_deref(), Some("cluster-info"));

    input.observed = vec![ObservedObjects {
        selector: first.requirements[0].clone(),
        objects: vec![r#"{"kind":"ConfigMap"}"#.into()],
    }];
    let second = module.reconcile(rt, &input, &limits).unwrap();
    assert_eq!(second.state, ModuleState::Ready);
    assert_eq!(second.requeue_after_seconds, Some(300));
    let object: serde_json::Value = serde_json::from_str(&second.desired[0]).unwrap();
    assert_eq!(object["data"]["greeting"], "hello");
    assert_eq!(object["data"]["kubernetes"], "1.33.2");

    let bad = ReconcileInput {
        config: "not json".into(),
        ..input.clone()
    };
    let err = module.reconcile(rt, &bad, &limits).unwrap_err();
    assert_eq!(err.field(), Some("config"));
    assert_eq!(
        module.delete(rt, &input, &limits).unwrap().state,
        ModuleState::Ready
    );
}

/// Both worlds end in the one evaluator: a module reconciler reading the environment is
/// refused exactly like a shoot extension.
#[test]
fn module_reconcilers_get_the_same_sandbox_checks() {
    use tessera::wasm::Failure;
    let rt = runtime();
    let bytes = std::fs::read(test_plugin_dir().join("hostile-module.wasm")).unwrap();
    let module = rt
        .load_module(&bytes, "hostile-module.wasm")
        .expect("loads");
    let input = |mode: &str| ReconcileInput {
        module: "hostile-module".into(),
        version: "1.0.0".into(),
        config: serde_json::json!({ "mode": mode, "namespace": "default", "name": "x" })
            .to_string(),
        cluster: ClusterFacts {
            kubernetes_version: None,
            provider: None,
            region: None,
        },
        observed: vec![],
    };
    let limits = Limits::default();
    let err = module
        .reconcile(rt, &input("read-env"), &limits)
        .unwrap_err();
    assert!(
        matches!(&err.cause, Failure::CapabilityDenied { capability } if capability == "the environment"),
        "{err}"
    );
    let huge = module
        .reconcile(rt, &input("huge-message"), &limits)
        .unwrap_err();
    assert!(
        matches!(&huge.cause, Failure::OutputTooLarge { .. }),
        "{huge}"
    );
    assert!(module.reconcile(rt, &input("ok"), &limits).is_ok());
}

#[test]
fn kinds_are_not_interchangeable() {
    let err = runtime().load(&bytes(), "module-example.wasm").unwrap_err();
    assert!(
        matches!(&err, LoadError::Link { message, .. } if message.contains("expected a shoot-extension plugin, found a module-reconciler plugin")),
        "{err}"
    );
    let shoot = std::fs::read(plugin_dir().join("labels.wasm")).unwrap();
    let err = runtime().load_module(&shoot, "labels.wasm").unwrap_err();
    assert!(
        err.to_string()
            .contains("expected a module-reconciler plugin"),
        "{err}"
    );
}

/// One loader and one cache by component digest for both kinds: the same bytes load once,
/// whichever way they are asked for, and a component loads as the kind it declares.
#[test]
fn one_loader_keeps_each_component_once_for_both_kinds() {
    let rt = runtime();
    let module = rt.load_module(&bytes(), "module-example.wasm").unwrap();
    let again = rt.load_module(&bytes(), "again.wasm").unwrap();
    assert!(std::sync::Arc::ptr_eq(&module, &again));
    let any = rt.load_any(&bytes(), "any.wasm").unwrap();
    assert!(matches!(&any, tessera::wasm::Loaded::Module(m) if std::sync::Arc::ptr_eq(m, &module)));
    let shoot = std::fs::read(plugin_dir().join("labels.wasm")).unwrap();
    let extension = rt.load(&shoot, "labels.wasm").unwrap();
    let any = rt.load_any(&shoot, "labels.wasm").unwrap();
    assert!(
        matches!(&any, tessera::wasm::Loaded::Extension(p) if std::sync::Arc::ptr_eq(p, &extension))
    );
    assert_eq!(any.info().name, extension.info.name);
}

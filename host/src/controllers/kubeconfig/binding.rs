//! A RuntimeKubeconfig acts only for the Runtime that owns it, and writes only the Secret
//! it created. Anyone who can create a RuntimeKubeconfig in a namespace could otherwise make
//! the host fetch the admin kubeconfig of any Shoot and write it into a Secret of their
//! choosing, or overwrite and delete any Secret the host can reach. Pure decisions over the
//! objects as read, unit-tested.

use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};

use super::super::labels::{self, kubeconfig_secret as secret_name};
use crate::controllers::KimTakeover;
use crate::crd::{Runtime, RuntimeKubeconfig};
// What KIM's GardenerCluster controller puts on the kubeconfig Secrets it writes
// (`internal/controller/kubeconfig/gardener_cluster_controller.go`, `newSecret`: the
// GardenerCluster's labels, among them the runtime id, and `managed-by`).
use crate::crd::labels::{KIM_MANAGED_BY_VALUE, KIM_OPERATOR_MANAGED_BY, KIM_RUNTIME_ID};

/// Why `rkc` may not act, if it may not: it must be controlled by the Runtime it names, in
/// its own namespace and with that Runtime's uid; name the Shoot that Runtime recorded; and
/// keep its kubeconfig in the Secret `kubeconfig-<runtime>` of its own namespace.
pub(crate) fn unbound(rkc: &RuntimeKubeconfig, runtime: Option<&Runtime>) -> Option<String> {
    let namespace = rkc.namespace().unwrap_or_default();
    let spec = &rkc.spec;
    let Some(owner) = rkc
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
    else {
        return Some(
            "it has no controller owner: only the host creates RuntimeKubeconfigs, for Runtimes"
                .into(),
        );
    };
    if owner.kind != "Runtime"
        || owner.api_version != Runtime::api_version(&()).as_ref()
        || owner.name != spec.runtime
    {
        return Some(format!(
            "its controller is {} {}, not the Runtime {} it names (field spec.runtime)",
            owner.kind, owner.name, spec.runtime
        ));
    }
    let Some(runtime) = runtime else {
        return Some(format!(
            "Runtime {namespace}/{} does not exist",
            spec.runtime
        ));
    };
    if runtime.uid().as_deref() != Some(owner.uid.as_str()) {
        return Some(format!(
            "its owner reference names another Runtime {} than the one that exists (uid)",
            spec.runtime
        ));
    }
    let recorded = runtime.status.as_ref().and_then(|s| s.shoot.as_ref());
    if recorded != Some(&spec.shoot) {
        return Some(format!(
            "Shoot {}/{} is not the Shoot Runtime {} created (field spec.shoot)",
            spec.shoot.namespace, spec.shoot.name, spec.runtime
        ));
    }
    let expected = secret_name(&spec.runtime);
    if spec.secret.namespace != namespace || spec.secret.name != expected {
        return Some(format!(
            "its Secret must be {namespace}/{expected} (field spec.secret), not {}/{}",
            spec.secret.namespace, spec.secret.name
        ));
    }
    None
}

/// Whether `secret` is the one `rkc` created: labelled as a kubeconfig of its Runtime and
/// controlled by this very RuntimeKubeconfig (uid).
pub(crate) fn owns(rkc: &RuntimeKubeconfig, secret: &Secret) -> bool {
    let l = secret.labels();
    let labelled = l.get(labels::KUBECONFIG).map(String::as_str) == Some("true")
        && l.get(labels::RUNTIME) == Some(&rkc.spec.runtime);
    let controlled = secret.owner_references().iter().any(|o| {
        o.controller == Some(true)
            && o.kind == "RuntimeKubeconfig"
            && rkc.uid().as_deref() == Some(o.uid.as_str())
    });
    labelled && controlled
}

/// Whether `secret` is the kubeconfig Secret KIM wrote for this RuntimeKubeconfig's
/// Runtime (KIM's `managed-by` and runtime-id labels, no controller), to be taken over when
/// the operator says so and the Runtime lives where KIM's are taken over: the next write
/// makes it this RuntimeKubeconfig's.
pub(crate) fn adoptable(rkc: &RuntimeKubeconfig, secret: &Secret, kim: &KimTakeover) -> bool {
    let l = secret.labels();
    // Only where KIM's Runtimes are taken over, as for their Shoots.
    let namespace = rkc.namespace().unwrap_or_default();
    kim.enabled
        && kim.runtime_namespaces.contains(&namespace)
        && l.get(KIM_OPERATOR_MANAGED_BY).map(String::as_str) == Some(KIM_MANAGED_BY_VALUE)
        && l.get(KIM_RUNTIME_ID) == Some(&rkc.spec.runtime)
        && !l.contains_key(labels::RUNTIME)
        && !secret
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runtime(uid: &str, shoot: &str) -> Runtime {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/runtime-aws.yaml"
        ))
        .unwrap();
        let mut doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        doc["metadata"] = json!({"name": "rt", "namespace": "team-a", "uid": uid});
        doc["status"] = json!({"shoot": {"name": shoot, "namespace": "garden-kyma-dev"}});
        serde_json::from_value(doc).unwrap()
    }

    #[test]
    fn a_kim_secret_is_adopted_only_with_takeover_and_in_kim_namespaces() {
        let kim_secret: Secret = serde_json::from_value(json!({"metadata": {
            "name": "kubeconfig-rt", "namespace": "team-a",
            "labels": {"kyma-project.io/runtime-id": "rt",
                "operator.kyma-project.io/managed-by": "infrastructure-manager"}}}))
        .unwrap();
        let rkc = rkc(Some("u1"), "c-1", ("team-a", "kubeconfig-rt"));
        let mut kim = KimTakeover::default();
        assert!(!adoptable(&rkc, &kim_secret, &kim), "takeover off");
        kim.enabled = true;
        assert!(
            !adoptable(&rkc, &kim_secret, &kim),
            "team-a is not KIM's namespace"
        );
        kim.runtime_namespaces = vec!["team-a".into()];
        assert!(adoptable(&rkc, &kim_secret, &kim));
    }

    fn rkc(owner_uid: Option<&str>, shoot: &str, secret: (&str, &str)) -> RuntimeKubeconfig {
        let owners = owner_uid.map(|uid| {
            json!([{"apiVersion": "tessera.dev/v1alpha1", "kind": "Runtime", "name": "rt",
                "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
            "metadata": {"name": "rt", "namespace": "team-a", "uid": "k1", "ownerReferences": owners},
            "spec": {"runtime": "rt", "shoot": {"name": shoot, "namespace": "garden-kyma-dev"},
                "secret": {"namespace": secret.0, "name": secret.1, "key": "config"}},
        }))
        .unwrap()
    }

    #[test]
    fn only_the_owning_runtime_binds() {
        let rt = runtime("u1", "s1");
        let own = ("team-a", "kubeconfig-rt");
        assert_eq!(unbound(&rkc(Some("u1"), "s1", own), Some(&rt)), None);
        let why = unbound(&rkc(None, "s1", own), Some(&rt)).unwrap();
        assert!(why.contains("no controller owner"), "{why}");
        let why = unbound(&rkc(Some("u0"), "s1", own), Some(&rt)).unwrap();
        assert!(why.contains("uid"), "{why}");
        let why = unbound(&rkc(Some("u1"), "someone-elses", own), Some(&rt)).unwrap();
        assert!(why.contains("spec.shoot"), "{why}");
        let why = unbound(
            &rkc(Some("u1"), "s1", ("team-b", "kubeconfig-rt")),
            Some(&rt),
        )
        .unwrap();
        assert!(why.contains("spec.secret"), "{why}");
        let why = unbound(&rkc(Some("u1"), "s1", ("team-a", "db-password")), Some(&rt)).unwrap();
        assert!(why.contains("spec.secret"), "{why}");
        assert!(unbound(&rkc(Some("u1"), "s1", own), None).is_some());
    }

    #[test]
    fn only_its_own_secret_is_written() {
        let k = rkc(Some("u1"), "s1", ("team-a", "kubeconfig-rt"));
        let secret = |owner_uid: &str, labelled: bool| -> Secret {
            let labels = labelled
                .then(|| json!({"tessera.dev/kubeconfig": "true", "tessera.dev/runtime": "rt"}));
            serde_json::from_value(json!({"metadata": {"name": "kubeconfig-rt", "labels": labels,
                "ownerReferences": [{"apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
                    "name": "rt", "uid": owner_uid, "controller": true}]}}))
            .unwrap()
        };
        assert!(owns(&k, &secret("k1", true)));
        assert!(!owns(&k, &secret("other", true)));
        assert!(!owns(&k, &secret("k1", false)));
    }
}

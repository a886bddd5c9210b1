//! Make sure the Runtime has a RuntimeKubeconfig and wait until its Secret is written.

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::labels::kubeconfig_secret as secret_name;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{
    ConditionStatus, KubeconfigState, RuntimeKubeconfig, RuntimeKubeconfigSpec, SecretRef,
};
use crate::crd::{ConditionType, Reason};
use crate::gardener::FIELD_MANAGER;

/// The RuntimeKubeconfig of `m`'s Runtime, owned by it. With sharding the leader labels
/// it for its Runtime's shard: an apply from here could move it back from a stale cache.
fn document(m: &Machine, spec: &RuntimeKubeconfigSpec) -> serde_json::Value {
    let owner = m
        .runtime
        .controller_owner_ref(&())
        .expect("Runtime has a name and uid");
    json!({
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "RuntimeKubeconfig",
        "metadata": {
            "name": spec.runtime,
            "namespace": m.namespace(),
            "labels": { labels::RUNTIME: spec.runtime },
            "ownerReferences": [owner],
        },
        "spec": spec,
    })
}

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let id = m.id();
    let namespace = m.namespace();
    let api: Api<RuntimeKubeconfig> = Api::namespaced(m.ctx.client.clone(), &namespace);
    let spec = RuntimeKubeconfigSpec {
        runtime: id.clone(),
        shoot: m
            .status
            .shoot
            .clone()
            .expect("select_processing set the Shoot"),
        secret: SecretRef {
            name: secret_name(&id),
            namespace: namespace.clone(),
            key: "config".into(),
        },
    };
    let existing = api.get_opt(&id).await?;
    if existing.as_ref().map(|k| &k.spec) != Some(&spec) {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&id, &params, &Patch::Apply(&document(m, &spec)))
            .await?;
    }
    let ready = existing
        .as_ref()
        .and_then(|k| k.status.as_ref())
        .is_some_and(|s| s.state == Some(KubeconfigState::Ready));
    if !ready {
        let message = existing
            .and_then(|k| k.status)
            .and_then(|s| {
                s.conditions
                    .into_iter()
                    .find(|c| c.is(ConditionType::Ready))
            })
            .map(|c| c.message)
            .unwrap_or_else(|| "waiting for the kubeconfig Secret".into());
        m.condition(
            ConditionType::KubeconfigReady,
            ConditionStatus::Unknown,
            Reason::KubeconfigPending,
            message,
        );
        // The RuntimeKubeconfig is owned by the Runtime: its status change wakes us.
        return Ok(Transition::Stop(Action::requeue(
            m.ctx.config.requeue.pending,
        )));
    }
    m.condition(
        ConditionType::KubeconfigReady,
        ConditionStatus::True,
        Reason::KubeconfigReady,
        format!("Secret {} holds the admin kubeconfig", secret_name(&id)),
    );
    Ok(Transition::Next(Step::CreateNamespaces))
}

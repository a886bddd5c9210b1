//! Admin ClusterRoleBindings in the runtime cluster from `spec.security.administrators`.
//! Only bindings labelled as Tessera's are ever changed or deleted.

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::{ReconcileError, runtime_cluster};
use crate::crd::ConditionStatus;
use crate::crd::{ConditionType, Reason};
use crate::gardener::FIELD_MANAGER;

/// Binding names are derived from runtime and user, so a renamed user is a create plus a
/// delete, and Runtimes sharing a cluster (tests, benchmarks) never collide.
pub(crate) fn binding_name(runtime_id: &str, user: &str) -> String {
    let digest = Sha256::digest(format!("{runtime_id}/{user}").as_bytes());
    format!("tessera-admin-{}", &hex::encode(digest)[..12])
}

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let admins = m.runtime.spec.inner.security.administrators.clone();
    let client = runtime_cluster::client(&m.ctx, &m.namespace(), &m.id()).await?;
    let api: Api<ClusterRoleBinding> = Api::all(client);
    let id = m.id();
    let existing = runtime_cluster::list_owned(&api, &id).await?;
    let existing_names: Vec<String> = existing
        .iter()
        .filter_map(|b| b.metadata.name.clone())
        .collect();
    let mut created = 0;
    for user in &admins {
        let name = binding_name(&id, user);
        if existing_names.contains(&name) {
            continue;
        }
        let doc = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": name,
                "labels": runtime_cluster::owned_labels(&id),
                "annotations": { "tessera.dev/user": user },
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
        });
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&doc),
        )
        .await?;
        created += 1;
    }
    let wanted: Vec<String> = admins.iter().map(|u| binding_name(&id, u)).collect();
    let mut deleted = 0;
    for name in existing_names.iter().filter(|n| !wanted.contains(n)) {
        api.delete(name, &DeleteParams::default()).await?;
        deleted += 1;
    }
    if created + deleted > 0 {
        tracing::info!(runtime = %m.id(), created, deleted, "admin bindings updated");
    }
    m.condition(
        ConditionType::Configured,
        ConditionStatus::True,
        Reason::AdministratorsConfigured,
        format!("{} administrator binding(s)", admins.len()),
    );
    Ok(Transition::Next(Step::Ready))
}

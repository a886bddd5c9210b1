//! Admin ClusterRoleBindings in the runtime cluster from `spec.security.administrators`.
//! Only bindings labelled as Tessera's are ever changed or deleted — and, taking over from
//! KIM, KIM's `admin-*` bindings of users no longer listed, as KIM itself would
//! (`internal/controller/runtime/fsm/runtime_fsm_apply_clusterrolebindings.go`).

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::super::machine::{Machine, Step, Transition};
use super::super::takeover;
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
    let client = m.cluster().await?;
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
        let doc = binding(&id, &name, user);
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&doc),
        )
        .await
        .map_err(runtime_cluster::failed(
            &id,
            &format!("ClusterRoleBinding {name}"),
        ))?;
        created += 1;
    }
    let wanted: Vec<String> = admins.iter().map(|u| binding_name(&id, u)).collect();
    let mut deleted = 0;
    for name in existing_names.iter().filter(|n| !wanted.contains(n)) {
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(runtime_cluster::failed(
                &id,
                &format!("ClusterRoleBinding {name}"),
            ))?;
        deleted += 1;
    }
    deleted += remove_kim_bindings(m, &api, &admins).await?;
    if created + deleted > 0 {
        tracing::info!(runtime = %m.id(), created, deleted, "admin bindings updated");
    }
    m.condition(
        ConditionType::Configured,
        ConditionStatus::True,
        Reason::AdministratorsConfigured,
        format!("{} administrator binding(s)", admins.len()),
    );
    Ok(Transition::Next(Step::ProvisioningInfo))
}

/// KIM's label on the admin bindings it made; only those are ever deleted by it.
fn kim_managed() -> String {
    use crate::crd::labels::{KIM_MANAGED_BY_VALUE, KIM_RECONCILER_MANAGED_BY};
    format!("{KIM_RECONCILER_MANAGED_BY}={KIM_MANAGED_BY_VALUE}")
}

/// With takeover on (for a Runtime that may take over), delete KIM's admin bindings whose
/// user is no longer an administrator: otherwise a user removed after the switch would
/// keep cluster-admin. Those of listed users stay (nothing is recreated).
async fn remove_kim_bindings(
    m: &Machine,
    api: &Api<ClusterRoleBinding>,
    admins: &[String],
) -> Result<usize, ReconcileError> {
    if !takeover::takes_over(&m.runtime, &m.ctx.config.kim) {
        return Ok(0);
    }
    let id = m.id();
    let params = kube::api::ListParams::default().labels(&kim_managed());
    let found = api
        .list(&params)
        .await
        .map_err(runtime_cluster::failed(&id, "ClusterRoleBindings of KIM"))?;
    let stale = stale_kim_bindings(&found.items, admins);
    for name in &stale {
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(runtime_cluster::failed(
                &id,
                &format!("ClusterRoleBinding {name}"),
            ))?;
    }
    Ok(stale.len())
}

/// KIM's cluster-admin bindings none of whose User subjects is still an administrator.
fn stale_kim_bindings(bindings: &[ClusterRoleBinding], admins: &[String]) -> Vec<String> {
    bindings
        .iter()
        .filter(|b| b.role_ref.name == "cluster-admin")
        .filter(|b| {
            !b.subjects
                .iter()
                .flatten()
                .any(|s| s.kind == "User" && admins.contains(&s.name))
        })
        .filter_map(|b| b.metadata.name.clone())
        .collect()
}

/// The ClusterRoleBinding `name` making `user` a cluster administrator, labelled as
/// Tessera's for Runtime `id`.
fn binding(id: &str, name: &str, user: &str) -> serde_json::Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": runtime_cluster::owned_labels(id),
            "annotations": { "tessera.dev/user": user },
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kim_binding(name: &str, role: &str, user: &str) -> ClusterRoleBinding {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }))
        .unwrap()
    }

    /// KIM `runtime_fsm_apply_crb_test.go`, "should return list if with CRBs to remove": a
    /// binding of a user no longer listed goes, those of listed users stay.
    #[test]
    fn kim_bindings_of_users_no_longer_listed_are_stale() {
        let bindings = [
            kim_binding("admin-a1", "cluster-admin", "alice@example.com"),
            kim_binding("admin-b2", "cluster-admin", "bob@example.com"),
            kim_binding("admin-v3", "view", "eve@example.com"),
        ];
        let admins = ["alice@example.com".to_string()];
        assert_eq!(stale_kim_bindings(&bindings, &admins), ["admin-b2"]);
    }
}

//! RuntimeAccess against the real API servers: least-privilege kubeconfigs, checked with
//! kubectl against the runtime cluster; rotation revokes the old token; deletion (also
//! while no host runs) removes exactly what the host made.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera_tests::probe::{eventually, tail};

use super::{ControlPlane, Host, LIMIT, Result, RuntimeState, Scenario};

/// How long a revoked token may still be accepted: the API server caches token reviews.
const REVOKED: Duration = Duration::from_secs(180);

fn accesses(s: &Scenario<'_>) -> Api<DynamicObject> {
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "tessera.dev",
        "v1alpha1",
        "RuntimeAccess",
    ));
    Api::namespaced_with(s.client.clone(), &s.ns, &resource)
}

async fn create(s: &Scenario<'_>, doc: Value) -> Result {
    let obj: tessera::crd::RuntimeAccess =
        serde_json::from_value(doc).map_err(|e| e.to_string())?;
    let typed: Api<tessera::crd::RuntimeAccess> = Api::namespaced(s.client.clone(), &s.ns);
    typed
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| format!("create RuntimeAccess: {e}"))?;
    Ok(())
}

/// `kubectl` with the kubeconfig in `file`: its output, or its error text.
fn kubectl(file: &Path, args: &[&str]) -> std::result::Result<String, String> {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(file)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(stderr)
    }
}

/// The issued kubeconfig of `access`, once Ready, written to a file of `dir`.
async fn ready_kubeconfig(
    s: &Scenario<'_>,
    access: &str,
    dir: &Path,
    host: &Host,
) -> Result<std::path::PathBuf> {
    eventually(&format!("RuntimeAccess {access} Ready"), LIMIT, || async {
        let obj = accesses(s).get(access).await.ok()?;
        (obj.data["status"]["state"] == "Ready").then_some(())
    })
    .await
    .map_err(|e| {
        let status = futures::executor::block_on(accesses(s).get(access))
            .map(|o| o.data["status"].to_string());
        format!("{e}: {status:?}\n{}", tail(&host.logs(), 20))
    })?;
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &s.ns);
    let secret = secrets
        .get(&format!("{access}-kubeconfig"))
        .await
        .map_err(|e| e.to_string())?;
    let config = secret
        .data
        .and_then(|mut d| d.remove("config"))
        .ok_or("no config in the Secret")?;
    let file = dir.join(format!("{access}.kubeconfig"));
    std::fs::write(&file, config.0).map_err(|e| e.to_string())?;
    Ok(file)
}

/// `Ok` when kubectl succeeds, else the error.
fn allowed(file: &Path, args: &[&str]) -> Result {
    kubectl(file, args)
        .map(|_| ())
        .map_err(|e| format!("kubectl {args:?} refused: {e}"))
}

fn forbidden(file: &Path, args: &[&str]) -> Result {
    match kubectl(file, args) {
        Err(e) if e.contains("Forbidden") || e.contains("forbidden") => Ok(()),
        other => Err(format!("kubectl {args:?} should get 403: {other:?}")),
    }
}

pub(super) async fn runtime_access(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-access").await;
    let mut host = s.host("a", &[]);
    // KIM's newer options ride along: the CRD keeps them and the Shoot carries them.
    let mut manifest = s.manifest("rt-access", "access");
    tessera_sdk::util::merge_patch(&mut manifest, &kim_options());
    s.create(&manifest).await?;
    s.wait_state("rt-access", RuntimeState::Ready, &host)
        .await?;
    shoot_has_kim_options(&s).await?;
    let apps = format!("{}-apps", s.ns);
    let by_hand_role = format!("{}-namespace-reader", s.ns);
    prepare_runtime_cluster(&s, &apps, &by_hand_role).await?;
    create(
        &s,
        access_doc(
            &s,
            "reader",
            &apps,
            json!([{ "namespace": apps,
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] }] }]),
        ),
    )
    .await?;
    create(
        &s,
        access_doc(
            &s,
            "viewer",
            &apps,
            json!([{ "clusterRole": by_hand_role }]),
        ),
    )
    .await?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let reader = ready_kubeconfig(&s, "reader", dir.path(), &host).await?;
    let viewer = ready_kubeconfig(&s, "viewer", dir.path(), &host).await?;
    allowed(&reader, &["get", "configmaps", "-n", &apps])?;
    forbidden(&reader, &["get", "secrets", "-n", &apps])?;
    forbidden(&reader, &["get", "configmaps", "-n", "default"])?;
    forbidden(&reader, &["get", "namespaces"])?;
    allowed(&viewer, &["get", "namespaces"])?;
    forbidden(&viewer, &["get", "configmaps", "-n", &apps])?;
    forbidden(&viewer, &["delete", "namespace", &apps, "--dry-run=server"])?;

    rotation(&s, &reader, dir.path(), &apps, &host).await?;
    let hand_binding = bind_by_hand(&s, &apps, &by_hand_role).await?;

    host.kill();
    for name in ["reader", "viewer"] {
        accesses(&s)
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| e.to_string())?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    if accesses(&s)
        .get_opt("reader")
        .await
        .ok()
        .flatten()
        .is_none()
    {
        return Err("the RuntimeAccess went without a host to clean up".into());
    }
    let host = s.host("b", &[]);
    removed(&s, &apps, &host).await?;
    untouched(&s, &apps, &by_hand_role, &hand_binding).await?;
    cleanup(&s, &apps, &by_hand_role).await
}

fn kim_options() -> Value {
    json!({"spec": {
        "shoot": {
            "kubernetes": {"kubeAPIServer": {"acl": {"allowedCIDRs": ["10.0.0.0/8"]}}},
            "networking": {"dualStack": true},
        },
        "imageRegistryCache": [{"name": "hub", "namespace": "kyma-system", "uid": "u1",
            "config": {"upstream": "docker.io", "volume": {"size": "10Gi"}}}],
    }})
}

/// The applied Shoot has the ACL, the registry cache and both IP families.
async fn shoot_has_kim_options(s: &Scenario<'_>) -> Result {
    let shoot = s.shoots().get("access").await.map_err(|e| e.to_string())?;
    let spec = &shoot.data["spec"];
    let extensions = spec["extensions"].as_array().cloned().unwrap_or_default();
    let has_acl = extensions.iter().any(|e| e["type"] == "acl");
    let cache = extensions
        .iter()
        .find(|e| e["type"] == "registry-cache")
        .map(|e| e["providerConfig"]["caches"][0].clone());
    let ok = has_acl
        && cache == Some(json!({"upstream": "docker.io", "volume": {"size": "10Gi"}}))
        && spec["networking"]["ipFamilies"] == json!(["IPv4", "IPv6"]);
    if ok {
        Ok(())
    } else {
        Err(format!("the Shoot lacks KIM's options: {spec}"))
    }
}

fn access_doc(s: &Scenario<'_>, name: &str, apps: &str, grants: Value) -> Value {
    json!({
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "RuntimeAccess",
        "metadata": { "name": name, "namespace": s.ns },
        "spec": {
            "runtime": "rt-access",
            "serviceAccount": { "name": name, "namespace": apps },
            "grants": grants,
            "lifetime": "1h",
        },
    })
}

/// A namespace with a ConfigMap and a Secret, and a ClusterRole made by hand that lets one
/// list namespaces.
async fn prepare_runtime_cluster(s: &Scenario<'_>, apps: &str, role: &str) -> Result {
    let client = s.runtime_client.clone();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": apps } })).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|e| e.to_string())?;
    let roles: Api<ClusterRole> = Api::all(client);
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": role },
        "rules": [{ "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"] }],
    }))
    .unwrap();
    roles
        .create(&PostParams::default(), &role)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A forced rotation issues a new token; the old kubeconfig stops working.
async fn rotation(s: &Scenario<'_>, old: &Path, dir: &Path, apps: &str, host: &Host) -> Result {
    let before = std::fs::read_to_string(old).map_err(|e| e.to_string())?;
    let patch = json!({ "metadata": { "annotations": { "tessera.dev/force-rotation": "true" } } });
    accesses(s)
        .patch("reader", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    let fresh = dir.join("fresh");
    std::fs::create_dir_all(&fresh).map_err(|e| e.to_string())?;
    let new = eventually("a new token", LIMIT, || async {
        let obj = accesses(s).get("reader").await.ok()?;
        if obj.annotations().contains_key("tessera.dev/force-rotation") {
            return None;
        }
        let file = ready_kubeconfig(s, "reader", &fresh, host).await.ok()?;
        let text = std::fs::read_to_string(&file).ok()?;
        (text != before).then_some(file)
    })
    .await?;
    allowed(&new, &["get", "configmaps", "-n", apps])?;
    eventually("the old token to be refused", REVOKED, || async {
        match kubectl(old, &["get", "configmaps", "-n", apps]) {
            Err(e) if e.contains("Unauthorized") => Some(()),
            _ => None,
        }
    })
    .await?;
    allowed(&new, &["get", "configmaps", "-n", apps])
}

/// A RoleBinding made by hand for the reader's ServiceAccount: the host must leave it.
async fn bind_by_hand(s: &Scenario<'_>, apps: &str, role: &str) -> Result<String> {
    let bindings: Api<RoleBinding> = Api::namespaced(s.runtime_client.clone(), apps);
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "by-hand" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": apps }],
    }))
    .unwrap();
    let made = bindings
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| e.to_string())?;
    Ok(made.resource_version().unwrap_or_default())
}

/// Everything the host made is gone: both RuntimeAccesses, their Secrets, ServiceAccounts,
/// roles, bindings and token anchors.
async fn removed(s: &Scenario<'_>, apps: &str, host: &Host) -> Result {
    eventually("both RuntimeAccesses gone", LIMIT, || async {
        let left = accesses(s).list(&ListParams::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &s.ns);
    for name in ["reader-kubeconfig", "viewer-kubeconfig"] {
        if secrets
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err(format!("Secret {name} is still there"));
        }
    }
    let left = made_in_runtime_cluster(s, apps).await?;
    if !left.is_empty() {
        return Err(format!("left in the runtime cluster: {left:?}"));
    }
    Ok(())
}

/// What carries the host's access label in the runtime cluster.
async fn made_in_runtime_cluster(s: &Scenario<'_>, apps: &str) -> Result<Vec<String>> {
    let mut left = Vec::new();
    let params = ListParams::default().labels("tessera.dev/access-uid");
    let client = &s.runtime_client;
    let list = |kind: &str, group: &str, namespaced: bool| {
        let resource =
            kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, "v1", kind));
        if namespaced {
            Api::<DynamicObject>::namespaced_with(client.clone(), apps, &resource)
        } else {
            Api::<DynamicObject>::all_with(client.clone(), &resource)
        }
    };
    for (kind, group, namespaced) in [
        ("ServiceAccount", "", true),
        ("Secret", "", true),
        ("Role", "rbac.authorization.k8s.io", true),
        ("RoleBinding", "rbac.authorization.k8s.io", true),
        ("ClusterRole", "rbac.authorization.k8s.io", false),
        ("ClusterRoleBinding", "rbac.authorization.k8s.io", false),
    ] {
        let items = list(kind, group, namespaced)
            .list(&params)
            .await
            .map_err(|e| e.to_string())?;
        left.extend(
            items
                .items
                .iter()
                .map(|o| format!("{kind} {}", o.name_any())),
        );
    }
    Ok(left)
}

/// The hand-made binding and ClusterRole are as they were.
async fn untouched(s: &Scenario<'_>, apps: &str, role: &str, version: &str) -> Result {
    let bindings: Api<RoleBinding> = Api::namespaced(s.runtime_client.clone(), apps);
    let binding = bindings
        .get_opt("by-hand")
        .await
        .map_err(|e| e.to_string())?;
    if binding.and_then(|b| b.resource_version()).as_deref() != Some(version) {
        return Err("the RoleBinding made by hand was changed or deleted".into());
    }
    let roles: Api<ClusterRole> = Api::all(s.runtime_client.clone());
    match roles.get_opt(role).await {
        Ok(Some(_)) => Ok(()),
        other => Err(format!("the ClusterRole made by hand: {other:?}")),
    }
}

async fn cleanup(s: &Scenario<'_>, apps: &str, role: &str) -> Result {
    let namespaces: Api<Namespace> = Api::all(s.runtime_client.clone());
    let _ = namespaces.delete(apps, &DeleteParams::default()).await;
    let roles: Api<ClusterRole> = Api::all(s.runtime_client.clone());
    let _ = roles.delete(role, &DeleteParams::default()).await;
    Ok(())
}

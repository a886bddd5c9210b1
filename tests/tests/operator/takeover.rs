//! Taking over what Kyma Infrastructure Manager made: a Shoot applied by field manager `kim`
//! with KIM's runtime-id and generation annotations, the structured-authentication
//! ConfigMap it names (KIM writes it without labels, `pkg/gardener/structuredauth`) and a
//! kubeconfig Secret with the labels of KIM's GardenerCluster controller, and KIM's admin
//! ClusterRoleBindings in the runtime cluster.
//!
//! The Shoot's content is `tessera render` of the Runtime (then defaulted by the test
//! Gardener): this proves the takeover mechanics — refusal without the flag, adoption
//! without a Shoot write, nothing deleted, a real change patching exactly that Shoot — not
//! parity with KIM's conversion.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera_tests::probe::eventually;

use super::landscape::{create_as_kim, handed_to_tessera, kim_config_map, refused_naming_the_flag};
use super::{ControlPlane, LIMIT, Result, RuntimeState, Scenario, patch_worker_maximum};

const SHOOT: &str = "kim";
const RUNTIME: &str = "rt-kim";
const PROJECT: &str = "garden-kyma-dev";

pub(super) async fn kim_takeover(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-kim").await;
    let doc = s.manifest(RUNTIME, SHOOT);
    let uids = seed_kim_landscape(&s, &doc).await?;
    let writes_before = shoot_writes(cp);

    let mut host = s.host("a", &[]);
    s.create(&doc).await?;
    let refused = s.wait_state(RUNTIME, RuntimeState::Failed, &host).await?;
    refused_naming_the_flag(&refused)?;
    host.kill();

    let host = s.host("b", &["--takeover-kim", "--kim-runtime-namespace", "t-kim"]);
    let ready = s.wait_state(RUNTIME, RuntimeState::Ready, &host).await?;
    if shoot_writes(cp) != writes_before {
        return Err(format!(
            "the Shoot was written on takeover ({writes_before} → {} writes); host log:\n{}",
            shoot_writes(cp),
            host.logs()
        ));
    }
    adopted_unwritten(&s, &ready).await?;
    same_objects(&s, &uids).await?;
    s.no_refusals(SHOOT)?;

    // Positive control: a real change patches exactly that Shoot, which now carries
    // Tessera's labels.
    let patched = patch_worker_maximum(&s, RUNTIME, SHOOT, 9).await?;
    if shoot_writes(cp) == writes_before {
        return Err("the change was not written either".into());
    }
    handed_to_tessera(&patched, RUNTIME)?;
    eventually("adoptedGeneration cleared", LIMIT, || async {
        let rt = s.runtimes().get(RUNTIME).await.ok()?;
        rt.status?.adopted_generation.is_none().then_some(())
    })
    .await?;
    kim_force_patch(&s, cp).await?;
    s.no_refusals(SHOOT)
}

/// Adopted without a write: Tessera manages no field of the Shoot yet, and the Runtime's
/// status says which generation the Shoot was found to match.
async fn adopted_unwritten(s: &Scenario<'_>, ready: &tessera::crd::Runtime) -> Result {
    let shoot = s.shoots().get(SHOOT).await.map_err(|e| e.to_string())?;
    let managers: Vec<String> = shoot
        .managed_fields()
        .iter()
        .filter_map(|f| f.manager.clone())
        .collect();
    if managers.iter().any(|m| m == "tessera") {
        return Err(format!(
            "Tessera manages Shoot fields already: {managers:?}"
        ));
    }
    let adopted = ready.status.as_ref().and_then(|s| s.adopted_generation);
    if adopted != ready.metadata.generation {
        return Err(format!(
            "adoptedGeneration {adopted:?} is not the Runtime's"
        ));
    }
    Ok(())
}

/// KIM's force-patch annotation works as Tessera's: the Shoot is written again and the
/// annotation removed once used.
async fn kim_force_patch(s: &Scenario<'_>, cp: &ControlPlane) -> Result {
    const KEY: &str = "operator.kyma-project.io/force-patch-reconciliation";
    let before = shoot_writes(cp);
    let patch = json!({ "metadata": { "annotations": { KEY: "true" } } });
    s.runtimes()
        .patch(RUNTIME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    eventually(
        "KIM's force-patch annotation used and removed",
        LIMIT,
        || async {
            let rt = s.runtimes().get(RUNTIME).await.ok()?;
            let gone = !rt.annotations().contains_key(KEY);
            (gone && shoot_writes(cp) > before).then_some(())
        },
    )
    .await
}

/// The uids of what KIM made: Shoot, ConfigMap, kubeconfig Secret.
struct Uids(BTreeMap<&'static str, String>);

/// Make the Shoot as KIM would (created, then applied as `kim`; its annotations, no
/// Tessera labels) with the ConfigMap it names, wait for Gardener to create it, and write the
/// kubeconfig Secret KIM's GardenerCluster controller would.
async fn seed_kim_landscape(s: &Scenario<'_>, doc: &Value) -> Result<Uids> {
    let mut shoot = render(doc)?;
    let annotations = &mut shoot["metadata"]["annotations"];
    annotations["infrastructuremanager.kyma-project.io/runtime-id"] = RUNTIME.into();
    annotations["infrastructuremanager.kyma-project.io/runtime-generation"] = "7".into();
    let mut uids = BTreeMap::new();
    if let Some(name) =
        shoot["spec"]["kubernetes"]["kubeAPIServer"]["structuredAuthentication"]["configMapName"]
            .as_str()
    {
        let oidc = &doc["spec"]["shoot"]["kubernetes"]["kubeAPIServer"]["oidcConfig"];
        uids.insert("configmap", kim_config_map(s, name, oidc).await?);
    }
    uids.insert("shoot", create_as_kim(s, &shoot).await?);
    eventually("KIM's Shoot created by Gardener", LIMIT, || async {
        let live = s.shoots().get(SHOOT).await.ok()?;
        let op = &live.data["status"]["lastOperation"];
        (op["type"] == "Create" && op["state"] == "Succeeded").then_some(())
    })
    .await?;
    uids.insert("secret", kim_kubeconfig_secret(s).await?);
    uids.insert(
        "binding",
        kim_admin_binding(s, "kim-admin-kept", "admin@example.com").await?,
    );
    kim_admin_binding(s, "kim-admin-gone", "former-admin@example.com").await?;
    Ok(Uids(uids))
}

/// An admin binding as KIM's `sFnApplyClusterRoleBindings` makes it (its label,
/// cluster-admin, one User) in the runtime cluster.
async fn kim_admin_binding(s: &Scenario<'_>, name: &str, user: &str) -> Result<String> {
    let api: Api<ClusterRoleBinding> = Api::all(s.runtime_client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name,
            "labels": {"reconciler.kyma-project.io/managed-by": "infrastructure-manager"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .map_err(|e| e.to_string())?;
    let created = api
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| format!("create KIM's binding {name}: {e}"))?;
    Ok(created.uid().unwrap_or_default())
}

/// `tessera render` of the Runtime `doc` with the plugins the hosts use.
fn render(doc: &Value) -> Result<Value> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("runtime.json");
    std::fs::write(&path, doc.to_string()).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(tessera_tests::env::tessera_bin())
        .args(["render", "--output", "json", "--runtime"])
        .arg(&path)
        .arg("--plugins")
        .arg(tessera_tests::plugin_dir())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "tessera render: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The Secret as KIM's GardenerCluster controller writes it (`newSecret`).
async fn kim_kubeconfig_secret(s: &Scenario<'_>) -> Result<String> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": format!("kubeconfig-{RUNTIME}"),
            "namespace": s.ns,
            "labels": {
                "kyma-project.io/runtime-id": RUNTIME,
                "operator.kyma-project.io/managed-by": "infrastructure-manager",
            },
            "annotations": {"operator.kyma-project.io/last-sync": "2026-11-26T00:00:00Z"},
        },
        "stringData": {"config": "apiVersion: v1\nkind: Config\n"},
    }))
    .map_err(|e| e.to_string())?;
    let created = s
        .secrets()
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| format!("create KIM's kubeconfig Secret: {e}"))?;
    Ok(created.uid().unwrap_or_default())
}

/// What KIM made is still there, the same objects (nothing deleted and recreated), the
/// ConfigMap and Secret now Tessera's.
async fn same_objects(s: &Scenario<'_>, uids: &Uids) -> Result {
    let config_maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), PROJECT);
    let secret_name = format!("kubeconfig-{RUNTIME}");
    let shoot = s.shoots().get(SHOOT).await.map_err(|e| e.to_string())?;
    let secret = eventually("the kubeconfig Secret taken over", LIMIT, || async {
        let secret = s.secrets().get(&secret_name).await.ok()?;
        (secret
            .labels()
            .get("tessera.dev/kubeconfig")
            .map(String::as_str)
            == Some("true"))
        .then_some(secret)
    })
    .await?;
    let mut found = BTreeMap::from([("shoot", shoot.uid()), ("secret", secret.uid())]);
    if let Some(name) = shoot.data["spec"]["kubernetes"]["kubeAPIServer"]
        ["structuredAuthentication"]["configMapName"]
        .as_str()
    {
        let cm = config_maps.get(name).await.map_err(|e| e.to_string())?;
        if cm.labels().get("tessera.dev/runtime").map(String::as_str) != Some(RUNTIME) {
            return Err(format!("ConfigMap {name} not taken over: {:?}", cm.labels()));
        }
        found.insert("configmap", cm.uid());
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(s.runtime_client.clone());
    let kept = bindings
        .get("kim-admin-kept")
        .await
        .map_err(|e| e.to_string())?;
    found.insert("binding", kept.uid());
    eventually("KIM's binding of a former admin removed", LIMIT, || async {
        bindings
            .get_opt("kim-admin-gone")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await?;
    for (what, uid) in &uids.0 {
        if found.get(what).cloned().flatten().as_ref() != Some(uid) {
            return Err(format!(
                "KIM's {what} was replaced: {uid} → {:?}",
                found.get(what)
            ));
        }
    }
    Ok(())
}

/// Writes of Shoot `kim` itself the test Gardener counted (subresources not included).
fn shoot_writes(cp: &ControlPlane) -> u64 {
    cp.sim_stats()["byObject"][format!("shoot/{SHOOT}")]["objectWrites"]
        .as_u64()
        .unwrap_or(0)
}

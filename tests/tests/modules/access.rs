//! A ModuleSet whose target is the kubeconfig of a RuntimeAccess: its modules get exactly
//! what the RuntimeAccess grants in the runtime cluster, no more.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera::crd::{Runtime, RuntimeAccess, RuntimeState};
use tessera::modules::State;
use tessera_tests::env::ControlPlane;
use tessera_tests::modules::{Fixture, LIMIT, module, target_get};
use tessera_tests::probe::{eventually, tail};

use super::{Result, page_plugin};

const NS: &str = "mods-access";
const PAGES: &str = "access-pages";

/// A Runtime of the fixture's namespace, Ready with its kubeconfig.
async fn ready_runtime(f: &Fixture<'_>, host: &tessera_tests::env::Host) -> Result {
    let text =
        std::fs::read_to_string(tessera_tests::workspace().join("examples/runtime-aws.yaml"))
            .map_err(|e| e.to_string())?;
    let mut doc: Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    doc["metadata"] = json!({"name": "rt-mods", "namespace": NS});
    doc["spec"]["shoot"]["name"] = "mods-access".into();
    let runtime: Runtime = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    let runtimes: Api<Runtime> = Api::namespaced(f.client.clone(), NS);
    runtimes
        .create(&PostParams::default(), &runtime)
        .await
        .map_err(|e| format!("Runtime: {e}"))?;
    eventually("Runtime rt-mods Ready", LIMIT, || async {
        let rt = runtimes.get("rt-mods").await.ok()?;
        (rt.status?.state == Some(RuntimeState::Ready)).then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))
}

/// A RuntimeAccess allowed Namespaces and ConfigMaps, nothing else.
async fn namespaces_and_config_maps(f: &Fixture<'_>, host: &tessera_tests::env::Host) -> Result {
    let access: RuntimeAccess = serde_json::from_value(json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeAccess",
        "metadata": {"name": "modules", "namespace": NS},
        "spec": {
            "runtime": "rt-mods",
            "serviceAccount": {"name": "module-manager", "namespace": "default"},
            "grants": [{"rules": [{"apiGroups": [""], "resources": ["namespaces", "configmaps"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}],
        },
    }))
    .map_err(|e| e.to_string())?;
    let accesses: Api<RuntimeAccess> = Api::namespaced(f.client.clone(), NS);
    accesses
        .create(&PostParams::default(), &access)
        .await
        .map_err(|e| format!("RuntimeAccess: {e}"))?;
    eventually("RuntimeAccess modules Ready", LIMIT, || async {
        let a = accesses.get("modules").await.ok()?;
        (a.status?.state == Some(tessera::crd::KubeconfigState::Ready)).then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))
}

/// The availability module: a PriorityClass and a PodDisruptionBudget, which Tessera's
/// grants allow but the RuntimeAccess does not.
async fn availability_plugin(f: &Fixture<'_>) -> Result {
    f.plugin(
        "access-availability",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("availability", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"namespace": PAGES},
            "grants": {"write": [
                {"apiGroups": ["scheduling.k8s.io"], "kinds": ["PriorityClass"], "clusterScoped": true,
                    "names": ["access-availability-critical"]},
                {"apiGroups": ["policy"], "kinds": ["PodDisruptionBudget"], "namespaces": [PAGES]},
            ]},
        }),
    )
    .await
}

/// The RuntimeAccess's grant of the core group's `resources`, cluster-wide, and of
/// ConfigMaps in tessera-system (where the set's inventory is kept) when `configmaps` is
/// not among them.
async fn grant(f: &Fixture<'_>, resources: &[&str]) -> Result {
    let accesses: Api<RuntimeAccess> = Api::namespaced(f.client.clone(), NS);
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let mut grants =
        vec![json!({"rules": [{"apiGroups": [""], "resources": resources, "verbs": verbs}]})];
    if !resources.contains(&"configmaps") {
        grants.push(json!({"namespace": "tessera-system",
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}));
    }
    let patch = json!({"spec": {"grants": grants}});
    let patched = accesses
        .patch("modules", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("RuntimeAccess grants: {e}"))?;
    eventually(
        "RuntimeAccess modules applied its grants",
        LIMIT,
        || async {
            let status = accesses.get("modules").await.ok()?.status?;
            let done = status.observed_generation >= patched.metadata.generation
                && status.state == Some(tessera::crd::KubeconfigState::Ready);
            done.then_some(())
        },
    )
    .await
}

/// The page module leaves the set after the RuntimeAccess lost the right to ConfigMaps
/// outside tessera-system:
/// its removal is an error of that module (naming the refusal), the set's other module is
/// still reported; with the right back, the removal completes.
async fn removal_refused_then_granted(f: &Fixture<'_>, host: &tessera_tests::env::Host) -> Result {
    grant(f, &["namespaces"]).await?;
    // The API server's authorizer follows RBAC changes by watching: wait until it refuses.
    let can_i = ["auth", "can-i", "get", "configmaps", "-n", PAGES];
    let as_module_manager = ["--as", "system:serviceaccount:default:module-manager"];
    eventually("the narrowed grant in force", LIMIT, || async {
        let args: Vec<&str> = can_i.iter().chain(&as_module_manager).copied().collect();
        (!f.cp.runtime.kubectl(&args).status.success()).then_some(())
    })
    .await?;
    f.apply_set(
        "via-access",
        json!({"target": {"secretName": "modules-kubeconfig"},
            "modules": [{"name": "access-availability",
                "config": {"budgets": [{"name": "pages", "matchLabels": {"app": "pages"}}]}}]}),
    )
    .await?;
    f.wait_set("via-access", host, "page's removal refused", |s| {
        let removing = module(s, "access-page").is_some_and(|m| {
            m.state == State::Error
                && m.message.as_deref().is_some_and(|t| {
                    t.starts_with("removing access-page") && t.contains("lacks the right")
                })
        });
        removing && module(s, "access-availability").is_some()
    })
    .await?;
    grant(f, &["namespaces", "configmaps"]).await?;
    f.wait_set("via-access", host, "page removed", |s| {
        module(s, "access-page").is_none()
    })
    .await?;
    match target_get(f.cp, &["configmap", "dashboard", "-n", PAGES]) {
        Some(left) => Err(format!("the page module's ConfigMap is left: {left}")),
        None => Ok(()),
    }
}

pub(super) async fn access_target(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, NS).await?;
    f.push("manifest", "manifest", "1.0.0")?;
    f.push("availability", "availability", "1.0.0")?;
    page_plugin(&f, "access-page", PAGES).await?;
    availability_plugin(&f).await?;
    let host = f.host("a");
    ready_runtime(&f, &host).await?;
    namespaces_and_config_maps(&f, &host).await?;
    f.apply_set(
        "via-access",
        json!({"target": {"secretName": "modules-kubeconfig"},
            "modules": [{"name": "access-page"}, {"name": "access-availability",
                "config": {"budgets": [{"name": "pages", "matchLabels": {"app": "pages"}}]}}]}),
    )
    .await?;
    let set = f
        .wait_set(
            "via-access",
            &host,
            "page Ready, availability refused",
            |s| {
                let page = module(s, "access-page").map(|m| m.state);
                let refused = module(s, "access-availability").is_some_and(|m| {
                    m.state == State::Error
                        && m.message
                            .as_deref()
                            .is_some_and(|t| t.contains("forbidden"))
                });
                page == Some(State::Ready) && refused
            },
        )
        .await?;
    if target_get(cp, &["configmap", "dashboard", "-n", PAGES]).is_none() {
        return Err(format!(
            "no dashboard ConfigMap on the target: {:?}",
            set.status
        ));
    }
    if target_get(cp, &["priorityclass", "access-availability-critical"]).is_some() {
        return Err("a PriorityClass was written past the RuntimeAccess".into());
    }
    removal_refused_then_granted(&f, &host).await?;
    f.delete_set("via-access").await?;
    let accesses: Api<DynamicObject> = Api::namespaced_with(
        f.client.clone(),
        NS,
        &kube::api::ApiResource::erase::<RuntimeAccess>(&()),
    );
    let _ = accesses.delete("modules", &DeleteParams::default()).await;
    Ok(())
}

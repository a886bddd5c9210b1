//! Plugin authority against real API servers and a real registry: a plugin gets exactly
//! what the operator granted. Hostile module reconcilers (`tests/guests/hostile-module`) and
//! a hostile shoot extension (`tests/guests/hostile`) return what they were not granted;
//! each answer is refused with a status naming the plugin, the object or path and the
//! missing grant, the target cluster and the Shoot stay unchanged, and the other modules
//! and Runtimes carry on. Granting the missing permission makes the same plugin work.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{Value, json};
use tessera::crd::{ModuleSet, Runtime, RuntimeState};
use tessera::gardener::shoot_resource;
use tessera::modules::State;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{Fixture, LIMIT, kubectl_ok, module, target_get};
use tessera_tests::probe::{eventually, tail};

type Result<T = ()> = std::result::Result<T, String>;

/// A value that would add a ClusterRoleBinding if it were pasted into the YAML text.
const INJECTED: &str = "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwned}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: User, name: 'system:anonymous', apiGroup: rbac.authorization.k8s.io}]";

fn hostile_module() -> PathBuf {
    tessera_tests::test_plugin_dir().join("hostile-module.wasm")
}

/// Write ConfigMaps in `namespace`: all these plugins are granted.
fn configmaps_in(namespace: &str) -> Value {
    json!({"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": [namespace]}]})
}

/// A module-reconciler Plugin spec for version 1.0.0 of `repo`.
fn module_plugin(f: &Fixture<'_>, repo: &str, grants: Value, config: Value) -> Value {
    json!({
        "kind": "module-reconciler",
        "versions": [{"version": "1.0.0", "ref": f.reference(repo, "1.0.0")}],
        "channels": [{"name": "regular", "version": "1.0.0"}],
        "config": config,
        "grants": grants,
    })
}

fn message(set: &ModuleSet, name: &str) -> String {
    module(set, name)
        .and_then(|m| m.message.clone())
        .unwrap_or_default()
}

/// Module `name` is in `state` with a message containing every needle.
fn says(set: &ModuleSet, name: &str, state: State, needles: &[&str]) -> bool {
    module(set, name).is_some_and(|m| m.state == state)
        && needles.iter().all(|n| message(set, name).contains(n))
}

fn ready(set: &ModuleSet, names: &[&str]) -> bool {
    names
        .iter()
        .all(|n| module(set, n).is_some_and(|m| m.state == State::Ready))
}

/// The `tessera` host log line (JSON) whose message contains `needle`, decoded.
fn log_message(host: &Host, needle: &str) -> Option<String> {
    host.logs().lines().find_map(|line| {
        let v: Value = serde_json::from_str(line).ok()?;
        let m = v["fields"]["message"].as_str()?;
        m.contains(needle).then(|| m.to_string())
    })
}

/// Create `namespace` and a ConfigMap `name` in it by hand (kubectl), as a user would.
fn by_hand(cp: &ControlPlane, namespace: &str, names: &[&str]) -> Result {
    let _ = cp.runtime.kubectl(&["create", "namespace", namespace]);
    for name in names {
        kubectl_ok(
            &cp.runtime,
            &[
                "create",
                "configmap",
                name,
                "-n",
                namespace,
                "--from-literal=owner=ops",
            ],
        )?;
    }
    Ok(())
}

fn untouched(cp: &ControlPlane, args: &[&str]) -> Result {
    let object = target_get(cp, args).ok_or(format!("{args:?} is gone"))?;
    let labels = &object["metadata"]["labels"];
    if labels["modules.tessera.dev/module"].is_string() || object["data"]["owner"] != "ops" {
        return Err(format!("{args:?} was changed: {object}"));
    }
    Ok(())
}

/// Every write and read a module reconciler was not granted is refused, whole.
async fn module_answers_are_checked_against_grants(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-refuse").await?;
    let ns = "team-refuse";
    by_hand(cp, ns, &["precious"])?;
    let secret = [
        "create",
        "secret",
        "generic",
        "bootstrap-token",
        "-n",
        "kube-system",
    ];
    let _ = cp
        .runtime
        .kubectl(&[&secret[..], &["--from-literal=token=topsecret-value"]].concat());
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    f.push("manifest", "manifest", "1.0.0")?;
    for name in ["evil", "good"] {
        f.plugin(
            name,
            module_plugin(&f, "hostile-module", configmaps_in(ns), json!({})),
        )
        .await?;
    }
    let bundle = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bundle, namespace: {ns}}}\ndata: {{title: '${{title}}'}}\n"
    );
    f.plugin(
        "bundle",
        module_plugin(
            &f,
            "manifest",
            configmaps_in(ns),
            json!({"manifest": bundle}),
        ),
    )
    .await?;
    let host = f.host("a");
    let set = |evil: Value, bundle_config: Value| {
        json!({"target": {"secretName": "kubeconfig-target"}, "modules": [
            {"name": "good", "config": {"namespace": ns, "name": "good-cm"}},
            {"name": "bundle", "config": bundle_config},
            {"name": "evil", "config": evil},
        ]})
    };
    let values = json!({"values": {"title": INJECTED}});
    let good_cm = format!("ConfigMap {ns}/good-cm");
    let precious = format!("ConfigMap {ns}/precious");
    let refused = [
        (
            "cluster-admin",
            "hostile",
            &[
                "ClusterRoleBinding hostile-anonymous-admin",
                "not granted to write",
                "rbac.authorization.k8s.io",
                "nothing of this answer was applied",
            ][..],
        ),
        (
            "webhook",
            "hostile",
            &[
                "ValidatingWebhookConfiguration hostile-webhook",
                "not granted to write",
            ][..],
        ),
        (
            "kube-system-secret",
            "hostile",
            &["Secret hostile in kube-system", "not granted to write"][..],
        ),
        (
            "read-secrets",
            "hostile",
            &["not granted to read Secret", "kube-system"][..],
        ),
        (
            "configmap",
            "good-cm",
            &[&good_cm, "belongs to module good"][..],
        ),
        (
            "configmap",
            "precious",
            &[&precious, "not created by this module", "kubectl"][..],
        ),
        ("huge-message", "hostile", &["output too large"][..]),
    ];
    for (mode, name, needles) in refused {
        let evil = json!({"mode": mode, "namespace": ns, "name": name});
        f.apply_set("main", set(evil, values.clone())).await?;
        let s = f
            .wait_set(
                "main",
                &host,
                &format!("evil refused ({mode} {name})"),
                |s| {
                    says(s, "evil", State::Error, needles)
                        && says(s, "evil", State::Error, &["plugin hostile-module 0.1.0"])
                        && ready(s, &["good", "bundle"])
                },
            )
            .await?;
        let status = serde_json::to_string(&s.status).unwrap();
        if status.contains("topsecret") || status.contains("dG9wc2VjcmV0") {
            return Err(format!("a Secret's data reached the status: {status}"));
        }
    }
    // Nothing of a refused answer reached the target, nor did the injected document.
    for args in [
        &["clusterrolebinding", "hostile-anonymous-admin"][..],
        &["clusterrolebinding", "pwned"][..],
        &["validatingwebhookconfiguration", "hostile-webhook"][..],
        &["secret", "hostile", "-n", "kube-system"][..],
        &["configmap", "hostile", "-n", ns][..],
    ] {
        if target_get(cp, args).is_some() {
            return Err(format!("{args:?} was applied"));
        }
    }
    untouched(cp, &["configmap", "precious", "-n", ns])?;
    let good = target_get(
        cp,
        &["configmap", "good-cm", "-n", ns, "--show-managed-fields"],
    )
    .ok_or("good-cm is gone")?;
    let managers = good["metadata"]["managedFields"].to_string();
    if good["metadata"]["labels"]["modules.tessera.dev/module"] != "good"
        || managers.contains("tessera-module-evil")
    {
        return Err(format!("module good's object was taken over: {good}"));
    }
    let bundle = target_get(cp, &["configmap", "bundle", "-n", ns]).ok_or("no bundle")?;
    if bundle["data"]["title"] != INJECTED {
        return Err(format!(
            "the value was not kept as data: {}",
            bundle["data"]
        ));
    }

    // The set's config cannot replace the bundle the Plugin owns.
    let replace = json!({"manifest": "kind: ClusterRoleBinding", "values": {"title": "t"}});
    let evil = json!({"mode": "configmap", "namespace": ns, "name": "hostile"});
    f.apply_set("main", set(evil.clone(), replace)).await?;
    f.wait_set("main", &host, "bundle lock refused", |s| {
        says(s, "bundle", State::Error, &["config.manifest", "locked"])
            && ready(s, &["good", "evil"])
    })
    .await?;

    // A log line cannot forge host log lines: the newline arrives escaped.
    let logs = json!({"mode": "log-newlines", "namespace": ns, "name": "hostile"});
    f.apply_set("main", set(logs, values.clone())).await?;
    f.wait_set("main", &host, "evil logs", |s| {
        ready(s, &["evil", "good", "bundle"])
    })
    .await?;
    let line = log_message(&host, "innocent").ok_or("the plugin's log line is missing")?;
    if line.contains('\n') || !line.contains(r"innocent\n2026-11-23") {
        return Err(format!("plugin log line not escaped: {line:?}"));
    }
    f.sets()
        .delete("main", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    eventually("set main gone", LIMIT, || async {
        f.sets().get_opt("main").await.ok()?.is_none().then_some(())
    })
    .await?;
    untouched(cp, &["configmap", "precious", "-n", ns])?;
    Ok(())
}

/// A refused plugin works once the operator grants what it needs; adoption only where the
/// set allows it.
async fn granting_makes_the_same_plugin_work(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-grant").await?;
    let ns = "team-grant";
    by_hand(cp, ns, &["adoptable"])?;
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    f.plugin(
        "grant-evil",
        module_plugin(&f, "hostile-module", configmaps_in(ns), json!({})),
    )
    .await?;
    let host = f.host("a");
    // What the plugin declares it needs is shown next to what it was granted.
    eventually(
        "Plugin grant-evil shows requested against granted",
        LIMIT,
        || async {
            let status = f.plugins().get("grant-evil").await.ok()?.status?;
            let flagged = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Granted" && c.reason == "NotGranted");
            let missing = status.grants?.not_granted.join("; ");
            (flagged
                && missing.contains("write ClusterRoleBinding")
                && missing.contains("read Secret bootstrap-token in kube-system"))
            .then_some(())
        },
    )
    .await?;
    let set = |mode: &str, name: &str, adopt: bool| {
        json!({"target": {"secretName": "kubeconfig-target"}, "modules": [
            {"name": "grant-evil", "adopt": adopt, "config": {"mode": mode, "namespace": ns, "name": name}},
        ]})
    };
    f.apply_set("main", set("priority-class", "hostile", false))
        .await?;
    f.wait_set("main", &host, "PriorityClass refused", |s| {
        says(
            s,
            "grant-evil",
            State::Error,
            &[
                "PriorityClass hostile-critical",
                "cluster-scoped",
                "clusterScoped: true",
            ],
        )
    })
    .await?;
    if target_get(cp, &["priorityclass", "hostile-critical"]).is_some() {
        return Err("the PriorityClass was applied without a grant".into());
    }
    let mut grants = configmaps_in(ns);
    grants["write"].as_array_mut().unwrap().push(json!(
        {"apiGroups": ["scheduling.k8s.io"], "kinds": ["PriorityClass"], "clusterScoped": true, "names": ["hostile-critical"]}
    ));
    f.plugin(
        "grant-evil",
        module_plugin(&f, "hostile-module", grants, json!({})),
    )
    .await?;
    f.wait_set("main", &host, "Ready once granted", |s| {
        ready(s, &["grant-evil"])
    })
    .await?;
    let pc = target_get(cp, &["priorityclass", "hostile-critical"]).ok_or("no PriorityClass")?;
    if pc["metadata"]["labels"]["modules.tessera.dev/module"] != "grant-evil" {
        return Err(format!("PriorityClass not labelled: {pc}"));
    }
    // An object made by hand is refused, then taken over once the set allows adoption.
    f.apply_set("main", set("configmap", "adoptable", false))
        .await?;
    f.wait_set("main", &host, "adoption refused", |s| {
        says(
            s,
            "grant-evil",
            State::Error,
            &["ConfigMap team-grant/adoptable", "adopt: true"],
        )
    })
    .await?;
    untouched(cp, &["configmap", "adoptable", "-n", ns])?;
    f.apply_set("main", set("configmap", "adoptable", true))
        .await?;
    f.wait_set("main", &host, "adopted", |s| ready(s, &["grant-evil"]))
        .await?;
    let cm = target_get(cp, &["configmap", "adoptable", "-n", ns]).ok_or("adoptable gone")?;
    if cm["metadata"]["labels"]["modules.tessera.dev/module"] != "grant-evil"
        || cm["data"]["written-by"] != "hostile-module"
    {
        return Err(format!("not adopted: {cm}"));
    }
    if target_get(cp, &["priorityclass", "hostile-critical"]).is_some() {
        return Err("the module's PriorityClass was not pruned".into());
    }
    Ok(())
}

/// Entries naming foreign objects in an edited inventory, and a cluster-wide `remove`,
/// delete nothing the module did not create.
async fn tampered_inventory_deletes_nothing_foreign(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-tamper").await?;
    let ns = "team-tamper";
    by_hand(cp, ns, &["precious"])?;
    by_hand(cp, "other-team", &["theirs"])?;
    let _ = cp.runtime.kubectl(&[
        "create",
        "configmap",
        "keep-me",
        "-n",
        "kube-system",
        "--from-literal=owner=ops",
    ]);
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    f.plugin(
        "tamper-good",
        module_plugin(&f, "hostile-module", configmaps_in(ns), json!({})),
    )
    .await?;
    // The mode is the Plugin's configuration: a module leaving the set has no set config.
    let remove_all = json!({"mode": "remove-all"});
    f.plugin(
        "tamper-evil",
        module_plugin(&f, "hostile-module", configmaps_in(ns), remove_all.clone()),
    )
    .await?;
    let host = f.host("a");
    let set = |with_evil: bool| {
        let mut modules =
            vec![json!({"name": "tamper-good", "config": {"namespace": ns, "name": "good-cm"}})];
        if with_evil {
            modules.push(
                json!({"name": "tamper-evil", "config": {"namespace": ns, "name": "hostile"}}),
            );
        }
        json!({"target": {"secretName": "kubeconfig-target"}, "modules": modules})
    };
    f.apply_set("main", set(true)).await?;
    f.wait_set("main", &host, "Ready", |s| {
        ready(s, &["tamper-good", "tamper-evil"])
    })
    .await?;
    // Someone with access to the target lists foreign objects (with their real uids) as
    // the module's.
    let inventory = target_get(
        cp,
        &[
            "configmap",
            "modules.auth-tamper.main",
            "-n",
            "tessera-system",
        ],
    )
    .ok_or("no inventory")?;
    let mut record: Value = serde_json::from_str(
        inventory["data"]["tamper-evil"]
            .as_str()
            .ok_or("no tamper-evil record")?,
    )
    .unwrap();
    for args in [
        &["configmap", "precious", "-n", ns][..],
        &["configmap", "keep-me", "-n", "kube-system"][..],
        &["configmap", "good-cm", "-n", ns][..],
        &["clusterrole", "cluster-admin"][..],
    ] {
        let o = target_get(cp, args).ok_or(format!("{args:?} missing"))?;
        let (group_version, kind) = (o["apiVersion"].clone(), o["kind"].clone());
        let mut entry = json!({"apiVersion": group_version, "kind": kind,
            "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]});
        if let Some(n) = o["metadata"]["namespace"].as_str() {
            entry["namespace"] = n.into();
        }
        record["objects"].as_array_mut().unwrap().push(entry);
    }
    let patch = json!({"data": {"tamper-evil": record.to_string()}}).to_string();
    kubectl_ok(
        &cp.runtime,
        &[
            "patch",
            "configmap",
            "modules.auth-tamper.main",
            "-n",
            "tessera-system",
            "--type=merge",
            "-p",
            &patch,
        ],
    )?;
    // Removing the module: its delete answer wants every ConfigMap of the cluster removed,
    // which its grant (one namespace) does not cover.
    f.apply_set("main", set(false)).await?;
    f.wait_set("main", &host, "cluster-wide remove refused", |s| {
        says(
            s,
            "tamper-evil",
            State::Error,
            &[
                "remove",
                "not granted to write ConfigMap",
                "every namespace",
            ],
        ) && ready(s, &["tamper-good"])
    })
    .await?;
    untouched(cp, &["configmap", "theirs", "-n", "other-team"])?;
    // Granted every namespace, the remove still only reaches the module's own objects.
    let everywhere =
        json!({"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["*"]}]});
    f.plugin(
        "tamper-evil",
        module_plugin(&f, "hostile-module", everywhere, remove_all),
    )
    .await?;
    f.wait_set("main", &host, "evil removed", |s| {
        module(s, "tamper-evil").is_none() && ready(s, &["tamper-good"])
    })
    .await?;
    if target_get(cp, &["configmap", "hostile", "-n", ns]).is_some() {
        return Err("the module's own ConfigMap was not removed".into());
    }
    untouched(cp, &["configmap", "precious", "-n", ns])?;
    untouched(cp, &["configmap", "theirs", "-n", "other-team"])?;
    untouched(cp, &["configmap", "keep-me", "-n", "kube-system"])?;
    target_get(cp, &["clusterrole", "cluster-admin"]).ok_or("cluster-admin was deleted")?;
    let good = target_get(cp, &["configmap", "good-cm", "-n", ns]).ok_or("good-cm was deleted")?;
    if good["metadata"]["labels"]["modules.tessera.dev/module"] != "tamper-good" {
        return Err(format!("good-cm changed: {good}"));
    }
    if log_message(
        &host,
        "the inventory lists an object this module did not create",
    )
    .is_none()
    {
        return Err(format!(
            "no log line about the foreign entries:\n{}",
            tail(&host.logs(), 30)
        ));
    }
    Ok(())
}

/// A Runtime in `ns` whose Shoot is named `shoot`, from `examples/runtime-aws.yaml`.
fn runtime_doc(ns: &str, id: &str, shoot: &str) -> Runtime {
    let text =
        std::fs::read_to_string(tessera_tests::workspace().join("examples/runtime-aws.yaml"))
            .unwrap();
    let mut doc: Value = serde_saphyr::from_str(&text).unwrap();
    doc["metadata"] = json!({"name": id, "namespace": ns, "labels": doc["metadata"]["labels"]});
    doc["spec"]["shoot"]["name"] = shoot.into();
    serde_json::from_value(doc).unwrap()
}

/// Wait until Runtime `id` is in `state`, and return it.
async fn runtime_in(
    api: &Api<Runtime>,
    id: &str,
    state: RuntimeState,
    host: &Host,
) -> Result<Runtime> {
    eventually(&format!("Runtime {id} {state:?}"), LIMIT, || async {
        let rt = api.get(id).await.ok()?;
        (rt.status.as_ref()?.state == Some(state)).then_some(rt)
    })
    .await
    .map_err(|e| {
        let status = futures::executor::block_on(api.get(id))
            .ok()
            .and_then(|r| serde_json::to_string_pretty(&r.status).ok());
        format!(
            "{e}\nstatus: {}\nhost log tail:\n{}",
            status.unwrap_or_default(),
            tail(&host.logs(), 30)
        )
    })
}

/// The message of the Runtime's condition with reason `reason`.
fn condition_with(rt: &Runtime, reason: &str) -> Option<String> {
    rt.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.reason == reason)
        .map(|c| c.message.clone())
}

/// A shoot extension sets only the Shoot paths it was granted and never the Shoot's
/// identity; a refused render writes nothing to Gardener.
async fn shoot_extensions_set_only_granted_paths(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-shoot").await?;
    f.push_path(
        &tessera_tests::test_plugin_dir().join("hostile.wasm"),
        "hostile",
        "1.0.0",
    )?;
    let plugin = |mode: &str, grants: Value| {
        json!({
            "kind": "shoot-extension",
            "versions": [{"version": "1.0.0", "ref": f.reference("hostile", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"mode": mode},
            "grants": grants,
        })
    };
    // The host's chain ends with the registry step `hostile`; its grants are the Plugin's.
    let mut chain: Vec<Value> = tessera::plugins::FIRST_PARTY
        .iter()
        .map(|p| json!(p))
        .collect();
    chain.push(json!("hostile"));
    let config = json!({"chain": chain, "plugins": {"hostile": {"source": "registry", "plugin": "auth-hostile"}}});
    let config_path = f.dir.path().join("chain.yaml");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let host = f.host_with("a", &["--config", &config_path.display().to_string()]);
    let runtimes: Api<Runtime> = Api::namespaced(f.client.clone(), &f.ns);
    let shoots: Api<DynamicObject> =
        Api::namespaced_with(f.client.clone(), "garden-kyma-dev", &shoot_resource());
    // Switch the Plugin and wait until the host runs the new spec.
    let set_plugin = |mode: &'static str, grants: Value| {
        let spec = plugin(mode, grants);
        let f = &f;
        async move {
            f.plugin("auth-hostile", spec).await?;
            eventually(
                &format!("Plugin auth-hostile runs mode {mode}"),
                LIMIT,
                || async {
                    let p = f.plugins().get("auth-hostile").await.ok()?;
                    (p.status?.observed_generation == p.metadata.generation).then_some(())
                },
            )
            .await
        }
    };
    set_plugin("ok", json!({})).await?;
    for (id, shoot) in [("rt-ok", "s-ok"), ("rt-other", "s-other")] {
        runtimes
            .create(&PostParams::default(), &runtime_doc(&f.ns, id, shoot))
            .await
            .map_err(|e| e.to_string())?;
        runtime_in(&runtimes, id, RuntimeState::Ready, &host).await?;
    }
    let before = shoots.get("s-ok").await.map_err(|e| e.to_string())?;

    let refused = [
        (
            "set-namespace",
            "rt-ns",
            "s-ns",
            &["plugin hostile 0.1.0", "metadata.namespace", "identity"][..],
        ),
        (
            "set-binding",
            "rt-bind",
            "s-bind",
            &["plugin hostile 0.1.0", "spec.secretBindingName", "identity"][..],
        ),
        (
            "set-field",
            "rt-field",
            "s-field",
            &[
                "plugin hostile 0.1.0",
                "not granted to set spec.purpose",
                "shootPaths",
            ][..],
        ),
    ];
    for (mode, id, shoot, needles) in refused {
        set_plugin(mode, json!({})).await?;
        runtimes
            .create(&PostParams::default(), &runtime_doc(&f.ns, id, shoot))
            .await
            .map_err(|e| e.to_string())?;
        let rt = runtime_in(&runtimes, id, RuntimeState::Failed, &host).await?;
        let why = condition_with(&rt, "PluginNotGranted")
            .ok_or(format!("{id}: no PluginNotGranted condition"))?;
        if !needles.iter().all(|n| why.contains(n)) {
            return Err(format!("{id}: condition {why:?} lacks {needles:?}"));
        }
        for namespace in ["garden-kyma-dev", "garden-other"] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(f.client.clone(), namespace, &shoot_resource());
            if api
                .get_opt(shoot)
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err(format!("{id}: a Shoot {namespace}/{shoot} was written"));
            }
        }
    }
    // A patch of an existing Shoot is refused the same way, and the Shoot stays as it was.
    let force = json!({"metadata": {"annotations": {"tessera.dev/force-patch": "true"}}});
    runtimes
        .patch(
            "rt-ok",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&force),
        )
        .await
        .map_err(|e| e.to_string())?;
    let rt = runtime_in(&runtimes, "rt-ok", RuntimeState::Failed, &host).await?;
    condition_with(&rt, "PluginNotGranted").ok_or("rt-ok: no PluginNotGranted condition")?;
    let after = shoots.get("s-ok").await.map_err(|e| e.to_string())?;
    if after.metadata.generation != before.metadata.generation
        || after.data["spec"] != before.data["spec"]
    {
        return Err(format!(
            "Shoot s-ok changed: {} → {}",
            before.data["spec"], after.data["spec"]
        ));
    }
    runtime_in(&runtimes, "rt-other", RuntimeState::Ready, &host).await?;
    // The identity cannot be granted: the Plugin itself is refused.
    f.plugin(
        "auth-hostile",
        plugin(
            "set-namespace",
            json!({"shootPaths": ["metadata.namespace"]}),
        ),
    )
    .await?;
    eventually("Plugin refusing an identity grant", LIMIT, || async {
        let p = f.plugins().get("auth-hostile").await.ok()?;
        let err = p.status?.last_error?;
        (err.contains("spec.grants.shootPaths[0]") && err.contains("identity")).then_some(())
    })
    .await?;
    // Granted the path, the same plugin works.
    set_plugin("set-field", json!({"shootPaths": ["spec.purpose"]})).await?;
    runtimes
        .create(
            &PostParams::default(),
            &runtime_doc(&f.ns, "rt-granted", "s-granted"),
        )
        .await
        .map_err(|e| e.to_string())?;
    runtime_in(&runtimes, "rt-granted", RuntimeState::Ready, &host).await?;
    let granted = shoots.get("s-granted").await.map_err(|e| e.to_string())?;
    if granted.data["spec"]["purpose"] != "evaluation" {
        return Err(format!(
            "the granted path was not set: {}",
            granted.data["spec"]
        ));
    }
    if granted
        .labels()
        .get("tessera.dev/runtime")
        .map(String::as_str)
        != Some("rt-granted")
    {
        return Err("the granted Shoot lacks its owner label".into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    let script = Script {
        create_ms: 500,
        reconcile_ms: 300,
        delete_ms: 300,
        shoots: BTreeMap::new(),
    };
    let rt = std::sync::Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap(),
    );
    let shared = match ControlPlane::start(&sim, &script) {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => panic!("local control plane: {e}"),
    };
    type Scenario = for<'a> fn(
        &'a ControlPlane,
    )
        -> std::pin::Pin<Box<dyn std::future::Future<Output = Result> + 'a>>;
    let scenarios: Vec<(&str, Scenario)> = vec![
        ("module_answers_are_checked_against_grants", |cp| {
            Box::pin(module_answers_are_checked_against_grants(cp))
        }),
        ("granting_makes_the_same_plugin_work", |cp| {
            Box::pin(granting_makes_the_same_plugin_work(cp))
        }),
        ("tampered_inventory_deletes_nothing_foreign", |cp| {
            Box::pin(tampered_inventory_deletes_nothing_foreign(cp))
        }),
        ("shoot_extensions_set_only_granted_paths", |cp| {
            Box::pin(shoot_extensions_set_only_granted_paths(cp))
        }),
    ];
    let trials = scenarios
        .into_iter()
        .map(|(name, scenario)| {
            let rt = rt.clone();
            let cp = shared.clone();
            Trial::test(name, move || {
                rt.block_on(scenario(&cp)).map_err(Failed::from)
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(shared);
    conclusion.exit();
}

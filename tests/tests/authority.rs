//! Plugin authority against real API servers and a real registry: a plugin gets exactly
//! what the operator granted. Hostile module reconcilers (`tests/guests/hostile-module`) and
//! a hostile shoot extension (`tests/guests/hostile`) return what they were not granted;
//! each answer is refused with a status naming the plugin, the object or path and the
//! missing grant, the target cluster and the Shoot stay unchanged, and the other modules
//! and Runtimes carry on. Granting the missing permission makes the same plugin work.

use std::path::PathBuf;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use tessera::crd::{ModuleSet, Runtime, RuntimeState};
use tessera::gardener::shoot_resource;
use tessera::modules::State;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{Fixture, LIMIT, kubectl_ok, module, target_get};
use tessera_tests::probe::{eventually, tail};
use tessera_tests::runtimes::{runtime_doc, runtime_in};
use tessera_tests::{scenario, scenarios};

use tessera_tests::Result;

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

/// The target namespace of the refusal scenario.
const REFUSE: &str = "team-refuse";

/// The refusal scenario's set: `good` and `bundle` behave, `evil` tries what `evil` says.
fn refusal_set(evil: Value, bundle: Value) -> Value {
    json!({"target": {"secretName": "kubeconfig-target"}, "modules": [
        {"name": "good", "config": {"namespace": REFUSE, "name": "good-cm"}},
        {"name": "bundle", "config": bundle},
        {"name": "evil", "config": evil},
    ]})
}

/// Plugins `evil`, `good` (the hostile module) and `bundle` (manifest), each granted
/// ConfigMaps in one namespace; a ConfigMap and a Secret made by hand; a host.
async fn refusal_fixture(cp: &ControlPlane) -> Result<(Fixture<'_>, Host)> {
    let f = Fixture::new(cp, "auth-refuse").await?;
    by_hand(cp, REFUSE, &["precious"])?;
    let secret = [
        "create",
        "secret",
        "generic",
        "bootstrap-token",
        "-n",
        "kube-system",
    ];
    let literal = ["--from-literal=token=topsecret-value"];
    let _ = cp.runtime.kubectl(&[&secret[..], &literal[..]].concat());
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    f.push("manifest", "manifest", "1.0.0")?;
    let granted = configmaps_in(REFUSE);
    for name in ["evil", "good"] {
        let spec = module_plugin(&f, "hostile-module", granted.clone(), json!({}));
        f.plugin(name, spec).await?;
    }
    let bundle = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bundle, namespace: {REFUSE}}}\ndata: {{title: '${{title}}'}}\n"
    );
    let spec = module_plugin(&f, "manifest", granted, json!({"manifest": bundle}));
    f.plugin("bundle", spec).await?;
    let host = f.host("a");
    Ok((f, host))
}

/// What `evil` tries (mode, ConfigMap name) and what its refusal must say.
fn hostile_modes() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let owned = |needles: &[&str]| needles.iter().map(|n| n.to_string()).collect();
    vec![
        (
            "cluster-admin",
            "hostile",
            owned(&[
                "ClusterRoleBinding hostile-anonymous-admin",
                "not granted to write",
                "rbac.authorization.k8s.io",
                "nothing of this answer was applied",
            ]),
        ),
        (
            "webhook",
            "hostile",
            owned(&[
                "ValidatingWebhookConfiguration hostile-webhook",
                "not granted to write",
            ]),
        ),
        (
            "kube-system-secret",
            "hostile",
            owned(&["Secret hostile in kube-system", "not granted to write"]),
        ),
        (
            "read-secrets",
            "hostile",
            owned(&["not granted to read Secret", "kube-system"]),
        ),
        (
            "configmap",
            "good-cm",
            owned(&[
                &format!("ConfigMap {REFUSE}/good-cm"),
                "belongs to module good",
            ]),
        ),
        (
            "configmap",
            "precious",
            owned(&[
                &format!("ConfigMap {REFUSE}/precious"),
                "not created by this module",
                "kubectl",
            ]),
        ),
        ("huge-message", "hostile", owned(&["output too large"])),
    ]
}

/// `evil` in `mode` is refused naming plugin, object and grant; the others stay Ready; no
/// Secret data reaches the status.
async fn refused(
    f: &Fixture<'_>,
    host: &Host,
    mode: &str,
    name: &str,
    needles: &[String],
) -> Result {
    let evil = json!({"mode": mode, "namespace": REFUSE, "name": name});
    let values = json!({"values": {"title": INJECTED}});
    f.apply_set("main", refusal_set(evil, values)).await?;
    let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
    let s = f
        .wait_set(
            "main",
            host,
            &format!("evil refused ({mode} {name})"),
            |s| {
                says(s, "evil", State::Error, &needles)
                    && says(s, "evil", State::Error, &["plugin hostile-module 0.1.0"])
                    && ready(s, &["good", "bundle"])
            },
        )
        .await?;
    let status = serde_json::to_string(&s.status).unwrap();
    if status.contains("topsecret") || status.contains("dG9wc2VjcmV0") {
        return Err(format!("a Secret's data reached the status: {status}"));
    }
    Ok(())
}

/// Nothing of a refused answer reached the target, nor did the injected document; the
/// objects of others are as they were.
fn nothing_refused_was_applied(cp: &ControlPlane) -> Result {
    for args in [
        &["clusterrolebinding", "hostile-anonymous-admin"][..],
        &["clusterrolebinding", "pwned"][..],
        &["validatingwebhookconfiguration", "hostile-webhook"][..],
        &["secret", "hostile", "-n", "kube-system"][..],
        &["configmap", "hostile", "-n", REFUSE][..],
    ] {
        if target_get(cp, args).is_some() {
            return Err(format!("{args:?} was applied"));
        }
    }
    untouched(cp, &["configmap", "precious", "-n", REFUSE])?;
    let good = target_get(
        cp,
        &[
            "configmap",
            "good-cm",
            "-n",
            REFUSE,
            "--show-managed-fields",
        ],
    )
    .ok_or("good-cm is gone")?;
    let managers = good["metadata"]["managedFields"].to_string();
    if good["metadata"]["labels"]["modules.tessera.dev/module"] != "good"
        || managers.contains("tessera-module-evil")
    {
        return Err(format!("module good's object was taken over: {good}"));
    }
    let bundle = target_get(cp, &["configmap", "bundle", "-n", REFUSE]).ok_or("no bundle")?;
    if bundle["data"]["title"] != INJECTED {
        return Err(format!(
            "the value was not kept as data: {}",
            bundle["data"]
        ));
    }
    Ok(())
}

/// The set cannot replace the bundle the Plugin owns; a plugin's log line cannot forge host
/// log lines (the newline arrives escaped).
async fn locked_config_and_escaped_logs(f: &Fixture<'_>, host: &Host) -> Result {
    let replace = json!({"manifest": "kind: ClusterRoleBinding", "values": {"title": "t"}});
    let evil = json!({"mode": "configmap", "namespace": REFUSE, "name": "hostile"});
    f.apply_set("main", refusal_set(evil, replace)).await?;
    f.wait_set("main", host, "bundle lock refused", |s| {
        says(s, "bundle", State::Error, &["config.manifest", "locked"])
            && ready(s, &["good", "evil"])
    })
    .await?;
    let logs = json!({"mode": "log-newlines", "namespace": REFUSE, "name": "hostile"});
    f.apply_set("main", refusal_set(logs, json!({"values": {"title": "t"}})))
        .await?;
    f.wait_set("main", host, "evil logs", |s| {
        ready(s, &["evil", "good", "bundle"])
    })
    .await?;
    let line = log_message(host, "innocent").ok_or("the plugin's log line is missing")?;
    if line.contains('\n') || !line.contains(r"innocent\n2026-11-23") {
        return Err(format!("plugin log line not escaped: {line:?}"));
    }
    Ok(())
}

/// Every write and read a module reconciler was not granted is refused, whole.
async fn module_answers_are_checked_against_grants(cp: &ControlPlane) -> Result {
    let (f, host) = refusal_fixture(cp).await?;
    for (mode, name, needles) in hostile_modes() {
        refused(&f, &host, mode, name, &needles).await?;
    }
    nothing_refused_was_applied(cp)?;
    locked_config_and_escaped_logs(&f, &host).await?;
    f.sets()
        .delete("main", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    eventually("set main gone", LIMIT, || async {
        f.sets().get_opt("main").await.ok()?.is_none().then_some(())
    })
    .await?;
    untouched(cp, &["configmap", "precious", "-n", REFUSE])
}

/// The target namespace of the granting scenario.
const GRANT: &str = "team-grant";

fn grant_set(mode: &str, name: &str, adopt: bool) -> Value {
    json!({"target": {"secretName": "kubeconfig-target"}, "modules": [
        {"name": "grant-evil", "adopt": adopt, "config": {"mode": mode, "namespace": GRANT, "name": name}},
    ]})
}

/// What the plugin declares it needs is shown next to what it was granted.
async fn requests_are_shown(f: &Fixture<'_>) -> Result {
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
    .await
}

/// An object made by hand is refused, then taken over once the set allows adoption.
async fn adoption_only_when_allowed(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    f.apply_set("main", grant_set("configmap", "adoptable", false))
        .await?;
    let needles = ["ConfigMap team-grant/adoptable", "adopt: true"];
    f.wait_set("main", host, "adoption refused", |s| {
        says(s, "grant-evil", State::Error, &needles)
    })
    .await?;
    untouched(cp, &["configmap", "adoptable", "-n", GRANT])?;
    f.apply_set("main", grant_set("configmap", "adoptable", true))
        .await?;
    f.wait_set("main", host, "adopted", |s| ready(s, &["grant-evil"]))
        .await?;
    let cm = target_get(cp, &["configmap", "adoptable", "-n", GRANT]).ok_or("adoptable gone")?;
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

/// A refused plugin works once the operator grants what it needs; adoption only where the
/// set allows it.
async fn granting_makes_the_same_plugin_work(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-grant").await?;
    by_hand(cp, GRANT, &["adoptable"])?;
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    let spec = module_plugin(&f, "hostile-module", configmaps_in(GRANT), json!({}));
    f.plugin("grant-evil", spec).await?;
    let host = f.host("a");
    requests_are_shown(&f).await?;
    f.apply_set("main", grant_set("priority-class", "hostile", false))
        .await?;
    let needles = [
        "PriorityClass hostile-critical",
        "cluster-scoped",
        "clusterScoped: true",
    ];
    f.wait_set("main", &host, "PriorityClass refused", |s| {
        says(s, "grant-evil", State::Error, &needles)
    })
    .await?;
    if target_get(cp, &["priorityclass", "hostile-critical"]).is_some() {
        return Err("the PriorityClass was applied without a grant".into());
    }
    let mut grants = configmaps_in(GRANT);
    grants["write"].as_array_mut().unwrap().push(json!(
        {"apiGroups": ["scheduling.k8s.io"], "kinds": ["PriorityClass"], "clusterScoped": true, "names": ["hostile-critical"]}
    ));
    let spec = module_plugin(&f, "hostile-module", grants, json!({}));
    f.plugin("grant-evil", spec).await?;
    f.wait_set("main", &host, "Ready once granted", |s| {
        ready(s, &["grant-evil"])
    })
    .await?;
    let pc = target_get(cp, &["priorityclass", "hostile-critical"]).ok_or("no PriorityClass")?;
    if pc["metadata"]["labels"]["modules.tessera.dev/module"] != "grant-evil" {
        return Err(format!("PriorityClass not labelled: {pc}"));
    }
    adoption_only_when_allowed(cp, &f, &host).await
}

/// The target namespace of the tampering scenario.
const TAMPER: &str = "team-tamper";

fn tamper_set(with_evil: bool) -> Value {
    let mut modules =
        vec![json!({"name": "tamper-good", "config": {"namespace": TAMPER, "name": "good-cm"}})];
    if with_evil {
        modules.push(
            json!({"name": "tamper-evil", "config": {"namespace": TAMPER, "name": "hostile"}}),
        );
    }
    json!({"target": {"secretName": "kubeconfig-target"}, "modules": modules})
}

/// Someone with access to the target lists foreign objects, with their real uids, as
/// module `tamper-evil`'s in the set's inventory.
fn tamper_inventory(cp: &ControlPlane) -> Result {
    let inventory = [
        "configmap",
        "modules.auth-tamper.main",
        "-n",
        "tessera-system",
    ];
    let cm = target_get(cp, &inventory).ok_or("no inventory")?;
    let text = cm["data"]["tamper-evil"]
        .as_str()
        .ok_or("no tamper-evil record")?;
    let mut record: Value = serde_json::from_str(text).unwrap();
    for args in [
        &["configmap", "precious", "-n", TAMPER][..],
        &["configmap", "keep-me", "-n", "kube-system"][..],
        &["configmap", "good-cm", "-n", TAMPER][..],
        &["clusterrole", "cluster-admin"][..],
    ] {
        let o = target_get(cp, args).ok_or(format!("{args:?} missing"))?;
        let mut entry = json!({"apiVersion": o["apiVersion"], "kind": o["kind"],
            "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]});
        if let Some(n) = o["metadata"]["namespace"].as_str() {
            entry["namespace"] = n.into();
        }
        record["objects"].as_array_mut().unwrap().push(entry);
    }
    let patch = json!({"data": {"tamper-evil": record.to_string()}}).to_string();
    let edit = [
        "patch",
        inventory[0],
        inventory[1],
        inventory[2],
        inventory[3],
    ];
    kubectl_ok(
        &cp.runtime,
        &[&edit[..], &["--type=merge", "-p", &patch]].concat(),
    )?;
    Ok(())
}

/// What survives: every foreign object the inventory named, and the other module's.
fn foreign_objects_survive(cp: &ControlPlane, host: &Host) -> Result {
    if target_get(cp, &["configmap", "hostile", "-n", TAMPER]).is_some() {
        return Err("the module's own ConfigMap was not removed".into());
    }
    untouched(cp, &["configmap", "precious", "-n", TAMPER])?;
    untouched(cp, &["configmap", "theirs", "-n", "other-team"])?;
    untouched(cp, &["configmap", "keep-me", "-n", "kube-system"])?;
    target_get(cp, &["clusterrole", "cluster-admin"]).ok_or("cluster-admin was deleted")?;
    let good = target_get(cp, &["configmap", "good-cm", "-n", TAMPER]).ok_or("good-cm gone")?;
    if good["metadata"]["labels"]["modules.tessera.dev/module"] != "tamper-good" {
        return Err(format!("good-cm changed: {good}"));
    }
    let warned = "the inventory lists an object this module did not create";
    if log_message(host, warned).is_none() {
        return Err(format!(
            "no log line about the foreign entries:\n{}",
            tail(&host.logs(), 30)
        ));
    }
    Ok(())
}

/// Entries naming foreign objects in an edited inventory, and a cluster-wide `remove`,
/// delete nothing the module did not create.
async fn tampered_inventory_deletes_nothing_foreign(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "auth-tamper").await?;
    by_hand(cp, TAMPER, &["precious"])?;
    by_hand(cp, "other-team", &["theirs"])?;
    let keep = [
        "create",
        "configmap",
        "keep-me",
        "-n",
        "kube-system",
        "--from-literal=owner=ops",
    ];
    let _ = cp.runtime.kubectl(&keep);
    f.push_path(&hostile_module(), "hostile-module", "1.0.0")?;
    let good = module_plugin(&f, "hostile-module", configmaps_in(TAMPER), json!({}));
    f.plugin("tamper-good", good).await?;
    // The mode is the Plugin's configuration: a module leaving the set has no set config.
    let remove_all = json!({"mode": "remove-all"});
    let evil = module_plugin(
        &f,
        "hostile-module",
        configmaps_in(TAMPER),
        remove_all.clone(),
    );
    f.plugin("tamper-evil", evil).await?;
    let host = f.host("a");
    f.apply_set("main", tamper_set(true)).await?;
    f.wait_set("main", &host, "Ready", |s| {
        ready(s, &["tamper-good", "tamper-evil"])
    })
    .await?;
    tamper_inventory(cp)?;
    // Removing the module: its delete answer wants every ConfigMap of the cluster removed,
    // which its grant (one namespace) does not cover.
    f.apply_set("main", tamper_set(false)).await?;
    let needles = [
        "remove",
        "not granted to write ConfigMap",
        "every namespace",
    ];
    f.wait_set("main", &host, "cluster-wide remove refused", |s| {
        says(s, "tamper-evil", State::Error, &needles) && ready(s, &["tamper-good"])
    })
    .await?;
    untouched(cp, &["configmap", "theirs", "-n", "other-team"])?;
    // Granted every namespace, the remove still only reaches the module's own objects.
    let everywhere =
        json!({"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["*"]}]});
    let evil = module_plugin(&f, "hostile-module", everywhere, remove_all);
    f.plugin("tamper-evil", evil).await?;
    f.wait_set("main", &host, "evil removed", |s| {
        module(s, "tamper-evil").is_none() && ready(s, &["tamper-good"])
    })
    .await?;
    foreign_objects_survive(cp, &host)
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

/// The shoot-extension scenario: a host whose chain ends with the registry step
/// `hostile` (Plugin `auth-hostile`, whose grants are the step's).
struct ShootScenario<'a> {
    f: Fixture<'a>,
    host: Host,
    runtimes: Api<Runtime>,
    shoots: Api<DynamicObject>,
}

impl<'a> ShootScenario<'a> {
    async fn new(cp: &'a ControlPlane) -> Result<Self> {
        let f = Fixture::new(cp, "auth-shoot").await?;
        let hostile = tessera_tests::test_plugin_dir().join("hostile.wasm");
        f.push_path(&hostile, "hostile", "1.0.0")?;
        let mut chain: Vec<Value> = tessera::plugins::FIRST_PARTY
            .iter()
            .map(|p| json!(p))
            .collect();
        chain.push(json!("hostile"));
        let step = json!({"source": "registry", "plugin": "auth-hostile"});
        let config = json!({"chain": chain, "plugins": {"hostile": step}});
        let path = f.dir.path().join("chain.yaml");
        std::fs::write(&path, config.to_string()).unwrap();
        let host = f.host_with("a", &["--config", &path.display().to_string()]);
        Ok(Self {
            runtimes: Api::namespaced(f.client.clone(), &f.ns),
            shoots: Api::namespaced_with(f.client.clone(), "garden-kyma-dev", &shoot_resource()),
            host,
            f,
        })
    }

    /// Give the Plugin `mode` and `grants`, and wait until the host runs that spec.
    async fn plugin(&self, mode: &str, grants: Value) -> Result {
        let spec = json!({
            "kind": "shoot-extension",
            "versions": [{"version": "1.0.0", "ref": self.f.reference("hostile", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"mode": mode},
            "grants": grants,
        });
        self.f.plugin("auth-hostile", spec).await?;
        eventually(
            &format!("Plugin auth-hostile runs {mode}"),
            LIMIT,
            || async {
                let p = self.f.plugins().get("auth-hostile").await.ok()?;
                (p.status?.observed_generation == p.metadata.generation).then_some(())
            },
        )
        .await
    }

    async fn create(&self, id: &str, shoot: &str, state: RuntimeState) -> Result<Runtime> {
        let doc = runtime_doc(&self.f.ns, id, shoot);
        self.runtimes
            .create(&PostParams::default(), &doc)
            .await
            .map_err(|e| e.to_string())?;
        runtime_in(&self.runtimes, id, state, &self.host).await
    }

    /// Runtime `id`, rendered with the plugin in `mode`, fails naming what was refused, and
    /// no Shoot is written anywhere.
    async fn refused(&self, mode: &str, id: &str, shoot: &str, needles: &[&str]) -> Result {
        self.plugin(mode, json!({})).await?;
        let rt = self.create(id, shoot, RuntimeState::Failed).await?;
        let why = condition_with(&rt, "PluginNotGranted")
            .ok_or(format!("{id}: no PluginNotGranted condition"))?;
        if !needles.iter().all(|n| why.contains(n)) {
            return Err(format!("{id}: condition {why:?} lacks {needles:?}"));
        }
        for namespace in ["garden-kyma-dev", "garden-other"] {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.f.client.clone(), namespace, &shoot_resource());
            if api
                .get_opt(shoot)
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err(format!("{id}: a Shoot {namespace}/{shoot} was written"));
            }
        }
        Ok(())
    }

    /// A forced patch of Runtime `id` with the plugin refusing fails and leaves its Shoot.
    async fn refused_patch(&self, id: &str, shoot: &str) -> Result {
        let before = self.shoots.get(shoot).await.map_err(|e| e.to_string())?;
        let force = json!({"metadata": {"annotations": {"tessera.dev/force-patch": "true"}}});
        self.runtimes
            .patch(
                id,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&force),
            )
            .await
            .map_err(|e| e.to_string())?;
        let rt = runtime_in(&self.runtimes, id, RuntimeState::Failed, &self.host).await?;
        condition_with(&rt, "PluginNotGranted").ok_or(format!("{id}: no PluginNotGranted"))?;
        let after = self.shoots.get(shoot).await.map_err(|e| e.to_string())?;
        if after.metadata.generation != before.metadata.generation
            || after.data["spec"] != before.data["spec"]
        {
            return Err(format!("Shoot {shoot} changed: {}", after.data["spec"]));
        }
        Ok(())
    }
}

/// A shoot extension sets only the Shoot paths it was granted and never the Shoot's
/// identity; a refused render writes nothing to Gardener.
async fn shoot_extensions_set_only_granted_paths(cp: &ControlPlane) -> Result {
    let s = ShootScenario::new(cp).await?;
    s.plugin("ok", json!({})).await?;
    s.create("rt-ok", "s-ok", RuntimeState::Ready).await?;
    s.create("rt-other", "s-other", RuntimeState::Ready).await?;
    let plugin = "plugin hostile 0.1.0";
    s.refused(
        "set-namespace",
        "rt-ns",
        "s-ns",
        &[plugin, "metadata.namespace", "identity"],
    )
    .await?;
    s.refused(
        "set-binding",
        "rt-bind",
        "s-bind",
        &[plugin, "spec.secretBindingName", "identity"],
    )
    .await?;
    let field = [plugin, "not granted to set spec.purpose", "shootPaths"];
    s.refused("set-field", "rt-field", "s-field", &field)
        .await?;
    s.refused_patch("rt-ok", "s-ok").await?;
    // The other Runtime carries on.
    runtime_in(&s.runtimes, "rt-other", RuntimeState::Ready, &s.host).await?;
    // The identity cannot be granted: the Plugin itself is refused.
    let identity = json!({"shootPaths": ["metadata.namespace"]});
    let spec = json!({
        "kind": "shoot-extension",
        "versions": [{"version": "1.0.0", "ref": s.f.reference("hostile", "1.0.0")}],
        "channels": [{"name": "regular", "version": "1.0.0"}],
        "config": {"mode": "set-namespace"},
        "grants": identity,
    });
    s.f.plugin("auth-hostile", spec).await?;
    eventually("Plugin refusing an identity grant", LIMIT, || async {
        let err =
            s.f.plugins()
                .get("auth-hostile")
                .await
                .ok()?
                .status?
                .last_error?;
        (err.contains("spec.grants.shootPaths[0]") && err.contains("identity")).then_some(())
    })
    .await?;
    // Granted the path, the same plugin works.
    s.plugin("set-field", json!({"shootPaths": ["spec.purpose"]}))
        .await?;
    s.create("rt-granted", "s-granted", RuntimeState::Ready)
        .await?;
    let granted = s.shoots.get("s-granted").await.map_err(|e| e.to_string())?;
    if granted.data["spec"]["purpose"] != "evaluation"
        || granted
            .labels()
            .get("tessera.dev/runtime")
            .map(String::as_str)
            != Some("rt-granted")
    {
        return Err(format!(
            "the granted path was not set: {}",
            granted.data["spec"]
        ));
    }
    Ok(())
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    scenarios::run(
        &sim,
        &Script::quick(),
        vec![
            scenario!(module_answers_are_checked_against_grants),
            scenario!(granting_makes_the_same_plugin_work),
            scenario!(tampered_inventory_deletes_nothing_foreign),
            scenario!(shoot_extensions_set_only_granted_paths),
        ],
    )
}

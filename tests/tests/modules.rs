//! Modules against real API servers: `tessera modules apply|delete` on one cluster, and
//! the ModuleSet controller with module plugins from a real registry, a control plane
//! ("garden") and a target ("runtime") API server, plus single-cluster mode.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera::crd::ModuleSet;
use tessera::modules::State;
use tessera_tests::cluster::Cluster;
use tessera_tests::env::{ControlPlane, Host, NodeOn, PlaneOptions};
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{
    DASHBOARD, Fixture, LIMIT, PIPELINE_CRD, crd_grant, kubectl_ok, module, no_managed_objects,
    plugin_file, requested_grants, state_is, target_get, tessera,
};
use tessera_tests::node::{Node, PAUSE_IMAGE};
use tessera_tests::probe::{eventually, tail};
use tessera_tests::scenarios;

#[path = "modules/access.rs"]
mod access;
#[path = "modules/clusters.rs"]
mod clusters;

use tessera_tests::Result;

/// A Pipeline someone else made, next to the telemetry module's own.
const FOREIGN_PIPELINE: &str = "apiVersion: telemetry.tessera.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: extra, namespace: default}\n";

/// `tessera modules` on one cluster with a node: the set file, and the arguments every
/// call shares.
struct Cli {
    cluster: Cluster,
    _node: Node,
    _dir: tempfile::TempDir,
    set: Value,
    set_path: PathBuf,
    /// After `modules <verb>`.
    args: Vec<String>,
}

impl Cli {
    fn start() -> Result<Self> {
        let cluster = Cluster::start("modules-cli")?;
        let node = Node::start(&cluster, "modules-cli-node", None)?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let set = json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": "edge", "namespace": "ops"},
            "spec": {"modules": [
                {"name": "telemetry", "config": {"endpoint": "otlp.example:4317", "image": PAUSE_IMAGE}},
                {"name": "telemetry-crds", "config": {"manifest": PIPELINE_CRD}},
                {"name": "availability", "config": {"namespace": "default",
                    "budgets": [{"name": "gateway", "matchLabels": {"app": "gateway"}}]}},
            ]},
        });
        let set_path = dir.path().join("set.yaml");
        std::fs::write(&set_path, set.to_string()).unwrap();
        // The bundle's CRD is granted by the operator; the first-party telemetry and
        // availability components from the plugin directory get what they declare.
        let config_path = dir.path().join("tessera.yaml");
        let config = json!({"modules": {"telemetry-crds": {"grants": crd_grant("pipelines.telemetry.tessera.dev")}}});
        std::fs::write(&config_path, config.to_string()).unwrap();
        let args = vec![
            "--kubeconfig".into(),
            cluster.kubeconfig.display().to_string(),
            "--set".into(),
            set_path.display().to_string(),
            "--plugins".into(),
            tessera_tests::plugin_dir().display().to_string(),
            "--module".into(),
            format!("telemetry-crds={}", plugin_file("manifest").display()),
            "--config".into(),
            config_path.display().to_string(),
        ];
        Ok(Self {
            cluster,
            _node: node,
            _dir: dir,
            set,
            set_path,
            args,
        })
    }

    /// `tessera modules <verb> … --timeout <timeout>`.
    fn run(&self, verb: &str, timeout: &str) -> (bool, String) {
        let mut args = vec!["modules", verb];
        args.extend(self.args.iter().map(String::as_str));
        args.extend(["--timeout", timeout]);
        tessera(&args)
    }

    fn write_set(&self, set: &Value) {
        std::fs::write(&self.set_path, set.to_string()).unwrap();
    }

    fn foreign_pipeline(&self) -> Result {
        let out = self
            .cluster
            .kubectl_stdin(&["apply", "-f", "-"], FOREIGN_PIPELINE);
        if !out.status.success() {
            return Err(format!(
                "extra Pipeline: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }
}

/// The one-shot CLI on a single cluster: three modules with a dependency, then removal;
/// each phase its own function so that a failure names it.
async fn cli_one_shot() -> Result {
    let cli = Cli::start()?;
    cli_installs_in_order(&cli)?;
    cli_record_replays(&cli)?;
    cli_dry_run_writes_nothing(&cli)?;
    cli_reapply_and_bad_config(&cli)?;
    cli_delete_waits_for_foreign_resources(&cli).await?;
    cli_ignore_keeps_custom_resources(&cli)
}

/// Apply: all three Ready, the CRD module first, adapted to the cluster, inventoried.
fn cli_installs_in_order(cli: &Cli) -> Result {
    let (ok, out) = cli.run("apply", "90s");
    if !ok {
        return Err(format!("modules apply failed:\n{out}"));
    }
    for line in [
        "ModuleSet ops/edge: Ready",
        "telemetry ",
        "telemetry-crds",
        "availability",
    ] {
        if !out.contains(line) {
            return Err(format!("summary lacks {line:?}:\n{out}"));
        }
    }
    // The dependent module's custom resource exists: the CRD module came first.
    kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "pipelines.telemetry.tessera.dev",
            "default",
            "-n",
            "kyma-system",
        ],
    )?;
    // Adapted to the cluster: Kubernetes 1.20 serves PodDisruptionBudget only as v1beta1.
    let pdb = kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "poddisruptionbudgets.v1beta1.policy",
            "gateway",
            "-n",
            "default",
            "-o",
            "json",
        ],
    )?;
    if !pdb.contains("\"modules.tessera.dev/module\": \"availability\"") {
        return Err(format!("PDB not labelled as the module's:\n{pdb}"));
    }
    let inventory = kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "configmap",
            "modules.ops.edge",
            "-n",
            "tessera-system",
            "-o",
            "json",
        ],
    )?;
    let inventory: Value = serde_json::from_str(&inventory).unwrap();
    let telemetry: Value =
        serde_json::from_str(inventory["data"]["telemetry"].as_str().unwrap_or("{}")).unwrap();
    if telemetry["objects"].as_array().map(Vec::len) != Some(5) {
        return Err(format!("telemetry inventory: {telemetry}"));
    }
    Ok(())
}

/// `modules record` writes what telemetry is given by the cluster (the CRD it waits for,
/// read live) and what it answers; `plugin test` replays that case green on its component.
fn cli_record_replays(cli: &Cli) -> Result {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let case = dir.path().join("recorded.yaml").display().to_string();
    let mut args = vec!["modules", "record", "telemetry"];
    args.extend(cli.args.iter().map(String::as_str));
    args.extend(["--case", &case]);
    let (ok, out) = tessera(&args);
    let text = std::fs::read_to_string(&case).unwrap_or_default();
    if !ok || !text.contains("pipelines.telemetry.tessera.dev") || text.contains("managedFields") {
        return Err(format!("modules record:\n{out}\n{text}"));
    }
    let component = plugin_file("telemetry").display().to_string();
    let cases = dir.path().display().to_string();
    let (ok, out) = tessera(&["plugin", "test", &component, "--cases", &cases]);
    if !ok || !out.contains("1 passed, 0 failed") {
        return Err(format!("the recorded case does not replay:\n{out}\n{text}"));
    }
    Ok(())
}

/// `apply --dry-run` with a new endpoint and one module fewer: the changed field shows as a
/// diff and the leaving module's objects as deleted, and the cluster keeps the old ones.
fn cli_dry_run_writes_nothing(cli: &Cli) -> Result {
    let mut set = cli.set.clone();
    set["spec"]["modules"][0]["config"]["endpoint"] = json!("otlp.other:4317");
    set["spec"]["modules"].as_array_mut().unwrap().pop();
    cli.write_set(&set);
    let mut args = vec!["modules", "apply", "--dry-run"];
    args.extend(cli.args.iter().map(String::as_str));
    let (ok, out) = tessera(&args);
    cli.write_set(&cli.set);
    let wanted = [
        "dry run: nothing was written",
        "(changed)",
        "- PodDisruptionBudget default/gateway (deleted)",
        "0 to create",
    ];
    let diff_line = |sign: &str, text: &str| {
        out.lines()
            .any(|l| l.trim_start().starts_with(sign) && l.contains(text))
    };
    let diffed = diff_line("-", "otlp.example:4317") && diff_line("+", "otlp.other:4317");
    if !ok || !diffed || wanted.iter().any(|w| !out.contains(w)) {
        return Err(format!("modules apply --dry-run:\n{out}"));
    }
    let live = kubectl_ok(
        &cli.cluster,
        &["get", "configmaps", "-n", "kyma-system", "-o", "json"],
    )?;
    if live.contains("otlp.other") || !live.contains("otlp.example:4317") {
        return Err(format!("the dry run changed the cluster:\n{live}"));
    }
    kubectl_ok(&cli.cluster, &["get", "pdb", "gateway", "-n", "default"]).map(drop)
}

/// Applying again changes nothing; a bad configuration names the module and field, and
/// loses nothing.
fn cli_reapply_and_bad_config(cli: &Cli) -> Result {
    let (ok, out) = cli.run("apply", "90s");
    if !ok {
        return Err(format!("second apply failed:\n{out}"));
    }
    let bad = cli.set.to_string().replace("otlp.example:4317", "");
    std::fs::write(&cli.set_path, bad).unwrap();
    let (ok, out) = cli.run("apply", "90s");
    if ok || !out.contains("config.endpoint") || !out.contains("Error") {
        return Err(format!("bad config was not reported:\n{out}"));
    }
    kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "deployment",
            "telemetry-gateway",
            "-n",
            "kyma-system",
        ],
    )
    .map(drop)
}

/// A custom resource someone else made: customResourcePolicy CreateAndDelete (the
/// default) does not delete it, and the CRD's module waits, naming it, until it is gone
/// (deleting the CRD would delete it too). Then delete removes everything.
async fn cli_delete_waits_for_foreign_resources(cli: &Cli) -> Result {
    cli.foreign_pipeline()?;
    // The dependent module's Namespace terminates first, which takes its Pods' grace period
    // and longer under load: delete is asked again until only the Pipeline is left.
    let mut out = String::new();
    for _ in 0..6 {
        let (ok, said) = cli.run("delete", "25s");
        if ok {
            return Err(format!(
                "delete did not wait for the foreign Pipeline:\n{said}"
            ));
        }
        out = said;
        if out.contains("Pipeline default/extra") {
            break;
        }
    }
    if !out.contains("Pipeline default/extra") || !out.contains("not created by it") {
        return Err(format!(
            "delete did not wait for the foreign Pipeline:\n{out}"
        ));
    }
    kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "pipelines.telemetry.tessera.dev",
            "extra",
            "-n",
            "default",
        ],
    )?;
    kubectl_ok(
        &cli.cluster,
        &[
            "delete",
            "pipelines.telemetry.tessera.dev",
            "extra",
            "-n",
            "default",
        ],
    )?;
    // Now delete removes everything, dependents first.
    let (ok, out) = cli.run("delete", "90s");
    if !ok || !out.contains("removed") {
        return Err(format!("modules delete failed:\n{out}"));
    }
    no_managed_objects(&cli.cluster, "all,configmaps,crd,pdb,priorityclasses")
        .await
        .map_err(|e| format!("after delete: {e}"))?;
    if cli
        .cluster
        .kubectl(&[
            "get",
            "configmap",
            "modules.ops.edge",
            "-n",
            "tessera-system",
        ])
        .status
        .success()
    {
        return Err("inventory left after delete".into());
    }
    Ok(())
}

/// customResourcePolicy Ignore: the CRD and its resources stay when the module goes.
fn cli_ignore_keeps_custom_resources(cli: &Cli) -> Result {
    let mut ignore = cli.set.clone();
    ignore["spec"]["modules"][1]["customResourcePolicy"] = json!("Ignore");
    cli.write_set(&ignore);
    let (ok, out) = cli.run("apply", "90s");
    if !ok {
        return Err(format!("apply with Ignore failed:\n{out}"));
    }
    cli.foreign_pipeline()?;
    let (ok, out) = cli.run("delete", "90s");
    if !ok {
        return Err(format!("delete with Ignore failed:\n{out}"));
    }
    kubectl_ok(
        &cli.cluster,
        &["get", "crd", "pipelines.telemetry.tessera.dev"],
    )?;
    kubectl_ok(
        &cli.cluster,
        &[
            "get",
            "pipelines.telemetry.tessera.dev",
            "extra",
            "-n",
            "default",
        ],
    )?;
    if cli
        .cluster
        .kubectl(&[
            "get",
            "pipelines.telemetry.tessera.dev",
            "default",
            "-n",
            "kyma-system",
        ])
        .status
        .success()
    {
        return Err("the telemetry module's own Pipeline was kept".into());
    }
    Ok(())
}

/// The ModuleSet controller end to end on a remote target.
/// The modules of set `main` in the lifecycle story.
fn main_set(min_available: u32, dashboard_channel: Option<&str>, with_availability: bool) -> Value {
    let mut m = vec![
        json!({"name": "telemetry", "config": {"endpoint": "otlp.example:4317", "replicas": 2,
            "image": PAUSE_IMAGE}}),
        json!({"name": "telemetry-crds"}),
        json!({"name": "dashboard", "channel": dashboard_channel}),
    ];
    if with_availability {
        m.push(json!({"name": "availability", "config": {"namespace": "dashboard",
            "budgets": [{"name": "dashboard", "matchLabels": {"app": "dashboard"}, "minAvailable": min_available}]}}));
    }
    json!({"target": {"secretName": "kubeconfig-target"}, "modules": m})
}

/// The module plugins the lifecycle story uses.
async fn lifecycle_plugins(f: &Fixture<'_>) -> Result {
    f.push("manifest", "manifest", "1.0.0")?;
    f.push("manifest", "manifest", "1.1.0")?;
    f.push("telemetry", "telemetry", "1.0.0")?;
    f.push("availability", "availability", "1.0.0")?;
    f.plugin(
        "telemetry-crds",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"manifest": PIPELINE_CRD},
            "grants": crd_grant("pipelines.telemetry.tessera.dev"),
        }),
    )
    .await?;
    f.plugin(
        "telemetry",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("telemetry", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "grants": requested_grants("telemetry"),
        }),
    )
    .await?;
    f.plugin(
        "availability",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("availability", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "grants": requested_grants("availability"),
        }),
    )
    .await?;
    f.plugin("dashboard", json!({
        "kind": "module-reconciler",
        "versions": [
            {"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")},
            {"version": "1.1.0", "ref": f.reference("manifest", "1.1.0")},
        ],
        "channels": [{"name": "regular", "version": "1.0.0", "shadow": "1.1.0"}, {"name": "fast", "version": "1.1.0"}],
        "config": {"manifest": DASHBOARD, "values": {"namespace": "dashboard", "title": "Overview"}},
        "grants": {"write": [
            {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true, "names": ["dashboard"]},
            {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["dashboard"]},
        ]},
    })).await?;
    Ok(())
}

/// The ModuleSet controller through a module's life: each phase builds on the one before;
/// each is its own function so that a failure names the phase.
async fn controller_lifecycle(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods").await?;
    lifecycle_plugins(&f).await?;
    let host = f.host("a");
    installs_in_dependency_order(cp, &f, &host).await?;
    config_and_drift_follow(cp, &f, &host).await?;
    removal_upgrade_and_no_downgrade(cp, &f, &host).await?;
    a_plugin_error_stays_in_its_module(cp, &f, &host).await?;
    let host = restart_mid_install(cp, &f, host).await?;
    deletion_leaves_the_target_clean(cp, &f, &host).await
}

/// Three modules with a dependency install in order, all Ready; the regular channel's
/// shadow 1.1.0 is rendered and compared, never applied.
async fn installs_in_dependency_order(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    // Install: three modules with a dependency, all Ready.
    f.apply_set("main", main_set(1, None, true)).await?;
    let set = f
        .wait_set("main", host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let summary = set
        .status
        .as_ref()
        .unwrap()
        .summary
        .clone()
        .unwrap_or_default();
    if summary != "4/4 Ready" {
        return Err(format!("summary {summary}"));
    }
    let crd = target_get(cp, &["crd", "pipelines.telemetry.tessera.dev"]).ok_or("no CRD")?;
    let deploy = target_get(
        cp,
        &[
            "deployment",
            "telemetry-gateway",
            "-n",
            "kyma-system",
            "--show-managed-fields",
        ],
    )
    .ok_or("no Deployment")?;
    if crd["metadata"]["creationTimestamp"].as_str()
        > deploy["metadata"]["creationTimestamp"].as_str()
    {
        return Err("telemetry was installed before the CRD module".into());
    }
    target_get(
        cp,
        &[
            "pipelines.telemetry.tessera.dev",
            "default",
            "-n",
            "kyma-system",
        ],
    )
    .ok_or("no Pipeline")?;
    let managers: Vec<String> = deploy["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    if !managers.contains(&"tessera-module-telemetry".to_string()) {
        return Err(format!("field managers {managers:?}"));
    }
    let dash = module(&set, "dashboard").unwrap();
    if dash.version.as_deref() != Some("1.0.0") || dash.digest.is_none() || dash.objects != 2 {
        return Err(format!("dashboard status {dash:?}"));
    }

    // The regular channel's shadow 1.1.0 is rendered and compared, never applied.
    let shadow = dash
        .shadow
        .as_ref()
        .ok_or("no shadow result for dashboard")?;
    if shadow.version != "1.1.0"
        || shadow.result != tessera::crd::ShadowOutcome::Differs
        || !shadow.diff.iter().any(|l| l.contains("data.version"))
    {
        return Err(format!("dashboard shadow: {shadow:?}"));
    }
    let cm =
        target_get(cp, &["configmap", "dashboard", "-n", "dashboard"]).ok_or("no dashboard")?;
    if cm["data"]["version"] != "1.0.0" {
        return Err(format!("the shadow version was applied: {}", cm["data"]));
    }
    eventually("ShadowDiff Event", LIMIT, || async {
        (!f.events("ShadowDiff").await.is_empty()).then_some(())
    })
    .await?;
    Ok(())
}

/// A config change reaches the object; drift is repaired.
async fn config_and_drift_follow(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    // Config change: the object follows.
    f.apply_set("main", main_set(2, None, true)).await?;
    eventually("PDB minAvailable 2", LIMIT, || async {
        let pdb = target_get(
            cp,
            &[
                "poddisruptionbudgets.v1beta1.policy",
                "dashboard",
                "-n",
                "dashboard",
            ],
        )?;
        (pdb["spec"]["minAvailable"] == 2).then_some(())
    })
    .await?;

    // Drift: a deleted object comes back, an edited field is restored.
    let old_uid = target_get(cp, &["configmap", "telemetry-gateway", "-n", "kyma-system"])
        .ok_or("no ConfigMap")?["metadata"]["uid"]
        .clone();
    kubectl_ok(
        &cp.runtime,
        &[
            "delete",
            "configmap",
            "telemetry-gateway",
            "-n",
            "kyma-system",
        ],
    )?;
    kubectl_ok(
        &cp.runtime,
        &[
            "patch",
            "configmap",
            "dashboard",
            "-n",
            "dashboard",
            "--type=merge",
            "-p",
            r#"{"data":{"title":"hacked"}}"#,
        ],
    )?;
    eventually("drift repaired", Duration::from_secs(20), || async {
        let cm = target_get(cp, &["configmap", "telemetry-gateway", "-n", "kyma-system"])?;
        let dash = target_get(cp, &["configmap", "dashboard", "-n", "dashboard"])?;
        (cm["metadata"]["uid"] != old_uid && dash["data"]["title"] == "Overview").then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    restored_in_spans(f, host)
}

/// The line about the restored field says which reconcile and which module pass wrote it
/// (its spans: the ModuleSet, and set, module and version).
fn restored_in_spans(f: &Fixture<'_>, host: &Host) -> Result {
    let logs = host.logs();
    let line = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["fields"]["message"] == "restoring fields of a module object edited by hand")
        .ok_or_else(|| format!("no line about the restored field\n{}", tail(&logs, 20)))?;
    let spans = line["spans"].as_array().cloned().unwrap_or_default();
    let named = |name: &str| spans.iter().find(|s| s["name"] == name).cloned();
    let reconcile = named("reconcile").ok_or(format!("no reconcile span: {line}"))?;
    let module = named("module").ok_or(format!("no module span: {line}"))?;
    let set = format!("{}/main", f.ns);
    if reconcile["object"] != format!("ModuleSet/{set}")
        || module["set"] != set.as_str()
        || module["module"] != "dashboard"
        || module["version"].as_str().is_none_or(str::is_empty)
    {
        return Err(format!("the spans do not name set and module: {line}"));
    }
    Ok(())
}

/// A removed module is pruned; a channel switch upgrades; going back is refused.
async fn removal_upgrade_and_no_downgrade(
    cp: &ControlPlane,
    f: &Fixture<'_>,
    host: &Host,
) -> Result {
    // Module removed: its objects are pruned, the others stay.
    f.apply_set("main", main_set(2, None, false)).await?;
    f.wait_set("main", host, "availability gone", |s| {
        module(s, "availability").is_none() && state_is(s, State::Ready)
    })
    .await?;
    if target_get(cp, &["priorityclass", "availability-critical"]).is_some()
        || target_get(
            cp,
            &[
                "poddisruptionbudgets.v1beta1.policy",
                "dashboard",
                "-n",
                "dashboard",
            ],
        )
        .is_some()
    {
        return Err("availability objects were not pruned".into());
    }

    // Channel switch: upgrade.
    f.apply_set("main", main_set(2, Some("fast"), false))
        .await?;
    f.wait_set("main", host, "dashboard 1.1.0", |s| {
        module(s, "dashboard").and_then(|m| m.version.as_deref()) == Some("1.1.0")
            && state_is(s, State::Ready)
    })
    .await?;
    let cm =
        target_get(cp, &["configmap", "dashboard", "-n", "dashboard"]).ok_or("no dashboard")?;
    if cm["data"]["version"] != "1.1.0" {
        return Err(format!("dashboard ConfigMap after upgrade: {}", cm["data"]));
    }
    // Back to a lower version: Warning, nothing downgraded.
    f.apply_set("main", main_set(2, Some("regular"), false))
        .await?;
    let set = f
        .wait_set("main", host, "Warning", |s| state_is(s, State::Warning))
        .await?;
    let dash = module(&set, "dashboard").unwrap();
    if dash.version.as_deref() != Some("1.1.0")
        || !dash
            .message
            .as_deref()
            .unwrap_or("")
            .contains("lower than the installed 1.1.0")
    {
        return Err(format!("dashboard after downgrade attempt: {dash:?}"));
    }
    let cm =
        target_get(cp, &["configmap", "dashboard", "-n", "dashboard"]).ok_or("no dashboard")?;
    if cm["data"]["version"] != "1.1.0" {
        return Err("the dashboard was downgraded".into());
    }
    if f.events("DowngradeRefused").await.is_empty() {
        return Err("no DowngradeRefused Event".into());
    }
    f.apply_set("main", main_set(2, Some("fast"), false))
        .await?;
    Ok(())
}

/// A plugin error is that module's Error; the others are unaffected.
async fn a_plugin_error_stays_in_its_module(
    cp: &ControlPlane,
    f: &Fixture<'_>,
    host: &Host,
) -> Result {
    // Plugin error: that module is Error, the others are unaffected.
    let mut broken = main_set(2, Some("fast"), false);
    broken["modules"][0]["config"]["endpoint"] = json!("");
    f.apply_set("main", broken).await?;
    let set = f
        .wait_set("main", host, "Error", |s| state_is(s, State::Error))
        .await?;
    let t = module(&set, "telemetry").unwrap();
    if t.state != State::Error
        || t.objects != 5
        || !t
            .message
            .as_deref()
            .unwrap_or("")
            .contains("config.endpoint")
    {
        return Err(format!("telemetry: {t:?}"));
    }
    for other in ["telemetry-crds", "dashboard"] {
        if module(&set, other).map(|m| m.state) != Some(State::Ready) {
            return Err(format!(
                "{other} not Ready while telemetry fails: {:?}",
                module(&set, other)
            ));
        }
    }
    target_get(
        cp,
        &["deployment", "telemetry-gateway", "-n", "kyma-system"],
    )
    .ok_or("a failing plugin removed objects")?;
    f.apply_set("main", main_set(2, Some("fast"), false))
        .await?;
    f.wait_set("main", host, "Ready again", |s| state_is(s, State::Ready))
        .await?;
    Ok(())
}

/// The host restarted mid-install: a second set converges without duplicates.
async fn restart_mid_install(cp: &ControlPlane, f: &Fixture<'_>, mut host: Host) -> Result<Host> {
    // Host restarted mid-install: a second set converges without duplicates.
    f.apply_set("second", json!({"target": {"secretName": "kubeconfig-target"}, "modules": [
        {"name": "availability", "config": {"namespace": "default", "budgets": [
            {"name": "b1", "matchLabels": {"app": "b1"}}, {"name": "b2", "matchLabels": {"app": "b2"}}]}},
    ]})).await?;
    eventually("second set's inventory", LIMIT, || async {
        target_get(
            cp,
            &["configmap", "modules.mods.second", "-n", "tessera-system"],
        )
        .map(|_| ())
    })
    .await?;
    host.kill();
    let host2 = f.host("b");
    f.wait_set("second", &host2, "Ready after restart", |s| {
        state_is(s, State::Ready)
    })
    .await?;
    let inv = target_get(
        cp,
        &["configmap", "modules.mods.second", "-n", "tessera-system"],
    )
    .ok_or("no inventory")?;
    let record: Value =
        serde_json::from_str(inv["data"]["availability"].as_str().unwrap_or("{}")).unwrap();
    let objects = record["objects"].as_array().cloned().unwrap_or_default();
    let unique: std::collections::BTreeSet<String> =
        objects.iter().map(|o| o.to_string()).collect();
    if objects.len() != 3 || unique.len() != 3 {
        return Err(format!("inventory after restart: {record}"));
    }
    Ok(host2)
}

/// Deleting the sets leaves the target clean.
async fn deletion_leaves_the_target_clean(
    cp: &ControlPlane,
    f: &Fixture<'_>,
    host2: &Host,
) -> Result {
    // A Pipeline someone else made holds up the CRD module's removal, named in its status
    // and a Warning Event; once it is gone, deletion goes on.
    let out = cp
        .runtime
        .kubectl_stdin(&["apply", "-f", "-"], FOREIGN_PIPELINE);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    for name in ["main", "second"] {
        f.sets()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| e.to_string())?;
    }
    f.wait_set("main", host2, "removal blocked by the Pipeline", |s| {
        module(s, "telemetry-crds").is_some_and(|m| m.blocked_by == ["Pipeline default/extra"])
    })
    .await?;
    let events = f.events("DeletionBlocked").await;
    if !events
        .iter()
        .any(|e| e.contains("telemetry-crds") && e.contains("default/extra"))
    {
        return Err(format!(
            "no DeletionBlocked Event naming the Pipeline: {events:?}"
        ));
    }
    kubectl_ok(
        &cp.runtime,
        &[
            "delete",
            "pipelines.telemetry.tessera.dev",
            "extra",
            "-n",
            "default",
        ],
    )?;
    eventually("sets gone", LIMIT, || async {
        let left = f.sets().list(&ListParams::default()).await.ok()?;
        left.items.is_empty().then_some(())
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host2.logs(), 30)))?;
    no_managed_objects(
        &cp.runtime,
        "all,configmaps,crd,pdb,priorityclasses,namespaces",
    )
    .await
    .map_err(|e| format!("on the target: {e}"))?;
    if target_get(cp, &["crd", "pipelines.telemetry.tessera.dev"]).is_some() {
        return Err("the CRD is still there".into());
    }
    let inventories = kubectl_ok(
        &cp.runtime,
        &["get", "configmaps", "-n", "tessera-system", "-o", "name"],
    )?;
    if inventories.contains("modules.mods.") {
        return Err(format!("inventories left: {inventories}"));
    }
    if !host2.error_lines().is_empty() {
        return Err(format!("host errors: {:?}", host2.error_lines()));
    }
    Ok(())
}

/// A ConfigMap saying which version of its module made it (no Namespace: this control
/// plane runs no namespace controller, so a module's Namespace could not go away).
const PINBOARD: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: pinboard, namespace: mods-pins}
data: {version: '${version}'}
";

/// A module Plugin with two versions of the manifest plugin rendering [`PINBOARD`], whose
/// `regular` channel runs `channel_version`.
fn pinboard(f: &Fixture<'_>, channel_version: &str) -> Value {
    json!({
        "kind": "module-reconciler",
        "versions": [
            {"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")},
            {"version": "1.1.0", "ref": f.reference("manifest", "1.1.0")},
        ],
        "channels": [{"name": "regular", "version": channel_version}],
        "config": {"manifest": PINBOARD},
        "grants": {"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mods-pins"]}]},
    })
}

/// The version of the pinboard on the host's own cluster.
fn pinboard_version(cp: &ControlPlane) -> Option<String> {
    let args = [
        "get",
        "configmap",
        "pinboard",
        "-n",
        "mods-pins",
        "-o",
        "json",
    ];
    let cm: Value = serde_json::from_str(&kubectl_ok(&cp.garden, &args).ok()?).ok()?;
    cm["data"]["version"].as_str().map(str::to_string)
}

/// A pinned version installs and stays while its channel moves (status shows both); a
/// version the Plugin does not list is an Error naming the field; unpinned, the module
/// follows its channel again. On the host's own cluster (single-cluster mode).
async fn pinned_versions(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-pins").await?;
    f.push("manifest", "manifest", "1.0.0")?;
    f.push("manifest", "manifest", "1.1.0")?;
    f.plugin("pinboard", pinboard(&f, "1.0.0")).await?;
    let extra = [
        "--module-target",
        "mods-pins/kubeconfig-doomed",
        "--module-target-gone-grace",
        "3s",
    ];
    let host = f.host_with("a", &extra);
    let set = |version: Option<&str>| {
        let mut module = json!({"name": "pinboard"});
        if let Some(v) = version {
            module["version"] = json!(v);
        }
        json!({"modules": [module]})
    };
    let runs = |s: &ModuleSet, version: &str, pinned: bool| {
        state_is(s, State::Ready)
            && module(s, "pinboard")
                .is_some_and(|m| m.version.as_deref() == Some(version) && m.pinned == pinned)
    };
    f.apply_set("pins", set(Some("1.0.0"))).await?;
    f.wait_set("pins", &host, "pinned 1.0.0", |s| runs(s, "1.0.0", true))
        .await?;
    // The channel moves on: the pin stays, and the status shows what the channel offers.
    f.plugin("pinboard", pinboard(&f, "1.1.0")).await?;
    f.wait_set("pins", &host, "the channel's 1.1.0 shown", |s| {
        runs(s, "1.0.0", true)
            && module(s, "pinboard").and_then(|m| m.channel_version.as_deref()) == Some("1.1.0")
    })
    .await?;
    if pinboard_version(cp).as_deref() != Some("1.0.0") {
        return Err(format!(
            "pinned 1.0.0, installed {:?}",
            pinboard_version(cp)
        ));
    }
    f.apply_set("pins", set(Some("9.9.9"))).await?;
    f.wait_set("pins", &host, "an unknown pin is an Error", |s| {
        module(s, "pinboard").is_some_and(|m| {
            m.state == State::Error
                && m.message
                    .as_deref()
                    .unwrap_or("")
                    .contains("modules[].version")
        })
    })
    .await?;
    f.apply_set("pins", set(None)).await?;
    f.wait_set("pins", &host, "unpinned: 1.1.0", |s| {
        runs(s, "1.1.0", false)
    })
    .await?;
    if pinboard_version(cp).as_deref() != Some("1.1.0") {
        return Err(format!("unpinned, installed {:?}", pinboard_version(cp)));
    }
    restricted_module(cp, &f, &host).await?;
    mandatory_module(cp, &f, &host).await?;
    unmanaged_means_unmanaged(cp, &f, &host).await?;
    a_gone_target_lets_go(cp, &f, &host).await
}

/// A set being deleted whose target Secret is gone finishes after the grace period
/// (3 s here), with a Warning Event saying what was left behind; its finalizer no longer
/// stays forever.
async fn a_gone_target_lets_go(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    let text = std::fs::read_to_string(&cp.runtime.kubeconfig).unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "kubeconfig-doomed"},
        "stringData": {"config": text},
    }))
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), &f.ns);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| e.to_string())?;
    // No modules: nothing is left on the shared target when the set is let go.
    let spec = json!({"target": {"secretName": "kubeconfig-doomed"}, "modules": []});
    f.apply_set("doomed", spec).await?;
    f.wait_set("doomed", host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    secrets
        .delete("kubeconfig-doomed", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    f.delete_set("doomed")
        .await
        .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    let events = f.events("TargetGone").await;
    if !events
        .iter()
        .any(|e| e.contains("kubeconfig-doomed") && e.contains("left behind"))
    {
        return Err(format!("no TargetGone Event naming the Secret: {events:?}"));
    }
    Ok(())
}

/// The Plugin `guard`, mandatory on sets labelled `guarded: yes`.
fn guard(f: &Fixture<'_>) -> Value {
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: guard, namespace: mods-pins}\n";
    let mut spec = json!({
        "kind": "module-reconciler",
        "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
        "channels": [{"name": "regular", "version": "1.0.0"}],
        "config": {"manifest": manifest},
        "grants": {"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mods-pins"]}]},
    });
    spec["mandatory"] =
        json!({"version": "1.0.0", "moduleSetSelector": {"matchLabels": {"guarded": "yes"}}});
    spec
}

/// A mandatory module lands on a matching set, reported apart from the set's own; the set
/// cannot unmanage it, and it survives the set dropping it; a set that does not match does
/// not get it; retired, it is uninstalled.
async fn mandatory_module(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    f.plugin("guard", guard(f)).await?;
    f.apply_set(
        "guarded",
        json!({"modules": [{"name": "guard", "managed": false}]}),
    )
    .await?;
    let labels = json!({"metadata": {"labels": {"guarded": "yes"}}});
    f.sets()
        .patch("guarded", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .map_err(|e| e.to_string())?;
    let guarded = |s: &ModuleSet| {
        let status = s.status.as_ref();
        status.is_some_and(|st| {
            st.mandatory_modules
                .iter()
                .any(|m| m.name == "guard" && m.state == State::Ready)
                && st.modules.iter().all(|m| m.name != "guard")
        })
    };
    f.wait_set("guarded", host, "guard installed, managed", guarded)
        .await?;
    let get = ["get", "configmap", "guard", "-n", "mods-pins", "-o", "json"];
    let cm = kubectl_ok(&cp.garden, &get)?;
    if !cm.contains("\"modules.tessera.dev/module\": \"guard\"") {
        return Err(format!("the mandatory module was not managed: {cm}"));
    }
    f.apply_set("guarded", json!({"modules": []})).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    f.wait_set("guarded", host, "guard stays", guarded).await?;
    kubectl_ok(&cp.garden, &get)?;
    let pins = f.sets().get("pins").await.map_err(|e| e.to_string())?;
    if pins.status.is_some_and(|s| !s.mandatory_modules.is_empty()) {
        return Err("a set that does not match got the mandatory module".into());
    }
    // Retired as an operator would: `kubectl patch` removing the field.
    let retire = json!({"spec": {"mandatory": null}});
    f.plugins()
        .patch("guard", &PatchParams::default(), &Patch::Merge(&retire))
        .await
        .map_err(|e| e.to_string())?;
    f.wait_set("guarded", host, "guard retired", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.mandatory_modules.is_empty() && st.modules.is_empty())
    })
    .await?;
    if kubectl_ok(&cp.garden, &get).is_ok() {
        return Err("a retired mandatory module was left installed".into());
    }
    f.sets()
        .delete("guarded", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())
        .map(drop)
}

/// `managed: false`: the module shows Unmanaged, its object loses Tessera's labels and
/// stays, a hand edit is no longer repaired, and deleting the set leaves it.
async fn unmanaged_means_unmanaged(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    // Positive control: while managed, a hand edit is put back.
    let managed = pinboard_version(cp).ok_or("no pinboard")?;
    let by_hand = [
        "patch",
        "configmap",
        "pinboard",
        "-n",
        "mods-pins",
        "--type=merge",
        "-p",
    ];
    kubectl_ok(
        &cp.garden,
        &[&by_hand[..], &[r#"{"data":{"version":"by hand"}}"#]].concat(),
    )?;
    eventually("a managed object repaired", LIMIT, || async {
        (pinboard_version(cp).as_deref() == Some(managed.as_str())).then_some(())
    })
    .await?;
    f.apply_set(
        "pins",
        json!({"modules": [{"name": "pinboard", "managed": false}]}),
    )
    .await?;
    f.wait_set("pins", host, "Unmanaged", |s| {
        state_is(s, State::Ready)
            && module(s, "pinboard").is_some_and(|m| m.state == State::Unmanaged)
    })
    .await?;
    let get = [
        "get",
        "configmap",
        "pinboard",
        "-n",
        "mods-pins",
        "-o",
        "json",
    ];
    let cm: Value = serde_json::from_str(&kubectl_ok(&cp.garden, &get)?).unwrap();
    let labels = &cm["metadata"]["labels"];
    if labels.get("modules.tessera.dev/module").is_some()
        || cm["metadata"]["annotations"]
            .get("modules.tessera.dev/set")
            .is_some()
    {
        return Err(format!(
            "an unmanaged object keeps Tessera's marks: {}",
            cm["metadata"]
        ));
    }
    let edit = r#"{"data":{"version":"by hand"}}"#;
    let patch = [
        "patch",
        "configmap",
        "pinboard",
        "-n",
        "mods-pins",
        "--type=merge",
        "-p",
        edit,
    ];
    kubectl_ok(&cp.garden, &patch)?;
    // Drift repair puts a managed object back within a second or two; this one stays.
    tokio::time::sleep(Duration::from_secs(5)).await;
    if pinboard_version(cp).as_deref() != Some("by hand") {
        return Err(format!(
            "an unmanaged object was repaired: {:?}",
            pinboard_version(cp)
        ));
    }
    f.delete_set("pins").await?;
    kubectl_ok(&cp.garden, &get).map(drop)
}

/// A module offered only to sets labelled `tier: premium`: an unlabelled set asking for it
/// gets an Error naming the selector and nothing installed; labelled, it installs.
async fn restricted_module(cp: &ControlPlane, f: &Fixture<'_>, host: &Host) -> Result {
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: premium, namespace: mods-pins}\n";
    f.plugin("premium-board", json!({
        "kind": "module-reconciler",
        "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
        "channels": [{"name": "regular", "version": "1.0.0"}],
        "config": {"manifest": manifest},
        "grants": {"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mods-pins"]}]},
        "moduleSetSelector": {"matchLabels": {"tier": "premium"}},
    }))
    .await?;
    f.apply_set("premium", json!({"modules": [{"name": "premium-board"}]}))
        .await?;
    f.wait_set("premium", host, "refused: not premium", |s| {
        module(s, "premium-board").is_some_and(|m| {
            m.state == State::Error && m.message.as_deref().unwrap_or("").contains("tier=premium")
        })
    })
    .await?;
    let installed = || {
        kubectl_ok(
            &cp.garden,
            &["get", "configmap", "premium", "-n", "mods-pins"],
        )
    };
    if installed().is_ok() {
        return Err("a restricted module was installed on a set that does not match".into());
    }
    let labels = json!({"metadata": {"labels": {"tier": "premium"}}});
    f.sets()
        .patch("premium", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .map_err(|e| e.to_string())?;
    f.wait_set("premium", host, "premium: Ready", |s| {
        state_is(s, State::Ready)
    })
    .await?;
    installed().map(drop)?;
    f.sets()
        .delete("premium", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The Plugin `winboard`: 1.1.0 needs downtime; `regular` runs `channel_version`. Each set
/// names its ConfigMap (`values.name`), so two sets can install it side by side.
fn winboard(f: &Fixture<'_>, channel_version: &str) -> Value {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '${name}', namespace: mods-window}\ndata: {version: '${version}'}\n";
    json!({
        "kind": "module-reconciler",
        "versions": [
            {"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")},
            {"version": "1.1.0", "ref": f.reference("manifest", "1.1.0"), "requiresDowntime": true},
        ],
        "channels": [{"name": "regular", "version": channel_version}],
        "config": {"manifest": manifest, "values": {"name": "unnamed"}},
        "grants": {"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mods-window"]}]},
    })
}

/// An upgrade to a version that needs downtime waits for the set's maintenance window
/// (opening 45 s after the host starts), reported as pending, while a set that
/// skips windows upgrades at once.
async fn maintenance_window(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-window").await?;
    f.push("manifest", "manifest", "1.0.0")?;
    f.push("manifest", "manifest", "1.1.0")?;
    f.plugin("winboard", winboard(&f, "1.0.0")).await?;
    // Far enough for the host to start and both sets to settle on a slow machine.
    let opens = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(45);
    let time = |t: jiff::Timestamp| {
        t.to_zoned(jiff::tz::TimeZone::UTC)
            .time()
            .strftime("%H:%M:%S")
            .to_string()
    };
    let closes = opens + jiff::SignedDuration::from_secs(7200);
    let windows = f.dir.path().join("windows.yaml");
    let text = format!(
        "sets:\n  mods-window/patient: [{{begin: '{}', end: '{}'}}]\n",
        time(opens),
        time(closes)
    );
    std::fs::write(&windows, text).unwrap();
    let host = f.host_with(
        "a",
        &["--maintenance-windows", &windows.display().to_string()],
    );
    let set = |name: &str, skip: bool| json!({"skipMaintenanceWindows": skip, "modules": [{"name": "winboard", "config": {"values": {"name": name}}}]});
    let at = |s: &ModuleSet, version: &str| {
        module(s, "winboard").and_then(|m| m.version.as_deref()) == Some(version)
            && state_is(s, State::Ready)
    };
    f.apply_set("patient", set("patient", false)).await?;
    f.apply_set("eager", set("eager", true)).await?;
    f.wait_set("patient", &host, "1.0.0", |s| at(s, "1.0.0"))
        .await?;
    f.wait_set("eager", &host, "1.0.0", |s| at(s, "1.0.0"))
        .await?;
    f.plugin("winboard", winboard(&f, "1.1.0")).await?;
    f.wait_set("eager", &host, "eager: 1.1.0 at once", |s| at(s, "1.1.0"))
        .await?;
    f.wait_set("patient", &host, "patient: pending", |s| {
        at(s, "1.0.0") && module(s, "winboard").is_some_and(|m| m.pending_upgrade.is_some())
    })
    .await?;
    if jiff::Timestamp::now() >= opens {
        return Err(
            "the window opened before the pending upgrade was seen; the phases took too long"
                .into(),
        );
    }
    f.wait_set("patient", &host, "patient: 1.1.0 in the window", |s| {
        at(s, "1.1.0")
    })
    .await?;
    let early = opens.duration_since(jiff::Timestamp::now());
    if early > jiff::SignedDuration::from_secs(1) {
        return Err(format!("upgraded {early:?} before the window opened"));
    }
    let args = [
        "get",
        "configmap",
        "patient",
        "-n",
        "mods-window",
        "-o",
        "jsonpath={.data.version}",
    ];
    match kubectl_ok(&cp.garden, &args)?.trim() {
        "1.1.0" => Ok(()),
        other => Err(format!("patient's ConfigMap says {other}")),
    }
}

/// Single-cluster mode: a ModuleSet without a target installs into the host's own cluster.
async fn single_cluster(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-local").await?;
    f.push("availability", "availability", "1.0.0")?;
    f.plugin(
        "availability-local",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("availability", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"namespace": "mods-local"},
            "grants": {"write": [
                {"apiGroups": ["scheduling.k8s.io"], "kinds": ["PriorityClass"], "clusterScoped": true,
                    "names": ["availability-local-critical"]},
                {"apiGroups": ["policy"], "kinds": ["PodDisruptionBudget"], "namespaces": ["mods-local"]},
            ]},
        }),
    )
    .await?;
    let host = f.host("a");
    f.apply_set(
        "local",
        json!({"modules": [{"name": "availability-local", "config": {
        "budgets": [{"name": "local", "matchLabels": {"app": "local"}}]}}]}),
    )
    .await?;
    f.wait_set("local", &host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    kubectl_ok(
        &cp.garden,
        &[
            "get",
            "poddisruptionbudgets.v1beta1.policy",
            "local",
            "-n",
            "mods-local",
        ],
    )?;
    kubectl_ok(
        &cp.garden,
        &["get", "priorityclass", "availability-local-critical"],
    )?;
    local_drift_and_removal(cp, &f).await
}

/// Drift on the local cluster is repaired too; deleting the set removes the module's
/// objects and inventory there.
async fn local_drift_and_removal(cp: &ControlPlane, f: &Fixture<'_>) -> Result {
    kubectl_ok(
        &cp.garden,
        &["delete", "priorityclass", "availability-local-critical"],
    )?;
    eventually(
        "PriorityClass restored",
        Duration::from_secs(20),
        || async {
            cp.garden
                .kubectl(&["get", "priorityclass", "availability-local-critical"])
                .status
                .success()
                .then_some(())
        },
    )
    .await?;
    f.delete_set("local").await?;
    if cp
        .garden
        .kubectl(&[
            "get",
            "poddisruptionbudgets.v1beta1.policy",
            "local",
            "-n",
            "mods-local",
        ])
        .status
        .success()
    {
        return Err("PDB left on the local cluster".into());
    }
    let cms: Api<ConfigMap> = Api::namespaced(f.client.clone(), "tessera-system");
    if cms
        .get_opt("modules.mods-local.local")
        .await
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Err("inventory left".into());
    }
    Ok(())
}

/// Plugin `name`: the manifest plugin with the dashboard page in `namespace`, granted
/// exactly that.
async fn page_plugin(f: &Fixture<'_>, name: &str, namespace: &str) -> Result {
    f.plugin(
        name,
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"manifest": DASHBOARD, "values": {"namespace": namespace, "title": "Overview"}},
            "grants": {"write": [
                {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true, "names": [namespace]},
                {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": [namespace]},
            ]},
        }),
    )
    .await
}

/// A token of ServiceAccount `default/<name>` on the target, bound to cluster-admin.
async fn service_account_token(cp: &ControlPlane, name: &str) -> Result<String> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::PostParams;
    let client = tessera_tests::probe::client_for(&cp.runtime.kubeconfig).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
    let account = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .map_err(|e| format!("ServiceAccount {name}: {e}"))?;
    let subject = format!("--serviceaccount=default:{name}");
    kubectl_ok(
        &cp.runtime,
        &[
            "create",
            "clusterrolebinding",
            name,
            "--clusterrole=cluster-admin",
            &subject,
        ],
    )?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("TokenRequest {name}: {e}"))?;
    issued
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| format!("TokenRequest {name}: no token issued"))
}

/// Point the fixture's target Secret at the target with `token`.
async fn set_target_token(f: &Fixture<'_>, token: &str) -> Result {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Patch, PatchParams};
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\n",
        f.cp.runtime.server
    );
    let patch = json!({"stringData": {"config": kubeconfig}});
    Api::<Secret>::namespaced(f.client.clone(), &f.ns)
        .patch(
            "kubeconfig-target",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| format!("target Secret: {e}"))?;
    Ok(())
}

/// After a rotation: the drift watch started again with the new credentials, and the host
/// did not spin on the old ones.
fn rotation_left_no_trace(host: &Host) -> Result {
    // The drift watch was started again with the new credentials.
    let watches = host
        .logs()
        .lines()
        .filter(|l| l.contains("watching module objects for drift") && l.contains("ConfigMap"))
        .count();
    if watches < 2 {
        return Err(format!(
            "the ConfigMap watch started {watches} times, expected a restart with the new credentials"
        ));
    }
    let refused = host
        .logs()
        .lines()
        // Not any "401": timestamps and digests contain it too.
        .filter(|l| l.contains("Unauthorized") || l.contains("HTTP 401"))
        .count();
    println!("credentials_rotate: {refused} log lines about refused credentials");
    if refused > 5 {
        return Err(format!(
            "{refused} lines about 401s:\n{}",
            tail(&host.logs(), 20)
        ));
    }
    Ok(())
}

/// The target's kubeconfig Secret is rotated and the old token revoked: drift repair goes
/// on with the new credentials, and the host does not spin on 401s.
async fn credentials_rotate(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-rotate").await?;
    set_target_token(&f, &service_account_token(cp, "rotate-a").await?).await?;
    f.push("manifest", "manifest", "1.0.0")?;
    page_plugin(&f, "rotate-page", "rotate").await?;
    let log = "info,kube=warn,tower=warn,hyper=warn,tessera::controllers::moduleset::drift=debug";
    let host = f.host_with("a", &["--log", log]);
    let spec = json!({"target": {"secretName": "kubeconfig-target"}, "modules": [{"name": "rotate-page"}]});
    f.apply_set("rot", spec).await?;
    f.wait_set("rot", &host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    // Rotation: the Secret gets new credentials, the old ones are revoked.
    set_target_token(&f, &service_account_token(cp, "rotate-b").await?).await?;
    kubectl_ok(
        &cp.runtime,
        &["delete", "serviceaccount", "rotate-a", "-n", "default"],
    )?;
    for round in 0..2 {
        kubectl_ok(
            &cp.runtime,
            &[
                "patch",
                "configmap",
                "dashboard",
                "-n",
                "rotate",
                "--type=merge",
                "-p",
                r#"{"data":{"title":"hacked"}}"#,
            ],
        )?;
        eventually(
            &format!("drift repaired after rotation ({round})"),
            LIMIT,
            || async {
                let page = target_get(cp, &["configmap", "dashboard", "-n", "rotate"])?;
                (page["data"]["title"] == "Overview").then_some(())
            },
        )
        .await
        .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    rotation_left_no_trace(&host)?;
    f.sets()
        .delete("rot", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    eventually("rot gone", LIMIT, || async {
        f.sets().get_opt("rot").await.ok()?.is_none().then_some(())
    })
    .await
    .map_err(|e| {
        let status = futures::executor::block_on(f.sets().get("rot"))
            .ok()
            .and_then(|s| serde_json::to_string_pretty(&s.status).ok());
        format!("{e}\nstatus: {status:?}\n{}", tail(&host.logs(), 30))
    })?;
    Ok(())
}

/// A target answering 500 for a while: the set reports the error, retries at growing
/// intervals with jitter, logs it a bounded number of times, and recovers by itself.
/// A target Secret `name` in the fixture's namespace for the host's own cluster reached
/// through the simulator, which can fail or hold its requests.
async fn sim_target_secret(cp: &ControlPlane, f: &Fixture<'_>, name: &str) -> Result {
    let text = std::fs::read_to_string(&cp.kubeconfig).map_err(|e| e.to_string())?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name}, "stringData": {"config": text},
    }))
    .unwrap();
    Api::<Secret>::namespaced(f.client.clone(), &f.ns)
        .create(&PostParams::default(), &secret)
        .await
        .map(drop)
        .map_err(|e| format!("Secret: {e}"))
}

async fn target_answers_500(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-flaky").await?;
    sim_target_secret(cp, &f, "kubeconfig-flaky").await?;
    f.push("manifest", "manifest", "1.0.0")?;
    page_plugin(&f, "flaky-page", "flaky500").await?;
    cp.sim_outage_any("flaky500", Some(500));
    let target = format!("{}/kubeconfig-flaky", f.ns);
    let log = "info,kube=warn,tower=warn,hyper=warn,tessera::controllers::kit=debug";
    let host = f.bare_host("a", &["--module-target", &target, "--log", log]);
    let spec =
        json!({"target": {"secretName": "kubeconfig-flaky"}, "modules": [{"name": "flaky-page"}]});
    f.apply_set("flaky", spec).await?;
    f.wait_set("flaky", &host, "Error", |s| state_is(s, State::Error))
        .await?;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let object = "ModuleSet/mods-flaky/flaky";
    let lines: Vec<String> = host
        .logs()
        .lines()
        .filter(|l| l.contains(object) && !l.contains("\"level\":\"DEBUG\""))
        .map(str::to_string)
        .collect();
    let delays: Vec<f64> = host
        .logs()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["object"] == object)
        .filter_map(|v| v["fields"]["retry_in_s"].as_f64())
        .collect();
    println!(
        "target_answers_500: {} retries in ~35 s, delays {delays:?} s, {} log lines above DEBUG",
        delays.len(),
        lines.len()
    );
    if lines.len() > 5 {
        return Err(format!("{} log lines:\n{}", lines.len(), lines.join("\n")));
    }
    if delays.len() < 4 || delays.windows(2).take(3).any(|w| w[1] <= w[0]) {
        return Err(format!("retries should back off: {delays:?}"));
    }
    cp.sim_outage_any("flaky500", None);
    f.wait_set("flaky", &host, "Ready after the outage", |s| {
        state_is(s, State::Ready)
    })
    .await?;
    Ok(())
}

/// The CRD both sharing modules install; `widgets` adds a short name to it.
fn board_crd(short_names: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: boards.share.tessera.dev}}
spec:
  group: share.tessera.dev
  scope: Namespaced
  names: {{plural: boards, singular: board, kind: Board{short_names}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"
    )
}

/// The CRD `boards.share.tessera.dev` as the host's own cluster has it (field managers
/// included, which kubectl leaves out).
async fn board_crd_live(f: &Fixture<'_>) -> Option<Value> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    let crd = crds.get_opt("boards.share.tessera.dev").await.ok()??;
    serde_json::to_value(crd).ok()
}

/// Who holds the shared CRD (`<set>/<module>` from its labels) and who shares it.
fn board_holders(crd: &Value) -> (String, String) {
    let meta = &crd["metadata"];
    let holder = format!(
        "{}/{}",
        meta["annotations"]["modules.tessera.dev/set"]
            .as_str()
            .unwrap_or("?"),
        meta["labels"]["modules.tessera.dev/module"]
            .as_str()
            .unwrap_or("?"),
    );
    let sharers = meta["annotations"]["modules.tessera.dev/shared-by"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (holder, sharers)
}

/// One CRD wanted by two modules of two sets (created at once): one holds it, the other
/// is listed as sharing it; the holder's set dropping its module hands the CRD (same uid,
/// a custom resource in it kept) to the other, whose content replaces the earlier holder's;
/// the last one removes it. On the host's own cluster (single-cluster mode).
async fn shared_crd(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-share").await?;
    f.push("manifest", "manifest", "1.0.0")?;
    for (name, short) in [("board-crds", ""), ("widgets", ", shortNames: [wb]")] {
        let spec = json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"manifest": board_crd(short)},
            "grants": crd_grant("boards.share.tessera.dev"),
        });
        f.plugin(name, spec).await?;
    }
    let host = f.host("a");
    let set = |module: Option<&str>| json!({"modules": module.map(|m| json!({"name": m})).into_iter().collect::<Vec<_>>()});
    let (alpha, beta) = futures::join!(
        f.apply_set("alpha", set(Some("board-crds"))),
        f.apply_set("beta", set(Some("widgets")))
    );
    alpha.and(beta)?;
    for name in ["alpha", "beta"] {
        f.wait_set(name, &host, "Ready", |s| state_is(s, State::Ready))
            .await?;
    }
    let crd = board_crd_live(&f).await.ok_or("no shared CRD")?;
    let (holder, sharers) = board_holders(&crd);
    let both = ["mods-share/alpha/board-crds", "mods-share/beta/widgets"];
    let Some(other) = both.iter().find(|w| **w != holder) else {
        return Err(format!("held by {holder}, not one of {both:?}"));
    };
    if sharers != *other {
        return Err(format!(
            "held by {holder}, shared by {sharers:?}, not {other}"
        ));
    }
    let board = "apiVersion: share.tessera.dev/v1\nkind: Board\nmetadata: {name: b1, namespace: mods-share}\n";
    apply_yaml(cp, board)?;
    shared_crd_handed_over(cp, &f, &host, &crd, &holder, other).await
}

/// The first module comes back and joins as a sharer; the set now holding the CRD is
/// deleted while the Board still exists (not blocking: the CRD stays) and the CRD goes back.
async fn shared_crd_handed_back(
    cp: &ControlPlane,
    f: &Fixture<'_>,
    host: &Host,
    holder: &str,
    other: &str,
) -> Result {
    let holder_set = holder.split('/').nth(1).unwrap();
    let module = holder.rsplit('/').next().unwrap();
    f.apply_set(holder_set, json!({"modules": [{"name": module}]}))
        .await?;
    f.wait_set(holder_set, host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let live = board_crd_live(f).await.ok_or("no shared CRD")?;
    if board_holders(&live) != (other.to_string(), holder.to_string()) {
        return Err(format!(
            "{holder} did not join {other}: {:?}",
            board_holders(&live)
        ));
    }
    f.delete_set(other.split('/').nth(1).unwrap()).await?;
    let live = board_crd_live(f)
        .await
        .ok_or("the shared CRD went with one set")?;
    if board_holders(&live) != (holder.to_string(), String::new()) {
        return Err(format!(
            "not handed back to {holder}: {:?}",
            board_holders(&live)
        ));
    }
    kubectl_ok(&cp.garden, &["get", "board", "b1", "-n", "mods-share"]).map(drop)
}

/// `kubectl apply` `yaml` on the host's own cluster.
fn apply_yaml(cp: &ControlPlane, yaml: &str) -> Result {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("object.yaml");
    std::fs::write(&file, yaml).unwrap();
    kubectl_ok(&cp.garden, &["apply", "-f", file.to_str().unwrap()]).map(drop)
}

/// The holder's set drops its module: the CRD stays (same uid, the Board in it), held by
/// the other module with its own content; then the last set goes and takes the CRD along.
async fn shared_crd_handed_over(
    cp: &ControlPlane,
    f: &Fixture<'_>,
    host: &Host,
    crd: &Value,
    holder: &str,
    other: &str,
) -> Result {
    let holder_set = holder.split('/').nth(1).unwrap();
    f.apply_set(holder_set, json!({"modules": []})).await?;
    f.wait_set(holder_set, host, "Ready without the module", |s| {
        state_is(s, State::Ready) && s.status.as_ref().is_some_and(|st| st.modules.is_empty())
    })
    .await?;
    let uid = crd["metadata"]["uid"].clone();
    let widgets_hold = other.ends_with("/widgets");
    let handed = eventually("the CRD handed over", Duration::from_secs(30), || async {
        let live = board_crd_live(f).await?;
        let earlier_holders = live["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .filter(|m| m.starts_with("tessera-module-"))
            .count();
        let short = live["spec"]["names"]["shortNames"] == json!(["wb"]);
        let done = live["metadata"]["uid"] == uid
            && board_holders(&live) == (other.to_string(), String::new())
            && short == widgets_hold
            && earlier_holders == 1;
        done.then_some(())
    })
    .await;
    if let Err(e) = handed {
        let live = board_crd_live(f).await;
        return Err(format!(
            "{e}: not handed to {other}: {live:#?}\n{}",
            tail(&host.logs(), 20)
        ));
    }
    kubectl_ok(&cp.garden, &["get", "board", "b1", "-n", "mods-share"])?;
    shared_crd_handed_back(cp, f, host, holder, other).await?;
    kubectl_ok(&cp.garden, &["delete", "board", "b1", "-n", "mods-share"])?;
    f.delete_set(holder_set).await?;
    if board_crd_live(f).await.is_some() {
        return Err("the last set deleted, the shared CRD is still there".into());
    }
    Ok(())
}

/// A module writing the ConfigMap `${name}` into `mods-turns`.
async fn board_plugin(f: &Fixture<'_>, plugin: &str) -> Result {
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '${name}', namespace: mods-turns}\ndata: {board: up}\n";
    f.plugin(
        plugin,
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "1.0.0", "ref": f.reference("manifest", "1.0.0")}],
            "channels": [{"name": "regular", "version": "1.0.0"}],
            "config": {"manifest": manifest, "values": {"name": "board"}},
            "grants": {"write": [{"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["mods-turns"]}]},
        }),
    )
    .await
}

/// One target cluster hangs (requests for its modules' objects are held): with two
/// workers and one turn per target, its four sets hold one worker at most, and a set on
/// another cluster still becomes Ready; once the cluster answers again, its sets do too.
/// (With `--module-target-concurrency 0` both workers hang and `calm` never gets one.)
/// Each hanging set's second module does not wait behind its first: independent modules
/// of a set run at once.
async fn a_hanging_target_cannot_starve(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "mods-turns").await?;
    sim_target_secret(cp, &f, "kubeconfig-hang").await?;
    f.push("manifest", "manifest", "1.0.0")?;
    board_plugin(&f, "turn-board").await?;
    board_plugin(&f, "turn-board-b").await?;
    // 999: the simulator holds requests naming a `hang-board-*` ConfigMap until lifted.
    cp.sim_outage_any("hang-board", Some(999));
    let extra = [
        "--module-target",
        "mods-turns/kubeconfig-hang",
        "--workers",
        "2",
        "--module-target-concurrency",
        "1",
    ];
    let host = f.host_with("a", &extra);
    let board = |name: &str| json!({"name": "turn-board", "config": {"values": {"name": name}}});
    for i in 1..=4 {
        let side = json!({"name": "turn-board-b", "config": {"values": {"name": format!("side-board-{i}")}}});
        let spec = json!({"target": {"secretName": "kubeconfig-hang"},
            "modules": [board(&format!("hang-board-{i}")), side]});
        f.apply_set(&format!("hang-{i}"), spec).await?;
    }
    // Not a measurement: room for both workers to take up the hanging sets first.
    tokio::time::sleep(Duration::from_secs(5)).await;
    f.apply_set("calm", json!({"modules": [board("calm-board")]}))
        .await?;
    let waited = f
        .wait_set("calm", &host, "Ready next to a hanging cluster", |s| {
            state_is(s, State::Ready)
        })
        .await;
    let sides = eventually(
        "a set's second module to run while its first hangs",
        LIMIT,
        || async {
            let args = ["get", "configmaps", "-n", "mods-turns", "-o", "name"];
            let names = kubectl_ok(&cp.garden, &args).ok()?;
            names.contains("configmap/side-board-").then_some(())
        },
    )
    .await;
    cp.sim_outage_any("hang-board", None);
    waited?;
    sides?;
    for i in 1..=4 {
        f.wait_set(&format!("hang-{i}"), &host, "Ready once it answers", |s| {
            state_is(s, State::Ready)
        })
        .await?;
    }
    for set in ["calm", "hang-1", "hang-2", "hang-3", "hang-4"] {
        f.delete_set(set).await?;
    }
    Ok(())
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    let script = Script {
        create_ms: 1000,
        reconcile_ms: 500,
        delete_ms: 500,
        shoots: BTreeMap::new(),
    };
    // Module Deployments really start on the target's node.
    let options = PlaneOptions {
        node: Some(NodeOn::Runtime),
        ..PlaneOptions::default()
    };
    scenarios::run_with(
        &sim,
        &script,
        &options,
        vec![
            ("cli_one_shot", |_| Box::pin(cli_one_shot())),
            ("controller_lifecycle", |cp| {
                Box::pin(controller_lifecycle(cp))
            }),
            ("single_cluster", |cp| Box::pin(single_cluster(cp))),
            ("pinned_and_restricted", |cp| Box::pin(pinned_versions(cp))),
            ("maintenance_window", |cp| Box::pin(maintenance_window(cp))),
            ("shared_crd", |cp| Box::pin(shared_crd(cp))),
            ("a_hanging_target_cannot_starve", |cp| {
                Box::pin(a_hanging_target_cannot_starve(cp))
            }),
            ("credentials_rotate", |cp| Box::pin(credentials_rotate(cp))),
            ("target_answers_500", |cp| Box::pin(target_answers_500(cp))),
            ("access_target", |cp| Box::pin(access::access_target(cp))),
            ("idle_targets", |cp| Box::pin(clusters::idle_targets(cp))),
        ],
    )
}

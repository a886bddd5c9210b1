//! The operator against real API servers and the Gardener simulator: one local control
//! plane for the whole binary, one namespace and one host per scenario.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tessera::crd::{Runtime, RuntimeKubeconfig, RuntimeState};
use tessera::gardener::shoot_resource;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::{Failure, Script, ShootScript};
use tessera_tests::probe::{client_for, eventually, http_get, tail};
use tessera_tests::rollout::metric_sum;

#[path = "operator/access.rs"]
mod access;
use access::runtime_access;
#[path = "operator/backlog.rs"]
mod backlog;
use backlog::backlog_is_no_stall;
#[path = "operator/budget.rs"]
mod budget;
use budget::gardener_budget;
#[path = "operator/sharding.rs"]
mod sharding;
use sharding::shards_split_and_hand_over;
#[path = "operator/structured_auth.rs"]
mod structured_auth;
use structured_auth::structured_authentication;
#[path = "operator/landscape.rs"]
mod landscape;
use landscape::kim_landscape;
#[path = "operator/takeover.rs"]
mod takeover;
use takeover::kim_takeover;

use tessera_tests::Result;
use tessera_tests::scenario;

/// Both takeover scenarios in one trial, one after the other: their hosts take over KIM's
/// OpenIDConnect objects, and the scenarios share one runtime cluster (a landscape has one
/// per Runtime), so running them side by side would let one host claim the other's.
async fn kim(cp: &ControlPlane) -> Result {
    kim_takeover(cp).await?;
    kim_landscape(cp).await
}

const LIMIT: Duration = Duration::from_secs(60);

fn script() -> Script {
    let mut shoots = BTreeMap::new();
    shoots.insert(
        "retry".to_string(),
        ShootScript {
            create: vec![failure("ERR_INFRA_QUOTA_EXCEEDED")],
            ..ShootScript::default()
        },
    );
    shoots.insert(
        "fatal".to_string(),
        ShootScript {
            create: vec![failure("ERR_INFRA_UNAUTHORIZED")],
            ..ShootScript::default()
        },
    );
    shoots.insert(
        "expiry".to_string(),
        ShootScript {
            admin_kubeconfig_max_seconds: Some(20),
            ..ShootScript::default()
        },
    );
    shoots.insert(
        "foreignca".to_string(),
        ShootScript {
            foreign_ca: true,
            ..ShootScript::default()
        },
    );
    // Deletions Gardener fails for good, with a code that allows force deletion.
    for name in ["delretry", "delforce"] {
        shoots.insert(
            name.to_string(),
            ShootScript {
                delete: vec![Failure {
                    state: Some("Failed".into()),
                    ..Failure::of(&["ERR_CLEANUP_CLUSTER_RESOURCES"])
                }],
                ..ShootScript::default()
            },
        );
    }
    Script {
        create_ms: 1500,
        reconcile_ms: 800,
        delete_ms: 800,
        shoots,
    }
}

/// A failure Gardener does not retry by itself (both codes used here are non-retryable for
/// the gardenlet, so the state is `Failed` either way).
fn failure(code: &str) -> Failure {
    Failure::of(&[code])
}

/// A scenario's view of the control plane.
struct Scenario<'a> {
    cp: &'a ControlPlane,
    client: Client,
    runtime_client: Client,
    ns: String,
}

impl<'a> Scenario<'a> {
    async fn new(cp: &'a ControlPlane, ns: &str) -> Self {
        let client = client_for(&cp.garden.kubeconfig).await;
        let runtime_client = client_for(&cp.runtime.kubeconfig).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let _ = namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap(),
            )
            .await;
        Self {
            cp,
            client,
            runtime_client,
            ns: ns.to_string(),
        }
    }

    fn host(&self, name: &str, extra: &[&str]) -> Host {
        let mut args = vec![
            "--namespace",
            &self.ns,
            "--requeue-retry",
            "1s",
            "--requeue-error",
            "1s",
            "--lease-duration",
            "6s",
        ];
        args.extend_from_slice(extra);
        self.cp.host(&format!("{}-{name}", self.ns), &args)
    }

    fn runtimes(&self) -> Api<Runtime> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn shoots(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "garden-kyma-dev", &shoot_resource())
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The AWS example with a new name and Shoot name.
    fn manifest(&self, id: &str, shoot: &str) -> Value {
        let text =
            std::fs::read_to_string(tessera_tests::workspace().join("examples/runtime-aws.yaml"))
                .unwrap();
        let mut doc: Value = serde_saphyr::from_str(&text).unwrap();
        doc["metadata"] =
            json!({ "name": id, "namespace": self.ns, "labels": doc["metadata"]["labels"] });
        doc["spec"]["shoot"]["name"] = shoot.into();
        doc
    }

    async fn create(&self, doc: &Value) -> Result {
        let runtime: Runtime = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
        self.runtimes()
            .create(&PostParams::default(), &runtime)
            .await
            .map_err(|e| format!("create Runtime: {e}"))?;
        Ok(())
    }

    async fn state(&self, id: &str) -> Option<RuntimeState> {
        self.runtimes().get(id).await.ok()?.status?.state
    }

    async fn wait_state(&self, id: &str, want: RuntimeState, host: &Host) -> Result<Runtime> {
        eventually(&format!("Runtime {id} {want:?}"), LIMIT, || async {
            let rt = self.runtimes().get(id).await.ok()?;
            (rt.status.as_ref()?.state == Some(want)).then_some(rt)
        })
        .await
        .map_err(|e| {
            let status = futures::executor::block_on(self.runtimes().get(id))
                .ok()
                .and_then(|r| serde_json::to_string_pretty(&r.status).ok());
            format!(
                "{e}\nstatus: {status:?}\nhost log tail:\n{}",
                tail(&host.logs(), 30)
            )
        })
    }

    /// Gardener refused no request about Shoot `shoot` (the host never sends what Gardener
    /// refuses); the refusals recorded otherwise.
    fn no_refusals(&self, shoot: &str) -> Result {
        match self.cp.refusals(shoot).as_slice() {
            [] => Ok(()),
            refused => Err(format!(
                "Gardener refused requests about Shoot {shoot}: {refused:?}"
            )),
        }
    }

    async fn shoots_of(&self, id: &str) -> Vec<DynamicObject> {
        self.shoots()
            .list(&ListParams::default().labels(&format!("tessera.dev/runtime={id}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }
}

fn condition<'r>(rt: &'r Runtime, type_: &str) -> Option<&'r tessera::crd::Condition> {
    rt.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

async fn create_to_ready(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-create").await;
    let host = s.host(
        "a",
        &[
            "--runtime-namespace",
            "kyma-system",
            "--runtime-namespace",
            CREATED_NAMESPACE,
        ],
    );
    s.create(&s.manifest("rt-create", "create")).await?;
    let rt = s
        .wait_state("rt-create", RuntimeState::Ready, &host)
        .await?;
    ready_status(&rt)?;
    shoot_applied(&s, &rt).await?;
    secret_reaches_runtime(&s).await?;
    namespaces_created(&s).await?;
    metrics_and_health(&host).await?;
    s.no_refusals("create")
}

/// A namespace only this scenario asks for (the runtime cluster is shared by all).
const CREATED_NAMESPACE: &str = "t-create-system";

/// The runtime namespaces the host was told to make exist there, the one it made labelled
/// with the Runtime.
async fn namespaces_created(s: &Scenario<'_>) -> Result {
    let namespaces: Api<Namespace> = Api::all(s.runtime_client.clone());
    let made = namespaces
        .get(CREATED_NAMESPACE)
        .await
        .map_err(|e| format!("namespace {CREATED_NAMESPACE}: {e}"))?;
    if made.labels().get("tessera.dev/runtime").map(String::as_str) != Some("rt-create") {
        return Err(format!("namespace labels: {:?}", made.labels()));
    }
    namespaces
        .get("kyma-system")
        .await
        .map(drop)
        .map_err(|e| format!("namespace kyma-system: {e}"))
}

/// Status of a Ready Runtime: its Shoot, the plugins and contract, the conditions.
fn ready_status(rt: &Runtime) -> Result {
    let status = rt.status.clone().unwrap();
    if status.shoot.as_ref().map(|r| r.name.as_str()) != Some("create") {
        return Err(format!("status.shoot: {:?}", status.shoot));
    }
    if status.plugins.len() != 17 || !status.plugins[0].digest.starts_with("sha256:") {
        return Err(format!("status.plugins: {:?}", status.plugins));
    }
    if status.contract_version.as_deref() != Some("0.1.0") || status.shoot_hash.is_none() {
        return Err(format!("contract/hash: {status:?}"));
    }
    if status.observed_generation != rt.metadata.generation {
        return Err("observedGeneration".into());
    }
    for c in [
        "Provisioned",
        "KubeconfigReady",
        "KymaSystemNSCreated",
        "Configured",
    ] {
        let cond = condition(rt, c).ok_or(format!("condition {c} missing"))?;
        if cond.status != tessera::crd::ConditionStatus::True {
            return Err(format!("condition {c}: {cond:?}"));
        }
    }
    Ok(())
}

/// The Shoot: labelled, generation annotation, the provider.
async fn shoot_applied(s: &Scenario<'_>, rt: &Runtime) -> Result {
    let shoots = s.shoots_of("rt-create").await;
    if shoots.len() != 1 {
        return Err(format!("{} Shoots", shoots.len()));
    }
    let generation = shoots[0]
        .annotations()
        .get("tessera.dev/runtime-generation")
        .cloned();
    if generation != rt.metadata.generation.map(|g| g.to_string()) {
        return Err(format!("runtime-generation annotation {generation:?}"));
    }
    if shoots[0].data["spec"]["provider"]["type"] != "aws" {
        return Err("Shoot provider".into());
    }
    Ok(())
}

/// The Secret works against the runtime cluster, where the admin binding exists; the
/// RuntimeKubeconfig has an expiry.
async fn secret_reaches_runtime(s: &Scenario<'_>) -> Result {
    let secret = s
        .secrets()
        .get("kubeconfig-rt-create")
        .await
        .map_err(|e| e.to_string())?;
    if secret
        .labels()
        .get("tessera.dev/kubeconfig")
        .map(String::as_str)
        != Some("true")
    {
        return Err("Secret label".into());
    }
    let config = secret.data.unwrap()["config"].0.clone();
    let kc =
        Kubeconfig::from_yaml(std::str::from_utf8(&config).unwrap()).map_err(|e| e.to_string())?;
    let runtime_client = Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let crbs: Api<ClusterRoleBinding> = Api::all(runtime_client);
    let bound = crbs
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=tessera"))
        .await
        .map_err(|e| e.to_string())?;
    if !bound.items.iter().any(|b| {
        b.subjects
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s.name == "admin@example.com"))
            && b.role_ref.name == "cluster-admin"
    }) {
        return Err("no admin ClusterRoleBinding for admin@example.com".into());
    }
    let rkc: Api<RuntimeKubeconfig> = Api::namespaced(s.client.clone(), &s.ns);
    let rkc = rkc.get("rt-create").await.map_err(|e| e.to_string())?;
    if rkc.status.and_then(|s| s.expiry).is_none() {
        return Err("RuntimeKubeconfig has no expiry".into());
    }
    Ok(())
}

/// Metrics of the Ready Runtime, and the health endpoints.
async fn metrics_and_health(host: &Host) -> Result {
    let addr = host
        .metrics_addr(Duration::from_secs(5))
        .ok_or("no metrics address logged")?;
    let wanted = [
        r#"tessera_runtime_state{namespace="t-create",runtime="rt-create",state="Ready"} 1"#,
        r#"tessera_kubeconfig_expiration_timestamp_seconds{namespace="t-create",runtime="rt-create"}"#,
        "tessera_reconcile_duration_seconds_bucket",
        r#"tessera_plugin_call_duration_seconds_count{plugin="provider"}"#,
        "tessera_leader 1",
        // The Runtime's cluster client (counted once built: a unit test) is dropped at Ready.
        "tessera_cluster_clients 0",
    ];
    // The state gauge follows the status write at the end of the reconcile that made the
    // Runtime Ready: wait for it rather than read it once.
    let found = eventually("the Ready Runtime's metrics", LIMIT, || async {
        let metrics = http_get(&addr, "/metrics").await.ok()?;
        wanted.iter().all(|w| metrics.contains(w)).then_some(())
    })
    .await;
    if let Err(e) = found {
        let metrics = http_get(&addr, "/metrics").await?;
        let missing: Vec<_> = wanted.iter().filter(|w| !metrics.contains(*w)).collect();
        return Err(format!("{e}: /metrics lacks {missing:?}:\n{metrics}"));
    }
    for path in ["/healthz", "/readyz"] {
        http_get(&addr, path).await?;
    }
    Ok(())
}

async fn patch_then_noop(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-patch").await;
    let mut host = s.host("a", &[]);
    s.create(&s.manifest("rt-patch", "patch")).await?;
    let rt = s.wait_state("rt-patch", RuntimeState::Ready, &host).await?;
    let gen1 = rt.metadata.generation.unwrap();
    let ready = versions(&s, "rt-patch", "patch").await;
    let shoot = patch_worker_maximum(&s, "rt-patch", "patch", 33).await?;
    let gen2 = shoot.annotations()["tessera.dev/runtime-generation"]
        .parse::<i64>()
        .unwrap();
    if gen2 <= gen1 {
        return Err(format!(
            "generation annotation {gen2} not advanced past {gen1}"
        ));
    }
    eventually("Ready at the new generation", LIMIT, || async {
        let rt = s.runtimes().get("rt-patch").await.ok()?;
        let st = rt.status.as_ref()?;
        (st.state == Some(RuntimeState::Ready) && st.observed_generation == Some(gen2))
            .then_some(rt)
    })
    .await?;
    let before = versions(&s, "rt-patch", "patch").await;
    if before == ready {
        return Err(format!("the versions did not show the patch: {before:?}"));
    }
    host.kill();
    let _host = noop_resync(&s, "patch", before).await?;
    s.no_refusals("patch")?;
    recorded_step_replays(&s, "rt-patch", "patch").await?;
    render_history(&s, "rt-patch", "patch").await
}

/// A no-op resync: a fresh host reconciles the settled Runtime of Shoot `shoot` once and
/// writes nothing (`versions` as `before`, which saw a patch: the positive control), and it
/// judges the Runtime from its watch of Shoots: not one read of the Shoot from Gardener
/// (the first host's reads are the counter's positive control). The new host goes on.
async fn noop_resync(s: &Scenario<'_>, shoot: &str, before: Vec<Option<String>>) -> Result<Host> {
    let reads = |stats: &Value| stats["byObject"][format!("shoot/{shoot}")]["reads"].as_u64();
    let earlier = reads(&s.cp.sim_stats()).ok_or("the first host never read the Shoot")?;
    let host = s.host("b", &[]);
    let addr = host
        .metrics_addr(LIMIT)
        .ok_or("the new host logged no metrics address")?;
    eventually("the new host to reconcile the Runtime", LIMIT, || async {
        let metrics = http_get(&addr, "/metrics").await.ok()?;
        let runtime = [("controller", "runtime")];
        (metric_sum(&metrics, "tessera_reconciles_total", &runtime) >= 1.0).then_some(())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = versions(s, "rt-patch", shoot).await;
    if before != after {
        return Err(format!("a no-op resync wrote: {before:?} → {after:?}"));
    }
    let read = reads(&s.cp.sim_stats()).unwrap_or(0) - earlier;
    if read > 0 {
        return Err(format!(
            "the restarted host read Shoot {shoot} {read} time(s) from Gardener; a settled Runtime is judged from the watch of Shoots\n{}",
            tail(&host.logs(), 20)
        ));
    }
    Ok(host)
}

/// Set the first worker's maximum of Runtime `id` and wait for its Shoot to have it.
async fn patch_worker_maximum(
    s: &Scenario<'_>,
    id: &str,
    shoot: &str,
    maximum: i64,
) -> Result<DynamicObject> {
    let patch = json!({ "spec": { "shoot": { "provider": { "workers": [
        s.manifest("x", "x")["spec"]["shoot"]["provider"]["workers"][0].clone()
            .as_object().cloned().map(|mut w| { w.insert("maximum".into(), maximum.into()); Value::Object(w) }).unwrap()
    ] } } } });
    s.runtimes()
        .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    eventually("Shoot patched", LIMIT, || async {
        let shoot = s.shoots().get(shoot).await.ok()?;
        (shoot.data["spec"]["provider"]["workers"][0]["maximum"] == maximum).then_some(shoot)
    })
    .await
}

/// `tessera history` on the Runtime's control plane: one revision per applied Shoot
/// (create, patch, patch), the diff names the changed field and generation, and a retried
/// resync adds none.
async fn render_history(s: &Scenario<'_>, id: &str, shoot: &str) -> Result {
    patch_worker_maximum(s, id, shoot, 34).await?;
    let history = |args: &[&str]| {
        let out = std::process::Command::new(tessera_tests::env::tessera_bin())
            .args(["history", id, "-n", &s.ns, "--kubeconfig"])
            .arg(&s.cp.garden.kubeconfig)
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!(
                "history {args:?}: {}{text}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let listed = eventually("three revisions", LIMIT, || async {
        let text = history(&[]).ok()?;
        (text.lines().count() == 4).then_some(text)
    })
    .await
    .map_err(|e| format!("{e}: {:?}", history(&[])))?;
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    let operations: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().nth(2))
        .collect();
    if operations != ["Create", "Patch", "Patch"] {
        return Err(format!("revisions:\n{listed}"));
    }
    let diff = history(&["--diff", "2", "3"])?;
    if !diff.contains("workers[0].maximum: 33 → 34") || !diff.contains("runtime generation") {
        return Err(format!("the diff of revisions 2 and 3:\n{diff}"));
    }
    let unknown = history(&["--diff", "1", "9"]);
    if !unknown.as_ref().is_err_and(|e| e.contains("no revision 9")) {
        return Err(format!("an unknown revision: {unknown:?}"));
    }
    replays(s, id).await
}

/// `tessera render --revision`: revision 1 replayed from its recorded inputs and digests
/// reproduces its Shoot hash; a revision whose provider digest was swapped for another
/// plugin's is refused as altered.
async fn replays(s: &Scenario<'_>, id: &str) -> Result {
    let replay = |number: &str| {
        let out = std::process::Command::new(tessera_tests::env::tessera_bin())
            .args(["render", "--revision", number, "--of", id, "-n", &s.ns])
            .arg("--kubeconfig")
            .arg(&s.cp.garden.kubeconfig)
            .arg("--plugins")
            .arg(tessera_tests::plugin_dir())
            .output()
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        ))
    };
    let revisions: Api<ControllerRevision> = Api::namespaced(s.client.clone(), &s.ns);
    let listed = revisions
        .list(&ListParams::default().labels(&format!("tessera.dev/runtime={id}")))
        .await
        .map_err(|e| e.to_string())?;
    let first = listed
        .items
        .iter()
        .find(|r| r.revision == Some(1))
        .ok_or("no revision 1")?;
    let hash = first.data.0["shootHash"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (ok, said) = replay("1")?;
    if !ok || !said.contains(&format!("reproduced: {hash}")) {
        return Err(format!("replay of revision 1 (recorded {hash}): {said}"));
    }
    let mut forged = first.data.0.clone();
    let other = forged["plugins"][1]["digest"].clone();
    forged["plugins"][0]["digest"] = other;
    let fake = ControllerRevision {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{id}-forged")),
            labels: first.metadata.labels.clone(),
            // Owned by the Runtime like the real ones (a tenant can write that too).
            owner_references: first.metadata.owner_references.clone(),
            ..Default::default()
        },
        revision: Some(99),
        data: k8s_openapi::apimachinery::pkg::runtime::RawExtension(forged),
    };
    revisions
        .create(&PostParams::default(), &fake)
        .await
        .map_err(|e| e.to_string())?;
    let tampered = replay("99");
    let _ = revisions
        .delete(&format!("{id}-forged"), &DeleteParams::default())
        .await;
    match tampered? {
        (false, said) if said.contains("the record was altered") => Ok(()),
        other => Err(format!("replay of a forged revision: {other:?}")),
    }
}

/// `tessera render --record provider` on the live Runtime and its Shoot, read back from
/// the API servers: the case holds the patch the provider step makes (the new worker
/// maximum) and `tessera plugin test` replays it green on the component.
async fn recorded_step_replays(s: &Scenario<'_>, id: &str, shoot: &str) -> Result {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let runtime = s.runtimes().get(id).await.map_err(|e| e.to_string())?;
    let live = s.shoots().get(shoot).await.map_err(|e| e.to_string())?;
    let (runtime_file, shoot_file) = (
        dir.path().join("runtime.json"),
        dir.path().join("shoot.json"),
    );
    std::fs::write(&runtime_file, serde_json::to_string(&runtime).unwrap()).unwrap();
    std::fs::write(&shoot_file, serde_json::to_string(&live).unwrap()).unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    let case = cases.join("recorded.yaml");
    let plugins = tessera_tests::plugin_dir();
    let path = |p: &std::path::Path| p.display().to_string();
    let out = std::process::Command::new(tessera_tests::env::tessera_bin())
        .args([
            "render",
            "--runtime",
            &path(&runtime_file),
            "--current-shoot",
        ])
        .args([
            &path(&shoot_file),
            "--plugins",
            &path(&plugins),
            "--record",
            "provider",
        ])
        .args(["--case", &path(&case)])
        .output()
        .map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&case).unwrap_or_default();
    // Keys come sorted: what lies between `expect:` and `operation:` is the answer.
    let answer = text
        .split_once("\nexpect:")
        .and_then(|(_, rest)| rest.split_once("\noperation: patch"))
        .map(|(answer, _)| answer)
        .unwrap_or_default();
    if !out.status.success() || !answer.contains("maximum: 33") {
        return Err(format!(
            "render --record: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let out = std::process::Command::new(tessera_tests::env::tessera_bin())
        .args([
            "plugin",
            "test",
            &path(&plugins.join("provider.wasm")),
            "--cases",
            &path(&cases),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let report = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !report.contains("1 passed, 0 failed") {
        return Err(format!(
            "the recorded case does not replay:\n{report}\n{text}"
        ));
    }
    Ok(())
}

/// resourceVersions of the Runtime, its Shoot, Secret and RuntimeKubeconfig.
async fn versions(s: &Scenario<'_>, id: &str, shoot: &str) -> Vec<Option<String>> {
    let rkc: Api<RuntimeKubeconfig> = Api::namespaced(s.client.clone(), &s.ns);
    vec![
        s.runtimes()
            .get(id)
            .await
            .ok()
            .and_then(|o| o.resource_version()),
        s.shoots()
            .get(shoot)
            .await
            .ok()
            .and_then(|o| o.resource_version()),
        s.secrets()
            .get(&format!("kubeconfig-{id}"))
            .await
            .ok()
            .and_then(|o| o.resource_version()),
        rkc.get(id).await.ok().and_then(|o| o.resource_version()),
    ]
}

async fn retryable_error(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-retry").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-retry", "retry")).await?;
    eventually("GardenerErrorRetrying", LIMIT, || async {
        let rt = s.runtimes().get("rt-retry").await.ok()?;
        let c = condition(&rt, "Provisioned")?;
        (c.reason == "GardenerErrorRetrying" && c.message.contains("ERR_INFRA_QUOTA_EXCEEDED"))
            .then_some(())
    })
    .await?;
    s.wait_state("rt-retry", RuntimeState::Ready, &host).await?;
    Ok(())
}

async fn fatal_error(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-fatal").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-fatal", "fatal")).await?;
    let rt = s
        .wait_state("rt-fatal", RuntimeState::Failed, &host)
        .await?;
    let c = condition(&rt, "Provisioned").ok_or("no Provisioned condition")?;
    if c.reason != "GardenerErrorFatal" || !c.message.contains("ERR_INFRA_UNAUTHORIZED") {
        return Err(format!("condition: {c:?}"));
    }
    Ok(())
}

async fn delete(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-delete").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-delete", "delete")).await?;
    s.wait_state("rt-delete", RuntimeState::Ready, &host)
        .await?;
    s.runtimes()
        .delete("rt-delete", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    eventually("Shoot confirmed for deletion", LIMIT, || async {
        match s.shoots().get_opt("delete").await.ok()? {
            None => Some(()),
            Some(shoot) => (shoot
                .annotations()
                .get("confirmation.gardener.cloud/deletion")
                == Some(&"true".to_string()))
            .then_some(()),
        }
    })
    .await?;
    gone(&s, "rt-delete", "delete", &host).await?;
    // Its render history went with it (no garbage collector runs here).
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let revisions: Api<ControllerRevision> = Api::namespaced(s.client.clone(), &s.ns);
    let left = revisions
        .list(&ListParams::default().labels("tessera.dev/runtime=rt-delete"))
        .await
        .map_err(|e| e.to_string())?
        .items;
    if !left.is_empty() {
        return Err(format!("{} revisions left after the Runtime", left.len()));
    }
    Ok(())
}

/// Runtime, Shoot, Secret and RuntimeKubeconfig all gone.
async fn gone(s: &Scenario<'_>, id: &str, shoot: &str, host: &Host) -> Result {
    eventually(
        &format!("Runtime {id} and what it owns to be gone"),
        LIMIT,
        || async {
            let v = versions(s, id, shoot).await;
            v.iter().all(Option::is_none).then_some(())
        },
    )
    .await
    .map_err(|e| {
        format!(
            "{e}: {:?}\n{}",
            futures::executor::block_on(versions(s, id, shoot)),
            tail(&host.logs(), 30)
        )
    })
}

/// Gardener fails a deletion for good: the Runtime reports it with Gardener's codes
/// (condition `ShootDeletionFailing`, a `Retrying` Event) and asks Gardener to retry; with `--force-deletion` the host instead sets Gardener's
/// force-deletion annotation, which Gardener allows only now (deleting, and a code among
/// the five). Either way the Runtime goes, and Gardener refused nothing on the way.
async fn deletion_failures(cp: &ControlPlane) -> Result {
    for (ns, shoot, flags, event) in [
        ("t-delretry", "delretry", &[][..], "Retrying"),
        (
            "t-delforce",
            "delforce",
            &["--force-deletion"][..],
            "ShootForceDeleting",
        ),
    ] {
        let s = Scenario::new(cp, ns).await;
        let host = s.host("a", flags);
        let id = format!("rt-{shoot}");
        s.create(&s.manifest(&id, shoot)).await?;
        s.wait_state(&id, RuntimeState::Ready, &host).await?;
        s.runtimes()
            .delete(&id, &DeleteParams::default())
            .await
            .map_err(|e| e.to_string())?;
        // The Runtime's condition says it while it lasts; the Event stays.
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(s.client.clone(), ns);
        eventually(
            &format!("{id}: a {event} Event with Gardener's code"),
            LIMIT,
            || async {
                let listed = events.list(&ListParams::default()).await.ok()?;
                listed
                    .items
                    .into_iter()
                    .find(|e| {
                        e.reason.as_deref() == Some(event)
                            && e.involved_object.name.as_deref() == Some(id.as_str())
                            && e.message
                                .as_deref()
                                .is_some_and(|m| m.contains("ERR_CLEANUP_CLUSTER_RESOURCES"))
                    })
                    .map(drop)
            },
        )
        .await
        .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 30)))?;
        gone(&s, &id, shoot, &host).await.map_err(|e| {
            let status = futures::executor::block_on(s.shoots().get(shoot))
                .map(|o| o.data["status"].to_string());
            format!(
                "{e}\nthe Shoot's status: {status:?}; refusals {:?}",
                cp.refusals(shoot)
            )
        })?;
        s.no_refusals(shoot)?;
    }
    Ok(())
}

/// A Gardener identity without `list`/`watch` on Shoots: the watch is refused (403). The
/// host says so once in its log (kube's watcher said it at WARN on every retry), in
/// `/readyz` and in the Runtime's `GardenerReachable` condition naming the resource and
/// the rights; it backs off, and the Runtime still becomes Ready by polling.
async fn watch_refused(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-nowatch").await;
    let kubeconfig =
        limited_gardener_identity(cp, "nowatch", &["get", "create", "patch", "delete"])?;
    let host = cp.host_as(
        "t-nowatch-a",
        &kubeconfig,
        &[
            "--namespace",
            "t-nowatch",
            "--requeue-pending",
            "2s",
            "--requeue-error",
            "1s",
        ],
    );
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    s.create(&s.manifest("rt-nowatch", "nowatch")).await?;
    let c = eventually("GardenerReachable ShootWatchFailed", LIMIT, || async {
        let rt = s.runtimes().get("rt-nowatch").await.ok()?;
        let c = condition(&rt, "GardenerReachable")?.clone();
        (c.reason == "ShootWatchFailed").then_some(c)
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    if !c.message.contains("shoots.core.gardener.cloud")
        || !c.message.contains("`list` and `watch`")
    {
        return Err(format!(
            "the condition should name the resource and the rights: {c:?}"
        ));
    }
    match http_get(&addr, "/readyz").await {
        Err(e) if e.contains("watch of Shoots") => {}
        other => return Err(format!("/readyz should say the watch fails: {other:?}")),
    }
    s.wait_state("rt-nowatch", RuntimeState::Ready, &host)
        .await?;
    // Watched for 15 s more: the refusal was logged once, kube's own line never.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let logs = host.logs();
    let ours = logs
        .lines()
        .filter(|l| l.contains("the watch of Shoots"))
        .count();
    let kubes = logs
        .lines()
        .filter(|l| l.contains("watch list error") || l.contains("watch initlist error"))
        .count();
    if ours != 1 || kubes != 0 {
        return Err(format!(
            "{ours} lines of ours and {kubes} of kube's about the refused watch (want 1 and 0):\n{}",
            tail(&logs, 30)
        ));
    }
    Ok(())
}

/// The watch of Shoots fails for a while (Gardener answers its requests 503) and comes
/// back: while it fails the Runtime says so and `/readyz` answers 503; once it works again
/// both say so, without a restart (the watch starts over with a fresh list after a
/// failure, so its recovery is seen).
async fn watch_recovers(cp: &ControlPlane) -> Result {
    use tessera::crd::ConditionStatus;
    let s = Scenario::new(cp, "t-rewatch").await;
    // A Ready Runtime is looked at again every 2 s, so that it says what it sees.
    let host = s.host("a", &["--requeue-ready", "2s"]);
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    s.create(&s.manifest("rt-rewatch", "rewatch")).await?;
    s.wait_state("rt-rewatch", RuntimeState::Ready, &host)
        .await?;
    // Only this host's list and watch of Shoots name its namespace.
    cp.sim_outage("t-rewatch", Some(503));
    let reachable = |want: ConditionStatus, reason: &'static str| {
        let s = &s;
        async move {
            let rt = s.runtimes().get("rt-rewatch").await.ok()?;
            let c = condition(&rt, "GardenerReachable")?.clone();
            (c.status == want && c.reason == reason).then_some(())
        }
    };
    let watched = eventually("ShootWatchFailed while the watch fails", LIMIT, || {
        reachable(ConditionStatus::False, "ShootWatchFailed")
    })
    .await;
    let during = http_get(&addr, "/readyz").await;
    cp.sim_outage("t-rewatch", None);
    watched.map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    if !during
        .as_ref()
        .is_err_and(|e| e.contains("watch of Shoots"))
    {
        return Err(format!("/readyz while the watch fails: {during:?}"));
    }
    eventually("Recovered once it works again", LIMIT, || {
        reachable(ConditionStatus::True, "Recovered")
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 20)))?;
    eventually("/readyz 200 again", LIMIT, || async {
        http_get(&addr, "/readyz").await.ok()
    })
    .await
    .map(drop)
}

/// A ServiceAccount of the project with `verbs` on Shoots (and what else a host needs
/// there), its Gardener kubeconfig.
fn limited_gardener_identity(
    cp: &ControlPlane,
    name: &str,
    verbs: &[&str],
) -> Result<std::path::PathBuf> {
    let verbs = serde_json::to_string(verbs).unwrap();
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
        {{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {{"name": "{name}", "namespace": "garden-kyma-dev"}}}},
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {{"name": "{name}", "namespace": "garden-kyma-dev"}},
          "rules": [{{"apiGroups": ["core.gardener.cloud"], "resources": ["shoots"], "verbs": {verbs}}},
                    {{"apiGroups": ["core.gardener.cloud"], "resources": ["shoots/adminkubeconfig"], "verbs": ["create"]}},
                    {{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch", "delete"]}}]}},
        {{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {{"name": "{name}", "namespace": "garden-kyma-dev"}},
          "roleRef": {{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "{name}"}},
          "subjects": [{{"kind": "ServiceAccount", "name": "{name}", "namespace": "garden-kyma-dev"}}]}}]}}"#
    );
    let out = cp.garden.kubectl_stdin(&["apply", "-f", "-"], &manifest);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let out = cp.garden.kubectl(&[
        "-n",
        "garden-kyma-dev",
        "create",
        "token",
        name,
        "--duration",
        "2h",
    ]);
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = cp.dir.path().join(format!("{name}.kubeconfig"));
    let text = tessera_tests::env::http_kubeconfig(&cp.sim_url, &token);
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Gardener's kubeconfig names a CA that did not sign the runtime API server's certificate:
/// the host refuses to talk to that cluster (it verifies TLS) and says so on the Runtime.
async fn foreign_ca_refused(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-foreign").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-foreign", "foreignca")).await?;
    eventually(
        "the runtime cluster refused for its certificate",
        LIMIT,
        || async {
            let rt = s.runtimes().get("rt-foreign").await.ok()?;
            let status = rt.status.as_ref()?;
            let refused = status.conditions.iter().any(|c| {
                c.type_ == "Configured"
                    && c.status == tessera::crd::ConditionStatus::False
                    && c.reason == "RuntimeClusterFailed"
                    && c.message.contains("invalid peer certificate")
            });
            (refused && status.state != Some(RuntimeState::Ready)).then_some(())
        },
    )
    .await
    .map_err(|e| {
        let status = futures::executor::block_on(s.runtimes().get("rt-foreign"))
            .ok()
            .and_then(|r| serde_json::to_string(&r.status).ok());
        format!("{e}; status {status:?}\n{}", tail(&host.logs(), 20))
    })
}

/// Create a kubeconfig Secret `name` whose RuntimeKubeconfig is gone (its owner's uid
/// names none).
async fn create_orphaned_kubeconfig(s: &Scenario<'_>, name: &str) -> Result {
    let orphan: Secret = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "tessera.dev/kubeconfig": "true" },
            "ownerReferences": [{ "apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
                "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000", "controller": true }] },
        "data": { "config": "Z2hvc3Q=" },
    }))
    .expect("a Secret");
    s.secrets()
        .create(&PostParams::default(), &orphan)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

async fn deleted_while_host_down(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-down").await;
    let mut host = s.host("a", &[]);
    s.create(&s.manifest("rt-down", "down")).await?;
    s.wait_state("rt-down", RuntimeState::Ready, &host).await?;
    host.kill();
    s.runtimes()
        .delete("rt-down", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    if s.secrets()
        .get_opt("kubeconfig-rt-down")
        .await
        .ok()
        .flatten()
        .is_none()
    {
        return Err("Secret vanished without a host".into());
    }
    // A kubeconfig Secret whose owner vanished while no host ran (finalizer removed by hand).
    create_orphaned_kubeconfig(&s, "kubeconfig-ghost").await?;
    // One that only carries the label was made by someone else: it stays.
    let foreign: Secret = serde_json::from_value(json!({
        "metadata": { "name": "kubeconfig-foreign", "labels": { "tessera.dev/kubeconfig": "true" } },
    }))
    .unwrap();
    s.secrets()
        .create(&PostParams::default(), &foreign)
        .await
        .map_err(|e| e.to_string())?;
    let host = s.host("b", &[]);
    gone(&s, "rt-down", "down", &host).await?;
    eventually("the orphaned Secret to be deleted", LIMIT, || async {
        s.secrets()
            .get_opt("kubeconfig-ghost")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await?;
    match s.secrets().get_opt("kubeconfig-foreign").await {
        Ok(Some(_)) => Ok(()),
        other => Err(format!(
            "a labelled Secret Tessera did not make was deleted: {other:?}"
        )),
    }
}

async fn force_rotation(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-rotate").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-rotate", "rotate")).await?;
    s.wait_state("rt-rotate", RuntimeState::Ready, &host)
        .await?;
    let read = || async {
        s.secrets()
            .get("kubeconfig-rt-rotate")
            .await
            .ok()
            .and_then(|s| s.data)
            .map(|d| d["config"].0.clone())
    };
    let before = read().await.ok_or("no Secret")?;
    let rkc: Api<RuntimeKubeconfig> = Api::namespaced(s.client.clone(), &s.ns);
    rkc.patch(
        "rt-rotate",
        &PatchParams::default(),
        &Patch::Merge(
            &json!({ "metadata": { "annotations": { "tessera.dev/force-rotation": "true" } } }),
        ),
    )
    .await
    .map_err(|e| e.to_string())?;
    eventually("new kubeconfig", LIMIT, || async {
        let now = read().await?;
        (now != before).then_some(())
    })
    .await?;
    eventually("force annotation removed", LIMIT, || async {
        let k = rkc.get("rt-rotate").await.ok()?;
        (!k.annotations().contains_key("tessera.dev/force-rotation")).then_some(())
    })
    .await?;
    let errors = host.error_lines();
    if !errors.is_empty() {
        return Err(format!(
            "error logs during rotation:\n{}",
            errors.join("\n")
        ));
    }
    Ok(())
}

/// Gardener grants less than asked (its maximum, 20 s for this Shoot, where 10 minutes were
/// asked): the host rotates by what Gardener granted (after a quarter of 20 s), so the
/// Secret never holds an expired credential: sampled every second for 30 s, the kubeconfig
/// it holds always works against the runtime cluster, while the first one, once expired,
/// is refused there (401): the credential really expires.
async fn scheduled_rotation(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-expiry").await;
    let host = s.host(
        "a",
        &[
            "--kubeconfig-expiration",
            "10m",
            "--rotation-fraction",
            "0.25",
        ],
    );
    s.create(&s.manifest("rt-expiry", "expiry")).await?;
    s.wait_state("rt-expiry", RuntimeState::Ready, &host)
        .await?;
    let read = || async {
        let secret = s.secrets().get("kubeconfig-rt-expiry").await.ok()?;
        let sync = secret.annotations().get("tessera.dev/last-sync").cloned()?;
        Some((secret.data?["config"].0.clone(), sync))
    };
    let (first, synced) = read().await.ok_or("no Secret")?;
    let (_, resynced) = eventually("a rotation without any annotation", LIMIT, || async {
        let (now, sync) = read().await?;
        (now != first).then_some((now, sync))
    })
    .await?;
    let gap = resynced
        .parse::<jiff::Timestamp>()
        .unwrap()
        .duration_since(synced.parse::<jiff::Timestamp>().unwrap());
    if gap < jiff::SignedDuration::from_secs(4) || gap > jiff::SignedDuration::from_secs(10) {
        return Err(format!(
            "rotated {gap:?} after the last sync; expected about 5 s (a quarter of the 20 s Gardener granted)"
        ));
    }
    for _ in 0..30 {
        let (held, _) = read().await.ok_or("no Secret")?;
        namespaces_with(&held).await.map_err(|e| {
            format!("the Secret held a credential the runtime cluster refuses: {e}")
        })?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    match namespaces_with(&first).await {
        Err(e) if e.contains("401") => s.no_refusals("expiry"),
        other => Err(format!(
            "the first kubeconfig should have expired by now: {other:?}"
        )),
    }
}

/// List namespaces of the runtime cluster with `kubeconfig` (YAML bytes).
async fn namespaces_with(kubeconfig: &[u8]) -> Result {
    let text = std::str::from_utf8(kubeconfig).map_err(|e| e.to_string())?;
    let kc = Kubeconfig::from_yaml(text).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    Api::<Namespace>::all(client)
        .list(&ListParams::default().limit(1))
        .await
        .map(drop)
        .map_err(|e| match e {
            kube::Error::Api(s) => format!("HTTP {} {}: {}", s.code, s.reason, s.message),
            other => other.to_string(),
        })
}

async fn killed_mid_provisioning(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-kill").await;
    let mut host = s.host("a", &[]);
    s.create(&s.manifest("rt-kill", "kill")).await?;
    eventually("Shoot created", LIMIT, || async {
        (!s.shoots_of("rt-kill").await.is_empty()).then_some(())
    })
    .await?;
    host.kill();
    if s.state("rt-kill").await == Some(RuntimeState::Ready) {
        return Err("Ready before the kill; the scenario needs a slower simulator".into());
    }
    let host = s.host("b", &[]);
    s.wait_state("rt-kill", RuntimeState::Ready, &host).await?;
    let n = s.shoots_of("rt-kill").await.len();
    if n != 1 {
        return Err(format!("{n} Shoots for one Runtime"));
    }
    Ok(())
}

async fn invalid_runtimes(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-invalid").await;
    let host = s.host("a", &[]);
    let mut bad_cidr = s.manifest("rt-bad-cidr", "bad-cidr");
    bad_cidr["spec"]["shoot"]["networking"]["nodes"] = "10.250.0.0/33".into();
    let mut bad_provider = s.manifest("rt-bad-provider", "bad-provider");
    bad_provider["spec"]["shoot"]["provider"]["type"] = "alibaba".into();
    bad_provider["spec"]["shoot"]["enforceSeedLocation"] = false.into();
    let mut no_zone = s.manifest("rt-no-zone", "no-zone");
    no_zone["spec"]["shoot"]["provider"]["workers"][0]["zones"] = json!([]);
    for (doc, field) in [
        (&bad_cidr, "spec.shoot.networking.nodes"),
        (&bad_provider, "spec.shoot.provider.type"),
        (&no_zone, "spec.shoot.provider.workers[0].zones"),
    ] {
        s.create(doc).await?;
        let id = doc["metadata"]["name"].as_str().unwrap();
        let rt = s.wait_state(id, RuntimeState::Failed, &host).await?;
        let c = condition(&rt, "Provisioned").ok_or("no Provisioned condition")?;
        if !c.message.contains(field) || !c.message.contains("plugin ") {
            return Err(format!(
                "{id}: the message should name plugin and {field}: {c:?}\n{}",
                tail(&host.logs(), 30)
            ));
        }
        if !s.shoots_of(id).await.is_empty() {
            return Err(format!("{id}: a Shoot was created"));
        }
    }
    no_seed_in_region(&s, &host).await
}

/// KIM's pre-check: `enforceSeedLocation` in a region without a usable Seed of the provider
/// fails `SeedNotFound`, naming the region and the regions that have one; no Shoot.
async fn no_seed_in_region(s: &Scenario<'_>, host: &Host) -> Result {
    let mut doc = s.manifest("rt-no-seed", "no-seed");
    doc["spec"]["shoot"]["region"] = "eu-west-2".into();
    doc["spec"]["shoot"]["enforceSeedLocation"] = true.into();
    let provider = &mut doc["spec"]["shoot"]["provider"];
    provider["workers"][0]["zones"] = json!(["eu-west-2a", "eu-west-2b", "eu-west-2c"]);
    provider["additionalWorkers"][0]["zones"] = json!(["eu-west-2a"]);
    s.create(&doc).await?;
    let rt = s
        .wait_state("rt-no-seed", RuntimeState::Failed, host)
        .await?;
    let c = condition(&rt, "Provisioned").ok_or("no Provisioned condition")?;
    if c.reason != "SeedNotFound"
        || !c.message.contains("region eu-west-2")
        || !c.message.contains("[eu-central-1]")
    {
        return Err(format!("rt-no-seed: {c:?}"));
    }
    if !s.shoots_of("rt-no-seed").await.is_empty() {
        return Err("rt-no-seed: a Shoot was created".into());
    }
    Ok(())
}

/// Taking a held Lease the way a host's lease manager takes a free one (a server-side
/// apply of the holder, as that host's own field manager) is refused as a conflict: what
/// keeps two hosts that find the Lease free at the same moment from both leading.
async fn second_taker_refused(leases: &Api<Lease>, holder: &str) -> Result {
    let other = "another-host";
    let take = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "spec": { "holderIdentity": other },
    });
    let params = PatchParams::apply(&tessera::operator::lease_field_manager(other));
    match leases.patch("tessera", &params, &Patch::Apply(take)).await {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => Err(format!(
            "taking the Lease {holder} holds should conflict: {other:?}"
        )),
    }
}

async fn two_hosts_one_leader(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-leader").await;
    let mut a = s.host("a", &[]);
    let mut b = s.host("b", &[]);
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    let holder = eventually("a lease holder", LIMIT, || async {
        leases.get("tessera").await.ok()?.spec?.holder_identity
    })
    .await
    .map_err(|e| {
        // CI timed out here once, and a local run later: both hosts had taken the Lease as
        // one field manager, led at once, saw the other in it and exited. Logs say it again.
        let (a, b) = (tail(&a.logs(), 15), tail(&b.logs(), 15));
        format!("{e}\n== a\n{a}\n== b\n{b}")
    })?;
    second_taker_refused(&leases, &holder).await?;
    s.create(&s.manifest("rt-leader-1", "leader-1")).await?;
    s.wait_state("rt-leader-1", RuntimeState::Ready, &a).await?;
    // A host that loses its lease exits, so "leading" is: said so, and still running.
    let leading: Vec<bool> = [&mut a, &mut b]
        .into_iter()
        .map(|h| h.logs().contains("became leader") && h.is_running())
        .collect();
    if leading.iter().filter(|l| **l).count() != 1 {
        return Err(format!(
            "leaders: {leading:?} (holder {holder})\n== a\n{}\n== b\n{}",
            tail(&a.logs(), 15),
            tail(&b.logs(), 15)
        ));
    }
    let (mut leader, standby) = if leading[0] { (a, b) } else { (b, a) };
    if leader
        .logs()
        .lines()
        .filter(|l| l.contains("Shoot created"))
        .count()
        != 1
        || standby.logs().contains("Shoot created")
    {
        return Err(format!(
            "the standby reconciled\n== leader\n{}\n== standby\n{}",
            tail(&leader.logs(), 15),
            tail(&standby.logs(), 15)
        ));
    }
    leader.kill();
    let killed = Instant::now();
    eventually(
        "the standby to take over",
        Duration::from_secs(30),
        || async { standby.logs().contains("became leader").then_some(()) },
    )
    .await?;
    let takeover = killed.elapsed();
    // A third host stands by: on a loaded machine the new leader may renew its 6 s lease
    // late and exit (as it must); the Runtime then still becomes Ready, through this one.
    let spare = s.host("c", &[]);
    s.create(&s.manifest("rt-leader-2", "leader-2")).await?;
    s.wait_state("rt-leader-2", RuntimeState::Ready, &standby)
        .await
        .map_err(|e| {
            format!(
                "{e}
== spare
{}",
                tail(&spare.logs(), 10)
            )
        })?;
    eprintln!("leader takeover after {takeover:?} (lease duration 6s)");
    if takeover > Duration::from_secs(6 + 4) {
        return Err(format!("takeover took {takeover:?}"));
    }
    a = leader;
    drop(a);
    Ok(())
}

/// SIGTERM ends a host cleanly whether it leads or stands by. In a pod the host is PID 1,
/// which ignores a signal it has no handler for: a standby without one sat out the
/// kubelet's 30 s grace on every rollout and uninstall.
async fn hosts_stop_on_sigterm(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-stop").await;
    // A host that loses its lease before the signal (a renewal late on a loaded machine)
    // exits on its own: that round says nothing about SIGTERM, and is run again.
    for round in 1..=3 {
        match stop_both(&s).await? {
            Some(lost) if round < 3 => eprintln!("hosts_stop_on_sigterm: {lost}; again"),
            Some(lost) => return Err(lost),
            None => return Ok(()),
        }
    }
    Ok(())
}

/// One round of [`hosts_stop_on_sigterm`]: `Some` when a host lost its lease before the
/// signal came.
async fn stop_both(s: &Scenario<'_>) -> Result<Option<String>> {
    let mut hosts = [s.host("a", &[]), s.host("b", &[])];
    one_leading_one_waiting(s, &mut hosts).await?;
    let standby = hosts
        .iter()
        .position(|h| !h.logs().contains("became leader"))
        .ok_or("no standby")?;
    for host in &mut hosts {
        match host.terminate(Duration::from_secs(30)) {
            Some(status) if status.success() => {}
            _ if !host.logs().contains("stop signal received")
                && host.logs().contains("lost the leader lease") =>
            {
                return Ok(Some(format!(
                    "a host lost its lease before the signal:\n{}",
                    tail(&host.logs(), 5)
                )));
            }
            ended => {
                return Err(format!(
                    "SIGTERM ended a host with {ended:?} (None: still running):\n{}",
                    tail(&host.logs(), 15)
                ));
            }
        }
    }
    if !hosts[standby].logs().contains("stopped before leading") {
        return Err(format!(
            "the standby did not say it stopped before leading:\n{}",
            tail(&hosts[standby].logs(), 15)
        ));
    }
    Ok(None)
}

/// Wait until one of `hosts` leads and the other waits for the lease. A host that loses
/// its lease exits (on a loaded machine a renewal can come late): one started in its place
/// keeps the scenario about two live hosts.
async fn one_leading_one_waiting(s: &Scenario<'_>, hosts: &mut [Host; 2]) -> Result {
    let started = Instant::now();
    let mut spares = 0;
    loop {
        for host in hosts.iter_mut() {
            if !host.is_running() {
                spares += 1;
                *host = s.host(&format!("spare-{spares}"), &[]);
            }
        }
        let logs = hosts.each_ref().map(|h| h.logs());
        let leading = logs.iter().filter(|l| l.contains("became leader")).count();
        let waited = logs
            .iter()
            .all(|l| l.contains("waiting for the leader lease"));
        if leading == 1 && waited {
            return Ok(());
        }
        if started.elapsed() > LIMIT {
            return Err(format!(
                "after {LIMIT:?} no host leads with the other waiting ({spares} replaced)\n== first\n{}\n== second\n{}",
                tail(&logs[0], 15),
                tail(&logs[1], 15)
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn runtime_cluster_bindings(s: &Scenario<'_>, id: &str) -> Vec<String> {
    let crbs: Api<ClusterRoleBinding> = Api::all(s.runtime_client.clone());
    let mut users: Vec<String> = crbs
        .list(&ListParams::default().labels(&format!(
            "app.kubernetes.io/managed-by=tessera,tessera.dev/runtime={id}"
        )))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|b| b.subjects?.into_iter().next().map(|s| s.name))
        .collect();
    users.sort();
    users
}

async fn admins_follow_spec(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-admins").await;
    let host = s.host("a", &[]);
    let mut doc = s.manifest("rt-admins", "admins");
    doc["spec"]["security"]["administrators"] = json!(["a@example.com", "b@example.com"]);
    s.create(&doc).await?;
    s.wait_state("rt-admins", RuntimeState::Ready, &host)
        .await?;
    let users = runtime_cluster_bindings(&s, "rt-admins").await;
    if users != ["a@example.com", "b@example.com"] {
        return Err(format!("bindings after create: {users:?}"));
    }
    // Somebody else's binding, not labelled as ours: must survive.
    let crbs: Api<ClusterRoleBinding> = Api::all(s.runtime_client.clone());
    let theirs: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "hand-made-admin" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "a@example.com" }],
    }))
    .unwrap();
    crbs.create(&PostParams::default(), &theirs)
        .await
        .map_err(|e| e.to_string())?;
    s.runtimes()
        .patch(
            "rt-admins",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "security": { "administrators": ["b@example.com", "c@example.com"] } } })),
        )
        .await
        .map_err(|e| e.to_string())?;
    eventually("bindings to follow the spec", LIMIT, || async {
        (runtime_cluster_bindings(&s, "rt-admins").await == ["b@example.com", "c@example.com"])
            .then_some(())
    })
    .await?;
    crbs.get("hand-made-admin")
        .await
        .map_err(|e| format!("hand-made binding: {e}"))?;
    Ok(())
}

async fn force_patch_and_suspend(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-force").await;
    let host = s.host("a", &[]);
    s.create(&s.manifest("rt-force", "force")).await?;
    let rt = s.wait_state("rt-force", RuntimeState::Ready, &host).await?;
    let generation = rt.metadata.generation.unwrap();
    let annotate = |key: &str, value: Option<&str>| {
        let patch = json!({ "metadata": { "annotations": { key: value } } });
        let api = s.runtimes();
        async move {
            api.patch("rt-force", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    // Suspended: a spec change does not reach the Shoot.
    annotate("tessera.dev/suspend-patch", Some("true")).await?;
    s.runtimes()
        .patch(
            "rt-force",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "shoot": { "purpose": "evaluation" } } })),
        )
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let shoot = s.shoots().get("force").await.map_err(|e| e.to_string())?;
    if shoot.data["spec"]["purpose"] != "production"
        || shoot.annotations()["tessera.dev/runtime-generation"] != generation.to_string()
    {
        return Err("a suspended Runtime's Shoot was patched".into());
    }
    // Resumed: the change goes through.
    annotate("tessera.dev/suspend-patch", None).await?;
    eventually("patch after resume", LIMIT, || async {
        let shoot = s.shoots().get("force").await.ok()?;
        (shoot.data["spec"]["purpose"] == "evaluation").then_some(())
    })
    .await
    .map_err(|e| {
        let status = futures::executor::block_on(s.runtimes().get("rt-force"))
            .ok()
            .and_then(|r| serde_json::to_string(&r.status).ok());
        format!(
            "{e}; Gardener refused {:?}; status {status:?}\n{}",
            cp.refusals("force"),
            tail(&host.logs(), 20)
        )
    })?;
    s.wait_state("rt-force", RuntimeState::Ready, &host).await?;
    // Someone edits the Shoot behind Tessera's back; a forced patch restores it.
    s.shoots()
        .patch(
            "force",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "purpose": "testing" } })),
        )
        .await
        .map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    annotate("tessera.dev/force-patch", Some("true")).await?;
    eventually("forced patch", LIMIT, || async {
        let shoot = s.shoots().get("force").await.ok()?;
        let rt = s.runtimes().get("rt-force").await.ok()?;
        (shoot.data["spec"]["purpose"] == "evaluation"
            && !rt.annotations().contains_key("tessera.dev/force-patch"))
        .then_some(())
    })
    .await?;
    Ok(())
}

async fn oidc_objects(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-oidc").await;
    let host = s.host("a", &[]);
    let mut doc = s.manifest("rt-oidc", "oidc");
    doc["spec"]["shoot"]["kubernetes"]["kubeAPIServer"]["additionalOidcConfig"] = json!([{
        "clientID": "extra-client",
        "issuerURL": "https://extra.example.com",
        "usernameClaim": "email",
    }]);
    s.create(&doc).await?;
    let rt = s.wait_state("rt-oidc", RuntimeState::Ready, &host).await?;
    if condition(&rt, "OidcConfigured").map(|c| c.status)
        != Some(tessera::crd::ConditionStatus::True)
    {
        return Err(format!(
            "OidcConfigured: {:?}",
            condition(&rt, "OidcConfigured")
        ));
    }
    let api: Api<DynamicObject> = Api::all_with(
        s.runtime_client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "authentication.gardener.cloud",
                "v1alpha1",
                "OpenIDConnect",
            ),
            "openidconnects",
        ),
    );
    let objects = api
        .list(&ListParams::default().labels("tessera.dev/runtime=rt-oidc"))
        .await
        .map_err(|e| e.to_string())?
        .items;
    if objects.len() != 1 || objects[0].data["spec"]["issuerURL"] != "https://extra.example.com" {
        return Err(format!("OpenIDConnect objects: {objects:?}"));
    }
    Ok(())
}

/// The Gardener side is down (its Shoot API answers 404): a new Runtime is still picked up
/// at once, says which endpoint fails, `/readyz` and the metric say so, the log stays
/// short, and everything recovers by itself when Gardener is back.
async fn gardener_outage(cp: &ControlPlane) -> Result {
    use tessera::crd::ConditionStatus;
    let s = Scenario::new(cp, "t-gdown").await;
    cp.sim_outage("gdown", Some(404));
    let host = s.host("a", &[]);
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    // Let the failing Shoot watch fail and back off first.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let created = Instant::now();
    s.create(&s.manifest("rt-gdown", "gdown1")).await?;
    let reachable = |want: ConditionStatus| {
        let s = &s;
        async move {
            let rt = s.runtimes().get("rt-gdown").await.ok()?;
            let c = condition(&rt, "GardenerReachable")?.clone();
            (c.status == want).then_some(c)
        }
    };
    let c = eventually("GardenerReachable False", LIMIT, || {
        reachable(ConditionStatus::False)
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 30)))?;
    let picked_up = created.elapsed();
    println!(
        "gardener_outage: condition {:.2} s after the Runtime was created",
        picked_up.as_secs_f64()
    );
    if picked_up > Duration::from_secs(3) {
        return Err(format!(
            "picked up only after {picked_up:?}\n{}",
            tail(&host.logs(), 40)
        ));
    }
    if c.reason != "GardenerUnavailable"
        || !c.message.contains(&cp.sim_url)
        || !c.message.contains("404")
    {
        return Err(format!(
            "the condition should name the endpoint and the status: {c:?}"
        ));
    }
    let ready = http_get(&addr, "/readyz").await;
    match &ready {
        Err(e) if e.contains("503") && e.contains("gardener") => {}
        other => return Err(format!("/readyz during the outage: {other:?}")),
    }
    let metrics = http_get(&addr, "/metrics").await?;
    if !metrics.contains(r#"tessera_dependency_up{dependency="gardener"} 0"#) {
        return Err("tessera_dependency_up should be 0 for gardener".into());
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let warnings = host
        .logs()
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\""))
        .count();
    println!("gardener_outage: {warnings} WARN lines in ~12 s of outage");
    if warnings == 0 || warnings > 10 {
        return Err(format!(
            "{warnings} WARN lines:\n{}",
            tail(&host.logs(), 20)
        ));
    }
    cp.sim_outage("gdown", None);
    s.wait_state("rt-gdown", RuntimeState::Ready, &host).await?;
    eventually("GardenerReachable True", LIMIT, || {
        reachable(ConditionStatus::True)
    })
    .await?;
    eventually("/readyz ok", LIMIT, || async {
        http_get(&addr, "/readyz").await.ok()
    })
    .await?;
    Ok(())
}

/// Gardener answers but refuses the Shoot: a Kubernetes version its CloudProfile does not
/// offer (gardener plugin/pkg/shoot/mutator `defaultKubernetesVersion`). The Runtime says so
/// with Gardener's message naming the field, the host stays ready (Gardener is up), and it
/// goes on by itself once the Runtime asks for a version Gardener has.
async fn gardener_rejects_shoot(cp: &ControlPlane) -> Result {
    use tessera::crd::ConditionStatus;
    let s = Scenario::new(cp, "t-rej").await;
    let host = s.host("a", &[]);
    let addr = host.metrics_addr(LIMIT).ok_or("no metrics address")?;
    let mut doc = s.manifest("rt-refused", "refused1");
    doc["spec"]["shoot"]["kubernetes"]["version"] = json!("1.29");
    s.create(&doc).await?;
    let c = eventually("ShootRejected", LIMIT, || async {
        let rt = s.runtimes().get("rt-refused").await.ok()?;
        let c = condition(&rt, "GardenerReachable")?.clone();
        (c.status == ConditionStatus::False && c.reason == "ShootRejected").then_some(c)
    })
    .await
    .map_err(|e| format!("{e}\n{}", tail(&host.logs(), 30)))?;
    if !c.message.contains("spec.kubernetes.version")
        || !c
            .message
            .contains("couldn't find a suitable version for 1.29")
    {
        return Err(format!(
            "the condition should carry Gardener's refusal: {c:?}"
        ));
    }
    if cp.refusals("refused1").is_empty() {
        return Err("the simulator recorded no refusal for Shoot refused1".into());
    }
    http_get(&addr, "/readyz")
        .await
        .map_err(|e| format!("a refused Shoot is no reason to be unready: {e}"))?;
    let patch = json!({"spec": {"shoot": {"kubernetes": {"version": "1.33"}}}});
    s.runtimes()
        .patch("rt-refused", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    s.wait_state("rt-refused", RuntimeState::Ready, &host)
        .await?;
    Ok(())
}

fn main() {
    let sim = std::path::PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    tessera_tests::scenarios::run(
        &sim,
        &script(),
        vec![
            scenario!(create_to_ready),
            scenario!(patch_then_noop),
            scenario!(retryable_error),
            scenario!(fatal_error),
            scenario!(delete),
            scenario!(deletion_failures),
            scenario!(watch_refused),
            scenario!(watch_recovers),
            scenario!(foreign_ca_refused),
            scenario!(deleted_while_host_down),
            scenario!(force_rotation),
            scenario!(scheduled_rotation),
            scenario!(killed_mid_provisioning),
            scenario!(invalid_runtimes),
            scenario!(two_hosts_one_leader),
            scenario!(hosts_stop_on_sigterm),
            scenario!(shards_split_and_hand_over),
            scenario!(admins_follow_spec),
            scenario!(force_patch_and_suspend),
            scenario!(oidc_objects),
            scenario!(gardener_outage),
            scenario!(gardener_rejects_shoot),
            scenario!(runtime_access),
            scenario!(structured_authentication),
            scenario!(gardener_budget),
            scenario!(backlog_is_no_stall),
            scenario!(kim),
        ],
    )
}

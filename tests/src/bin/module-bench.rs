//! `module-bench`: module figures against the local control plane (real API servers, a
//! real registry, a release-built host). Prints (1) the time for a ModuleSet of 10 modules
//! to reach Ready on a target, and (2) with `--sets N` ModuleSets of 5 modules each, the
//! time until all are Ready and the host's peak RSS and CPU seconds, then its CPU over an
//! idle minute. Run through `cargo xtask bench-modules`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tessera::crd::{ModuleSet, Plugin};
use tessera::modules::State;
use tessera_tests::env::{ControlPlane, cpu_seconds, tessera_bin};
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::client_for;
use tessera_tests::registry::TestRegistry;

#[derive(Debug, Parser)]
struct Args {
    /// ModuleSets of 5 modules for the load figure (0: skip it).
    #[arg(long, default_value_t = 1000)]
    sets: usize,
    /// Runs of the 10-module figure.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Extra arguments for `tessera run` (e.g. `--workers=64`).
    #[arg(long, allow_hyphen_values = true)]
    host_arg: Vec<String>,
}

const NS: &str = "bench";

/// Namespace and a ConfigMap: every other module requires this one.
const BASE: &str = "apiVersion: v1
kind: Namespace
metadata: {name: '${namespace}'}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: '${namespace}'}
data: {cluster: '${kubernetesVersion}'}
";

/// Five namespaced objects named after the module.
const MODULE: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: '${module}', namespace: '${namespace}'}
data: {version: '${version}'}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: '${module}', namespace: '${namespace}'}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: '${module}', namespace: '${namespace}'}
rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: '${module}', namespace: '${namespace}'}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: '${module}'}
subjects: [{kind: ServiceAccount, name: '${module}', namespace: '${namespace}'}]
---
apiVersion: v1
kind: Service
metadata: {name: '${module}', namespace: '${namespace}'}
spec:
  clusterIP: None   # headless: the test API server's service range has 254 addresses
  selector: {app: '${module}'}
  ports: [{name: http, port: 80, protocol: TCP}]
";

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0)
    };
    field("VmHWM:") / 1024.0
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn set_spec(secret: &str, namespace: &str, modules: usize) -> serde_json::Value {
    let mut list =
        vec![json!({"name": "bench-base", "config": {"values": {"namespace": namespace}}})];
    for i in 1..modules {
        list.push(
            json!({"name": format!("bench-m{i}"), "config": {"values": {"namespace": namespace}}}),
        );
    }
    json!({"target": {"secretName": secret}, "modules": list})
}

async fn create_set(
    api: &Api<ModuleSet>,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<()> {
    let set: ModuleSet = serde_json::from_value(json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "ModuleSet",
        "metadata": {"name": name}, "spec": spec,
    }))?;
    api.create(&PostParams::default(), &set).await?;
    Ok(())
}

fn is_ready(s: &ModuleSet) -> bool {
    s.status.as_ref().and_then(|st| st.state) == Some(State::Ready)
        && s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let sim = tessera_bin().with_file_name("gardener-sim");
    let script = Script {
        create_ms: 1000,
        reconcile_ms: 500,
        delete_ms: 500,
        shoots: BTreeMap::new(),
    };
    let cp = ControlPlane::start(&sim, &script).map_err(anyhow::Error::msg)?;
    let registry = TestRegistry::start().map_err(anyhow::Error::msg)?;
    rt.block_on(async {
        let client = client_for(&cp.garden.kubeconfig).await;
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
            )
            .await?;
        let reference = format!("{}/bench/manifest:1.0.0", registry.host());
        let manifest = tessera_tests::plugin_dir().join("manifest.wasm");
        let out = Command::new(tessera_bin())
            .args([
                "plugin",
                "push",
                &manifest.display().to_string(),
                &reference,
                "--version",
                "1.0.0",
            ])
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "push: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plugins: Api<Plugin> = Api::all(client.clone());
        // Each set installs into its own namespace: what the bundles need, granted.
        let base_grants = json!({"write": [
            {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true},
            {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["*"]},
        ]});
        let module_grants = json!({"write": [
            {"apiGroups": [""], "kinds": ["ConfigMap", "ServiceAccount", "Service"], "namespaces": ["*"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "kinds": ["Role", "RoleBinding"], "namespaces": ["*"]},
        ]});
        for i in 0..10 {
            let (name, config, grants) = if i == 0 {
                ("bench-base".to_string(), json!({"manifest": BASE}), &base_grants)
            } else {
                (
                    format!("bench-m{i}"),
                    json!({"manifest": MODULE, "requires": ["bench-base"]}),
                    &module_grants,
                )
            };
            let doc = json!({
                "apiVersion": "tessera.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": name, "labels": {"tessera.dev/test": NS}},
                "spec": {"kind": "module-reconciler",
                    "versions": [{"version": "1.0.0", "ref": reference}],
                    "channels": [{"name": "regular", "version": "1.0.0"}],
                    "config": config,
                    "grants": grants},
            });
            plugins
                .patch(
                    &name,
                    &PatchParams::apply("bench").force(),
                    &Patch::Apply(&doc),
                )
                .await?;
        }
        let kubeconfig = std::fs::read_to_string(&cp.runtime.kubeconfig)?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
        let secret = |name: String| -> Secret {
            serde_json::from_value(
                json!({"metadata": {"name": name}, "stringData": {"config": kubeconfig}}),
            )
            .unwrap()
        };
        secrets
            .create(&PostParams::default(), &secret("target".into()))
            .await?;
        let store = cp.dir.path().join("bench-store").display().to_string();
        let mut host_args: Vec<String> = [
            "--namespace",
            NS,
            "--plugin-selector",
            "tessera.dev/test=bench",
            "--plugin-store",
            &store,
            "--requeue-error",
            "2s",
            // The target Secret is made by hand here, not by a RuntimeKubeconfig.
            "--module-target",
            "bench/*",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        host_args.extend(args.host_arg.iter().cloned());
        let host_args: Vec<&str> = host_args.iter().map(String::as_str).collect();
        let host = cp.host("bench", &host_args);
        let sets: Api<ModuleSet> = Api::namespaced(client.clone(), NS);

        // (1) One ModuleSet of 10 modules.
        let target_client = client_for(&cp.runtime.kubeconfig).await;
        let requests_before = request_counts(&target_client).await;
        let mut times = Vec::new();
        for r in 0..args.runs {
            let name = format!("ten-{r}");
            let started = Instant::now();
            create_set(&sets, &name, set_spec("target", &name, 10)).await?;
            loop {
                if sets.get(&name).await.map(|s| is_ready(&s)).unwrap_or(false) {
                    break;
                }
                anyhow::ensure!(
                    started.elapsed() < Duration::from_secs(300),
                    "ModuleSet {name} not Ready:\n{}",
                    host.logs()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let took = started.elapsed();
            println!(
                "10-module ModuleSet Ready on the target: run {r}: {:.3} s (47 objects)",
                took.as_secs_f64()
            );
            times.push(took);
        }
        times.sort();
        if !times.is_empty() {
            println!(
                "10-module ModuleSet: median {:.3} s, min {:.3} s, max {:.3} s",
                times[times.len() / 2].as_secs_f64(),
                times[0].as_secs_f64(),
                times[times.len() - 1].as_secs_f64()
            );
        }
        if args.runs > 0 {
            print_requests(&requests_before, &request_counts(&target_client).await, args.runs);
        }
        // Drift repair: a managed object deleted on the target, until it is back.
        if args.runs > 0 {
            let target = client_for(&cp.runtime.kubeconfig).await;
            let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(target, "ten-0");
            let mut repairs = Vec::new();
            for i in 1..=5 {
                let name = format!("bench-m{i}");
                let old = cms.get(&name).await?.metadata.uid;
                let started = Instant::now();
                cms.delete(&name, &Default::default()).await?;
                loop {
                    if let Some(cm) = cms.get_opt(&name).await?
                        && cm.metadata.uid != old
                    {
                        break;
                    }
                    anyhow::ensure!(
                        started.elapsed() < Duration::from_secs(60),
                        "ConfigMap {name} not restored"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                repairs.push(started.elapsed().as_millis());
            }
            println!(
                "drift repair (managed ConfigMap deleted → recreated), 5 samples: {repairs:?} ms"
            );
        }
        if args.sets == 0 {
            return Ok(());
        }

        // (2) N ModuleSets × 5 modules, each on "its own cluster" (own Secret, own client).
        let cpu_before = cpu_seconds(host.pid());
        let target_cpu_before: Vec<f64> = cp
            .runtime
            .pids()
            .iter()
            .map(|(_, p)| cpu_seconds(*p))
            .collect();
        let started = Instant::now();
        for i in 0..args.sets {
            secrets
                .create(&PostParams::default(), &secret(format!("target-{i}")))
                .await?;
            create_set(
                &sets,
                &format!("s-{i}"),
                set_spec(&format!("target-{i}"), &format!("s-{i}"), 5),
            )
            .await?;
        }
        println!(
            "created {} ModuleSets in {:.1} s",
            args.sets,
            started.elapsed().as_secs_f64()
        );
        let mut last = 0;
        loop {
            let list = sets.list(&ListParams::default()).await?;
            let ready = list
                .items
                .iter()
                .filter(|s| {
                    s.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("s-"))
                        && is_ready(s)
                })
                .count();
            if ready != last {
                last = ready;
            }
            if ready >= args.sets {
                break;
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(args.timeout),
                "only {ready}/{} Ready after {}s",
                args.sets,
                args.timeout
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let all_ready = started.elapsed();
        let cpu = cpu_seconds(host.pid()) - cpu_before;
        let peak = peak_rss_mib(host.pid());
        let target_cpu: Vec<f64> = cp
            .runtime
            .pids()
            .iter()
            .map(|(_, p)| cpu_seconds(*p))
            .zip(target_cpu_before)
            .map(|(a, b)| a - b)
            .collect();
        println!(
            "{} ModuleSets × 5 modules ({} module installations, {} objects) Ready after {:.1} s",
            args.sets,
            args.sets * 5,
            args.sets * 22,
            all_ready.as_secs_f64()
        );
        println!("host CPU during install: {cpu:.1} s; peak RSS {peak:.0} MiB");
        println!(
            "target etcd / kube-apiserver CPU during install: {:.1} s / {:.1} s",
            target_cpu[0], target_cpu[1]
        );
        let idle_cpu = cpu_seconds(host.pid());
        tokio::time::sleep(Duration::from_secs(60)).await;
        println!(
            "idle minute afterwards: host CPU {:.2} s, RSS {:.0} MiB",
            cpu_seconds(host.pid()) - idle_cpu,
            rss_mib(host.pid())
        );
        let errors = host.error_lines();
        println!("host ERROR log lines: {}", errors.len());
        Ok::<_, anyhow::Error>(())
    })?;
    drop(registry);
    Ok(())
}

/// `apiserver_request_total` of an API server, summed per (verb, resource).
async fn request_counts(client: &kube::Client) -> BTreeMap<(String, String), f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            let start = line.find(&format!("{name}=\""))? + name.len() + 2;
            line[start..].split('"').next().map(str::to_string)
        };
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let key = (
            label("verb").unwrap_or_default(),
            label("resource").unwrap_or_default(),
        );
        *counts.entry(key).or_insert(0.0) += value;
    }
    counts
}

/// What the target API server served per 10-module run, by verb and resource.
fn print_requests(
    before: &BTreeMap<(String, String), f64>,
    after: &BTreeMap<(String, String), f64>,
    runs: usize,
) {
    let mut lines = Vec::new();
    let mut total = 0.0;
    for (key, n) in after {
        let per_run = (n - before.get(key).copied().unwrap_or(0.0)) / runs as f64;
        if per_run >= 0.5 {
            total += per_run;
            lines.push(format!("{} {} {per_run:.1}", key.0, key.1));
        }
    }
    println!(
        "target API server requests per 10-module run: {total:.0} ({})",
        lines.join(", ")
    );
}

//! `module-bench`: module figures against the local control plane (real API servers, a
//! real registry, a release-built host). Prints (1) the time for a ModuleSet of 10 modules
//! to reach Ready on a target, and (2) with `--sets N` ModuleSets of 5 modules each, the
//! time until all are Ready and the host's peak RSS and CPU seconds, then its CPU over an
//! idle minute. Run through `cargo xtask bench-modules`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tessera::crd::{ModuleSet, Plugin};
use tessera::modules::State;
use tessera_tests::clusters::Clusters;
use tessera_tests::env::{ControlPlane, Host, cpu_seconds, tessera_bin};
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::client_for;
use tessera_tests::registry::TestRegistry;
use tessera_tests::rollout::{metric_sum, scrape};

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
    /// Distinct target clusters the sets are spread over (one real API server served under
    /// as many loopback addresses and client certificates); 1: every set on the runtime
    /// cluster itself.
    #[arg(long, default_value_t = 1)]
    targets: usize,
    /// Replicas sharding the ModuleSets (`tessera run --sharding`); with more than one, the
    /// first is killed (SIGKILL) once half the sets are Ready and its sets' handover is
    /// timed.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Extra arguments for `tessera run` (e.g. `--workers=64`).
    #[arg(long, allow_hyphen_values = true)]
    host_arg: Vec<String>,
}

const NS: &str = "bench";

/// Namespace and a ConfigMap: every other module requires this one.
const BASE: &str = "apiVersion: v1
kind: Namespace
metadata: {name: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
data: {cluster: '${kubernetesVersion}'}
";

/// Five namespaced objects named after the module.
const MODULE: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: '${module}', namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
data: {version: '${version}'}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: '${module}', namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: '${module}', namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: '${module}', namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: '${module}'}
subjects: [{kind: ServiceAccount, name: '${module}', namespace: '${namespace}'}]
---
apiVersion: v1
kind: Service
metadata: {name: '${module}', namespace: '${namespace}', labels: {bench.tessera.dev/cluster: '${cluster}'}}
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

/// A set of `modules` modules in `namespace` on the cluster of `secret`, whose objects are
/// labelled for cluster `cluster` (see `tessera_tests::clusters`).
fn set_spec(secret: &str, namespace: &str, modules: usize, cluster: usize) -> serde_json::Value {
    let values = json!({"namespace": namespace, "cluster": format!("c{cluster}")});
    let mut list = vec![json!({"name": "bench-base", "config": {"values": values}})];
    for i in 1..modules {
        list.push(json!({"name": format!("bench-m{i}"), "config": {"values": values}}));
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
    let script = Script {
        create_ms: 1000,
        reconcile_ms: 500,
        delete_ms: 500,
        shoots: BTreeMap::new(),
    };
    let cp = ControlPlane::start_for_tool(&script, NS).map_err(anyhow::Error::msg)?;
    let registry = TestRegistry::start().map_err(anyhow::Error::msg)?;
    rt.block_on(async {
        let client = client_for(&cp.garden.kubeconfig).await;
        register_plugins(&client, &registry).await?;
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
        let hosts = start_hosts(&cp, &host_args, args.replicas).await;
        let host = &hosts[0].0;
        let sets: Api<ModuleSet> = Api::namespaced(client.clone(), NS);

        // (1) One ModuleSet of 10 modules, then drift repair.
        if args.runs > 0 {
            ten_module_runs(&cp, &sets, host, args.runs).await?;
            drift_repairs(&cp).await?;
        }
        if args.sets == 0 {
            return Ok(());
        }

        // (2) N ModuleSets × 5 modules, each with its own Secret and client.
        let clusters = Clusters::serve(&cp.runtime, args.targets.max(1), true)
            .await
            .map_err(anyhow::Error::msg)?;
        let many = Many {
            args: &args,
            cp: &cp,
            sets: &sets,
            secrets: &secrets,
            kubeconfig: &kubeconfig,
            clusters: &clusters,
        };
        install_many(&many, hosts).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    drop(registry);
    Ok(())
}

/// Push the manifest plugin to `registry` and register the ten bench module Plugins.
async fn register_plugins(client: &kube::Client, registry: &TestRegistry) -> anyhow::Result<()> {
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
            (
                "bench-base".to_string(),
                json!({"manifest": BASE}),
                &base_grants,
            )
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
    Ok(())
}

/// `runs` ModuleSets of 10 modules on the runtime cluster, each timed until Ready, and the
/// target API server's requests per run.
async fn ten_module_runs(
    cp: &ControlPlane,
    sets: &Api<ModuleSet>,
    host: &Host,
    runs: usize,
) -> anyhow::Result<()> {
    let target_client = client_for(&cp.runtime.kubeconfig).await;
    let requests_before = request_counts(&target_client).await;
    let mut times = Vec::new();
    for r in 0..runs {
        let name = format!("ten-{r}");
        let started = Instant::now();
        create_set(sets, &name, set_spec("target", &name, 10, 0)).await?;
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
    print_requests(
        &requests_before,
        &request_counts(&target_client).await,
        runs,
    );
    Ok(())
}

/// Drift repair: a managed ConfigMap of `ten-0` deleted on the target, until it is back.
async fn drift_repairs(cp: &ControlPlane) -> anyhow::Result<()> {
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
    println!("drift repair (managed ConfigMap deleted → recreated), 5 samples: {repairs:?} ms");
    Ok(())
}

/// Hosts and their names: one, or `replicas` sharding the sets, each holding its shard
/// Lease before the first set is made (so that the split is the ring's).
async fn start_hosts(
    cp: &ControlPlane,
    host_args: &[&str],
    replicas: usize,
) -> Vec<(Host, String)> {
    if replicas <= 1 {
        return vec![(cp.host("bench", host_args), "bench".into())];
    }
    let hosts: Vec<(Host, String)> = (0..replicas)
        .map(|i| {
            let name = format!("bench-replica-{i}");
            let mut args = host_args.to_vec();
            args.extend(["--sharding", "--identity", &name]);
            (cp.host(&name, &args), name)
        })
        .collect();
    let started = Instant::now();
    while !hosts
        .iter()
        .all(|(h, _)| h.logs().contains("holding the shard lease"))
        && started.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The leader's next pass sees every shard Lease.
    tokio::time::sleep(Duration::from_secs(2)).await;
    hosts
}

/// What the many-sets figure needs.
struct Many<'a> {
    args: &'a Args,
    cp: &'a ControlPlane,
    sets: &'a Api<ModuleSet>,
    secrets: &'a Api<Secret>,
    /// The runtime cluster's own kubeconfig (`--targets 1`).
    kubeconfig: &'a str,
    clusters: &'a Clusters,
}

impl Many<'_> {
    /// The kubeconfig of set `i`'s target.
    fn kubeconfig(&self, i: usize) -> &str {
        match self.args.targets {
            0 | 1 => self.kubeconfig,
            n => &self.clusters.kubeconfigs[i % n],
        }
    }

    async fn create(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        for i in 0..self.args.sets {
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": format!("target-{i}")},
                "stringData": {"config": self.kubeconfig(i)},
            }))?;
            self.secrets.create(&PostParams::default(), &secret).await?;
            let name = format!("s-{i}");
            let cluster = i % self.args.targets.max(1);
            let spec = set_spec(&format!("target-{i}"), &name, 5, cluster);
            create_set(self.sets, &name, spec).await?;
        }
        println!(
            "created {} ModuleSets on {} target cluster(s) in {:.1} s",
            self.args.sets,
            self.args.targets.max(1),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    async fn ready(&self) -> anyhow::Result<usize> {
        let list = self.sets.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|s| {
                s.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("s-"))
                    && is_ready(s)
            })
            .count())
    }

    /// Sets labelled for `shard`.
    async fn on_shard(&self, shard: &str) -> usize {
        let selector = format!("{}={shard}", tessera::crd::labels::SHARD);
        self.sets
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items.len())
            .unwrap_or(usize::MAX)
    }

    /// CPU seconds of the target's etcd and kube-apiserver.
    fn target_cpu(&self) -> Vec<f64> {
        let pids = self.cp.runtime.pids();
        pids.iter().map(|(_, p)| cpu_seconds(*p)).collect()
    }
}

/// A replica killed mid-run and how its sets were handed over.
struct Failover {
    name: String,
    after: Duration,
    sets: usize,
    moved_in: Duration,
}

/// (2): N sets × 5 modules until all are Ready; with replicas, the first is killed half
/// way. Prints time, per-replica peak RSS and CPU, the target API server's CPU, the
/// targets and drift watches each replica holds, and an idle minute after.
async fn install_many(many: &Many<'_>, mut hosts: Vec<(Host, String)>) -> anyhow::Result<()> {
    let cpu_before: Vec<f64> = hosts.iter().map(|(h, _)| cpu_seconds(h.pid())).collect();
    let target_cpu_before = many.target_cpu();
    let started = Instant::now();
    many.create().await?;
    let mut failover = None;
    loop {
        let ready = many.ready().await?;
        if ready >= many.args.sets {
            break;
        }
        if failover.is_none() && hosts.len() > 1 && ready * 2 >= many.args.sets {
            failover = Some(kill_first(many, &mut hosts, started).await);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(many.args.timeout),
            "only {ready}/{} Ready after {}s",
            many.args.sets,
            many.args.timeout
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let all_ready = started.elapsed();
    let target_cpu: Vec<f64> = many
        .target_cpu()
        .iter()
        .zip(&target_cpu_before)
        .map(|(a, b)| a - b)
        .collect();
    println!(
        "{} ModuleSets × 5 modules ({} module installations, {} objects) on {} cluster(s), {} replica(s): all Ready after {:.1} s",
        many.args.sets,
        many.args.sets * 5,
        many.args.sets * 22,
        many.args.targets.max(1),
        hosts.len(),
        all_ready.as_secs_f64()
    );
    if let Some(f) = &failover {
        println!(
            "failover: {} killed after {:.1} s; its {} sets on other shards {:.1} s later",
            f.name,
            f.after.as_secs_f64(),
            f.sets,
            f.moved_in.as_secs_f64()
        );
    }
    print_replicas(&hosts, &cpu_before, failover.as_ref());
    println!(
        "target etcd / kube-apiserver CPU during install: {:.1} s / {:.1} s",
        target_cpu[0], target_cpu[1]
    );
    idle_minute(&hosts, failover.as_ref().map(|f| f.name.as_str())).await;
    Ok(())
}

/// Each live replica's CPU during the install, peak RSS and what it holds.
fn print_replicas(hosts: &[(Host, String)], cpu_before: &[f64], failover: Option<&Failover>) {
    for ((host, name), before) in hosts.iter().zip(cpu_before) {
        if failover.is_some_and(|f| &f.name == name) {
            continue;
        }
        let (targets, watches) = held(host);
        println!(
            "{name}: CPU during install {:.1} s; peak RSS {:.0} MiB; holds {targets} target clusters, {watches} drift watches",
            cpu_seconds(host.pid()) - before,
            peak_rss_mib(host.pid())
        );
    }
}

/// Kill the first replica and wait until none of the sets is labelled for its shard.
async fn kill_first(many: &Many<'_>, hosts: &mut [(Host, String)], started: Instant) -> Failover {
    let name = hosts[0].1.clone();
    let sets = many.on_shard(&name).await;
    hosts[0].0.kill();
    let killed = Instant::now();
    while many.on_shard(&name).await > 0 && killed.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Failover {
        name,
        after: killed - started,
        sets,
        moved_in: killed.elapsed(),
    }
}

/// The target clusters and drift watches a host holds, from its metrics.
fn held(host: &Host) -> (f64, f64) {
    let Some(addr) = host.metrics_addr(Duration::from_secs(5)) else {
        return (f64::NAN, f64::NAN);
    };
    let text = scrape(&addr);
    (
        metric_sum(&text, "tessera_module_targets", &[]),
        metric_sum(&text, "tessera_drift_watches", &[]),
    )
}

/// The minute after the install: CPU and RSS of every live host, and their ERROR lines.
async fn idle_minute(hosts: &[(Host, String)], killed: Option<&str>) {
    let live: Vec<&(Host, String)> = hosts
        .iter()
        .filter(|(_, n)| Some(n.as_str()) != killed)
        .collect();
    let before: Vec<f64> = live.iter().map(|(h, _)| cpu_seconds(h.pid())).collect();
    tokio::time::sleep(Duration::from_secs(60)).await;
    for ((host, name), before) in live.iter().zip(before) {
        let (targets, watches) = held(host);
        println!(
            "{name}: idle minute afterwards: CPU {:.2} s, RSS {:.0} MiB; holds {targets} target clusters, {watches} drift watches; {} ERROR log lines",
            cpu_seconds(host.pid()) - before,
            rss_mib(host.pid()),
            host.error_lines().len()
        );
    }
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

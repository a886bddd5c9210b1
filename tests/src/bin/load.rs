//! `load --runtimes N`: N Runtimes against the local control plane (real API servers and
//! the Gardener simulator) and one release-built host. Prints the time until all are
//! Ready, the host's peak RSS and CPU seconds, the API requests it made, and what a no-op
//! resync (a restarted host) writes. With `--rollout`, one chain step comes from a
//! registry instead, and after the fleet settled a new digest of it is released on the
//! channel half the fleet follows (see `rollout` below). Run through `cargo xtask load`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use kube::api::{Api, ListParams, PartialObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tessera::crd::labels::SHARD;
use tessera::crd::{Plugin, Runtime, RuntimeState};
use tessera_tests::env::{ControlPlane, Host, cpu_seconds};
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::client_for;
use tessera_tests::rollout::{
    FAST, RolloutStep, component_digest, metric_sum, scrape, with_custom_section,
};

#[derive(Debug, Parser)]
struct Args {
    /// How many Runtimes.
    #[arg(long, default_value_t = 1000)]
    runtimes: usize,
    /// Simulated Gardener: milliseconds a Create stays Processing.
    #[arg(long, default_value_t = 2000)]
    create_ms: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Extra arguments for `tessera run` (e.g. `--workers=64`).
    #[arg(long, allow_hyphen_values = true)]
    host_arg: Vec<String>,
    /// Take `--rollout-step` from a registry Plugin with channels `regular` and `fast`
    /// (half the Runtimes on `fast`); once all are Ready, release a new digest of it on
    /// `fast` and measure until every `fast` Runtime runs it. Replaces the no-op resync.
    #[arg(long)]
    rollout: bool,
    /// The first-party step the rollout releases (late in the chain: the render cache
    /// answers the steps before it).
    #[arg(long, default_value = "maintenance")]
    rollout_step: String,
    /// Rollouts one after the other (1.1.0, 1.2.0, …): the first after provisioning finds
    /// no draft of a render against the current Shoot in the render cache, later ones do.
    #[arg(long, default_value_t = 2)]
    rollout_rounds: u32,
    /// Replicas sharding the Runtimes (`tessera run --sharding`); after provisioning the
    /// leader is killed (SIGKILL) and the handover of its Runtimes is measured instead of a
    /// restart. A replica that exits while the fleet provisions is started again.
    /// 1: one host, no sharding.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
}

/// (peak RSS in MiB, CPU seconds) of a process, from /proc.
fn usage(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    (hwm_kib / 1024.0, cpu_seconds(pid))
}

/// Reads of single Shoots the simulator counted.
fn shoot_reads(stats: &Value) -> u64 {
    let objects = stats["byObject"].as_object().into_iter().flatten();
    objects.filter_map(|(_, o)| o["reads"].as_u64()).sum()
}

/// The `top` kinds of request (the simulator's `byKind`) between two readings, most first.
fn by_kind(after: &Value, before: &Value, top: usize) -> String {
    let mut kinds: Vec<(u64, &str)> = after["byKind"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(kind, n)| {
            let was = before["byKind"][kind].as_u64().unwrap_or(0);
            (n.as_u64().unwrap_or(0).saturating_sub(was), kind.as_str())
        })
        .filter(|(n, _)| *n > 0)
        .collect();
    kinds.sort_by(|a, b| b.cmp(a));
    let shown: Vec<String> = kinds
        .iter()
        .take(top)
        .map(|(n, k)| format!("{k} {n}"))
        .collect();
    shown.join(", ")
}

fn delta(after: &Value, before: &Value, key: &str) -> u64 {
    after[key].as_u64().unwrap_or(0) - before[key].as_u64().unwrap_or(0)
}

async fn ready_count(api: &Api<Runtime>) -> usize {
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|r| r.status.as_ref().and_then(|s| s.state) == Some(RuntimeState::Ready))
                .count()
        })
        .unwrap_or(0)
}

/// Runtimes the hosts report Ready on /metrics (each exports its own shard's).
fn ready_from_metrics(addrs: &[String]) -> usize {
    let mut ready = std::collections::HashSet::new();
    for addr in addrs {
        for line in scrape(addr).lines() {
            if line.starts_with("tessera_runtime_state{") && line.contains("state=\"Ready\"} 1") {
                let runtime = line
                    .split("runtime=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next());
                ready.insert(runtime.unwrap_or_default().to_string());
            }
        }
    }
    ready.len()
}

/// Wait until the host has made no request (leases aside) for `quiet`.
fn wait_quiet(cp: &ControlPlane, quiet: Duration, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = cp.sim_stats();
    let mut since = Instant::now();
    while started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(500));
        let now = cp.sim_stats();
        let busy = delta(&now, &last, "requests") - delta(&now, &last, "leaseRequests");
        if busy > 0 {
            since = Instant::now();
            last = now;
        } else if since.elapsed() >= quiet {
            break;
        }
    }
    since.duration_since(started)
}

/// The control plane, a client of its garden API server (directly, not through the
/// simulator, so that the benchmark's own requests are not counted as the host's), and
/// the namespace the Runtimes live in.
struct Bench {
    args: Args,
    cp: ControlPlane,
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    api: Api<Runtime>,
}

impl Bench {
    fn start(args: Args) -> anyhow::Result<Self> {
        let script = Script {
            create_ms: args.create_ms,
            reconcile_ms: 1000,
            delete_ms: 500,
            ..Script::default()
        };
        let cp = ControlPlane::start_for_tool(&script, "load").map_err(anyhow::Error::msg)?;
        let rt = tokio::runtime::Runtime::new()?;
        let client = rt.block_on(client_for(&cp.garden.kubeconfig));
        let api: Api<Runtime> = Api::namespaced(client.clone(), "load");
        Ok(Self {
            args,
            cp,
            rt,
            client,
            api,
        })
    }

    fn limit(&self) -> Duration {
        Duration::from_secs(self.args.timeout)
    }

    /// Create the Runtimes (16 parallel clients); every second one carries `annotation`.
    fn create(&self, annotation: Option<(String, String)>) -> anyhow::Result<()> {
        let template: Value = serde_saphyr::from_str(&std::fs::read_to_string(
            tessera_tests::workspace().join("examples/runtime-aws.yaml"),
        )?)?;
        self.rt.block_on(async {
            futures::stream::iter(0..self.args.runtimes)
                .map(|i| {
                    let api = self.api.clone();
                    let mut doc = template.clone();
                    doc["metadata"] = json!({ "name": format!("load-{i}"), "namespace": "load" });
                    if let Some((key, value)) = annotation.as_ref().filter(|_| i % 2 == 1) {
                        doc["metadata"]["annotations"] = json!({ key: value });
                    }
                    doc["spec"]["shoot"]["name"] = format!("load-{i}").into();
                    async move {
                        let rt: Runtime = serde_json::from_value(doc).expect("runtime");
                        api.create(&PostParams::default(), &rt).await
                    }
                })
                .buffer_unordered(16)
                .for_each(|r| {
                    if let Err(e) = r {
                        eprintln!("create failed: {e}");
                    }
                    futures::future::ready(())
                })
                .await;
        });
        Ok(())
    }

    /// Poll the hosts' /metrics until all Runtimes are Ready (or the time is up).
    fn wait_ready(&self, hosts: &mut Replicas, started: Instant) {
        let mut last_print = Instant::now();
        while started.elapsed() < self.limit() {
            hosts.tend(&self.cp);
            let ready = ready_from_metrics(&hosts.metrics);
            if ready == self.args.runtimes {
                break;
            }
            if last_print.elapsed() >= Duration::from_secs(10) {
                eprintln!(
                    "{:>6.0?}: {ready}/{} Ready",
                    started.elapsed(),
                    self.args.runtimes
                );
                last_print = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// What provisioning the fleet cost.
struct Provisioned {
    created: Duration,
    all_ready: Duration,
    /// Peak RSS (MiB) and CPU seconds of each host.
    usage: Vec<(f64, f64)>,
    /// Hosts that exited and were started again.
    restarts: usize,
    before: Value,
    after: Value,
}

/// The hosts of a run. One that exits is started again with its arguments (a replica keeps
/// its `--identity`; its log continues in `<name>-restart-N.log`), as
/// a Deployment's kubelet restarts its container (a leader that cannot confirm its Lease
/// ends on purpose); each slot's peak RSS and CPU seconds are kept across its restarts.
struct Replicas {
    hosts: Vec<Host>,
    names: Vec<String>,
    args: Vec<Vec<String>>,
    /// Current metrics address of each host.
    metrics: Vec<String>,
    /// Highest peak RSS (MiB) seen in each slot, sampled while its hosts ran.
    peak: Vec<f64>,
    /// CPU seconds of each slot's ended hosts, and of its current host as last sampled.
    cpu_past: Vec<f64>,
    cpu_now: Vec<f64>,
    restarts: usize,
}

impl Replicas {
    fn start(cp: &ControlPlane, names: Vec<String>, args: Vec<Vec<String>>) -> Self {
        let hosts: Vec<Host> = names
            .iter()
            .zip(&args)
            .map(|(name, args)| cp.host(name, &as_strs(args)))
            .collect();
        let n = hosts.len();
        Self {
            hosts,
            names,
            args,
            metrics: vec![String::new(); n],
            peak: vec![0.0; n],
            cpu_past: vec![0.0; n],
            cpu_now: vec![0.0; n],
            restarts: 0,
        }
    }

    /// Wait for every host's metrics address.
    fn find_metrics(&mut self) -> anyhow::Result<()> {
        for (i, host) in self.hosts.iter().enumerate() {
            self.metrics[i] = host
                .metrics_addr(Duration::from_secs(30))
                .ok_or_else(|| anyhow::anyhow!("{} logged no metrics address", self.names[i]))?;
        }
        Ok(())
    }

    /// Sample each host's usage; start again each one that exited.
    fn tend(&mut self, cp: &ControlPlane) {
        for i in 0..self.hosts.len() {
            if self.metrics[i].is_empty() {
                self.metrics[i] = self.hosts[i]
                    .metrics_addr(Duration::from_millis(200))
                    .unwrap_or_default();
            }
            let pid = self.hosts[i].pid();
            let (rss, cpu) = usage(pid);
            self.peak[i] = self.peak[i].max(rss);
            self.cpu_now[i] = self.cpu_now[i].max(cpu);
            if self.hosts[i].is_running() {
                continue;
            }
            self.restarts += 1;
            let last = self.hosts[i]
                .logs()
                .lines()
                .last()
                .unwrap_or_default()
                .to_string();
            eprintln!(
                "{} exited (last line: {last}); starting it again",
                self.names[i]
            );
            self.cpu_past[i] += std::mem::take(&mut self.cpu_now[i]);
            let log = format!("{}-restart-{}", self.names[i], self.restarts);
            self.hosts[i] = cp.host(&log, &as_strs(&self.args[i]));
            self.metrics[i] = self.hosts[i]
                .metrics_addr(Duration::from_secs(30))
                .unwrap_or_default();
        }
    }

    /// (peak RSS in MiB, CPU seconds) of each slot.
    fn usage(&mut self, cp: &ControlPlane) -> Vec<(f64, f64)> {
        self.tend(cp);
        (0..self.hosts.len())
            .map(|i| (self.peak[i], self.cpu_past[i] + self.cpu_now[i]))
            .collect()
    }
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Create the fleet and wait until the API server says every Runtime is Ready.
fn provision(
    bench: &Bench,
    hosts: &mut Replicas,
    fast: Option<(String, String)>,
) -> anyhow::Result<Provisioned> {
    let before = bench.cp.sim_stats();
    let started = Instant::now();
    bench.create(fast)?;
    let created = started.elapsed();
    eprintln!("created {} Runtimes in {created:.1?}", bench.args.runtimes);
    // Progress from the host's /metrics (cheap); the final count from the API server.
    hosts.find_metrics()?;
    bench.wait_ready(hosts, started);
    let all_ready = started.elapsed();
    let ready = bench.rt.block_on(ready_count(&bench.api));
    let usage = hosts.usage(&bench.cp);
    let restarts = hosts.restarts;
    let after = bench.cp.sim_stats();
    anyhow::ensure!(
        ready == bench.args.runtimes,
        "only {ready}/{} Ready after {all_ready:?}",
        bench.args.runtimes,
    );
    Ok(Provisioned {
        created,
        all_ready,
        usage,
        restarts,
        before,
        after,
    })
}

fn print_provisioned(args: &Args, p: &Provisioned) {
    println!("runtimes:                      {}", args.runtimes);
    println!("simulated Gardener create:     {} ms", args.create_ms);
    println!(
        "created (16 parallel clients): {:.1} s",
        p.created.as_secs_f64()
    );
    println!(
        "all Ready after:               {:.1} s",
        p.all_ready.as_secs_f64()
    );
    let peak = p.usage.iter().map(|u| u.0).fold(0.0, f64::max);
    let rss: Vec<String> = p.usage.iter().map(|u| format!("{:.0}", u.0)).collect();
    let cpu: Vec<String> = p.usage.iter().map(|u| format!("{:.1}", u.1)).collect();
    println!("replicas:                      {}", args.replicas);
    println!("hosts restarted (exited):      {}", p.restarts);
    println!(
        "host peak RSS:                 {peak:.0} MiB (per replica: {} MiB)",
        rss.join(", ")
    );
    println!("host CPU:                      {} s", cpu.join(", "));
    let (after, before) = (&p.after, &p.before);
    println!(
        "host API requests:             {} ({} writes, {} watch requests, {} lease)",
        delta(after, before, "requests"),
        delta(after, before, "writes"),
        delta(after, before, "watches"),
        delta(after, before, "leaseRequests"),
    );
    println!(
        "of them to Gardener:           {} ({} Shoot reads)",
        delta(after, before, "gardenerRequests"),
        shoot_reads(after) - shoot_reads(before),
    );
    let per = |key: &str| delta(after, before, key) as f64 / args.runtimes.max(1) as f64;
    println!(
        "per Runtime:                   {:.1} requests, {:.1} to Gardener, {:.0} KiB of peak RSS",
        per("requests"),
        per("gardenerRequests"),
        p.usage.iter().map(|u| u.0).sum::<f64>() * 1024.0 / args.runtimes.max(1) as f64,
    );
    println!(
        "requests by kind:              {}",
        by_kind(after, before, 12)
    );
}

/// A no-op resync: a fresh host lists and reconciles every Runtime once (under Gardener's
/// default request budget unless `--host-arg` sets one).
fn resync(bench: &Bench, mut host: Host, host_args: &[&str]) {
    host.kill();
    let before = bench.cp.sim_stats();
    let host2 = bench.cp.host("load-host-2", host_args);
    // The killed leader's lease must expire before the new host starts reconciling.
    let lease_wait = Instant::now();
    while !host2.logs().contains("became leader") && lease_wait.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let settle = wait_quiet(&bench.cp, Duration::from_secs(10), bench.limit());
    let after = bench.cp.sim_stats();
    let (rss2, cpu2) = usage(host2.pid());
    let leader_line = host2.logs().contains("became leader");
    println!(
        "no-op resync (restarted host): {} requests, {} writes, {} to Gardener ({} Shoot reads), busy {:.1} s, CPU {cpu2:.1} s, peak RSS {rss2:.0} MiB, leader: {leader_line}",
        delta(&after, &before, "requests") - delta(&after, &before, "leaseRequests"),
        delta(&after, &before, "writes"),
        delta(&after, &before, "gardenerRequests"),
        shoot_reads(&after) - shoot_reads(&before),
        settle.as_secs_f64(),
    );
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        !(args.rollout && args.replicas > 1),
        "--rollout runs with one replica"
    );
    let bench = Bench::start(args)?;
    let step = match bench.args.rollout {
        true => Some(bench.rt.block_on(async {
            let step = RolloutStep::start(&bench.args.rollout_step).await?;
            step.apply_plugin(&bench.client, "1.0.0").await?;
            anyhow::Ok(step)
        })?),
        false => None,
    };
    let mut owned: Vec<String> = vec!["--namespace".into(), "load".into()];
    // The host's own cost is measured, not Gardener's budget (5 requests/s by default would
    // make the run as long as the budget says), unless `--host-arg` sets one.
    let budget = "--gardener-requests-per-second";
    if !bench.args.host_arg.iter().any(|a| a.starts_with(budget)) {
        owned.push(format!("{budget}=0"));
    }
    if let Some(step) = &step {
        owned.extend(step.host_args()?);
    }
    owned.extend(bench.args.host_arg.iter().cloned());
    if bench.args.replicas > 1 {
        let mut hosts = start_replicas(&bench, &owned);
        let provisioned = provision(&bench, &mut hosts, None)?;
        print_provisioned(&bench.args, &provisioned);
        failover(&bench, hosts)?;
        println!("processes (CPU seconds): {}", bench.cp.process_cpu());
        return Ok(());
    }
    let mut hosts = Replicas::start(&bench.cp, vec!["load-host".into()], vec![owned.clone()]);
    let provisioned = provision(
        &bench,
        &mut hosts,
        step.as_ref().map(|s| s.fast_annotation()),
    )?;
    print_provisioned(&bench.args, &provisioned);
    let host = hosts.hosts.remove(0);
    let host_args = as_strs(&owned);
    // The restart runs under Gardener's default budget (unless `--host-arg` set one): a
    // restarted host must not need a Gardener request per settled Runtime.
    let unlimited = format!("{budget}=0");
    let restart_args: Vec<&str> = host_args
        .iter()
        .copied()
        .filter(|a| *a != unlimited)
        .collect();
    match step {
        Some(mut step) => rollout(&bench, &host, &mut step)?,
        None => resync(&bench, host, &restart_args),
    }
    println!("processes (CPU seconds): {}", bench.cp.process_cpu());
    Ok(())
}

/// `--replicas` hosts sharding the Runtimes, each holding its shard Lease before the first
/// Runtime is made (so that the split is the ring's, not the first comer's).
fn start_replicas(bench: &Bench, host_args: &[String]) -> Replicas {
    let names: Vec<String> = (0..bench.args.replicas)
        .map(|i| format!("load-replica-{i}"))
        .collect();
    let args = names
        .iter()
        .map(|name| {
            let mut args = host_args.to_vec();
            args.extend(["--sharding".into(), "--identity".into(), name.clone()]);
            args
        })
        .collect();
    let hosts = Replicas::start(&bench.cp, names, args);
    let started = Instant::now();
    while !hosts
        .hosts
        .iter()
        .all(|h| h.logs().contains("holding the shard lease"))
        && started.elapsed() < Duration::from_secs(120)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    // The leader's next pass sees every shard Lease.
    std::thread::sleep(Duration::from_secs(2));
    hosts
}

/// Each Runtime's shard label, kept from one metadata watch: polling the Runtimes of a
/// shard four times a second (3,414 of them at 10,000) loads the API server whose label
/// writes the failover waits for.
#[derive(Clone, Default)]
struct Placements(Arc<Mutex<(HashMap<String, String>, bool)>>);

impl Placements {
    /// Follow `api` on the benchmark's runtime until it is dropped.
    fn follow(bench: &Bench) -> Self {
        let placements = Self::default();
        let api: Api<PartialObjectMeta<Runtime>> = Api::namespaced(bench.client.clone(), "load");
        let into = placements.clone();
        bench.rt.spawn(async move {
            let events = watcher(api, watcher::Config::default()).default_backoff();
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let mut held = into.0.lock().expect("placements lock");
                match event {
                    Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => {
                        let shard = r.metadata.labels.as_ref().and_then(|l| l.get(SHARD));
                        let name = r.metadata.name.clone().unwrap_or_default();
                        held.0.insert(name, shard.cloned().unwrap_or_default());
                    }
                    Ok(watcher::Event::Delete(r)) => {
                        held.0.remove(&r.metadata.name.unwrap_or_default());
                    }
                    Ok(watcher::Event::InitDone) => held.1 = true,
                    Ok(watcher::Event::Init) | Err(_) => {}
                }
            }
        });
        placements
    }

    /// Runtimes labelled for `shard`, once the watch has listed them.
    fn listed_on(&self, shard: &str) -> usize {
        loop {
            match self.on(shard) {
                Some(n) => return n,
                None => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Runtimes labelled for `shard` (`None` until the watch has listed them once).
    fn on(&self, shard: &str) -> Option<usize> {
        let held = self.0.lock().expect("placements lock");
        held.1
            .then(|| held.0.values().filter(|s| s.as_str() == shard).count())
    }
}

/// Kill the leading replica (SIGKILL) and measure the handover: how long until none of its
/// Runtimes is left on its shard (its Lease must expire first: 15 s by default), and what
/// the survivors then spent taking them over (a handover must not cost Gardener a request
/// per Runtime).
fn failover(bench: &Bench, replicas: Replicas) -> anyhow::Result<()> {
    let (mut hosts, names) = (replicas.hosts, replicas.names);
    // The leader, the worst case: a survivor must take the leader Lease before anything
    // moves.
    let index = hosts
        .iter()
        .position(|h| h.logs().contains("became leader"))
        .unwrap_or(0);
    let victim = &names[index];
    let placements = Placements::follow(bench);
    let moving = placements.listed_on(victim);
    let leader = hosts[index].logs().contains("became leader");
    let before = bench.cp.sim_stats();
    hosts[index].kill();
    let killed = Instant::now();
    let killed_at = jiff::Timestamp::now();
    while placements.on(victim) != Some(0) && killed.elapsed() < bench.limit() {
        std::thread::sleep(Duration::from_millis(250));
    }
    let moved = killed.elapsed();
    // When a survivor took the leader Lease, from its log: the first part of the handover.
    let led = hosts
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .filter_map(|(_, h)| logged_at(&h.logs(), "became leader"))
        .filter(|at| *at >= killed_at)
        .min()
        .map(|at| at.duration_since(killed_at).as_secs_f64());
    let settle = wait_quiet(&bench.cp, Duration::from_secs(10), bench.limit());
    let after = bench.cp.sim_stats();
    let ready = bench.rt.block_on(ready_count(&bench.api));
    let rss: Vec<String> = hosts
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, h)| format!("{:.0}", usage(h.pid()).0))
        .collect();
    println!(
        "failover (1 of {} replicas killed, the leader: {leader}): its {moving} Runtimes on other shards after {:.1} s (the leader Lease taken after {}); survivors busy {:.1} s: {} requests, {} writes, {} to Gardener ({} Shoot reads); {ready} Ready; survivors' peak RSS {} MiB",
        names.len(),
        moved.as_secs_f64(),
        led.map_or("?".into(), |s| format!("{s:.1} s")),
        settle.as_secs_f64(),
        delta(&after, &before, "requests") - delta(&after, &before, "leaseRequests"),
        delta(&after, &before, "writes"),
        delta(&after, &before, "gardenerRequests"),
        shoot_reads(&after) - shoot_reads(&before),
        rss.join(", "),
    );
    println!(
        "failover requests by kind (leases included): {}",
        by_kind(&after, &before, 10)
    );
    anyhow::ensure!(
        ready == bench.args.runtimes,
        "only {ready} Ready after the failover"
    );
    Ok(())
}

/// When the last line of `logs` (the host's JSON lines) with `message` was written.
fn logged_at(logs: &str, message: &str) -> Option<jiff::Timestamp> {
    logs.lines()
        .rev()
        .filter(|line| line.contains(message))
        .find_map(|line| {
            let v: Value = serde_json::from_str(line).ok()?;
            if v["fields"]["message"] != message {
                return None;
            }
            v["timestamp"].as_str()?.parse().ok()
        })
}

/// Where one Runtime stands, from a watch of the Runtimes.
#[derive(Debug, Clone, Default)]
struct Seen {
    fast: bool,
    ready: bool,
    /// The digest `status.plugins` records for the rolled-out step.
    digest: Option<String>,
}

/// Every Runtime as last seen, and whether the watch's initial list is complete.
#[derive(Debug, Default)]
struct Fleet {
    runtimes: HashMap<String, Seen>,
    listed: bool,
}

impl Fleet {
    /// (Runtimes on `fast`, of them Ready on `digest`, others, of them on `digest`).
    fn count(&self, digest: &str) -> (usize, usize, usize, usize) {
        let on = |s: &Seen| s.digest.as_deref() == Some(digest);
        let (fast, slow): (Vec<&Seen>, Vec<&Seen>) = self.runtimes.values().partition(|s| s.fast);
        (
            fast.len(),
            fast.iter().filter(|s| s.ready && on(s)).count(),
            slow.len(),
            slow.iter().filter(|s| on(s)).count(),
        )
    }
}

fn seen(runtime: &Runtime, step: &str) -> Seen {
    let (key, value) = (
        format!("{}{step}", tessera::crd::labels::CHANNEL_PREFIX),
        FAST,
    );
    let status = runtime.status.as_ref();
    Seen {
        fast: runtime
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&key))
            .map(String::as_str)
            == Some(value),
        ready: status.and_then(|s| s.state) == Some(RuntimeState::Ready),
        digest: status
            .and_then(|s| s.plugins.iter().find(|p| p.name == step))
            .map(|p| p.digest.clone()),
    }
}

/// Keep `fleet` up to date from a watch of `api` (one stream: cheaper for the API server
/// the host shares the machine with than listing thousands of Runtimes again and again).
fn follow(api: Api<Runtime>, step: String, fleet: Arc<Mutex<Fleet>>) -> impl Future<Output = ()> {
    let events = watcher(api, watcher::Config::default());
    async move {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let mut fleet = fleet.lock().expect("fleet lock");
            match event {
                Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => {
                    let name = r.metadata.name.clone().unwrap_or_default();
                    fleet.runtimes.insert(name, seen(&r, &step));
                }
                Ok(watcher::Event::InitDone) => fleet.listed = true,
                Ok(_) => {}
                Err(e) => eprintln!("Runtime watch: {e}"),
            }
        }
    }
}

/// The host's counters a rollout moves.
#[derive(Debug, Clone, Copy)]
struct Counters {
    wakes: f64,
    run: f64,
    cached: f64,
    reconciles: f64,
}

fn counters(metrics: &str) -> Counters {
    let text = scrape(metrics);
    let runtime = [("controller", "runtime")];
    Counters {
        wakes: metric_sum(&text, "tessera_catalog_wakes_total", &runtime),
        run: metric_sum(&text, "tessera_render_steps_total", &[("result", "run")]),
        cached: metric_sum(&text, "tessera_render_steps_total", &[("result", "cached")]),
        reconciles: metric_sum(&text, "tessera_reconciles_total", &runtime),
    }
}

/// Log lines written after byte `from` whose message is `message`.
fn logged(host: &Host, from: usize, message: &str) -> usize {
    let needle = format!("\"message\":\"{message}\"");
    host.logs()
        .get(from..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .count()
}

/// What the host did between two points of a rollout.
struct Spent {
    cpu: f64,
    counters: Counters,
    stats: Value,
}

impl Spent {
    fn now(bench: &Bench, host: &Host, metrics: &str) -> Self {
        Self {
            cpu: cpu_seconds(host.pid()),
            counters: counters(metrics),
            stats: bench.cp.sim_stats(),
        }
    }
}

/// Release new digests of the step on `fast` once the fleet settled, one per round, and
/// measure each until every `fast` Runtime records it and is Ready again (see
/// docs/performance.md).
fn rollout(bench: &Bench, host: &Host, step: &mut RolloutStep) -> anyhow::Result<()> {
    // The fleet settles first: status writes and Events after Ready are not the rollout's.
    wait_quiet(&bench.cp, Duration::from_secs(5), bench.limit());
    let fleet = Arc::new(Mutex::new(Fleet::default()));
    let watch = bench
        .rt
        .spawn(follow(bench.api.clone(), step.step.clone(), fleet.clone()));
    while !fleet.lock().expect("fleet lock").listed {
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics = host
        .metrics_addr(Duration::from_secs(5))
        .ok_or_else(|| anyhow::anyhow!("the host logged no metrics address"))?;
    let result = (1..=bench.args.rollout_rounds)
        .try_for_each(|round| rollout_round(bench, host, step, &fleet, &metrics, round));
    watch.abort();
    result
}

/// Push `version`: the step's component with other bytes; its digest.
fn release(bench: &Bench, step: &mut RolloutStep, version: &str) -> anyhow::Result<String> {
    // Same code, new bytes; unique per run, so that the host compiles it as it would a
    // real release instead of finding it in its compile cache from an earlier run.
    let mark = format!(
        "load --rollout {version} {:?}",
        std::time::SystemTime::now()
    );
    let bytes = with_custom_section(&step.component, "tessera-rollout", mark.as_bytes());
    bench.rt.block_on(step.push(version, &bytes))?;
    Ok(component_digest(&bytes))
}

/// Move `fast` to a new digest `1.<round>.0` and measure until it reached its Runtimes.
fn rollout_round(
    bench: &Bench,
    host: &Host,
    step: &mut RolloutStep,
    fleet: &Mutex<Fleet>,
    metrics: &str,
    round: u32,
) -> anyhow::Result<()> {
    let version = format!("1.{round}.0");
    let new = release(bench, step, &version)?;
    let log_from = host.logs().len();
    let before = Spent::now(bench, host, metrics);
    let started = Instant::now();
    bench
        .rt
        .block_on(step.apply_plugin(&bench.client, &version))?;
    let (plugin_ready, done) = wait_rolled_out(bench, host, &step.step, fleet, &new, started)?;
    wait_quiet(&bench.cp, Duration::from_secs(3), bench.limit());
    let after = Spent::now(bench, host, metrics);
    let fleet = fleet.lock().expect("fleet lock");
    let (fast, fast_new, slow, slow_new) = fleet.count(&new);
    let slow_old = fleet.count(&component_digest(&step.component)).3;
    println!(
        "rollout {round}: {} {version} (new digest, same code) on channel {FAST}:",
        step.step
    );
    println!(
        "  Plugin channel {FAST} ready on it after: {:.2} s (host CPU {:.2} s: pull, compile)",
        plugin_ready.at.as_secs_f64(),
        plugin_ready.cpu - before.cpu
    );
    println!(
        "  every {FAST} Runtime on it and Ready after: {:.2} s ({fast_new}/{fast})",
        done.at.as_secs_f64()
    );
    // After the Plugin was seen ready: the renders and status writes, nearly all of it.
    let renders = after.cpu - plugin_ready.cpu;
    println!(
        "  host CPU until then / until quiet: {:.2} s / {:.2} s; after the Plugin was ready {:.2} s, {:.1} ms per affected Runtime",
        done.cpu - before.cpu,
        after.cpu - before.cpu,
        renders,
        renders * 1000.0 / fast.max(1) as f64
    );
    print_spent(host, log_from, &before, &after);
    println!("  other Runtimes on 1.0.0's digest: {slow_old}/{slow} (on the new one: {slow_new})");
    anyhow::ensure!(
        slow_old == slow && slow_new == 0,
        "the rollout reached Runtimes not on {FAST}"
    );
    Ok(())
}

fn print_spent(host: &Host, log_from: usize, before: &Spent, after: &Spent) {
    let (c0, c1) = (before.counters, after.counters);
    println!(
        "  Runtimes woken: {:.0}; runtime reconciles: {:.0}; render steps run {:.0}, cached {:.0}",
        c1.wakes - c0.wakes,
        c1.reconciles - c0.reconciles,
        c1.run - c0.run,
        c1.cached - c0.cached
    );
    let (s0, s1) = (&before.stats, &after.stats);
    println!(
        "  Shoots patched: {}; renders equal to the applied Shoot: {}; host API requests {} ({} writes)",
        logged(host, log_from, "Shoot patched"),
        logged(
            host,
            log_from,
            "new plugin versions render the same Shoot; nothing to patch"
        ),
        delta(s1, s0, "requests") - delta(s1, s0, "leaseRequests"),
        delta(s1, s0, "writes"),
    );
}

/// Whether the Plugin's `fast` channel reports `digest` ready.
fn channel_on(bench: &Bench, plugins: &Api<Plugin>, step: &str, digest: &str) -> bool {
    let status = bench
        .rt
        .block_on(plugins.get(step))
        .ok()
        .and_then(|p| p.status);
    status
        .and_then(|s| s.channels.into_iter().find(|c| c.name == FAST))
        .is_some_and(|c| c.ready && c.component_digest.as_deref() == Some(digest))
}

/// When something happened (from the rollout's start) and the host's CPU seconds then.
#[derive(Debug, Clone, Copy)]
struct Moment {
    at: Duration,
    cpu: f64,
}

/// Wait until the Plugin's `fast` channel reports `digest` and every `fast` Runtime is
/// Ready with `digest` recorded for `step`; when each happened (from `started`).
fn wait_rolled_out(
    bench: &Bench,
    host: &Host,
    step: &str,
    fleet: &Mutex<Fleet>,
    digest: &str,
    started: Instant,
) -> anyhow::Result<(Moment, Moment)> {
    let plugins: Api<Plugin> = Api::all(bench.client.clone());
    let (mut plugin_ready, mut fleet_done) = (None, None);
    let mut last_print = Instant::now();
    let now = || Moment {
        at: started.elapsed(),
        cpu: cpu_seconds(host.pid()),
    };
    loop {
        if plugin_ready.is_none() && channel_on(bench, &plugins, step, digest) {
            plugin_ready = Some(now());
        }
        let (fast, fast_new, ..) = fleet.lock().expect("fleet lock").count(digest);
        if fleet_done.is_none() && fast_new == fast {
            fleet_done = Some(now());
        }
        if let (Some(plugin), Some(fleet)) = (plugin_ready, fleet_done) {
            return Ok((plugin, fleet));
        }
        anyhow::ensure!(
            started.elapsed() < bench.limit(),
            "only {fast_new}/{fast} {FAST} Runtimes on {digest} after {:?} (Plugin ready: {plugin_ready:?})",
            started.elapsed()
        );
        if last_print.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "{:>6.0?}: {fast_new}/{fast} {FAST} Runtimes rolled out",
                started.elapsed()
            );
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

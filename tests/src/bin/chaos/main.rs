//! `chaos --seed S --kills K`: hosts killed with SIGKILL at random moments (a seeded
//! plan) while Runtimes, RuntimeAccesses and (with `--modulesets`) ModuleSets are created,
//! changed and deleted and the Gardener side fails for a while; then every check of
//! convergence: each Shoot and each module object created once (the simulator notes every
//! uid a Shoot name had, a watch every uid of a module object), no Shoot,
//! RuntimeKubeconfig, Secret, service account or module object left without its object, no
//! finalizer stuck, every Runtime and ModuleSet Ready at its generation with the modules'
//! objects as last asked, and every RuntimeAccess Ready. Prints what it did and how long
//! convergence took; exits non-zero naming each violation. Run through `./x chaos`; a
//! small fixed-seed run is part of `./x test` (`tests/tests/small_chaos.rs`).

mod modules;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera::crd::{
    KubeconfigState, ModuleSet, Runtime, RuntimeAccess, RuntimeKubeconfig, RuntimeState, labels,
};
use tessera::gardener::shoot_resource;
use tessera_tests::env::{ControlPlane, Host};
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::client_for;

const NS: &str = "chaos";
const PROJECT: &str = "garden-kyma-dev";

#[derive(Debug, Parser)]
struct Args {
    /// Seeds the plan: which host dies when, what changes, when Gardener fails.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hosts running at once (one leads; a killed one is replaced at once).
    #[arg(long, default_value_t = 2)]
    hosts: usize,
    /// Runtimes created before the first kill (more come and go during the run).
    #[arg(long, default_value_t = 6)]
    runtimes: usize,
    /// Kills (SIGKILL) of the leading host or another, one per step.
    #[arg(long, default_value_t = 6)]
    kills: usize,
    /// Mean milliseconds between two kills.
    #[arg(long, default_value_t = 3000)]
    gap_ms: u64,
    /// Give up converging after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Shard the objects across the hosts (`tessera run --sharding`): every kill hands a
    /// shard's objects over, every new host takes a share through the drain step.
    #[arg(long)]
    sharding: bool,
    /// ModuleSets (two modules each, from a real registry) created before the first kill on
    /// the first Runtimes' clusters; with any, sets are also created, changed and deleted
    /// during the run, and a Runtime is deleted only once it has none (as a user would).
    #[arg(long, default_value_t = 0)]
    modulesets: usize,
}

/// What the run wants to exist, and what it did.
#[derive(Default)]
struct World {
    /// Runtimes created and not deleted (by index).
    live: BTreeSet<usize>,
    /// Runtimes deleted.
    deleted: BTreeSet<usize>,
    /// RuntimeAccesses (runtime index, access index) created and not deleted.
    accesses: BTreeSet<(usize, usize)>,
    /// RuntimeAccesses deleted.
    deleted_accesses: BTreeSet<(usize, usize)>,
    next_runtime: usize,
    next_access: usize,
    kills: usize,
    changes: Vec<String>,
    /// ModuleSets created and not deleted: set index → (runtime index, colour asked).
    sets: BTreeMap<usize, (usize, u32)>,
    /// ModuleSets deleted: set index → runtime index.
    deleted_sets: BTreeMap<usize, usize>,
    next_set: usize,
    /// When the current Gardener outage ends.
    outage_until: Option<Instant>,
    outages: usize,
}

struct Chaos {
    args: Args,
    cp: ControlPlane,
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    runtime_client: kube::Client,
    rng: fastrand::Rng,
    hosts: Vec<Host>,
    /// The identity of each of `hosts`.
    names: Vec<String>,
    started_hosts: usize,
    world: World,
    /// With `--modulesets`: the registry, plugin store and module-object uids.
    modules: Option<modules::Modules>,
}

fn runtime_name(i: usize) -> String {
    format!("chaos-{i}")
}

fn access_name(a: usize) -> String {
    format!("chaos-a{a}")
}

impl Chaos {
    fn start(args: Args) -> anyhow::Result<Self> {
        let script = Script {
            create_ms: 1500,
            reconcile_ms: 500,
            delete_ms: 500,
            ..Script::default()
        };
        let cp = ControlPlane::start_for_tool(&script, NS).map_err(anyhow::Error::msg)?;
        let rt = tokio::runtime::Runtime::new()?;
        let client = rt.block_on(client_for(&cp.garden.kubeconfig));
        let runtime_client = rt.block_on(client_for(&cp.runtime.kubeconfig));
        let rng = fastrand::Rng::with_seed(args.seed);
        let modules = (args.modulesets > 0)
            .then(|| rt.block_on(modules::Modules::start(&client, &runtime_client)))
            .transpose()?;
        Ok(Self {
            args,
            cp,
            rt,
            client,
            runtime_client,
            rng,
            hosts: Vec::new(),
            names: Vec::new(),
            started_hosts: 0,
            world: World::default(),
            modules,
        })
    }

    fn start_host(&mut self) {
        self.started_hosts += 1;
        let name = format!("chaos-host-{}", self.started_hosts);
        let mut args = vec![
            "--namespace",
            NS,
            "--lease-duration",
            "6s",
            "--requeue-retry",
            "1s",
            "--requeue-error",
            "1s",
            "--gardener-requests-per-second=0",
            "--identity",
            &name,
        ];
        if self.args.sharding {
            args.push("--sharding");
        }
        let plugins = self.modules.as_ref().map(|m| m.host_args.clone());
        args.extend(plugins.iter().flatten().map(String::as_str));
        self.hosts.push(self.cp.host(&name, &args));
        self.names.push(name);
    }

    fn runtimes(&self) -> Api<Runtime> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn accesses(&self) -> Api<RuntimeAccess> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn sets(&self) -> Api<ModuleSet> {
        Api::namespaced(self.client.clone(), NS)
    }
}

fn runtime_doc(i: usize) -> anyhow::Result<Runtime> {
    let text =
        std::fs::read_to_string(tessera_tests::workspace().join("examples/runtime-aws.yaml"))?;
    let mut doc: Value = serde_saphyr::from_str(&text)?;
    doc["metadata"] = json!({ "name": runtime_name(i), "namespace": NS });
    doc["spec"]["shoot"]["name"] = runtime_name(i).into();
    Ok(serde_json::from_value(doc)?)
}

fn access_doc(runtime: usize, access: usize) -> anyhow::Result<RuntimeAccess> {
    let name = access_name(access);
    Ok(serde_json::from_value(json!({
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "RuntimeAccess",
        "metadata": { "name": name, "namespace": NS },
        "spec": {
            "runtime": runtime_name(runtime),
            "serviceAccount": { "name": name, "namespace": "default" },
            "grants": [{ "namespace": "default",
                "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }] }],
            "lifetime": "1h",
        },
    }))?)
}

/// The changes a step may make.
#[derive(Debug, Clone, Copy)]
enum Change {
    CreateRuntime,
    PatchRuntime,
    DeleteRuntime,
    CreateAccess,
    DeleteAccess,
    GardenerOutage,
    CreateModuleSet,
    PatchModuleSet,
    DeleteModuleSet,
}

/// Every change a step may make; a run without ModuleSets draws from the first six only,
/// so a seed plans as it did before they came.
const CHANGES: [Change; 9] = [
    Change::CreateRuntime,
    Change::PatchRuntime,
    Change::DeleteRuntime,
    Change::CreateAccess,
    Change::DeleteAccess,
    Change::GardenerOutage,
    Change::CreateModuleSet,
    Change::PatchModuleSet,
    Change::DeleteModuleSet,
];
const WITHOUT_MODULES: usize = 6;

impl Chaos {
    fn pick(&mut self, from: &BTreeSet<usize>) -> Option<usize> {
        let n = from.len();
        (n > 0).then(|| *from.iter().nth(self.rng.usize(..n)).expect("in range"))
    }

    /// Make `change`; a description of what was done, if anything.
    fn make(&mut self, change: Change) -> anyhow::Result<Option<String>> {
        match change {
            Change::CreateRuntime => self.create_runtime().map(Some),
            Change::PatchRuntime => self.patch_runtime(),
            Change::DeleteRuntime => self.delete_runtime(),
            Change::CreateAccess => self.create_access(),
            Change::DeleteAccess => self.delete_access(),
            Change::GardenerOutage => Ok(self.gardener_outage()),
            Change::CreateModuleSet => self.create_set(),
            Change::PatchModuleSet => self.patch_set(),
            Change::DeleteModuleSet => self.delete_set(),
        }
    }

    fn create_runtime(&mut self) -> anyhow::Result<String> {
        let i = self.world.next_runtime;
        self.world.next_runtime += 1;
        let doc = runtime_doc(i)?;
        let api = self.runtimes();
        self.rt.block_on(api.create(&PostParams::default(), &doc))?;
        self.world.live.insert(i);
        Ok(format!("created {}", runtime_name(i)))
    }

    fn patch_runtime(&mut self) -> anyhow::Result<Option<String>> {
        let Some(i) = self.pick(&self.world.live.clone()) else {
            return Ok(None);
        };
        let maximum = 3 + self.rng.u32(..20);
        let runtime = self.rt.block_on(self.runtimes().get(&runtime_name(i)))?;
        let mut workers =
            serde_json::to_value(&runtime.spec)?["shoot"]["provider"]["workers"].clone();
        workers[0]["maximum"] = maximum.into();
        let patch = json!({ "spec": { "shoot": { "provider": { "workers": workers } } } });
        let params = PatchParams::default();
        self.rt.block_on(self.runtimes().patch(
            &runtime_name(i),
            &params,
            &Patch::Merge(&patch),
        ))?;
        Ok(Some(format!(
            "patched {} (maximum {maximum})",
            runtime_name(i)
        )))
    }

    /// Delete a Runtime (its RuntimeAccesses first, as a user would); only one without
    /// ModuleSets: a user deletes those first and waits for them to go.
    fn delete_runtime(&mut self) -> anyhow::Result<Option<String>> {
        if self.world.live.len() <= 2 {
            return Ok(None);
        }
        let busy = self.runtimes_with_sets()?;
        let free = self.world.live.difference(&busy).copied().collect();
        let Some(i) = self.pick(&free) else {
            return Ok(None);
        };
        let theirs: Vec<(usize, usize)> = self
            .world
            .accesses
            .iter()
            .filter(|(r, _)| *r == i)
            .copied()
            .collect();
        for (r, a) in theirs {
            self.delete_access_of(r, a)?;
        }
        let params = DeleteParams::default();
        self.rt
            .block_on(self.runtimes().delete(&runtime_name(i), &params))?;
        self.world.live.remove(&i);
        self.world.deleted.insert(i);
        Ok(Some(format!("deleted {}", runtime_name(i))))
    }

    fn create_access(&mut self) -> anyhow::Result<Option<String>> {
        let Some(i) = self.pick(&self.world.live.clone()) else {
            return Ok(None);
        };
        let a = self.world.next_access;
        self.world.next_access += 1;
        let doc = access_doc(i, a)?;
        self.rt
            .block_on(self.accesses().create(&PostParams::default(), &doc))?;
        self.world.accesses.insert((i, a));
        Ok(Some(format!(
            "created {} for {}",
            access_name(a),
            runtime_name(i)
        )))
    }

    fn delete_access(&mut self) -> anyhow::Result<Option<String>> {
        let all: Vec<(usize, usize)> = self.world.accesses.iter().copied().collect();
        if all.is_empty() {
            return Ok(None);
        }
        let (r, a) = all[self.rng.usize(..all.len())];
        self.delete_access_of(r, a)?;
        Ok(Some(format!("deleted {}", access_name(a))))
    }

    fn delete_access_of(&mut self, runtime: usize, access: usize) -> anyhow::Result<()> {
        let params = DeleteParams::default();
        self.rt
            .block_on(self.accesses().delete(&access_name(access), &params))?;
        self.world.accesses.remove(&(runtime, access));
        self.world.deleted_accesses.insert((runtime, access));
        Ok(())
    }

    /// Gardener answers every Shoot request with 503 for 2 to 8 seconds.
    fn gardener_outage(&mut self) -> Option<String> {
        if self.world.outage_until.is_some() {
            return None;
        }
        let lasts = Duration::from_millis(2000 + self.rng.u64(..6000));
        self.cp.sim_outage("shoots", Some(503));
        self.world.outage_until = Some(Instant::now() + lasts);
        self.world.outages += 1;
        Some(format!("Gardener down for {lasts:.1?}"))
    }

    fn end_outage_if_due(&mut self, now: Instant) {
        if self.world.outage_until.is_some_and(|until| until <= now) {
            self.cp.sim_outage("shoots", None);
            self.world.outage_until = None;
        }
    }
}

impl Chaos {
    /// Runtimes a ModuleSet targets: those of live sets and of deleted ones not yet gone.
    fn runtimes_with_sets(&self) -> anyhow::Result<BTreeSet<usize>> {
        let mut busy: BTreeSet<usize> = self.world.sets.values().map(|(r, _)| *r).collect();
        if !self.world.deleted_sets.is_empty() {
            let lp = ListParams::default();
            for set in self.rt.block_on(self.sets().list_metadata(&lp))?.items {
                let name = set.metadata.name.unwrap_or_default();
                let deleted = self.world.deleted_sets.iter();
                let r = deleted.filter(|(s, _)| modules::set_name(**s) == name);
                busy.extend(r.map(|(_, r)| *r));
            }
        }
        Ok(busy)
    }

    fn apply_set(&self, s: usize, runtime: usize, color: u32) -> anyhow::Result<()> {
        let doc = modules::set_doc(s, &runtime_name(runtime), color);
        let params = PatchParams::apply("chaos").force();
        let patch = Patch::Apply(&doc);
        self.rt
            .block_on(self.sets().patch(&modules::set_name(s), &params, &patch))?;
        Ok(())
    }

    /// A ModuleSet on a live Runtime's cluster (its kubeconfig Secret may not exist yet).
    fn create_set(&mut self) -> anyhow::Result<Option<String>> {
        let Some(runtime) = self.pick(&self.world.live.clone()) else {
            return Ok(None);
        };
        let s = self.world.next_set;
        self.world.next_set += 1;
        let color = self.rng.u32(..1000);
        self.apply_set(s, runtime, color)?;
        self.world.sets.insert(s, (runtime, color));
        let on = runtime_name(runtime);
        Ok(Some(format!("created {} on {on}", modules::set_name(s))))
    }

    /// A new colour for a set's modules: every object of it is updated in place.
    fn patch_set(&mut self) -> anyhow::Result<Option<String>> {
        let live: BTreeSet<usize> = self.world.sets.keys().copied().collect();
        let Some(s) = self.pick(&live) else {
            return Ok(None);
        };
        let color = self.rng.u32(..1000);
        let runtime = self.world.sets[&s].0;
        self.apply_set(s, runtime, color)?;
        self.world.sets.insert(s, (runtime, color));
        Ok(Some(format!(
            "patched {} (colour {color})",
            modules::set_name(s)
        )))
    }

    fn delete_set(&mut self) -> anyhow::Result<Option<String>> {
        let live: BTreeSet<usize> = self.world.sets.keys().copied().collect();
        let Some(s) = self.pick(&live) else {
            return Ok(None);
        };
        let params = DeleteParams::default();
        self.rt
            .block_on(self.sets().delete(&modules::set_name(s), &params))?;
        let (runtime, _) = self
            .world
            .sets
            .remove(&s)
            .expect("picked from the live sets");
        self.world.deleted_sets.insert(s, runtime);
        Ok(Some(format!("deleted {}", modules::set_name(s))))
    }

    fn changes(&self) -> &'static [Change] {
        if self.modules.is_some() {
            &CHANGES
        } else {
            &CHANGES[..WITHOUT_MODULES]
        }
    }

    /// SIGKILL a random host (the leader as likely as any) and start another.
    fn kill_one(&mut self) {
        let i = self.rng.usize(..self.hosts.len());
        let mut host = self.hosts.remove(i);
        self.names.remove(i);
        host.kill();
        self.world.kills += 1;
        self.start_host();
    }

    /// The seeded plan: per step a wait, a kill and up to two changes.
    fn run_plan(&mut self) -> anyhow::Result<()> {
        for _ in 0..self.args.kills {
            let gap = self.rng.u64(self.args.gap_ms / 5..=self.args.gap_ms * 2);
            std::thread::sleep(Duration::from_millis(gap));
            self.end_outage_if_due(Instant::now());
            self.kill_one();
            for _ in 0..self.rng.usize(1..=2) {
                let changes = self.changes();
                let change = changes[self.rng.usize(..changes.len())];
                if let Some(done) = self.make(change)? {
                    eprintln!("chaos: {done}");
                    self.world.changes.push(done);
                }
            }
        }
        if self.world.outage_until.take().is_some() {
            self.cp.sim_outage("shoots", None);
        }
        Ok(())
    }
}

/// What is left to converge, in words (empty: converged).
async fn unsettled(c: &Chaos) -> anyhow::Result<Vec<String>> {
    let mut left = Vec::new();
    let runtimes = c.runtimes().list(&ListParams::default()).await?.items;
    for rt in &runtimes {
        let name = rt.metadata.name.clone().unwrap_or_default();
        let status = rt.status.clone().unwrap_or_default();
        let ready = status.state == Some(RuntimeState::Ready)
            && status.observed_generation == rt.metadata.generation;
        if rt.metadata.deletion_timestamp.is_some() {
            left.push(format!("Runtime {name} still being deleted"));
        } else if !ready {
            left.push(format!("Runtime {name} is {:?}", status.state));
        }
    }
    let names: BTreeSet<String> = runtimes
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    for i in &c.world.live {
        if !names.contains(&runtime_name(*i)) {
            left.push(format!("Runtime {} is missing", runtime_name(*i)));
        }
    }
    let accesses = c.accesses().list(&ListParams::default()).await?.items;
    if c.args.sharding {
        let metas = runtimes.iter().map(|r| ("Runtime", &r.metadata));
        left.extend(misplaced(
            c,
            metas.chain(accesses.iter().map(|a| ("RuntimeAccess", &a.metadata))),
        ));
    }
    let names: BTreeSet<String> = accesses
        .iter()
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    for (_, a) in &c.world.accesses {
        if !names.contains(&access_name(*a)) {
            left.push(format!("RuntimeAccess {} is missing", access_name(*a)));
        }
    }
    left.extend(unsettled_sets(c).await?);
    for access in &accesses {
        let name = access.metadata.name.clone().unwrap_or_default();
        let state = access.status.as_ref().and_then(|s| s.state);
        if access.metadata.deletion_timestamp.is_some() {
            left.push(format!("RuntimeAccess {name} still being deleted"));
        } else if state != Some(KubeconfigState::Ready) {
            left.push(format!("RuntimeAccess {name} is {state:?}"));
        }
    }
    Ok(left)
}

/// With `--modulesets`: the sets left to converge, and (sharded) those not on a running
/// host's shard.
async fn unsettled_sets(c: &Chaos) -> anyhow::Result<Vec<String>> {
    if c.modules.is_none() {
        return Ok(Vec::new());
    }
    let sets = c.sets().list(&ListParams::default()).await?.items;
    let mut left = modules::unsettled(&sets, &c.world.sets);
    if c.args.sharding {
        let metas = sets.iter().map(|s| ("ModuleSet", &s.metadata));
        left.extend(misplaced(c, metas));
    }
    Ok(left)
}

fn main() -> anyhow::Result<()> {
    let mut c = Chaos::start(Args::parse())?;
    for _ in 0..c.args.hosts {
        c.start_host();
    }
    for _ in 0..c.args.runtimes {
        c.create_runtime()?;
    }
    // Every other Runtime gets a RuntimeAccess from the start (more come and go).
    for i in (0..c.args.runtimes).step_by(2) {
        let a = c.world.next_access;
        c.world.next_access += 1;
        let doc = access_doc(i, a)?;
        c.rt.block_on(c.accesses().create(&PostParams::default(), &doc))?;
        c.world.accesses.insert((i, a));
    }
    for s in 0..c.args.modulesets {
        let (runtime, color) = (s % c.args.runtimes.max(1), c.rng.u32(..1000));
        c.apply_set(s, runtime, color)?;
        c.world.sets.insert(s, (runtime, color));
        c.world.next_set += 1;
    }
    let started = Instant::now();
    c.run_plan()?;
    let plan = started.elapsed();
    let converged = Instant::now();
    let limit = Duration::from_secs(c.args.timeout);
    let mut left = c.rt.block_on(unsettled(&c))?;
    let mut shown = Instant::now();
    while !left.is_empty() && converged.elapsed() < limit {
        if shown.elapsed() >= Duration::from_secs(10) {
            shown = Instant::now();
            eprintln!(
                "after {:.0?} still unsettled: {:?}",
                converged.elapsed(),
                &left[..left.len().min(4)]
            );
        }
        std::thread::sleep(Duration::from_secs(1));
        left = c.rt.block_on(unsettled(&c))?;
    }
    let took = converged.elapsed();
    let mut violations = left;
    violations.extend(c.rt.block_on(leftovers(&c))?);
    print_summary(&c, plan, took, &violations);
    anyhow::ensure!(violations.is_empty(), "{} violation(s)", violations.len());
    Ok(())
}

fn print_summary(c: &Chaos, plan: Duration, took: Duration, violations: &[String]) {
    let w = &c.world;
    println!("seed:                 {}", c.args.seed);
    println!(
        "hosts:                {} at once, {} started",
        c.args.hosts, c.started_hosts
    );
    println!("kills (SIGKILL):      {}", w.kills);
    println!("changes:              {}", w.changes.len());
    println!("Gardener outages:     {}", w.outages);
    println!(
        "runtimes:             {} live, {} deleted; accesses: {} live",
        w.live.len(),
        w.deleted.len(),
        w.accesses.len()
    );
    if let Some(m) = &c.modules {
        println!(
            "modulesets:           {} live, {} deleted; {} module object names seen",
            w.sets.len(),
            w.deleted_sets.len(),
            m.seen()
        );
    }
    println!("plan ran:             {:.1} s", plan.as_secs_f64());
    println!(
        "converged after:      {:.1} s (after the plan)",
        took.as_secs_f64()
    );
    println!("violations:           {}", violations.len());
    for v in violations {
        println!("  {v}");
    }
}

/// With sharding: objects not (yet) on the shard of a running host, or still draining.
fn misplaced<'m>(
    c: &Chaos,
    metas: impl Iterator<Item = (&'static str, &'m ObjectMeta)>,
) -> Vec<String> {
    let mut left = Vec::new();
    for (kind, meta) in metas {
        let name = meta.name.clone().unwrap_or_default();
        let labels = meta.labels.clone().unwrap_or_default();
        match labels.get(labels::SHARD) {
            _ if labels.contains_key(labels::DRAIN) => {
                left.push(format!("{kind} {name} is still draining"))
            }
            Some(shard) if c.names.contains(shard) => {}
            shard => left.push(format!(
                "{kind} {name} is on shard {shard:?}, no running host's"
            )),
        }
    }
    left
}

/// Objects the run's end state must not hold: Shoots without a live Runtime or made more
/// than once, RuntimeKubeconfigs and Secrets whose owner is gone, service accounts of
/// RuntimeAccesses deleted from a live Runtime, anything still being deleted.
async fn leftovers(c: &Chaos) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    let w = &c.world;
    let shoots: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), PROJECT, &shoot_resource());
    let live: BTreeSet<String> = w.live.iter().map(|i| runtime_name(*i)).collect();
    for shoot in shoots.list(&ListParams::default()).await?.items {
        let name = shoot.metadata.name.clone().unwrap_or_default();
        if !live.contains(&name) {
            found.push(format!("Shoot {name} is left without its Runtime"));
        }
    }
    let stats = c.cp.sim_stats();
    for i in w.live.iter().chain(&w.deleted) {
        let uids = &stats["byObject"][format!("shoot/{}", runtime_name(*i))]["uids"];
        let made = uids.as_array().map_or(0, Vec::len);
        if made > 1 || (made == 0 && w.live.contains(i)) {
            found.push(format!("Shoot {} was made {made} times", runtime_name(*i)));
        }
    }
    found.extend(orphans(c).await?);
    if let Some(m) = &c.modules {
        let target = &c.runtime_client;
        found.extend(modules::leftovers(m, target, &w.sets, &w.deleted_sets).await?);
    }
    // A deleted Runtime takes its cluster with it (here the runtime cluster is shared and
    // stays): only accesses deleted from a Runtime that lives on must be gone from it.
    let accounts: Api<ServiceAccount> = Api::namespaced(c.runtime_client.clone(), "default");
    let names: BTreeSet<String> = accounts
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        .collect();
    for (r, a) in &w.deleted_accesses {
        if w.live.contains(r) && names.contains(&access_name(*a)) {
            let name = access_name(*a);
            found.push(format!(
                "service account default/{name} outlived its RuntimeAccess"
            ));
        }
    }
    Ok(found)
}

/// RuntimeKubeconfigs and Secrets of the namespace whose owner is gone, and anything
/// there still being deleted.
async fn orphans(c: &Chaos) -> anyhow::Result<Vec<String>> {
    let lp = ListParams::default();
    let kubeconfigs: Api<RuntimeKubeconfig> = Api::namespaced(c.client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), NS);
    let mut owners: BTreeSet<(String, String)> = BTreeSet::new();
    for rt in c.runtimes().list(&lp).await?.items {
        owners.insert(("Runtime".into(), rt.metadata.name.unwrap_or_default()));
    }
    for access in c.accesses().list(&lp).await?.items {
        owners.insert((
            "RuntimeAccess".into(),
            access.metadata.name.unwrap_or_default(),
        ));
    }
    let mut metas = Vec::new();
    for k in kubeconfigs.list(&lp).await?.items {
        owners.insert((
            "RuntimeKubeconfig".into(),
            k.metadata.name.clone().unwrap_or_default(),
        ));
        metas.push(("RuntimeKubeconfig", k.metadata));
    }
    metas.extend(
        secrets
            .list(&lp)
            .await?
            .items
            .into_iter()
            .map(|s| ("Secret", s.metadata)),
    );
    let mut found = Vec::new();
    for (kind, meta) in metas {
        let name = meta.name.clone().unwrap_or_default();
        if meta.deletion_timestamp.is_some() {
            found.push(format!("{kind} {name} is stuck being deleted"));
        }
        for owner in meta.owner_references.iter().flatten() {
            if !owners.contains(&(owner.kind.clone(), owner.name.clone())) {
                found.push(format!(
                    "{kind} {name} outlived its {} {}",
                    owner.kind, owner.name
                ));
            }
        }
    }
    Ok(found)
}

//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoints.

mod liveness;
mod server;

pub(crate) use liveness::Stalls;
pub(crate) use server::{Health, serve};

use std::time::Duration;

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::crd::moduleset::State as ModuleSetState;
use crate::crd::{RuntimeState, ShadowOutcome};
use crate::gardener::GardenerFailure;
use crate::wasm::Fault;

/// Every metric the host exports, registered in its own registry.
#[derive(Clone)]
pub struct Metrics {
    pub(crate) registry: Registry,
    /// 1 for the Runtime's current state, 0 for the others (KIM's runtime state metric).
    runtime_state: IntGaugeVec,
    /// Expiry of each Runtime's kubeconfig, in Unix seconds.
    kubeconfig_expiry: IntGaugeVec,
    /// Expiry of each RuntimeAccess's token, in Unix seconds.
    access_expiry: IntGaugeVec,
    /// Reconciles that ended with an error instead of a planned transition.
    unexpected_stops: IntCounterVec,
    /// Reconciles by controller and outcome.
    reconciles: IntCounterVec,
    /// Objects a catalog change woke, by controller.
    catalog_wakes: IntCounterVec,
    reconcile_duration: HistogramVec,
    plugin_call_duration: HistogramVec,
    /// Chain steps of renders, by whether the plugin ran or its draft came from the cache.
    render_steps: IntCounterVec,
    /// Chain calls of applied renders that failed, by plugin and whose fault it was.
    plugin_call_failures: IntCounterVec,
    /// Failed requests to Gardener, by call and by whether Gardener was down or refused.
    gardener_errors: IntCounterVec,
    /// 1 while this process holds the leader lease.
    leader: IntGauge,
    /// Objects per shard and kind, as the leader last counted them (sharding only).
    shard_objects: IntGaugeVec,
    /// Objects moved between shards, by how.
    shard_moves: IntCounterVec,
    /// Shadow renders per plugin and shadow version, by whether they differed.
    shadow_renders: IntCounterVec,
    /// 1 when a Plugin's channel has a runnable version.
    plugin_channel_ready: IntGaugeVec,
    /// 1 for the state each ModuleSet is in.
    moduleset_state: IntGaugeVec,
    /// Changes to managed objects on targets made by someone else, by kind.
    module_drift: IntCounterVec,
    /// ModuleSet passes put off because their target's turns were taken.
    module_turn_waits: IntCounter,
    /// Target clusters this replica holds a client for.
    module_targets: IntGauge,
    /// Drift watches this replica runs.
    drift_watches: IntGauge,
    /// Clients for runtime and target clusters this replica holds.
    pub(crate) cluster_clients: IntGauge,
    /// 1 while a dependency (Gardener, a registry, a target cluster) answers.
    dependency_up: IntGaugeVec,
    /// What is down and why, for `/readyz`.
    pub(crate) dependencies: std::sync::Arc<Dependencies>,
    /// 1 while a controller has work waiting that nothing moves.
    controller_stalled: IntGaugeVec,
    /// Which controllers stalled and why, for `/healthz`.
    pub(crate) stalls: std::sync::Arc<Stalls>,
}

/// What the host depends on, as `/readyz` and `tessera_dependency_up` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Dependency {
    /// The Shoot API: without it no Runtime makes progress.
    Gardener,
}

/// How an object moved between shards, as `tessera_shard_moves_total` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardMove {
    /// The leader labelled it for a shard (new, or its shard is dead or let it go).
    Assigned,
    /// The leader asked its live shard to let it go.
    Drained,
    /// This replica let it go (it was draining).
    Released,
    /// The leader took an expired shard Lease (counted per Lease).
    Taken,
}

impl ShardMove {
    fn as_str(self) -> &'static str {
        match self {
            Self::Assigned => "assigned",
            Self::Drained => "drained",
            Self::Released => "released",
            Self::Taken => "taken",
        }
    }
}

/// Which request to Gardener failed, as `tessera_gardener_errors_total` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GardenerCall {
    /// Reading, creating, patching or deleting a Shoot (the Runtime state machine).
    Shoot,
    /// The watch of Shoots that wakes Runtimes.
    Watch,
    /// `shoots/<name>/adminkubeconfig` (the RuntimeKubeconfig controller).
    AdminKubeconfig,
}

impl GardenerCall {
    const ALL: [Self; 3] = [Self::Shoot, Self::Watch, Self::AdminKubeconfig];

    fn as_str(self) -> &'static str {
        match self {
            Self::Shoot => "shoot",
            Self::Watch => "watch",
            Self::AdminKubeconfig => "adminkubeconfig",
        }
    }
}

impl Dependency {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Gardener => "gardener",
        }
    }
}

/// Dependencies that failed last time they were used, with the failure.
#[derive(Debug, Default)]
pub(crate) struct Dependencies {
    down: std::sync::Mutex<std::collections::BTreeMap<Dependency, String>>,
    gauge: std::sync::OnceLock<IntGaugeVec>,
}

impl Dependencies {
    /// `dependency` failed with `message`.
    pub(crate) fn down(&self, dependency: Dependency, message: &str) {
        self.set(dependency, 0);
        let mut down = self.down.lock().expect("dependencies lock");
        down.insert(dependency, message.to_string());
    }

    /// `dependency` answered.
    pub(crate) fn up(&self, dependency: Dependency) {
        self.set(dependency, 1);
        self.down
            .lock()
            .expect("dependencies lock")
            .remove(&dependency);
    }

    /// One line per dependency that is down.
    pub(crate) fn problems(&self) -> Vec<String> {
        let down = self.down.lock().expect("dependencies lock");
        down.iter()
            .map(|(d, m)| format!("{}: {m}", d.as_str()))
            .collect()
    }

    fn set(&self, dependency: Dependency, value: i64) {
        if let Some(gauge) = self.gauge.get() {
            gauge.with_label_values(&[dependency.as_str()]).set(value);
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Name and help of each metric.
type Doc = (&'static str, &'static str);

const RUNTIME_STATE: Doc = (
    "tessera_runtime_state",
    "1 for the state each Runtime is in, no series for the others (labels: namespace, runtime, state)",
);
const KUBECONFIG_EXPIRY: Doc = (
    "tessera_kubeconfig_expiration_timestamp_seconds",
    "When the kubeconfig of each Runtime expires (Unix seconds)",
);
const ACCESS_EXPIRY: Doc = (
    "tessera_access_expiration_timestamp_seconds",
    "When the token of each RuntimeAccess's kubeconfig expires (Unix seconds)",
);
const UNEXPECTED_STOPS: Doc = (
    "tessera_state_machine_unexpected_stops_total",
    "Reconciles that stopped on an error instead of a planned transition",
);
const RECONCILES: Doc = (
    "tessera_reconciles_total",
    "Reconciles by controller and outcome (ok|conflict|error)",
);
const CATALOG_WAKES: Doc = (
    "tessera_catalog_wakes_total",
    "Objects a Plugin change woke because they use the changed plugin and channel, by controller",
);
const RECONCILE_DURATION: Doc = (
    "tessera_reconcile_duration_seconds",
    "Time spent in a reconcile (step Reconcile) and in each state-machine step",
);
const PLUGIN_CALL_DURATION: Doc = (
    "tessera_plugin_call_duration_seconds",
    "Duration of one plugin call, sandbox set-up included",
);
const RENDER_STEPS: Doc = (
    "tessera_render_steps_total",
    "Chain steps of renders by result: run (the plugin was called) or cached (its draft was known from the same inputs)",
);
const PLUGIN_CALL_FAILURES: Doc = (
    "tessera_plugin_call_failures_total",
    "Plugin calls of applied Runtime renders that failed, by plugin and fault (input|config|grant|plugin|transient)",
);
const GARDENER_ERRORS: Doc = (
    "tessera_gardener_errors_total",
    "Failed requests to Gardener by call (shoot|watch|adminkubeconfig) and failure (unavailable|rejected)",
);
const LEADER: Doc = (
    "tessera_leader",
    "1 while this process holds the leader lease",
);
const SHARD_OBJECTS: Doc = (
    "tessera_shard_objects",
    "Objects labelled for each shard, by kind, as the leader last counted them (only with --sharding; labels: shard, kind)",
);
const SHARD_MOVES: Doc = (
    "tessera_shard_moves_total",
    "Objects moved between shards, by how: assigned (the leader labelled it for a shard), drained (the leader asked its shard to let it go), released (this replica let it go), taken (the leader took an expired shard Lease)",
);
const SHADOW_RENDERS: Doc = (
    "tessera_shadow_renders_total",
    "Renders with a shadow version, by plugin, shadow version and result (same|differs|failed)",
);
const PLUGIN_CHANNEL_READY: Doc = (
    "tessera_plugin_channel_ready",
    "1 when the channel of a Plugin has a runnable version",
);
const MODULESET_STATE: Doc = (
    "tessera_moduleset_state",
    "1 for the state each ModuleSet is in (labels: namespace, name, state)",
);
const MODULE_DRIFT: Doc = (
    "tessera_module_object_events_total",
    "Changes to module-managed objects on targets not made by the host (edits, deletions, status updates), by kind",
);
const MODULE_TURN_WAITS: Doc = (
    "tessera_moduleset_turn_waits_total",
    "ModuleSet passes put off because as many passes as --module-target-concurrency allows were running against their target cluster",
);
const MODULE_TARGETS: Doc = (
    "tessera_module_targets",
    "Target clusters this replica holds a client and discovery cache for (dropped after --target-idle without a ModuleSet pass)",
);
const CLUSTER_CLIENTS: Doc = (
    "tessera_cluster_clients",
    "Clients for runtime and target clusters in this replica's client cache, one per kubeconfig Secret version (a Runtime's leaves once it is Ready, unless its reconciles read its cluster; a target's after --target-idle; a ModuleSet's target keeps its own handle until it is dropped)",
);
const DRIFT_WATCHES: Doc = (
    "tessera_drift_watches",
    "Watches of module-managed objects on target clusters this replica runs (one per cluster and kind)",
);
const DEPENDENCY_UP: Doc = (
    "tessera_dependency_up",
    "1 while a dependency answers (gardener: the Shoot API), 0 while it fails",
);

const CONTROLLER_STALLED: Doc = (
    "tessera_controller_stalled",
    "1 while a controller has an object waiting (a generation not yet observed, a deletion its finalizer holds) and no reconcile of it ended for --stall-timeout; /healthz then fails",
);

const RECONCILE_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const CALL_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
];

/// How a chain step of a render was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepResult {
    /// The plugin was called.
    Run,
    /// The draft was known from a render with the same inputs.
    Cached,
}

impl StepResult {
    fn label(self) -> &'static str {
        match self {
            StepResult::Run => "run",
            StepResult::Cached => "cached",
        }
    }
}

/// How a reconcile ended, as `tessera_reconciles_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReconcileResult {
    Ok,
    /// Someone wrote first, or the leader fence was closed: retried at once.
    Conflict,
    Error,
}

impl ReconcileResult {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Conflict => "conflict",
            Self::Error => "error",
        }
    }
}

/// Set a gauge to `value`, or forget the series with `None` (the object is gone).
fn gauge_or_forget(gauges: &IntGaugeVec, labels: &[&str], value: Option<i64>) {
    match value {
        Some(v) => gauges.with_label_values(labels).set(v),
        None => {
            let _ = gauges.remove_label_values(labels);
        }
    }
}

impl Metrics {
    /// A reconcile of `controller` ended as `result`.
    pub(crate) fn reconciled(&self, controller: &str, result: ReconcileResult) {
        self.reconciles
            .with_label_values(&[controller, result.as_str()])
            .inc();
    }

    /// `step` of a reconcile of `controller` (or the whole, `Reconcile`) took `took`.
    pub(crate) fn reconcile_took(&self, controller: &str, step: &str, took: Duration) {
        self.reconcile_duration
            .with_label_values(&[controller, step])
            .observe(took.as_secs_f64());
    }

    /// A reconcile stopped on an error at `step` instead of a planned transition.
    pub(crate) fn stopped_unexpectedly(&self, controller: &str, step: &str, reason: &str) {
        self.unexpected_stops
            .with_label_values(&[controller, step, reason])
            .inc();
    }

    /// The counter of objects a catalog change woke for `controller`.
    pub(crate) fn catalog_wakes(&self, controller: &str) -> IntCounter {
        self.catalog_wakes.with_label_values(&[controller])
    }

    /// One call of `plugin` took `took`.
    pub(crate) fn plugin_call_took(&self, plugin: &str, took: Duration) {
        self.plugin_call_duration
            .with_label_values(&[plugin])
            .observe(took.as_secs_f64());
    }

    /// A render with shadow `version` of `plugin` came out as `outcome`.
    pub(crate) fn shadow_rendered(&self, plugin: &str, version: &str, outcome: ShadowOutcome) {
        self.shadow_renders
            .with_label_values(&[plugin, version, outcome.as_lower()])
            .inc();
    }

    /// When the kubeconfig of `runtime` expires, in Unix seconds (`None`: forget it).
    pub(crate) fn kubeconfig_expires(&self, namespace: &str, runtime: &str, at: Option<i64>) {
        gauge_or_forget(&self.kubeconfig_expiry, &[namespace, runtime], at);
    }

    /// Forget the series of an object of `kind` this host handed to another shard: that
    /// shard exports them now.
    pub(crate) fn forget(&self, kind: &str, namespace: &str, name: &str) {
        match kind {
            "Runtime" => self.set_runtime_state(namespace, name, None),
            "RuntimeKubeconfig" => self.kubeconfig_expires(namespace, name, None),
            "RuntimeAccess" => self.access_expires(namespace, name, None),
            "ModuleSet" => self.set_moduleset_state(namespace, name, None),
            _ => {}
        }
    }

    /// When the token of `access` expires, in Unix seconds (`None`: forget it).
    pub(crate) fn access_expires(&self, namespace: &str, access: &str, at: Option<i64>) {
        gauge_or_forget(&self.access_expiry, &[namespace, access], at);
    }

    /// Whether `channel` of `plugin` has a runnable version (`None`: forget it).
    pub(crate) fn channel_ready(&self, plugin: &str, channel: &str, ready: Option<bool>) {
        let value = ready.map(i64::from);
        gauge_or_forget(&self.plugin_channel_ready, &[plugin, channel], value);
    }

    /// Record the ModuleSet's state (or forget it, with `None`, once the set is gone).
    pub(crate) fn set_moduleset_state(
        &self,
        namespace: &str,
        name: &str,
        state: Option<ModuleSetState>,
    ) {
        for candidate in ModuleSetState::ALL {
            let label = candidate.to_string();
            let value = state.map(|s| i64::from(s == candidate));
            gauge_or_forget(&self.moduleset_state, &[namespace, name, &label], value);
        }
    }

    /// Someone else changed an object of `kind` a module manages.
    pub(crate) fn module_drifted(&self, kind: &str) {
        self.module_drift.with_label_values(&[kind]).inc();
    }

    /// A ModuleSet pass was put off: its target's turns were taken.
    pub(crate) fn module_turn_waited(&self) {
        self.module_turn_waits.inc();
    }

    /// How many target clusters this replica holds a client for and watches for drift.
    pub(crate) fn set_module_targets(&self, targets: usize, watches: usize) {
        self.module_targets.set(targets as i64);
        self.drift_watches.set(watches as i64);
    }

    /// Whether this process holds the leader lease.
    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The leader's latest count of objects per (shard, kind); shards no longer counted
    /// are dropped.
    pub(crate) fn set_shard_objects(
        &self,
        counts: &std::collections::BTreeMap<(String, String), i64>,
    ) {
        self.shard_objects.reset();
        for ((shard, kind), n) in counts {
            self.shard_objects.with_label_values(&[shard, kind]).set(*n);
        }
    }

    /// `n` objects moved between shards as `how`.
    pub(crate) fn shard_moved(&self, how: ShardMove, n: u64) {
        self.shard_moves
            .with_label_values(&[how.as_str()])
            .inc_by(n);
    }

    /// Count `steps` chain steps answered as `result`.
    pub(crate) fn render_steps(&self, result: StepResult, steps: usize) {
        self.render_steps
            .with_label_values(&[result.label()])
            .inc_by(steps as u64);
    }

    pub(crate) fn new() -> Self {
        let registry = Registry::new();
        let r = &registry;
        let leader = IntGauge::new(LEADER.0, LEADER.1).expect("metric");
        Self {
            runtime_state: gauges(r, RUNTIME_STATE, &["namespace", "runtime", "state"]),
            kubeconfig_expiry: gauges(r, KUBECONFIG_EXPIRY, &["namespace", "runtime"]),
            access_expiry: gauges(r, ACCESS_EXPIRY, &["namespace", "access"]),
            unexpected_stops: counters(r, UNEXPECTED_STOPS, &["controller", "step", "reason"]),
            reconciles: counters(r, RECONCILES, &["controller", "result"]),
            catalog_wakes: counters(r, CATALOG_WAKES, &["controller"]),
            reconcile_duration: histograms(
                r,
                RECONCILE_DURATION,
                &["controller", "step"],
                RECONCILE_BUCKETS,
            ),
            plugin_call_duration: histograms(r, PLUGIN_CALL_DURATION, &["plugin"], CALL_BUCKETS),
            render_steps: counters(r, RENDER_STEPS, &["result"]),
            plugin_call_failures: counters(r, PLUGIN_CALL_FAILURES, &["plugin", "fault"]),
            gardener_errors: counters(r, GARDENER_ERRORS, &["call", "failure"]),
            leader: register(r, leader),
            shard_objects: gauges(r, SHARD_OBJECTS, &["shard", "kind"]),
            shard_moves: counters(r, SHARD_MOVES, &["how"]),
            shadow_renders: counters(r, SHADOW_RENDERS, &["plugin", "version", "result"]),
            plugin_channel_ready: gauges(r, PLUGIN_CHANNEL_READY, &["plugin", "channel"]),
            moduleset_state: gauges(r, MODULESET_STATE, &["namespace", "name", "state"]),
            module_drift: counters(r, MODULE_DRIFT, &["kind"]),
            module_turn_waits: register(
                r,
                IntCounter::new(MODULE_TURN_WAITS.0, MODULE_TURN_WAITS.1).expect("metric"),
            ),
            module_targets: register(
                r,
                IntGauge::new(MODULE_TARGETS.0, MODULE_TARGETS.1).expect("metric"),
            ),
            drift_watches: register(
                r,
                IntGauge::new(DRIFT_WATCHES.0, DRIFT_WATCHES.1).expect("metric"),
            ),
            cluster_clients: register(
                r,
                IntGauge::new(CLUSTER_CLIENTS.0, CLUSTER_CLIENTS.1).expect("metric"),
            ),
            dependency_up: gauges(r, DEPENDENCY_UP, &["dependency"]),
            dependencies: std::sync::Arc::default(),
            controller_stalled: gauges(r, CONTROLLER_STALLED, &["controller"]),
            stalls: std::sync::Arc::default(),
            registry,
        }
        .with_dependency_gauge()
        .with_gardener_errors_at_zero()
    }

    /// Every (call, failure) pair exists from the start, so that "no errors" reads as a
    /// rate of 0 on dashboards and in alert expressions instead of as no data.
    fn with_gardener_errors_at_zero(self) -> Self {
        for call in GardenerCall::ALL {
            for failure in GardenerFailure::ALL {
                let _ = self
                    .gardener_errors
                    .with_label_values(&[call.as_str(), failure.as_str()]);
            }
        }
        self
    }

    /// A request to Gardener failed.
    pub(crate) fn gardener_failed(&self, call: GardenerCall, failure: GardenerFailure) {
        self.gardener_errors
            .with_label_values(&[call.as_str(), failure.as_str()])
            .inc();
    }

    /// A call of `plugin` in an applied render failed.
    pub(crate) fn plugin_failed(&self, plugin: &str, fault: Fault) {
        self.plugin_call_failures
            .with_label_values(&[plugin, fault.as_str()])
            .inc();
    }

    fn with_dependency_gauge(self) -> Self {
        let _ = self.dependencies.gauge.set(self.dependency_up.clone());
        self.stalls.with_gauge(self.controller_stalled.clone());
        self
    }

    /// Record the Runtime's state (or forget it, with `None`, once the Runtime is gone).
    /// Only the state it is in has a series (KIM's `im_runtime_state` gauge does the same): a
    /// series with 0 for each other state cost 5 of the 7 series per Runtime, about 5 KiB
    /// of a replica's heap per Runtime it holds.
    pub(crate) fn set_runtime_state(
        &self,
        namespace: &str,
        runtime: &str,
        state: Option<RuntimeState>,
    ) {
        for candidate in RuntimeState::ALL {
            let labels = [namespace, runtime, candidate.as_str()];
            if state == Some(candidate) {
                self.runtime_state.with_label_values(&labels).set(1);
            } else {
                let _ = self.runtime_state.remove_label_values(&labels);
            }
        }
    }

    /// The text exposition format.
    pub(crate) fn render(&self) -> String {
        prometheus::TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_default()
    }
}

fn register<M: prometheus::core::Collector + Clone + 'static>(registry: &Registry, m: M) -> M {
    registry
        .register(Box::new(m.clone()))
        .expect("unique metric names");
    m
}

fn gauges(registry: &Registry, (name, help): Doc, labels: &[&str]) -> IntGaugeVec {
    register(
        registry,
        IntGaugeVec::new(Opts::new(name, help), labels).expect("metric"),
    )
}

fn counters(registry: &Registry, (name, help): Doc, labels: &[&str]) -> IntCounterVec {
    register(
        registry,
        IntCounterVec::new(Opts::new(name, help), labels).expect("metric"),
    )
}

fn histograms(
    registry: &Registry,
    (name, help): Doc,
    labels: &[&str],
    buckets: &[f64],
) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    register(registry, HistogramVec::new(opts, labels).expect("metric"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_state_has_one_series_and_is_forgotten() {
        let m = Metrics::new();
        m.set_runtime_state("ns", "rt1", Some(RuntimeState::Provisioning));
        m.set_runtime_state("ns", "rt1", Some(RuntimeState::Ready));
        let text = m.render();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("tessera_runtime_state{"))
            .collect();
        assert_eq!(
            series,
            [r#"tessera_runtime_state{namespace="ns",runtime="rt1",state="Ready"} 1"#]
        );
        m.set_runtime_state("ns", "rt1", None);
        assert!(!m.render().contains("rt1"));
    }

    #[test]
    fn gardener_errors_start_at_zero_and_count() {
        let m = Metrics::new();
        let text = m.render();
        assert!(text.contains(
            r#"tessera_gardener_errors_total{call="adminkubeconfig",failure="rejected"} 0"#
        ));
        m.gardener_failed(GardenerCall::Watch, GardenerFailure::Down);
        assert!(
            m.render()
                .contains(r#"tessera_gardener_errors_total{call="watch",failure="unavailable"} 1"#)
        );
    }

    #[test]
    fn plugin_failures_name_plugin_and_fault() {
        let m = Metrics::new();
        m.plugin_failed("provider", Fault::Input);
        assert!(
            m.render().contains(
                r#"tessera_plugin_call_failures_total{fault="input",plugin="provider"} 1"#
            )
        );
    }
}

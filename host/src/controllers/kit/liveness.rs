//! The controllers' watchdog: a host whose controllers stopped is restarted by its liveness
//! probe. Each controller's objects are listed every quarter of `--stall-timeout`, straight
//! from the API server and not from the controller's own watch (which may be what stopped
//! delivering), through a client of its own (the controllers' connections may be what
//! went silent; a page that hangs is dropped with its connection, the next opens anew). An
//! object *waits* while its generation is not yet observed or a deletion waits for our
//! finalizer; a controller *stalls* when an object has waited a whole timeout and no
//! reconcile of it ended within that time. Failing reconciles end too (they back off
//! and retry), so an unreachable dependency is no stall: that is `/readyz`'s business. A
//! listing that fails or hangs decides nothing; listings failing for a whole timeout are
//! logged (once), since stalls go unseen meanwhile.
//!
//! Nor is a backlog a stall: when more objects are due than `--workers`, kube-runtime
//! takes the surplus in hash order, not first come first served, so under a lasting burst
//! (10,000 Runtimes created at once) an unlucky object waits as long as the burst lasts.
//! A restart would only lose the work in hand. An object is excused while its controller
//! was busy all the time it waited: its workers at work at least three quarters of the
//! time (a queue leaves them idle only between two reconciles) and reconciles ending. A
//! watch that stopped delivering leaves workers idle; reconciles that hang end nothing:
//! both still stall.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use super::Controller;
use crate::api::PAGE;
use crate::controllers::Context;
use crate::crd::labels::FINALIZER_PREFIX;

/// When each object's last reconcile ended (any outcome), by `Kind/namespace/name`, and
/// how busy each controller is.
#[derive(Default)]
pub(crate) struct Progress {
    ended: Mutex<HashMap<String, Instant>>,
    load: Mutex<HashMap<Controller, Load>>,
}

/// One controller's reconciles running now, and how much they worked since the watchdog
/// last looked.
#[derive(Debug, Default, Clone, Copy)]
struct Load {
    running: u32,
    /// When `running` last changed (`None`: never yet).
    changed: Option<Instant>,
    /// Reconcile-time (summed over the reconciles running) since the last look.
    worked: Duration,
    /// Reconciles ended since the last look.
    ended: u32,
    looked: Option<Instant>,
}

/// How busy a controller was between two looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Its workers were at work most of the time and reconciles ended: a queue.
    Queued,
    /// Its workers were at work most of the time, none ended: long reconciles, or hung.
    Quiet,
    /// Workers to spare: an object that waits was not held up by the others.
    Idle,
}

impl Load {
    /// Count the time since the last change at the reconciles running through it.
    fn tally(&mut self, now: Instant) {
        if let Some(changed) = self.changed {
            self.worked += now.saturating_duration_since(changed) * self.running;
        }
        self.changed = Some(now);
    }

    fn start(&mut self, now: Instant) {
        self.tally(now);
        self.running += 1;
    }

    fn end(&mut self, now: Instant) {
        self.tally(now);
        self.running = self.running.saturating_sub(1);
        self.ended += 1;
    }

    /// How busy the controller was since the last look, for `workers` at once (0:
    /// unbounded, nothing queues). Queued means at work three quarters of the time: a
    /// queue keeps every worker at work but for the moments between two reconciles.
    fn look(&mut self, now: Instant, workers: u32) -> Pace {
        self.tally(now);
        let since = self.looked.replace(now).unwrap_or(now);
        let capacity = now.saturating_duration_since(since) * workers;
        let (worked, ended) = (
            std::mem::take(&mut self.worked),
            std::mem::take(&mut self.ended),
        );
        if capacity.is_zero() || worked * 4 < capacity * 3 {
            return Pace::Idle;
        }
        match ended {
            0 => Pace::Quiet,
            _ => Pace::Queued,
        }
    }
}

/// A reconcile of `controller` running; its drop (also when it is cancelled) ends it.
pub(crate) struct Running<'a> {
    progress: &'a Progress,
    controller: Controller,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut load = self.progress.load.lock().expect("progress lock");
        load.entry(self.controller).or_default().end(Instant::now());
    }
}

impl Progress {
    /// A reconcile of `controller` starts; it ends when the returned guard drops.
    pub(crate) fn running(&self, controller: Controller) -> Running<'_> {
        let mut load = self.load.lock().expect("progress lock");
        load.entry(controller).or_default().start(Instant::now());
        Running {
            progress: self,
            controller,
        }
    }

    /// How busy `controller` was since this was last asked ([`Load::look`]).
    fn load(&self, controller: Controller, workers: u32) -> Pace {
        let mut load = self.load.lock().expect("progress lock");
        load.entry(controller)
            .or_default()
            .look(Instant::now(), workers)
    }

    /// A reconcile of `key` ended.
    pub(crate) fn ended(&self, key: &str) {
        let mut ended = self.ended.lock().expect("progress lock");
        ended.insert(key.to_string(), Instant::now());
    }

    fn last(&self, key: &str) -> Option<Instant> {
        self.ended.lock().expect("progress lock").get(key).copied()
    }

    /// Forget the objects of `kind` a listing no longer holds.
    fn forget_gone(&self, kind: &str, present: &HashSet<String>) {
        let mut ended = self.ended.lock().expect("progress lock");
        ended.retain(|key, _| !key.starts_with(&format!("{kind}/")) || present.contains(key));
    }
}

/// Since when each object of one controller has waited, as the listings saw it, and since
/// when the controller has been busy without a break.
#[derive(Debug, Default)]
struct Waiting {
    since: HashMap<String, Instant>,
    last_look: Option<Instant>,
    busy_since: Option<Instant>,
    /// The last look that found reconciles ending in a queue.
    last_busy: Option<Instant>,
}

impl Waiting {
    /// Fold in how busy the controller was between the last look and `now`.
    fn load(&mut self, pace: Pace, now: Instant) {
        match pace {
            Pace::Queued => {
                self.busy_since = self.busy_since.or(self.last_look).or(Some(now));
                self.last_busy = Some(now);
            }
            Pace::Quiet => {}
            Pace::Idle => self.busy_since = None,
        }
        self.last_look = Some(now);
    }

    /// Whether an object waiting since `since` waited behind a queue all that time, one
    /// that still moved within `timeout` (workers that all hang are no queue).
    fn excused(&self, since: Instant, now: Instant, timeout: Duration) -> bool {
        let moving = self
            .last_busy
            .is_some_and(|t| now.duration_since(t) < timeout);
        moving && self.busy_since.is_some_and(|busy| busy <= since)
    }

    /// Fold in one listing: the objects waiting now keep the time they were first seen
    /// waiting; the others are dropped.
    fn observe(&mut self, waiting: impl IntoIterator<Item = String>, now: Instant) {
        let mut next = HashMap::new();
        for key in waiting {
            let since = self.since.get(&key).copied().unwrap_or(now);
            next.insert(key, since);
        }
        self.since = next;
    }

    /// The object that has waited longest, if it waited a whole `timeout` and no reconcile
    /// of it ended within the last `timeout`.
    fn stalled(
        &self,
        last_ended: impl Fn(&str) -> Option<Instant>,
        now: Instant,
        timeout: Duration,
    ) -> Option<(String, Duration)> {
        self.since
            .iter()
            .filter(|(_, since)| now.duration_since(**since) >= timeout)
            .filter(|(_, since)| !self.excused(**since, now, timeout))
            .filter(|(key, _)| last_ended(key).is_none_or(|t| now.duration_since(t) >= timeout))
            .map(|(key, since)| (key.clone(), now.duration_since(*since)))
            .max_by_key(|(_, waited)| *waited)
    }
}

/// Whether `obj` asks its controller for work: a generation not yet observed in its status,
/// or a deletion held by one of our finalizers.
fn waits(obj: &DynamicObject) -> bool {
    let meta = &obj.metadata;
    if meta.deletion_timestamp.is_some() {
        return meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f.starts_with(FINALIZER_PREFIX));
    }
    let observed = obj.data["status"]["observedGeneration"].as_i64();
    match (meta.generation, observed) {
        (Some(generation), Some(observed)) => observed < generation,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Stops the watchdog when the controller's run ends.
pub(crate) struct Watchdog(Option<tokio::task::JoinHandle<()>>);

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Watch the progress of `controller` on the objects `api` and `selector` scope (the same
/// as its watch's); nothing when `--stall-timeout` is 0.
pub(crate) fn watch_progress<K>(
    ctx: &Arc<Context>,
    controller: Controller,
    api: &Api<K>,
    selector: Option<&str>,
) -> Watchdog
where
    K: Resource<DynamicType = ()>,
{
    let Some(timeout) = ctx.config.stall_timeout else {
        return Watchdog(None);
    };
    let resource = ApiResource::erase::<K>(&());
    let client = ctx.watchdog_client.clone();
    let dynamic: Api<DynamicObject> = match api.namespace() {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    // Paged (see `api::for_each_page`): a listing of thousands of objects parsed at once
    // cost a replica 15 MiB per 333 Runtimes at its peak.
    let mut params = ListParams::default().limit(PAGE);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let looker = Looker {
        ctx: ctx.clone(),
        controller,
        kind: resource.kind,
        api: dynamic,
        params,
        timeout,
    };
    Watchdog(Some(tokio::spawn(looker.run())))
}

/// Why a listing decided nothing.
#[derive(Debug, thiserror::Error)]
enum Unlisted {
    #[error("{}", crate::report::kube_error(.0))]
    Failed(kube::Error),
    #[error("a page of {PAGE} objects took longer than {}s", .0.as_secs())]
    Hung(Duration),
}

/// One listing of `kind`, a page at a time: the objects present, and those waiting. Each
/// page gets `patience`: a large fleet takes many pages, a hung connection hangs one.
async fn look(
    api: &Api<DynamicObject>,
    params: &ListParams,
    kind: &str,
    patience: Duration,
) -> Result<(HashSet<String>, Vec<String>), Unlisted> {
    let (mut present, mut waiting) = (HashSet::new(), Vec::new());
    let page = |params: ListParams| async move {
        tokio::time::timeout(patience, api.list(&params))
            .await
            .map_err(|_| Unlisted::Hung(patience))?
            .map_err(Unlisted::Failed)
    };
    crate::api::for_each_page(params, page, |object| {
        let key = key(kind, &object);
        if waits(&object) {
            waiting.push(key.clone());
        }
        present.insert(key);
    })
    .await?;
    Ok((present, waiting))
}

/// `Kind/namespace/name`, as the reconcile guard records it.
fn key(kind: &str, obj: &DynamicObject) -> String {
    let name = obj.metadata.name.as_deref().unwrap_or_default();
    match obj.metadata.namespace.as_deref() {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// One controller's watchdog.
struct Looker {
    ctx: Arc<Context>,
    controller: Controller,
    kind: String,
    api: Api<DynamicObject>,
    params: ListParams,
    timeout: Duration,
}

impl Looker {
    async fn run(self) {
        let every = (self.timeout / 4).max(Duration::from_secs(1));
        let mut waiting = Waiting::default();
        let mut blind = Blind::default();
        let mut reported = false;
        loop {
            tokio::time::sleep(every).await;
            // A page that hangs is dropped, and its connection with it.
            let listed = look(&self.api, &self.params, &self.kind, every).await;
            let now = Instant::now();
            let (present, waits) = match listed {
                Ok(listed) => listed,
                Err(why) => {
                    blind.failed(&why, now, self.timeout, self.controller);
                    continue;
                }
            };
            blind.listed(self.controller);
            let workers = u32::from(self.ctx.config.workers);
            waiting.load(self.ctx.progress.load(self.controller, workers), now);
            waiting.observe(waits, now);
            self.ctx.progress.forget_gone(&self.kind, &present);
            let verdict = waiting.stalled(|k| self.ctx.progress.last(k), now, self.timeout);
            reported = self.report(verdict, reported);
        }
    }

    /// Tell `/healthz`; log a stall once when it begins and once when it ends.
    fn report(&self, verdict: Option<(String, Duration)>, reported: bool) -> bool {
        let controller = self.controller.as_str();
        let stalls = &self.ctx.metrics.stalls;
        match verdict {
            Some((object, waited)) => {
                let why = format!(
                    "{object} has waited {}s and no reconcile of it ended for {}s",
                    waited.as_secs(),
                    self.timeout.as_secs()
                );
                if !reported {
                    tracing::error!(controller, %object, waited_s = waited.as_secs(), "controller stalled: /healthz fails until it moves");
                }
                stalls.stalled(controller, why);
                true
            }
            None => {
                if reported {
                    tracing::info!(controller, "controller moves again");
                }
                stalls.progressing(controller);
                false
            }
        }
    }
}

/// Listings that keep failing leave a stall unseen (they decide nothing, so that an API
/// server out of reach restarts no host): said once after a whole timeout of them, and
/// once when a listing succeeds again.
#[derive(Default)]
struct Blind {
    since: Option<Instant>,
    said: bool,
}

impl Blind {
    fn failed(&mut self, why: &Unlisted, now: Instant, timeout: Duration, controller: Controller) {
        let failing = now.duration_since(*self.since.get_or_insert(now));
        if !self.said && failing >= timeout {
            self.said = true;
            tracing::warn!(controller = controller.as_str(), failing_s = failing.as_secs(), error = %why, "the stall watchdog cannot list this controller's objects: a stall would go unseen until it can");
        }
    }

    fn listed(&mut self, controller: Controller) {
        if std::mem::take(&mut self.said) {
            tracing::info!(
                controller = controller.as_str(),
                "the stall watchdog lists again"
            );
        }
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: Duration = Duration::from_secs(60);

    fn object(generation: i64, status: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "Runtime",
            "metadata": {"name": "a", "namespace": "ns", "generation": generation},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn an_unobserved_generation_waits_and_an_observed_one_does_not() {
        assert!(waits(&object(2, json!({"observedGeneration": 1}))));
        assert!(waits(&object(1, json!({}))));
        assert!(!waits(&object(2, json!({"observedGeneration": 2}))));
    }

    #[test]
    fn a_deletion_waits_only_for_our_finalizer() {
        let mut obj = object(1, json!({"observedGeneration": 1}));
        obj.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        obj.metadata.finalizers = Some(vec!["example.com/other".into()]);
        assert!(!waits(&obj));
        obj.metadata.finalizers = Some(vec![format!("{FINALIZER_PREFIX}runtime")]);
        assert!(waits(&obj));
    }

    #[test]
    fn waiting_a_whole_timeout_without_a_reconcile_is_a_stall() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        waiting.observe(["Runtime/ns/a".to_string()], t0);
        // Seen again later: it keeps its first time.
        waiting.observe(["Runtime/ns/a".to_string()], t0 + T / 2);
        assert_eq!(waiting.stalled(|_| None, t0 + T / 2, T), None);
        assert_eq!(
            waiting.stalled(|_| None, t0 + T, T),
            Some(("Runtime/ns/a".to_string(), T))
        );
    }

    #[test]
    fn a_reconcile_that_ended_within_the_timeout_is_progress() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        waiting.observe(["Runtime/ns/a".to_string()], t0);
        let ended = |_: &str| Some(t0 + T / 2);
        assert_eq!(waiting.stalled(ended, t0 + T, T), None);
        assert!(waiting.stalled(ended, t0 + T / 2 + T, T).is_some());
    }

    #[test]
    fn a_controller_is_busy_while_its_workers_work_and_reconciles_end() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut load = Load::default();
        assert_eq!(load.look(at(0), 2), Pace::Idle, "the first look");
        // Two workers, each at work but for a millisecond between two reconciles.
        load.start(at(0));
        load.start(at(0));
        for ms in (100..=1000).step_by(100) {
            load.end(at(ms));
            load.start(at(ms + 1));
        }
        assert_eq!(load.look(at(1000), 2), Pace::Queued);
        assert_eq!(
            load.look(at(2000), 2),
            Pace::Quiet,
            "both at work, none ended"
        );
        load.end(at(2100));
        load.end(at(2200));
        load.start(at(2900));
        load.end(at(2950));
        assert_eq!(
            load.look(at(3000), 2),
            Pace::Idle,
            "at work a fraction of the time"
        );
        assert_eq!(
            load.look(at(4000), 0),
            Pace::Idle,
            "unbounded workers never queue"
        );
    }

    #[test]
    fn progress_tracks_load_per_controller() {
        let progress = Progress::default();
        let running = progress.running(Controller::Runtime);
        std::thread::sleep(Duration::from_millis(5));
        drop(running);
        assert!(progress.load.lock().unwrap()[&Controller::Runtime].ended == 1);
        assert!(
            !progress
                .load
                .lock()
                .unwrap()
                .contains_key(&Controller::Plugin)
        );
    }

    #[test]
    fn an_object_waiting_behind_a_queue_is_no_stall_until_the_queue_is_gone() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        let key = || ["Runtime/ns/a".to_string()];
        for (i, pace) in [Pace::Queued, Pace::Quiet, Pace::Queued]
            .into_iter()
            .enumerate()
        {
            let now = t0 + T / 2 * i as u32;
            waiting.load(pace, now);
            waiting.observe(key(), now);
        }
        assert_eq!(
            waiting.stalled(|_| None, t0 + T, T),
            None,
            "busy throughout"
        );
        waiting.load(Pace::Idle, t0 + T * 2);
        waiting.observe(key(), t0 + T * 2);
        let stalled = waiting.stalled(|_| None, t0 + T * 2, T);
        assert!(stalled.is_some(), "workers to spare: a stall");
    }

    #[test]
    fn workers_that_all_hang_are_no_queue() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        let key = || ["Runtime/ns/a".to_string()];
        waiting.load(Pace::Queued, t0);
        waiting.observe(key(), t0);
        waiting.load(Pace::Quiet, t0 + T);
        waiting.observe(key(), t0 + T);
        assert!(
            waiting.stalled(|_| None, t0 + T, T).is_some(),
            "nothing ended for a whole timeout"
        );
    }

    #[test]
    fn a_queue_that_began_after_an_object_waited_does_not_excuse_it() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        let key = || ["Runtime/ns/a".to_string()];
        for (i, pace) in [Pace::Idle, Pace::Idle, Pace::Queued]
            .into_iter()
            .enumerate()
        {
            let now = t0 + T / 2 * i as u32;
            waiting.load(pace, now);
            waiting.observe(key(), now);
        }
        assert!(waiting.stalled(|_| None, t0 + T, T).is_some());
    }

    #[test]
    fn an_object_no_longer_waiting_is_forgotten() {
        let t0 = Instant::now();
        let mut waiting = Waiting::default();
        waiting.observe(["Runtime/ns/a".to_string()], t0);
        waiting.observe([], t0 + T / 2);
        waiting.observe(["Runtime/ns/a".to_string()], t0 + T);
        assert_eq!(waiting.stalled(|_| None, t0 + T, T), None);
    }

    #[test]
    fn progress_forgets_objects_gone_from_a_listing() {
        let progress = Progress::default();
        progress.ended("Runtime/ns/a");
        progress.ended("Runtime/ns/b");
        progress.ended("ModuleSet/ns/a");
        progress.forget_gone("Runtime", &HashSet::from(["Runtime/ns/b".to_string()]));
        assert!(progress.last("Runtime/ns/a").is_none());
        assert!(progress.last("Runtime/ns/b").is_some());
        assert!(progress.last("ModuleSet/ns/a").is_some());
    }

    #[tokio::test]
    async fn a_listing_reads_every_page() {
        use crate::api::mock::{Exchange, serve};
        use http::Method;
        let runtime = |name: &str, generation: i64, observed: i64| {
            serde_json::json!({
                "apiVersion": "tessera.dev/v1alpha1", "kind": "Runtime",
                "metadata": {"name": name, "namespace": "ns", "generation": generation},
                "status": {"observedGeneration": observed},
            })
        };
        let page = |items: Vec<serde_json::Value>, next: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "List",
                "metadata": {"continue": next}, "items": items})
        };
        let path = "/apis/tessera.dev/v1alpha1/namespaces/ns/runtimes";
        let (client, server) = serve(vec![
            Exchange::ok(Method::GET, path, page(vec![runtime("a", 2, 1)], "next")),
            Exchange::ok(Method::GET, path, page(vec![runtime("b", 1, 1)], "")),
        ]);
        let resource = ApiResource::erase::<crate::crd::Runtime>(&());
        let api = Api::<DynamicObject>::namespaced_with(client, "ns", &resource);
        let params = ListParams::default().limit(PAGE);
        let (present, waiting) = look(&api, &params, "Runtime", T).await.expect("listed");
        drop(api);
        let got = server.received().await;
        assert_eq!(present.len(), 2);
        assert_eq!(waiting, vec!["Runtime/ns/a".to_string()]);
        assert!(got[0].query.contains("limit=100"), "{}", got[0].query);
        assert!(got[1].query.contains("continue=next"), "{}", got[1].query);
    }

    #[tokio::test]
    async fn a_page_that_hangs_ends_the_listing() {
        let (service, mut handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let resource = ApiResource::erase::<crate::crd::Runtime>(&());
        let api = Api::<DynamicObject>::namespaced_with(
            kube::Client::new(service, "ns"),
            "ns",
            &resource,
        );
        let params = ListParams::default().limit(PAGE);
        let patience = Duration::from_millis(50);
        // The request is held, unanswered, until the listing has given up.
        let both = async {
            tokio::join!(
                look(&api, &params, "Runtime", patience),
                handle.next_request()
            )
        };
        let (listed, asked) = tokio::time::timeout(Duration::from_secs(10), both)
            .await
            .expect("the listing gave up on the page");
        assert!(asked.is_some());
        assert!(matches!(listed, Err(Unlisted::Hung(_))), "{listed:?}");
    }

    #[test]
    fn listings_that_keep_failing_are_said_once_after_a_whole_timeout() {
        let why = Unlisted::Hung(T / 4);
        let t0 = Instant::now();
        let mut blind = Blind::default();
        blind.failed(&why, t0, T, Controller::Runtime);
        blind.failed(&why, t0 + T / 2, T, Controller::Runtime);
        assert!(!blind.said);
        blind.failed(&why, t0 + T, T, Controller::Runtime);
        assert!(blind.said);
        blind.listed(Controller::Runtime);
        assert!(!blind.said);
        // A new run of failures counts from its own start.
        blind.failed(&why, t0 + 2 * T, T, Controller::Runtime);
        blind.failed(&why, t0 + 2 * T + T / 2, T, Controller::Runtime);
        assert!(!blind.said);
    }
}

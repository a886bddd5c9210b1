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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use super::Controller;
use crate::api::PAGE;
use crate::controllers::Context;
use crate::crd::labels::FINALIZER_PREFIX;

/// When each object's last reconcile ended (any outcome), by `Kind/namespace/name`.
#[derive(Default)]
pub(crate) struct Progress {
    ended: Mutex<HashMap<String, Instant>>,
}

impl Progress {
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

/// Since when each object of one controller has waited, as the listings saw it.
#[derive(Debug, Default)]
struct Waiting {
    since: HashMap<String, Instant>,
}

impl Waiting {
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

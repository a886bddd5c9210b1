//! Sharding, the acting half (the decisions are in [`super::shards`]): every sharding
//! replica watches the shard Leases and the sharded objects (each kept as its placement and
//! the key it is hashed by, [`super::sharded`]); the leader, after every change and every
//! third of a lease duration, labels objects for their shard, drains those that move,
//! takes expired shard Leases and deletes dead ones no object names any more.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};

use super::sharded::{Slim, SlimStore};
use super::shards::{
    DEAD_HOLDER, LeaseFacts, LeaseMove, LeaseView, Liveness, Move, Placement, Ring, decide,
    lease_move, liveness, next_expiry,
};
use crate::controllers::Controllers;
use crate::crd::{ModuleSet, Runtime, RuntimeAccess, RuntimeKubeconfig, labels};
use crate::fence::Fence;
use crate::metrics::{Metrics, ShardMove};

/// Who the leader's label writes are from.
const FIELD_MANAGER: &str = "tessera-sharder";
/// Label writes in flight at once. A dead replica's objects wait for these writes: at 16,
/// its 1,045 Runtimes (and their RuntimeKubeconfigs) took 14 s against a busy API server
/// (`./x load --runtimes 3000 --replicas 3`).
const CONCURRENCY: usize = 48;

/// How long after a shard Lease runs out the leader looks again: past the instant, so that
/// the Lease judges expired.
const EXPIRY_MARGIN: Duration = Duration::from_millis(50);

/// The shard Lease of the replica `identity`, next to the leader Lease `leader_lease`.
pub(crate) fn lease_name(leader_lease: &str, identity: &str) -> String {
    format!("{leader_lease}-shard-{identity}")
}

/// The leader's sharding loop.
pub(crate) struct Sharder {
    /// Writes labels and Leases; passes the leader fence.
    pub(crate) client: Client,
    /// The leader Lease's fence (`client` passes it): no pass runs while it is closed.
    pub(crate) fence: Arc<Fence>,
    /// Namespace of the Leases.
    pub(crate) lease_namespace: String,
    /// The leader Lease's name: shard Leases are named after it.
    pub(crate) leader_lease: String,
    /// Only objects of this namespace are sharded (`None`: all).
    pub(crate) namespace: Option<String>,
    /// Which controllers run: only their kinds are sharded (a modules-only installation
    /// may not have the Runtime kinds at all).
    pub(crate) controllers: Controllers,
    pub(crate) lease_duration: Duration,
    pub(crate) metrics: Metrics,
}

/// One sharded kind: its objects, each slimmed to its placement and key.
struct Kind {
    resource: ApiResource,
    store: Arc<Mutex<SlimStore>>,
}

impl Kind {
    fn store(&self) -> std::sync::MutexGuard<'_, SlimStore> {
        self.store.lock().expect("sharded store lock")
    }
}

fn watch_kind<K>(client: &Client, namespace: Option<&str>) -> (Kind, BoxStream<'static, ()>)
where
    K: Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    let store = Arc::new(Mutex::new(SlimStore::default()));
    let config = watcher::Config::default().any_semantic();
    let events = match K::kind(&()).as_ref() {
        // Every status write of a Runtime reached every replica whole, to be slimmed to
        // its metadata: the sharder needs nothing else of it.
        "Runtime" => {
            let api: Api<PartialObjectMeta<Runtime>> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            keep(store.clone(), watcher(api, config), |o| {
                Slim::of_runtime(&o.metadata)
            })
        }
        kind => {
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let kind = if kind == "ModuleSet" {
                "ModuleSet"
            } else {
                "other"
            };
            keep(store.clone(), watcher(api, config), move |o| {
                Slim::of(kind, o)
            })
        }
    };
    (Kind { resource, store }, events)
}

/// Keep `store` from `events`, each object slimmed by `slim`.
fn keep<K, S, F>(store: Arc<Mutex<SlimStore>>, events: S, slim: F) -> BoxStream<'static, ()>
where
    K: Resource + Clone + std::fmt::Debug + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    F: Fn(&K) -> Option<(Box<str>, Slim)> + Send + 'static,
{
    // Errors need nothing here: the watcher backs off and lists again.
    events
        .default_backoff()
        .map(move |event| {
            if let Ok(event) = event {
                store
                    .lock()
                    .expect("sharded store lock")
                    .apply(event, &slim);
            }
        })
        .boxed()
}

/// The shard Leases, by shard.
struct Shards {
    prefix: String,
    store: Store<Lease>,
}

impl Shards {
    fn leases(&self) -> Vec<(String, Arc<Lease>)> {
        self.store
            .state()
            .into_iter()
            .filter_map(|lease| {
                let shard = lease.name_any().strip_prefix(&self.prefix)?.to_string();
                Some((shard, lease))
            })
            .collect()
    }

    /// How long until the first live shard Lease runs out (`Duration::MAX` if none is live).
    fn next_expiry(&self) -> Duration {
        let now = jiff::Timestamp::now();
        let leases = self.leases();
        let views: Vec<(&str, LeaseView)> = leases
            .iter()
            .map(|(shard, lease)| (shard.as_str(), view(lease)))
            .collect();
        next_expiry(views.iter().map(|(s, v)| (*s, v)), now).unwrap_or(Duration::MAX)
    }
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        holder: spec.holder_identity,
        renewed: spec.renew_time.map(|t| t.0),
        duration_s: spec.lease_duration_seconds,
    }
}

/// What the sharder looks at: the shard Leases and the sharded objects. Every sharding
/// replica keeps it from its start, not only the leader, so that a new leader acts on its
/// first pass instead of first listing every sharded kind from an API server that may be
/// busy (9.8 s of a 40 s handover at 3,000 Runtimes). It costs a standby what it costs the
/// leader: each object's placement and key.
pub(crate) struct View {
    shards: Shards,
    kinds: Vec<Kind>,
    /// The watches' events; polling them keeps the stores current.
    triggers: SelectAll<BoxStream<'static, ()>>,
}

impl View {
    /// Keep the view current until `until` completes (this replica leads).
    pub(crate) async fn follow<F: std::future::Future>(&mut self, until: F) -> F::Output {
        tokio::pin!(until);
        loop {
            tokio::select! {
                out = &mut until => return out,
                // The watches never end (they back off and retry); if they did, wait on
                // `until` alone instead of spinning.
                event = self.triggers.next() => if event.is_none() {
                    return until.await;
                },
            }
        }
    }
}

impl Sharder {
    /// Start watching what the sharder looks at; nothing is written until [`Sharder::run`].
    pub(crate) fn watch(&self) -> View {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
        let writer = reflector::store::Writer::<Lease>::default();
        let store = writer.as_reader();
        let lease_events = watcher(leases, watcher::Config::default().any_semantic())
            .default_backoff()
            .reflect(writer)
            .map(|_| ())
            .boxed();
        let shards = Shards {
            prefix: lease_name(&self.leader_lease, ""),
            store,
        };
        let (kinds, events) = self.watch_kinds();
        let triggers = futures::stream::select_all(events.into_iter().chain([lease_events]));
        View {
            shards,
            kinds,
            triggers,
        }
    }

    /// Run until the process ends (the leader stops by exiting). `quiet` is told after
    /// the first pass that had nothing to move or take, once a lease duration has passed
    /// (by then the Lease of a replica that died with the last leader has run out), or
    /// after ten lease durations: work that can wait (the sweep) waits for it, since a
    /// dead replica's objects move first.
    pub(crate) async fn run(
        self,
        view: View,
        quiet: tokio::sync::oneshot::Sender<()>,
    ) -> std::convert::Infallible {
        let (mut quiet, leading) = (Some(quiet), std::time::Instant::now());
        let View {
            shards,
            kinds,
            mut triggers,
        } = view;
        let mut acted = Acted::default();
        let tick = (self.lease_duration / 3).max(Duration::from_secs(1));
        tracing::info!(shard_leases = %shards.prefix, "sharding as leader");
        // A closed fence (the leader cannot confirm its Lease, as when the API server is too
        // busy to answer) would refuse every write of a pass, and the view of the shard
        // Leases is stale then: no pass until it opens, said once each way.
        let mut paused = false;
        loop {
            let mut wait = tick;
            if !fenced(&self.fence, &mut paused) && self.ready(&shards, &kinds) {
                let moved = self.pass(&shards, &kinds, &mut acted).await;
                wait = wait.min(shards.next_expiry().saturating_add(EXPIRY_MARGIN));
                // A write refused for good would keep every pass moving: the sweep waits
                // ten lease durations at most.
                let led = leading.elapsed();
                if (moved == 0 && led >= self.lease_duration || led >= 10 * self.lease_duration)
                    && let Some(quiet) = quiet.take()
                {
                    let _ = quiet.send(());
                }
            }
            tokio::select! {
                _ = triggers.next() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            // Let a burst of events settle into one pass.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while futures::FutureExt::now_or_never(triggers.next()).is_some() {}
        }
    }

    /// The sharded kinds this host runs controllers of, and their watches' events.
    fn watch_kinds(&self) -> (Vec<Kind>, Vec<BoxStream<'static, ()>>) {
        let ns = self.namespace.as_deref();
        let mut watched = vec![watch_kind::<ModuleSet>(&self.client, ns)];
        if self.controllers == Controllers::All {
            watched.push(watch_kind::<Runtime>(&self.client, ns));
            watched.push(watch_kind::<RuntimeKubeconfig>(&self.client, ns));
            watched.push(watch_kind::<RuntimeAccess>(&self.client, ns));
        }
        watched.into_iter().unzip()
    }

    /// Whether every watch has listed once: before that, a shard would look dead and an
    /// object unassigned.
    fn ready(&self, shards: &Shards, kinds: &[Kind]) -> bool {
        futures::FutureExt::now_or_never(shards.store.wait_until_ready()).is_some_and(|r| r.is_ok())
            && kinds.iter().all(|k| k.store().listed())
    }

    /// One look at everything: label, drain, take and delete as decided; how many
    /// objects and Leases it decided to move or take.
    async fn pass(&self, shards: &Shards, kinds: &[Kind], acted: &mut Acted) -> usize {
        let now = jiff::Timestamp::now();
        let leases = shards.leases();
        let liveness: BTreeMap<String, Liveness> = leases
            .iter()
            .map(|(shard, lease)| (shard.clone(), liveness(shard, &view(lease), now)))
            .collect();
        let ring = Ring::new(
            liveness
                .iter()
                .filter(|(_, l)| **l == Liveness::Ready)
                .map(|(s, _)| s.clone()),
        );
        let (mut counts, mut moved) = (BTreeMap::new(), 0);
        for kind in kinds {
            let moves = plan(kind, &ring, &liveness, acted, &mut counts);
            moved += moves.len();
            self.perform(kind, moves, acted).await;
        }
        acted.retain(|uid, _| kinds.iter().any(|k| k.store().contains(uid)));
        for (shard, lease) in &leases {
            let facts = self.facts(shard, lease, &counts, now);
            match lease_move(liveness[shard], facts) {
                LeaseMove::Keep => {}
                LeaseMove::TakeOver => {
                    moved += 1;
                    self.take(lease, now).await;
                }
                LeaseMove::Delete => self.delete(lease).await,
            }
        }
        self.metrics.set_shard_objects(&counts);
        moved
    }

    /// What the Lease of `shard` is besides its liveness.
    fn facts(
        &self,
        shard: &str,
        lease: &Lease,
        counts: &BTreeMap<(String, String), i64>,
        now: jiff::Timestamp,
    ) -> LeaseFacts {
        let within = |t: Option<jiff::Timestamp>, d: Duration| {
            let d = jiff::SignedDuration::try_from(d).unwrap_or_default();
            t.is_some_and(|t| t + d > now)
        };
        let renewed = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref());
        LeaseFacts {
            has_objects: counts.keys().any(|(s, _)| s == shard),
            young: within(lease.creation_timestamp().map(|t| t.0), self.lease_duration),
            fresh: within(renewed.map(|t| t.0), self.lease_duration / 3),
        }
    }

    /// Write the moves of one kind, a few at a time.
    async fn perform(&self, kind: &Kind, moves: Vec<Planned>, acted: &mut Acted) {
        let results: Vec<(String, String, Written)> = futures::stream::iter(moves)
            .map(|planned| async move {
                let written = self.write(kind, &planned).await;
                (planned.uid, planned.version, written)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let (mut assigned, mut drained, mut failed) = (0, 0, Vec::new());
        for (uid, version, written) in results {
            match written {
                Written::Moved(ShardMove::Drained) => drained += 1,
                Written::Moved(_) => assigned += 1,
                // Tried again on the next pass.
                Written::Failed(why) => {
                    failed.push(why);
                    continue;
                }
                Written::Changed => {}
            }
            acted.insert(uid, version);
        }
        if let Some(first) = failed.first() {
            // One line per kind and pass, however many failed.
            tracing::warn!(kind = %kind.resource.kind, failed = failed.len(), first = %first, "cannot label objects for their shards; retrying on the next pass");
        }
        self.metrics.shard_moved(ShardMove::Assigned, assigned);
        self.metrics.shard_moved(ShardMove::Drained, drained);
    }

    /// Label one object, on the condition that it is the version decided on.
    async fn write(&self, kind: &Kind, planned: &Planned) -> Written {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &planned.namespace, &kind.resource);
        let (labels, how) = match &planned.action {
            Move::Assign(shard) => (
                serde_json::json!({ labels::SHARD: shard, labels::DRAIN: null }),
                ShardMove::Assigned,
            ),
            Move::Drain => (
                serde_json::json!({ labels::DRAIN: "true" }),
                ShardMove::Drained,
            ),
            Move::Stay => return Written::Changed,
        };
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": planned.version, "labels": labels }
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        // Answered with the metadata only: nothing of the answer is read, and a whole
        // Runtime decoded per write (48 in flight) is memory and CPU spent for nothing.
        match api
            .patch_metadata(&planned.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Written::Moved(how),
            Err(e) if crate::api::is_conflict(&e) || crate::api::is_not_found(&e) => {
                Written::Changed
            }
            Err(e) => Written::Failed(format!(
                "{}: {}",
                planned.name,
                crate::report::kube_error(&e)
            )),
        }
    }

    /// Take an expired shard Lease, on the condition that it is the version judged: a shard
    /// that renewed meanwhile keeps it.
    async fn take(&self, lease: &Lease, now: jiff::Timestamp) {
        let mut taken = lease.clone();
        crate::api::slim(&mut taken);
        let spec = taken.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(DEAD_HOLDER.into());
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            now,
        ));
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
        match api
            .replace(&lease.name_any(), &PostParams::default(), &taken)
            .await
        {
            // Held dead again while its objects move (every third of a lease duration):
            // said once.
            Ok(_) if held_dead(lease) => {}
            Ok(_) => {
                self.metrics.shard_moved(ShardMove::Taken, 1);
                tracing::warn!(lease = %lease.name_any(), "a shard stopped renewing its Lease: taken, its objects move to the live shards");
            }
            Err(e) if crate::api::is_conflict(&e) => {}
            Err(e) => {
                tracing::warn!(lease = %lease.name_any(), error = %crate::report::kube_error(&e), "cannot take an expired shard Lease")
            }
        }
    }

    /// Delete a dead shard's Lease, on the condition that it is the version judged.
    async fn delete(&self, lease: &Lease) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease_namespace);
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: lease.resource_version(),
                uid: lease.uid(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&lease.name_any(), &params).await {
            Ok(_) => tracing::info!(lease = %lease.name_any(), "deleted the Lease of a shard gone"),
            Err(e) if crate::api::is_conflict(&e) || crate::api::is_not_found(&e) => {}
            Err(e) => {
                tracing::warn!(lease = %lease.name_any(), error = %crate::report::kube_error(&e), "cannot delete the Lease of a shard gone")
            }
        }
    }
}

/// Whether `fence` is closed now, saying so when that changed since `was`.
fn fenced(fence: &Fence, was: &mut bool) -> bool {
    let now = !fence.allows_writes();
    match (*was, now) {
        (false, true) => tracing::warn!(
            "the sharder pauses: this host cannot confirm it still holds the leader Lease"
        ),
        (true, false) => tracing::info!("the sharder resumes: the leader Lease is confirmed"),
        _ => {}
    }
    *was = now;
    now
}

/// Whether the leader took `lease` already.
fn held_dead(lease: &Lease) -> bool {
    let holder = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref());
    holder == Some(DEAD_HOLDER)
}

/// Objects already written at a version (uid → resourceVersion): not written again until
/// their watch shows a newer one.
type Acted = HashMap<String, String>;

/// How a label write ended.
enum Written {
    Moved(ShardMove),
    /// The object changed or went since it was judged: its next version decides.
    Changed,
    /// Refused or unanswered (why): tried again on the next pass.
    Failed(String),
}

/// A decided move of one object.
struct Planned {
    namespace: String,
    name: String,
    uid: String,
    version: String,
    action: Move,
}

/// Decide every object of `kind`; count objects per (shard, kind).
fn plan(
    kind: &Kind,
    ring: &Ring,
    liveness: &BTreeMap<String, Liveness>,
    acted: &Acted,
    counts: &mut BTreeMap<(String, String), i64>,
) -> Vec<Planned> {
    let mut moves = Vec::new();
    // Counted borrowed: a pass runs after every change, over every object.
    let mut per_shard: HashMap<&str, i64> = HashMap::new();
    let store = kind.store();
    for (uid, object) in store.iter() {
        if let Some(shard) = object.shard.as_deref() {
            *per_shard.entry(shard).or_default() += 1;
        }
        if acted.get(uid).map(String::as_str) == Some(&*object.version) {
            continue;
        }
        let placement = Placement {
            shard: object.shard.as_deref(),
            draining: object.draining,
            deleting: object.deleting,
            key: &object.key,
        };
        let action = decide(placement, ring, liveness);
        if action != Move::Stay {
            moves.push(Planned {
                namespace: object.namespace.to_string(),
                name: object.name.to_string(),
                uid: uid.to_string(),
                version: object.version.to_string(),
                action,
            });
        }
    }
    for (shard, n) in per_shard {
        counts.insert((shard.to_string(), kind.resource.kind.clone()), n);
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sharder_pauses_while_the_fence_is_closed_and_resumes() {
        let fence = Fence::closed();
        let mut was = false;
        assert!(fenced(&fence, &mut was) && was);
        assert!(fenced(&fence, &mut was), "still closed");
        fence.hold_until(std::time::Instant::now() + Duration::from_secs(60));
        assert!(!fenced(&fence, &mut was) && !was);
    }
}

//! Drift repair: one watch per (cluster, kind) of the objects modules applied (label
//! `modules.tessera.dev/module`), shared by every ModuleSet on that cluster. A change the
//! host did not make itself re-queues the ModuleSet named in the object's annotation,
//! whose next pass applies its objects again. The periodic resync is the safety net.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

use crate::crd::ModuleSet;
use crate::metrics::Metrics;
use crate::modules::Target;
use crate::modules::apply::Applied;
use crate::modules::labels;

/// A module object as its drift watch sees it: metadata only.
type Meta = PartialObjectMeta<DynamicObject>;

/// A drift watch and the target (credentials) it was started with.
struct Watch {
    target: Weak<Target>,
    task: tokio::task::AbortHandle,
}

/// (cluster, apiVersion, kind) of a watch.
type WatchKey = (String, String, String);

/// How often a watch checks that some ModuleSet still uses its target.
const IN_USE_CHECK: Duration = Duration::from_secs(60);

/// The watches and what the host itself last wrote.
pub(crate) struct Drift {
    tx: mpsc::UnboundedSender<ObjectRef<ModuleSet>>,
    metrics: Metrics,
    watched: Mutex<HashMap<WatchKey, Watch>>,
    /// cluster → uid → resourceVersion our last apply produced.
    own: Mutex<HashMap<String, HashMap<String, String>>>,
    /// cluster → the ModuleSets (`namespace/name`) with objects there.
    sets: Mutex<HashMap<String, HashSet<String>>>,
}

impl Drift {
    pub(crate) fn new(
        metrics: Metrics,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<ObjectRef<ModuleSet>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Self {
                tx,
                metrics,
                watched: Mutex::new(HashMap::new()),
                own: Mutex::new(HashMap::new()),
                sets: Mutex::new(HashMap::new()),
            }),
            rx,
        )
    }

    /// Remember what we applied and make sure its kinds are watched on `target` with the
    /// target's current credentials (a watch started with older ones is replaced).
    pub(crate) async fn track(self: &Arc<Self>, target: &Arc<Target>, applied: &[Applied]) {
        let kinds = self.remember(target, applied);
        for (api_version, kind) in kinds {
            let key = (target.server.clone(), api_version.clone(), kind.clone());
            if self.is_watched(&key, target) {
                continue;
            }
            // Not watchable now (discovery failed): the next apply of this kind tries again.
            let Ok(Some(resolved)) = target.kind(&api_version, &kind).await else {
                continue;
            };
            // Metadata alone: uid, version and annotations are all a change is told by.
            let api: Api<Meta> = Api::all_with(target.client.clone(), &resolved.resource);
            let task = tokio::spawn(self.clone().watch(api, Arc::downgrade(target), kind));
            let watch = Watch {
                target: Arc::downgrade(target),
                task: task.abort_handle(),
            };
            if let Some(old) = self.watched.lock().expect("drift lock").insert(key, watch) {
                // Started with credentials the target no longer has.
                old.task.abort();
            }
        }
    }

    /// Record our own writes and the sets on the cluster; the kinds to watch.
    fn remember(&self, target: &Target, applied: &[Applied]) -> Vec<(String, String)> {
        let mut kinds = Vec::new();
        let mut own = self.own.lock().expect("drift lock");
        let mut sets = self.sets.lock().expect("drift lock");
        for a in applied {
            let meta = &a.object["metadata"];
            if let (Some(uid), Some(rv)) = (meta["uid"].as_str(), meta["resourceVersion"].as_str())
            {
                let on_cluster = own.entry(target.server.clone()).or_default();
                on_cluster.insert(uid.to_string(), rv.to_string());
            }
            if let Some(set) = meta["annotations"][labels::MODULE_SET].as_str() {
                let on_cluster = sets.entry(target.server.clone()).or_default();
                on_cluster.insert(set.to_string());
            }
            kinds.push((a.key.api_version.clone(), a.key.kind.clone()));
        }
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// Stop the watches on `server` and forget what was applied there: no set on this
    /// replica has used the cluster for a while. The next pass of one of its sets applies
    /// everything again (repairing what changed meanwhile) and watches anew.
    pub(crate) fn forget(&self, server: &str) {
        let mut watched = self.watched.lock().expect("drift lock");
        watched.retain(|(s, _, _), w| {
            if s == server {
                w.task.abort();
            }
            s != server
        });
        drop(watched);
        self.own.lock().expect("drift lock").remove(server);
        self.sets.lock().expect("drift lock").remove(server);
    }

    /// Drift watches running now.
    pub(crate) fn watches(&self) -> usize {
        let watched = self.watched.lock().expect("drift lock");
        watched.values().filter(|w| !w.task.is_finished()).count()
    }

    /// A live watch for `key` runs with `target`'s credentials.
    fn is_watched(&self, key: &WatchKey, target: &Arc<Target>) -> bool {
        let watched = self.watched.lock().expect("drift lock");
        watched
            .get(key)
            .is_some_and(|w| w.target.ptr_eq(&Arc::downgrade(target)) && !w.task.is_finished())
    }

    /// Watch one kind until the target is no longer used or its credentials are refused.
    /// Failures back off (kube-runtime's default backoff) and are logged at debug level.
    async fn watch(self: Arc<Self>, api: Api<Meta>, target: Weak<Target>, kind: String) {
        let Some(server) = target.upgrade().map(|t| t.server.clone()) else {
            return;
        };
        tracing::debug!(%server, %kind, "watching module objects for drift");
        // The first list only fixes where the watch starts (its objects were just applied,
        // their versions are in `own`): served from the API server's cache, not read from
        // etcd, as a target with thousands of objects would otherwise pay on every start.
        let config = watcher::Config::default()
            .labels(labels::MODULE)
            .any_semantic();
        let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
        let mut in_use = tokio::time::interval(IN_USE_CHECK);
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                _ = in_use.tick() => {
                    if target.strong_count() == 0 {
                        tracing::debug!(%server, %kind, "drift watch no longer needed");
                        return;
                    }
                    continue;
                }
            };
            match event {
                Some(Ok(Event::Apply(o))) => self.changed(&server, &kind, &o, false),
                Some(Ok(Event::Delete(o))) => self.changed(&server, &kind, &o, true),
                Some(Ok(_)) => {}
                Some(Err(e)) if refused_credentials(&e) => {
                    tracing::info!(%server, %kind, error = %crate::report::watch_error(&e), "credentials refused; the drift watch restarts with the target Secret's current ones");
                    self.requeue_sets(&server);
                    return;
                }
                Some(Err(e)) => {
                    tracing::debug!(%server, %kind, error = %crate::report::watch_error(&e), "drift watch error")
                }
                None => return,
            }
        }
    }

    /// Reconcile every set with objects on `server` (they read the Secret again).
    fn requeue_sets(&self, server: &str) {
        let sets = self.sets.lock().expect("drift lock");
        for set in sets.get(server).into_iter().flatten() {
            if let Some((namespace, name)) = set.split_once('/') {
                let _ = self.tx.send(ObjectRef::new(name).within(namespace));
            }
        }
    }

    fn changed(&self, server: &str, kind: &str, object: &Meta, deleted: bool) {
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let rv = object.metadata.resource_version.clone().unwrap_or_default();
        if !deleted {
            let own = self.own.lock().expect("drift lock");
            if own.get(server).and_then(|o| o.get(&uid)) == Some(&rv) {
                return;
            }
        }
        let Some(set) = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::MODULE_SET))
        else {
            return;
        };
        if deleted {
            // A shared object is made again by whichever module wanting it comes first.
            let json = serde_json::to_value(object).expect("an object serializes");
            for sharing in crate::modules::sharing::sharing_sets(&json) {
                if let Some((namespace, name)) = sharing.split_once('/') {
                    let _ = self.tx.send(ObjectRef::new(name).within(namespace));
                }
            }
        }
        let Some((namespace, name)) = set.split_once('/') else {
            return;
        };
        self.metrics.module_drifted(kind);
        tracing::debug!(
            %server,
            kind,
            object = object.metadata.name.as_deref().unwrap_or_default(),
            moduleset = %set,
            deleted,
            "managed object changed on the target"
        );
        let _ = self.tx.send(ObjectRef::new(name).within(namespace));
    }
}

/// The target's API server refused the credentials (rotated and revoked).
fn refused_credentials(e: &watcher::Error) -> bool {
    matches!(crate::report::watch_status(e), Some(401 | 403))
}

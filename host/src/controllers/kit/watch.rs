//! The controllers' own watches, with a cache of slimmed objects (`api::slim`): a Runtime
//! written by a client and by the host's status writes carries two managed-fields entries,
//! whose field sets are often as large as its spec, and no reconcile reads them.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde::de::DeserializeOwned;

/// Which changes of its own objects wake a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Every change, its own status writes included (the Runtime state machine goes on
    /// from what it wrote).
    OnAnyChange,
    /// A change of what the object asks for: its generation (spec, deletion), labels,
    /// annotations or deletion. Not its status, which only this host writes and which a
    /// pass just ended with; not its finalizers, which the pass adds and then goes on.
    /// A ModuleSet woken by its own status write ran its plugins and applied every object
    /// again (two to three full passes per install where one does). ModuleSets only.
    OnIntent,
}

/// A controller of the objects `api` and `config` select, its cache slimmed, woken as
/// `wake` says (its other triggers, requeues and owned objects wake it regardless).
pub(crate) fn controller<K>(api: Api<K>, config: watcher::Config, wake: Wake) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    let (reader, writer) = reflector::store();
    let mut seen = Seen::new(wake);
    let objects = watcher(api, config)
        .modify(crate::api::slim)
        .reflect(writer)
        .filter_map(move |event| futures::future::ready(seen.wakes(event)));
    Controller::for_stream(objects, reader)
}

/// The intent last woken for, per object this watch holds.
struct Seen {
    wake: Wake,
    intents: HashMap<String, u64>,
}

impl Seen {
    fn new(wake: Wake) -> Self {
        Self {
            wake,
            intents: HashMap::new(),
        }
    }

    /// The object `event` wakes the controller for, if any. An object that left the watch
    /// (deleted, or no longer selected: a shard label moved it) or a relist forgets what
    /// was seen: coming back wakes it even with the intent it left with.
    fn wakes<K: Resource>(
        &mut self,
        event: Result<watcher::Event<K>, watcher::Error>,
    ) -> Option<Result<K, watcher::Error>> {
        match event {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                if self.wake == Wake::OnIntent {
                    let intent = intent(&o)?;
                    let was = self.intents.insert(key(&o), intent);
                    if was == Some(intent) {
                        return None;
                    }
                }
                Some(Ok(o))
            }
            Ok(watcher::Event::Delete(o)) => {
                self.intents.remove(&key(&o));
                None
            }
            Ok(watcher::Event::Init) => {
                self.intents.clear();
                None
            }
            Ok(watcher::Event::InitDone) => None,
        }
    }
}

fn key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    meta.uid.clone().unwrap_or_else(|| {
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        format!("{namespace}/{}", meta.name.as_deref().unwrap_or_default())
    })
}

/// What `Wake::OnIntent` compares: equal for two versions that differ only in status,
/// finalizers or bookkeeping (managed fields, resourceVersion).
fn intent<K: Resource>(object: &K) -> Option<u64> {
    let meta = object.meta();
    let deleting = meta.deletion_timestamp.as_ref().map(|t| t.0.as_second());
    let mut hasher = std::hash::DefaultHasher::new();
    (meta.generation, &meta.labels, &meta.annotations, deleting).hash(&mut hasher);
    Some(std::hash::Hasher::finish(&hasher))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ModuleSet;

    fn set() -> ModuleSet {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": "s", "namespace": "n", "generation": 1, "resourceVersion": "1"},
            "spec": {"modules": []}
        }))
        .expect("a ModuleSet")
    }

    #[test]
    fn intent_ignores_status_and_finalizers_but_not_what_the_object_asks_for() {
        let base = set();
        let mut status = base.clone();
        status.status = Some(Default::default());
        status.metadata.resource_version = Some("2".into());
        status.metadata.finalizers = Some(vec!["tessera.dev/x".into()]);
        assert_eq!(intent(&status), intent(&base));
        let mut spec = base.clone();
        spec.metadata.generation = Some(2);
        let mut labelled = base.clone();
        labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        let mut annotated = base.clone();
        annotated.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        let mut deleting = base.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        for changed in [spec, labelled, annotated, deleting] {
            assert_ne!(intent(&changed), intent(&base));
        }
    }

    #[test]
    fn an_object_coming_back_into_the_watch_wakes_its_controller_again() {
        let mut seen = Seen::new(Wake::OnIntent);
        let mut wakes = |event| seen.wakes::<ModuleSet>(Ok(event)).is_some();
        let mut placed = set();
        placed.metadata.uid = Some("u1".into());
        assert!(wakes(watcher::Event::Apply(placed.clone())), "first sight");
        let mut written = placed.clone();
        written.status = Some(Default::default());
        assert!(
            !wakes(watcher::Event::Apply(written.clone())),
            "its own status write"
        );
        assert!(
            !wakes(watcher::Event::Delete(written.clone())),
            "moved to another shard"
        );
        assert!(
            wakes(watcher::Event::Apply(written.clone())),
            "back with the labels it left with"
        );
        assert!(!wakes(watcher::Event::Init));
        assert!(wakes(watcher::Event::InitApply(written)), "a relist");
        let mut any = Seen::new(Wake::OnAnyChange);
        assert!(
            any.wakes::<ModuleSet>(Ok(watcher::Event::Apply(placed.clone())))
                .is_some()
        );
        assert!(
            any.wakes::<ModuleSet>(Ok(watcher::Event::Apply(placed)))
                .is_some()
        );
    }
}

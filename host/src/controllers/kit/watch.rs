//! The controllers' own watches, with a cache of slimmed objects (`api::slim`): a Runtime
//! written by a client and by the host's status writes carries two managed-fields entries,
//! whose field sets are often as large as its spec, and no reconcile reads them.

use std::fmt::Debug;
use std::hash::Hash;

use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::{PredicateConfig, WatchStreamExt, reflector, watcher};
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
    /// again (two to three full passes per install where one does).
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
    let objects = watcher(api, config)
        .modify(crate::api::slim)
        .reflect(writer)
        .applied_objects();
    match wake {
        Wake::OnAnyChange => Controller::for_stream(objects, reader),
        Wake::OnIntent => {
            let filtered = objects.predicate_filter(intent::<K>, PredicateConfig::default());
            Controller::for_stream(filtered, reader)
        }
    }
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
}

//! The controllers' own watches, with a cache of slimmed objects (`api::slim`): a Runtime
//! written by a client and by the host's status writes carries two managed-fields entries,
//! whose field sets are often as large as its spec, and no reconcile reads them.

use std::fmt::Debug;
use std::hash::Hash;

use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde::de::DeserializeOwned;

/// A controller of the objects `api` and `config` select, its cache slimmed.
pub(crate) fn controller<K>(api: Api<K>, config: watcher::Config) -> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Debug + Unpin,
{
    let (reader, writer) = reflector::store();
    let objects = watcher(api, config)
        .modify(crate::api::slim)
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(objects, reader)
}

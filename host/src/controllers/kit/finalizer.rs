//! The one finalizer helper. A merge patch carrying the resourceVersion adds or removes our
//! finalizer and keeps everyone else's; a concurrent change makes it a conflict, retried.

use crate::api;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Whether `obj` carries `finalizer`.
pub(crate) fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Add `finalizer` to `obj` unless it is there. Returns whether it wrote.
pub(crate) async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(obj, finalizer) {
        return Ok(false);
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_string());
    write(api, obj, finalizers).await?;
    Ok(true)
}

/// Remove `finalizer` from `obj` if it is there. Returns whether it wrote.
pub(crate) async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !has(obj, finalizer) {
        return Ok(false);
    }
    let rest: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    match write(api, obj, rest).await {
        // Already gone: what we wanted.
        Err(e) if api::is_not_found(&e) => Ok(false),
        other => other.map(|()| true),
    }
}

async fn write<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "metadata": { "finalizers": finalizers, "resourceVersion": obj.resource_version() }
    });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

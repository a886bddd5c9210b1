//! A replica's side of sharding (`tessera run --sharding`, decided in
//! `operator::shards`): its watches select the objects labelled for its shard, and an
//! object the leader asks it to let go (the drain label) is released instead of
//! reconciled, so that two replicas never work on one object at once.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::controllers::{Context, ReconcileError, labels};
use crate::metrics::ShardMove;

/// `config` narrowed to the objects of this replica's shard (unchanged without sharding).
pub(crate) fn selected(ctx: &Context, config: watcher::Config) -> watcher::Config {
    match selector(ctx) {
        Some(selector) => config.labels(&selector),
        None => config,
    }
}

/// `tessera.dev/shard=<this shard>` (`None` without sharding).
pub(crate) fn selector(ctx: &Context) -> Option<String> {
    let shard = ctx.config.shard.as_deref()?;
    Some(format!("{}={shard}", labels::SHARD))
}

/// Whether the leader asked this replica to let `obj` go.
pub(crate) fn draining<K: Resource>(ctx: &Context, obj: &K) -> bool {
    ctx.config.shard.is_some() && obj.labels().contains_key(labels::DRAIN)
}

/// Let `obj` go: remove its shard and drain labels, on the condition that it is still the
/// version this replica saw (a conflict means it changed, and its next event decides).
/// Called instead of a reconcile, which the controller never runs twice at once for one
/// object: nothing of this replica is working on it when it goes.
pub(crate) async fn release<K>(ctx: &Context, obj: &K) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match obj.meta().namespace.as_deref() {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &resource),
        None => Api::all_with(ctx.client.clone(), &resource),
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": obj.meta().resource_version,
            "labels": { labels::SHARD: null, labels::DRAIN: null },
        }
    });
    let name = obj.name_any();
    match api
        .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            ctx.metrics.shard_moved(ShardMove::Released, 1);
            let namespace = obj.meta().namespace.as_deref().unwrap_or_default();
            ctx.metrics.forget(&K::kind(&()), namespace, &name);
            tracing::info!(object = %super::key(obj), "let go to another shard");
            Ok(Action::await_change())
        }
        Err(e) if crate::api::is_conflict(&e) || crate::api::is_not_found(&e) => {
            Ok(Action::await_change())
        }
        Err(e) => Err(e.into()),
    }
}

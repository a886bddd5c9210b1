//! Catalog changes as reconcile triggers: each change wakes only the objects it concerns,
//! read from the controller's own cache, so a rollout of one channel wakes its users and
//! leaves the rest of the fleet alone.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use super::Controller;
use crate::controllers::Context;
use crate::plugins::CatalogWake;

/// The objects of `store` that `woken` says a catalog change concerns, counted per
/// controller in `tessera_catalog_wakes_total`.
pub(crate) fn catalog_wakes<K, F>(
    ctx: &Context,
    controller: Controller,
    store: Store<K>,
    woken: F,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    F: Fn(&K, &CatalogWake) -> bool + Send + 'static,
{
    let counter = ctx.metrics.catalog_wakes(controller.as_str());
    ctx.renderer
        .resolver
        .catalog
        .subscribe()
        .flat_map(move |wake| {
            let refs = affected(&store.state(), &wake, &woken);
            counter.inc_by(refs.len() as u64);
            futures::stream::iter(refs)
        })
}

/// The references of the `objects` that `woken` says `wake` concerns.
fn affected<K>(
    objects: &[Arc<K>],
    wake: &CatalogWake,
    woken: impl Fn(&K, &CatalogWake) -> bool,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    objects
        .iter()
        .filter(|o| woken(o, wake))
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::ModuleSet;
    use crate::modules::set::woken_by;
    use crate::plugins::{CatalogChange, ChangedChannels};

    fn set(name: &str, channel: &str) -> Arc<ModuleSet> {
        let set = serde_json::from_value(json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": { "name": name, "namespace": "team" },
            "spec": { "modules": [{ "name": "dash", "channel": channel }] },
        }));
        Arc::new(set.expect("a valid ModuleSet"))
    }

    fn module_sets(set: &ModuleSet, wake: &CatalogWake) -> bool {
        woken_by(&set.spec.modules, set.spec.channel.as_deref(), &[], wake)
    }

    #[test]
    fn only_the_objects_on_the_changed_channel_are_woken() {
        let sets = [set("on-fast", "fast"), set("on-regular", "regular")];
        let wake = CatalogWake::Changed(CatalogChange {
            plugin: "dash".into(),
            channels: ChangedChannels::Some(["fast".to_string()].into()),
        });
        let woken = affected(&sets, &wake, module_sets);
        assert_eq!(woken, vec![ObjectRef::from_obj(sets[0].as_ref())]);
        let all = affected(&sets, &CatalogWake::Lagged, module_sets);
        assert_eq!(all.len(), 2);
    }
}

//! Objects more than one module may want on a target — a CustomResourceDefinition, a
//! Namespace — are reference-counted instead of refused. One module *holds* the object: its
//! labels and annotation name it, and its field manager's apply is the object's content.
//! Every other module that wants it is listed in the annotation [`labels::SHARED_BY`] and writes
//! nothing else of it. When the holder lets go, the object passes to the first sharer that
//! still wants it (its set's inventory on the target lists the object); only the last one
//! deletes it. Only definitions are shared: two modules rarely agree on a Deployment, while
//! a CRD or a namespace is one cluster-wide thing whose deletion destroys what others keep
//! in it.
//!
//! Every change of the list, and the last holder's delete, carries the object's
//! resourceVersion, so two sets (or two hosts) joining or leaving at once cannot lose an
//! entry: the slower one is told the object changed and reads it again. Sharing stays
//! within one namespace of the control plane (one tenant): a module of another namespace's
//! set is refused as before, so no tenant keeps another's namespace alive or takes it over.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::error::ModuleError;
use super::inventory::{Inventory, ObjectKey};
use super::labels;
use super::target::Target;
use super::types::{MODULE_MANAGER_PREFIX, Owner};
use crate::api;

/// The field manager of the list and of hand-overs.
const MANAGER: &str = "tessera-sharing";

/// Whether modules may share objects of `key`'s kind.
pub(crate) fn shareable(key: &ObjectKey) -> bool {
    key.is_crd() || (key.kind == "Namespace" && key.api_version == "v1")
}

/// Whether the object `object` (a manifest or a live object) is of a kind modules share.
pub(crate) fn shareable_object(object: &Value) -> bool {
    ObjectKey::of(object).is_some_and(|k| shareable(&k))
}

/// Whether a module of `owner`'s set may share an object held by a module of `holder_set`:
/// both sets are in one namespace.
pub(crate) fn may_share(holder_set: &str, owner: Owner<'_>) -> bool {
    let namespace = |set: &str| set.split_once('/').map(|(ns, _)| ns.to_string());
    namespace(holder_set).is_some() && namespace(holder_set) == namespace(owner.set)
}

/// Whether `live` is being deleted (a terminating Namespace, a CRD whose resources are
/// being cleaned up): it can be neither shared nor handed over.
pub(crate) fn is_deleting(live: &DynamicObject) -> bool {
    live.metadata.deletion_timestamp.is_some()
}

/// How `owner` is listed.
fn entry(owner: Owner<'_>) -> String {
    format!("{}/{}", owner.set, owner.module)
}

/// The set and module a list entry names.
fn owner_of(entry: &str) -> Option<(&str, &str)> {
    entry.rsplit_once('/').filter(|(set, _)| set.contains('/'))
}

/// The modules listed as sharing `object`.
pub(crate) fn sharers(object: &Value) -> Vec<String> {
    object["metadata"]["annotations"][labels::SHARED_BY]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The sets (`<namespace>/<name>`) of the modules sharing `object`.
pub(crate) fn sharing_sets(object: &Value) -> Vec<String> {
    let mut sets: Vec<String> = sharers(object)
        .iter()
        .filter_map(|s| owner_of(s).map(|(set, _)| set.to_string()))
        .collect();
    sets.sort();
    sets.dedup();
    sets
}

/// Whether `owner` is listed as sharing `object`.
pub(crate) fn listed(object: &Value, owner: Owner<'_>) -> bool {
    let me = entry(owner);
    sharers(object).contains(&me)
}

/// The annotation's value for `list` (`null` removes it).
fn list_value(list: &[String]) -> Value {
    if list.is_empty() {
        Value::Null
    } else {
        list.join(",").into()
    }
}

/// The sharers of `object` other than `owner` that still want it: their set's inventory on
/// the target lists the object for that module. A set deleted without letting go, or a
/// module that left without saying so, no longer counts; an inventory that cannot be read
/// counts as wanting (keeping an object is the safe mistake).
pub(crate) async fn wanting(
    target: &Target,
    key: &ObjectKey,
    object: &Value,
    owner: Owner<'_>,
) -> Result<Vec<String>, ModuleError> {
    let me = entry(owner);
    let mut out = Vec::new();
    for sharer in sharers(object) {
        let Some((set, module)) = owner_of(&sharer).filter(|_| sharer != me) else {
            continue;
        };
        let wants = match Inventory::load(target, set).await {
            Ok(inventory) => inventory.modules.get(module).is_some_and(|r| r.lists(key)),
            Err(ModuleError::Object { .. }) => true,
            Err(e) => return Err(e),
        };
        if wants {
            out.push(sharer);
        }
    }
    Ok(out)
}

/// Whether the module holding `object` (its labels and set annotation) still wants it: its
/// set's inventory on the target lists it. A holder whose set went without letting go
/// (its target Secret gone) no longer does; an unreadable inventory counts as wanting.
pub(crate) async fn holder_wants(
    target: &Target,
    key: &ObjectKey,
    object: &Value,
) -> Result<bool, ModuleError> {
    let meta = &object["metadata"];
    let (Some(set), Some(module)) = (
        meta["annotations"][labels::MODULE_SET].as_str(),
        meta["labels"][labels::MODULE].as_str(),
    ) else {
        return Ok(false);
    };
    match Inventory::load(target, set).await {
        Ok(inventory) => Ok(inventory.modules.get(module).is_some_and(|r| r.lists(key))),
        Err(ModuleError::Object { .. }) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Merge `body` into `live`, provided it has not changed since it was read; `None` when it
/// has (or is gone): read it again.
async fn patch_unchanged(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    mut body: Value,
) -> Result<Option<DynamicObject>, ModuleError> {
    body["metadata"]["resourceVersion"] = live.metadata.resource_version.clone().into();
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    let name = live.metadata.name.as_deref().unwrap_or_default();
    match api.patch(name, &params, &Patch::Merge(&body)).await {
        Ok(done) => Ok(Some(done)),
        Err(e) if api::is_conflict(&e) || api::is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn json_of(live: &DynamicObject) -> Value {
    serde_json::to_value(live).expect("an object serializes")
}

/// List `owner` among the sharers of `live`.
pub(crate) async fn join(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    owner: Owner<'_>,
) -> Result<Option<DynamicObject>, ModuleError> {
    let mut list = sharers(&json_of(live));
    list.push(entry(owner));
    list.sort();
    list.dedup();
    let body = json!({"metadata": {"annotations": {labels::SHARED_BY: list_value(&list)}}});
    patch_unchanged(api, live, body).await
}

/// Take `owner` off the sharers of `live`.
pub(crate) async fn leave(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    owner: Owner<'_>,
) -> Result<Option<DynamicObject>, ModuleError> {
    let me = entry(owner);
    let list: Vec<String> = sharers(&json_of(live))
        .into_iter()
        .filter(|s| *s != me)
        .collect();
    let body = json!({"metadata": {"annotations": {labels::SHARED_BY: list_value(&list)}}});
    patch_unchanged(api, live, body).await
}

/// Make `to` (`<set>/<module>`) the holder of `live`, listing `rest` as its sharers. Its
/// next pass applies its own content and retires the fields of the previous holder, whose
/// field manager the annotation [`labels::EARLIER_HOLDER`] names.
pub(crate) async fn hand_over(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    to: &str,
    rest: &[String],
) -> Result<Option<DynamicObject>, ModuleError> {
    let Some((set, module)) = owner_of(to) else {
        return Ok(None);
    };
    let earlier = live
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::MODULE))
        .map(|m| format!("{MODULE_MANAGER_PREFIX}{m}"));
    let body = json!({"metadata": {
        "labels": {labels::MODULE: module},
        "annotations": {labels::MODULE_SET: set, labels::SHARED_BY: list_value(rest), labels::EARLIER_HOLDER: earlier},
    }});
    patch_unchanged(api, live, body).await
}

/// The previous holder's field manager, when a hand-over named one other than `manager`.
pub(crate) fn earlier_holder(object: &DynamicObject, manager: &str) -> Option<String> {
    let annotations = object.metadata.annotations.as_ref()?;
    let earlier = annotations.get(labels::EARLIER_HOLDER)?;
    (earlier.starts_with(MODULE_MANAGER_PREFIX) && earlier != manager).then(|| earlier.clone())
}

/// The hand-over's note taken off once the earlier holder's fields are retired.
pub(crate) fn without_earlier_holder() -> Value {
    json!({"metadata": {"annotations": {labels::EARLIER_HOLDER: null}}})
}

/// What an earlier holder's manager applies to give up its fields: the object's identity
/// only. Fields the new holder set too stay; those only the earlier holder wanted go.
pub(crate) fn withdrawal(key: &ObjectKey) -> Value {
    let mut metadata = json!({"name": key.name});
    if let Some(ns) = &key.namespace {
        metadata["namespace"] = ns.clone().into();
    }
    json!({"apiVersion": key.api_version, "kind": key.kind, "metadata": metadata})
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: Owner<'static> = Owner {
        set: "team-a/main",
        module: "telemetry",
    };

    fn key(kind: &str, api_version: &str) -> ObjectKey {
        ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            name: "x".into(),
        }
    }

    #[test]
    fn sharing_stays_within_a_namespace() {
        assert!(may_share("team-a/other", OWNER));
        assert!(!may_share("team-b/main", OWNER));
        assert!(!may_share("?", OWNER));
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": "x"}});
        assert!(shareable_object(&crd));
        assert!(!shareable_object(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}})
        ));
    }

    #[test]
    fn only_definitions_are_shared() {
        assert!(shareable(&key(
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1"
        )));
        assert!(shareable(&key("Namespace", "v1")));
        assert!(!shareable(&key("ConfigMap", "v1")));
        assert!(!shareable(&key("Deployment", "apps/v1")));
    }

    #[test]
    fn the_list_round_trips() {
        let object = json!({"metadata": {"annotations": {
            labels::SHARED_BY: "team-b/main/telemetry, team-a/main/telemetry,,"
        }}});
        assert_eq!(
            sharers(&object),
            ["team-b/main/telemetry", "team-a/main/telemetry"]
        );
        assert!(listed(&object, OWNER));
        assert!(!listed(
            &object,
            Owner {
                set: "team-a/main",
                module: "dashboard"
            }
        ));
        assert_eq!(
            owner_of("team-b/main/telemetry"),
            Some(("team-b/main", "telemetry"))
        );
        // A set is always `<namespace>/<name>`: an entry without one is ignored.
        assert_eq!(owner_of("main/telemetry"), None);
        assert_eq!(sharing_sets(&object), ["team-a/main", "team-b/main"]);
        assert_eq!(list_value(&[]), Value::Null);
        assert!(sharers(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn the_earlier_holder_is_the_one_a_hand_over_named() {
        let object = |earlier: &str| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "x", "annotations": {labels::EARLIER_HOLDER: earlier}}
            }))
            .unwrap()
        };
        let me = "tessera-module-telemetry";
        assert_eq!(
            earlier_holder(&object("tessera-module-dashboard"), me).as_deref(),
            Some("tessera-module-dashboard")
        );
        // The same module of another set: the same manager, nothing to retire.
        assert_eq!(earlier_holder(&object(me), me), None);
        // Only module managers are ever retired.
        assert_eq!(earlier_holder(&object("kubectl-edit"), me), None);
        let gone = withdrawal(&ObjectKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("n".into()),
            name: "c".into(),
        });
        assert_eq!(
            gone,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}})
        );
    }
}

//! Objects more than one module may want on a target — a CustomResourceDefinition, a
//! Namespace — are reference-counted instead of refused. One module *holds* the object: its
//! labels and annotation name it, and its field manager's apply is the object's content.
//! Every other module that wants it is listed in the annotation [`SHARED_BY`] and writes
//! nothing else of it. When the holder lets go, the object passes to the first sharer that
//! still wants it (its set's inventory on the target lists the object); only the last one
//! deletes it. Only definitions are shared: two modules rarely agree on a Deployment, while
//! a CRD or a namespace is one cluster-wide thing whose deletion destroys what others keep
//! in it.
//!
//! Every change of the list is a merge patch carrying the object's resourceVersion, so two
//! sets (or two hosts) joining or leaving at once cannot lose an entry: the slower one is
//! told the object changed and reads it again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::error::ModuleError;
use super::inventory::{Inventory, ObjectKey};
use super::labels;
use super::ownership::{MODULE_MANAGER_PREFIX, Owner};
use super::target::Target;

/// `<set namespace>/<set name>/<module>` of each module sharing the object besides its
/// holder, comma-separated.
pub(crate) const SHARED_BY: &str = "modules.tessera.dev/shared-by";
/// The field manager of the list and of hand-overs.
const MANAGER: &str = "tessera-sharing";

/// Whether modules may share objects of `key`'s kind.
pub(crate) fn shareable(key: &ObjectKey) -> bool {
    key.is_crd() || (key.kind == "Namespace" && key.api_version == "v1")
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
    object["metadata"]["annotations"][SHARED_BY]
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
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(None),
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
    let body = json!({"metadata": {"annotations": {SHARED_BY: list_value(&list)}}});
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
    let body = json!({"metadata": {"annotations": {SHARED_BY: list_value(&list)}}});
    patch_unchanged(api, live, body).await
}

/// Make `to` the holder of `live`, listing `rest` as its sharers. Its next pass applies its
/// own content and retires the fields the previous holder set ([`stale_holders`]).
pub(crate) async fn hand_over(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    to: &str,
    rest: &[String],
) -> Result<Option<DynamicObject>, ModuleError> {
    let Some((set, module)) = owner_of(to) else {
        return Ok(None);
    };
    let body = json!({"metadata": {
        "labels": {labels::MODULE: module},
        "annotations": {labels::SET: set, SHARED_BY: list_value(rest)},
    }});
    patch_unchanged(api, live, body).await
}

/// The field managers of earlier holders still owning fields of an object `manager` now
/// holds: other modules' managers that applied it.
pub(crate) fn stale_holders(object: &DynamicObject, manager: &str) -> Vec<String> {
    let entries: &[ManagedFieldsEntry] = object.metadata.managed_fields.as_deref().unwrap_or(&[]);
    let mut out: Vec<String> = entries
        .iter()
        .filter(|e| e.operation.as_deref() == Some("Apply"))
        .filter_map(|e| e.manager.clone())
        .filter(|m| m.starts_with(MODULE_MANAGER_PREFIX) && m != manager)
        .collect();
    out.sort();
    out.dedup();
    out
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
            SHARED_BY: "team-b/main/telemetry, team-a/main/telemetry,,"
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
    fn earlier_holders_are_found_by_their_apply_entries() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "x", "managedFields": [
                {"manager": "tessera-module-telemetry", "operation": "Apply"},
                {"manager": "tessera-module-dashboard", "operation": "Apply"},
                {"manager": "tessera-module-old", "operation": "Update"},
                {"manager": "kubectl-edit", "operation": "Apply"},
                {"manager": "tessera-sharing", "operation": "Update"},
            ]}
        }))
        .unwrap();
        assert_eq!(
            stale_holders(&object, "tessera-module-telemetry"),
            ["tessera-module-dashboard"]
        );
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

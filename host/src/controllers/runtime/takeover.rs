//! Shoots Kyma Infrastructure Manager made: recognised by KIM's field manager and its
//! runtime-id annotation, taken over only when the operator says so (`--takeover-kim`).
//! A Shoot taken over is not written while the Runtime's render matches it; Tessera's
//! labels come with the first real change (`shoot_diff::bookkeeping`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::shoot_doc;
use crate::controllers::KimTakeover;
use crate::crd::{Reason, Runtime, RuntimeStatus};

/// Who made a Shoot, as far as one Runtime is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Tessera, for this Runtime (its labels).
    Tessera,
    /// KIM, for this Runtime's id.
    Kim,
    /// Another Runtime, or someone else.
    Other,
}

/// Who made `shoot`, for `runtime`.
pub(crate) fn owner(shoot: &DynamicObject, runtime: &Runtime, kim: &KimTakeover) -> Owner {
    if shoot_doc::is_ours(shoot, runtime) {
        return Owner::Tessera;
    }
    let written_by_kim = shoot.metadata.managed_fields.iter().flatten().any(|f| {
        f.manager
            .as_ref()
            .is_some_and(|m| kim.field_managers.contains(m))
    });
    let names_runtime =
        shoot.annotations().get(&kim.runtime_id_annotation) == Some(&runtime.name_any());
    // A Shoot with another Runtime's Tessera labels is that Runtime's, whatever KIM did.
    let labelled = shoot
        .labels()
        .contains_key(crate::controllers::labels::RUNTIME);
    if written_by_kim && names_runtime && !labelled {
        Owner::Kim
    } else {
        Owner::Other
    }
}

/// Why `runtime` may not use `shoot` (`namespace/name`), or `None` when it may.
pub(crate) fn refusal(
    owner: Owner,
    runtime: &Runtime,
    kim: &KimTakeover,
    shoot: &str,
) -> Option<(Reason, String)> {
    match owner {
        Owner::Tessera => None,
        Owner::Kim if !kim.enabled => Some((
            Reason::TakeoverDisabled,
            format!(
                "Shoot {shoot} was made by Kyma Infrastructure Manager (annotation {}); start the host with --takeover-kim (chart value takeover.kim.enabled) to take it over (field spec.shoot.name)",
                kim.runtime_id_annotation
            ),
        )),
        Owner::Kim if !may_claim(runtime, kim) => Some((
            Reason::ShootNameTaken,
            format!(
                "Shoot {shoot} was made by Kyma Infrastructure Manager; only Runtimes of the namespaces {:?} may take KIM's Shoots over (--kim-runtime-namespace) (field spec.shoot.name)",
                kim.runtime_namespaces
            ),
        )),
        Owner::Kim => None,
        Owner::Other => Some((
            Reason::ShootNameTaken,
            format!("Shoot {shoot} exists and belongs to another Runtime (field spec.shoot.name)"),
        )),
    }
}

/// Whether `runtime` lives where KIM's Runtimes are taken over: a tenant elsewhere
/// cannot claim a Shoot by naming its runtime id.
fn may_claim(runtime: &Runtime, kim: &KimTakeover) -> bool {
    runtime
        .namespace()
        .is_some_and(|ns| kim.runtime_namespaces.contains(&ns))
}

/// Whether the host takes over what KIM made for `runtime`: takeover is on and the Runtime
/// lives in one of KIM's namespaces.
pub(crate) fn takes_over(runtime: &Runtime, kim: &KimTakeover) -> bool {
    kim.enabled && may_claim(runtime, kim)
}

/// Whether `runtime` may act on (patch, delete) a Shoot of `owner`.
pub(crate) fn claims(owner: Owner, runtime: &Runtime, kim: &KimTakeover) -> bool {
    refusal(owner, runtime, kim, "").is_none()
}

/// The Runtime generation `shoot` stands for: the one Tessera rendered it from, or, for a
/// Shoot taken over and not written yet, the one found to match it.
pub(crate) fn rendered_generation(shoot: &DynamicObject, status: &RuntimeStatus) -> i64 {
    shoot_doc::rendered_generation(shoot)
        .or(status.adopted_generation)
        .unwrap_or(0)
}

/// `entries` with the fields KIM applied handed to `manager` as one Apply entry (merged
/// with `manager`'s own, if any), as `kubectl`'s `csaupgrade` hands over fields: Tessera's
/// next apply then also removes what KIM applied and Tessera no longer renders, instead of
/// leaving it owned by a manager that is gone. Only KIM's Apply entries move whole: an
/// Update (KIM's create, its binding update) also owns every field Gardener defaulted, which
/// an apply would then remove; of those only `spec.secretBindingName` moves, so that moving
/// to a credentials binding removes it. Entries of another apiVersion or of a subresource
/// (Gardener's status) stay. `None` when nothing moves.
pub(crate) fn hand_over_fields(
    entries: &[ManagedFieldsEntry],
    kim: &KimTakeover,
    manager: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    let first = entries.iter().find(|e| is_kim(e, kim))?.clone();
    let same_version = |e: &ManagedFieldsEntry| e.api_version == first.api_version;
    let is_ours = |e: &ManagedFieldsEntry| {
        top_level(e) && e.manager.as_deref() == Some(manager) && is_apply(e) && same_version(e)
    };
    let mut fields = Value::Object(Default::default());
    let mut time = None;
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let moving = is_kim(entry, kim) && same_version(entry);
        let taken = match (moving && is_apply(entry), moving, &entry.fields_v1) {
            (true, _, Some(FieldsV1(set))) => Some(set.clone()),
            (false, true, Some(FieldsV1(set))) => take_secret_binding(set, &mut out, entry),
            _ if is_ours(entry) => entry.fields_v1.as_ref().map(|f| f.0.clone()),
            _ => {
                out.push(entry.clone());
                None
            }
        };
        if let Some(set) = taken {
            merge_field_sets(&mut fields, &set);
            time = time.max(entry.time.clone());
        }
    }
    if fields.as_object().is_none_or(|f| f.is_empty()) {
        return None;
    }
    out.push(ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        operation: Some("Apply".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        time,
        ..first
    });
    Some(out)
}

fn top_level(e: &ManagedFieldsEntry) -> bool {
    e.subresource.as_deref().unwrap_or_default().is_empty()
}

fn is_apply(e: &ManagedFieldsEntry) -> bool {
    e.operation.as_deref() == Some("Apply")
}

fn is_kim(e: &ManagedFieldsEntry, kim: &KimTakeover) -> bool {
    top_level(e)
        && e.manager
            .as_ref()
            .is_some_and(|m| kim.field_managers.contains(m))
}

/// `spec.secretBindingName` out of KIM's Update entry `entry` (pushed to `out` without it,
/// unless nothing else is left), as a field set of its own.
fn take_secret_binding(
    set: &Value,
    out: &mut Vec<ManagedFieldsEntry>,
    entry: &ManagedFieldsEntry,
) -> Option<Value> {
    let mut rest = set.clone();
    let binding = rest
        .get_mut("f:spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| spec.remove("f:secretBindingName"));
    let spec_empty = rest["f:spec"].as_object().is_some_and(|s| s.is_empty());
    if let (true, Some(map)) = (spec_empty, rest.as_object_mut()) {
        map.remove("f:spec");
    }
    if rest.as_object().is_some_and(|r| !r.is_empty()) {
        out.push(ManagedFieldsEntry {
            fields_v1: Some(FieldsV1(rest)),
            ..entry.clone()
        });
    }
    binding.map(|b| serde_json::json!({ "f:spec": { "f:secretBindingName": b } }))
}

/// The union of two `FieldsV1` sets: both are tries of objects (`{"f:spec": {...}, ".": {}}`).
fn merge_field_sets(into: &mut Value, from: &Value) {
    let (Value::Object(into), Value::Object(from)) = (into, from) else {
        return;
    };
    for (key, value) in from {
        let slot = into
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Default::default()));
        merge_field_sets(slot, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runtime(name: &str) -> Runtime {
        let text = include_str!("../../../../examples/runtime-aws.yaml");
        let mut doc: serde_json::Value = serde_saphyr::from_str(text).unwrap();
        doc["metadata"] = serde_json::json!({"name": name, "namespace": "kcp-system"});
        serde_json::from_value(doc).unwrap()
    }

    fn shoot(manager: &str, annotation: Option<&str>) -> DynamicObject {
        let mut s: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "c-1", "namespace": "garden-kyma"}
        }))
        .unwrap();
        s.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(manager.into()),
            ..Default::default()
        }]);
        if let Some(id) = annotation {
            s.annotations_mut().insert(
                "infrastructuremanager.kyma-project.io/runtime-id".into(),
                id.into(),
            );
        }
        s
    }

    #[test]
    fn a_kim_shoot_of_this_runtime_is_kims_and_refused_until_takeover_is_on() {
        let kim = KimTakeover::default();
        let r = runtime("rt-1");
        let s = shoot("kim", Some("rt-1"));
        assert_eq!(owner(&s, &r, &kim), Owner::Kim);
        let (reason, why) = refusal(Owner::Kim, &r, &kim, "garden-kyma/c-1").unwrap();
        assert_eq!(reason, Reason::TakeoverDisabled);
        assert!(why.contains("--takeover-kim"), "{why}");
        let on = KimTakeover {
            enabled: true,
            ..kim.clone()
        };
        assert_eq!(refusal(Owner::Kim, &r, &on, "garden-kyma/c-1"), None);
        assert!(claims(Owner::Kim, &r, &on) && !claims(Owner::Kim, &r, &kim));
        let mut tenant = runtime("rt-1");
        tenant.metadata.namespace = Some("team-a".into());
        let (reason, why) = refusal(Owner::Kim, &tenant, &on, "garden-kyma/c-1").unwrap();
        assert_eq!(
            reason,
            Reason::ShootNameTaken,
            "a tenant claims nothing: {why}"
        );
        assert!(!claims(Owner::Kim, &tenant, &on));
    }

    #[test]
    fn another_manager_or_another_runtime_id_is_not_kims() {
        let kim = KimTakeover::default();
        let r = runtime("rt-1");
        assert_eq!(
            owner(&shoot("kubectl", Some("rt-1")), &r, &kim),
            Owner::Other
        );
        assert_eq!(owner(&shoot("kim", Some("rt-2")), &r, &kim), Owner::Other);
        assert_eq!(owner(&shoot("kim", None), &r, &kim), Owner::Other);
        // KIM's create names no field manager: its binary's name is recorded.
        assert_eq!(owner(&shoot("manager", Some("rt-1")), &r, &kim), Owner::Kim);

        let mut labelled = shoot("kim", Some("rt-1"));
        labelled
            .labels_mut()
            .insert(crate::controllers::labels::RUNTIME.into(), "rt-9".into());
        assert_eq!(owner(&labelled, &r, &kim), Owner::Other);
    }

    #[test]
    fn a_shoot_taken_over_stands_for_the_generation_found_to_match() {
        let s = shoot("kim", Some("rt-1"));
        let mut status = RuntimeStatus::default();
        assert_eq!(rendered_generation(&s, &status), 0);
        status.adopted_generation = Some(3);
        assert_eq!(rendered_generation(&s, &status), 3);
    }

    fn entry(
        manager: &str,
        operation: &str,
        sub: Option<&str>,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("core.gardener.cloud/v1beta1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: sub.map(Into::into),
            ..Default::default()
        }
    }

    /// KIM's apply becomes Tessera's; of KIM's create (an Update owning Gardener's defaults
    /// too) only the secret binding moves; Gardener's status entry and other managers stay.
    #[test]
    fn kims_applied_fields_are_handed_over_as_one_apply_entry() {
        let kim = KimTakeover::default();
        let entries = vec![
            entry(
                "kim",
                "Apply",
                None,
                json!({"f:spec": {"f:region": {}, "f:provider": {"f:type": {}}}}),
            ),
            entry(
                "manager",
                "Update",
                None,
                json!({"f:spec": {"f:secretBindingName": {},
                "f:maintenance": {"f:timeWindow": {}}}}),
            ),
            entry(
                "gardenlet",
                "Update",
                Some("status"),
                json!({"f:status": {}}),
            ),
            entry(
                "kubectl",
                "Update",
                None,
                json!({"f:metadata": {"f:labels": {"f:x": {}}}}),
            ),
        ];
        let out = hand_over_fields(&entries, &kim, "tessera").unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[0].fields_v1.as_ref().unwrap().0,
            json!({"f:spec": {"f:maintenance": {"f:timeWindow": {}}}}),
            "Gardener's defaults stay KIM's create's"
        );
        assert_eq!(out[1..3], entries[2..]);
        let handed = &out[3];
        assert_eq!(handed.manager.as_deref(), Some("tessera"));
        assert_eq!(handed.operation.as_deref(), Some("Apply"));
        assert_eq!(
            handed.fields_v1.as_ref().unwrap().0,
            json!({"f:spec": {"f:region": {}, "f:provider": {"f:type": {}}, "f:secretBindingName": {}}})
        );
        let none_of_kims = vec![entries[2].clone(), entries[3].clone()];
        assert_eq!(hand_over_fields(&none_of_kims, &kim, "tessera"), None);
    }
}

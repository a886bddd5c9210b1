//! Letting go of a module's objects: pruning what it no longer wants, deleting what it
//! removes, releasing what it stops managing. Only this module's own objects are deleted or
//! released, under uid (and, for shareable ones, resourceVersion) preconditions; shared
//! objects pass to the next module wanting them; others' objects are never touched.

use std::collections::HashSet;

use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use serde_json::Value;

use super::apply::{ATTEMPTS, api_error, rank};
use super::error::ModuleError;
use super::inventory::{Entry, ModuleRecord, ObjectKey};
use super::labels;
use super::ownership::{Whose, whose};
use super::sharing;
use super::target::Target;
use super::types::Owner;
use crate::api;
use crate::crd::labels::MANAGED_BY;

/// Delete `live` with its uid (and, when `unchanged`, its resourceVersion) as a
/// precondition: `Some(true)` when finalizers keep it for now, `Some(false)` when deleted
/// or already gone, `None` when it changed since it was read (read it again).
async fn delete_guarded(
    api: &Api<DynamicObject>,
    live: &DynamicObject,
    unchanged: bool,
) -> Result<Option<bool>, ModuleError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: live.metadata.uid.clone(),
            resource_version: live.metadata.resource_version.clone().filter(|_| unchanged),
        }),
        ..Default::default()
    };
    let name = live.metadata.name.as_deref().unwrap_or_default();
    match api.delete(name, &params).await {
        Ok(either) => Ok(Some(either.is_left())),
        Err(e) if api::is_not_found(&e) => Ok(Some(false)),
        Err(e) if api::is_conflict(&e) && unchanged => Ok(None),
        Err(e) if api::is_conflict(&e) => Ok(Some(false)),
        Err(e) => Err(e.into()),
    }
}

/// What letting go of an object came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LetGo {
    /// Gone, or deleted (released: no longer labelled as Tessera's).
    Done,
    /// Deleted, finalizers pending.
    Pending,
    /// Shared: handed to another module that wants it, or this module left its sharers.
    Kept,
    /// Not this module's: left alone.
    NotOurs(Whose),
}

/// What a module does with its own objects when it lets go of them and no other module
/// wants them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    /// Delete them (pruned, or the module is removed).
    Delete,
    /// Leave them as they are, without Tessera's labels (`managed: false`).
    Release,
    /// Leave them as they are (a CRD under `customResourcePolicy: Ignore`).
    Keep,
    /// Not yet: look again on the next pass (a CRD that was shared when its custom
    /// resources were checked).
    NextPass,
}

/// Let go of the object `key` names (through `api`) for `owner`; `recorded` is the uid the
/// inventory lists. A shared object is handed to the next module that still wants it, or
/// this module leaves its sharers; only what this module made and nobody else wants is
/// deleted or released, guarded by its resourceVersion when it is shareable (a module
/// joining meanwhile is not lost). Others' objects are never touched.
pub(crate) async fn let_go(
    target: &Target,
    api: &Api<DynamicObject>,
    key: &ObjectKey,
    owner: Owner<'_>,
    recorded: Option<&str>,
    last: Last,
) -> Result<LetGo, ModuleError> {
    for _ in 0..ATTEMPTS {
        let Some(live) = api.get_opt(&key.name).await? else {
            return Ok(LetGo::Done);
        };
        let json = serde_json::to_value(&live).expect("an object serializes");
        let settled = match whose(&json, owner, recorded) {
            Whose::Sharing => sharing::leave(api, &live, owner)
                .await?
                .map(|_| LetGo::Kept),
            // Going already: handed to no one; the next pass sees it gone.
            Whose::Ours if sharing::is_deleting(&live) => Some(LetGo::Pending),
            Whose::Ours if sharing::shareable(key) => {
                match sharing::wanting(target, key, &json, owner)
                    .await?
                    .split_first()
                {
                    Some((to, rest)) => sharing::hand_over(api, &live, to, rest)
                        .await?
                        .map(|_| LetGo::Kept),
                    None => last_one(api, key, &live, last, true).await?,
                }
            }
            Whose::Ours => last_one(api, key, &live, last, false).await?,
            other => Some(LetGo::NotOurs(other)),
        };
        if let Some(settled) = settled {
            return Ok(settled);
        }
    }
    Err(ModuleError::object(
        key,
        "changed under every attempt to let go of it; tried again on the next pass",
    ))
}

/// Delete, release or keep `live`, which no other module wants; `None` when it changed
/// since it was read (only checked when `unchanged`).
async fn last_one(
    api: &Api<DynamicObject>,
    key: &ObjectKey,
    live: &DynamicObject,
    last: Last,
    unchanged: bool,
) -> Result<Option<LetGo>, ModuleError> {
    Ok(match last {
        Last::Delete => delete_guarded(api, live, unchanged)
            .await?
            .map(|pending| if pending { LetGo::Pending } else { LetGo::Done }),
        Last::Release => strip_labels(api, key, live, unchanged)
            .await?
            .then_some(LetGo::Done),
        Last::Keep => Some(LetGo::Done),
        Last::NextPass => Some(LetGo::Pending),
    })
}

/// Delete the objects of `entries` (in reverse apply order) that `keep` does not list and
/// that are this module's own (labels, and the recorded uid); returns those still present
/// afterwards (finalizers pending). Entries naming objects the module did not create are
/// skipped and reported in the log: the inventory is not a licence to delete. `keep` (what
/// other modules of the set hold) does not protect shareable objects: those are shared
/// through their own list ([`sharing`]).
pub(crate) async fn prune(
    target: &Target,
    owner: Owner<'_>,
    entries: &[Entry],
    keep: &HashSet<ObjectKey>,
    last: &(dyn Fn(&ObjectKey) -> Last + Sync),
) -> Result<Vec<ObjectKey>, ModuleError> {
    let mut entries: Vec<&Entry> = entries
        .iter()
        .filter(|e| !keep.contains(&e.key) || sharing::shareable(&e.key))
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(rank(&e.key.kind)));
    let mut remaining = Vec::new();
    for entry in entries {
        let key = &entry.key;
        let Some(kind) = target.kind(&key.api_version, &key.kind).await? else {
            continue;
        };
        let api = target.api(&kind, key.namespace.as_deref());
        match let_go(target, &api, key, owner, entry.uid.as_deref(), last(key)).await? {
            LetGo::Pending => remaining.push(key.clone()),
            LetGo::Done | LetGo::Kept => {}
            // Handed over to another module earlier.
            LetGo::NotOurs(Whose::Tessera { .. }) if sharing::shareable(key) => {}
            LetGo::NotOurs(other) => {
                tracing::warn!(object = %key, set = owner.set, module = owner.module, reason = %other.refusal(), "the inventory lists an object this module did not create; not deleted");
            }
        }
    }
    Ok(remaining)
}

/// Let go of a module that is no longer managed: remove Tessera's labels and annotation
/// from each of its own objects in `entries` (other objects are left as they are; shared
/// ones pass to the next module wanting them), so drift watches stop seeing them and no
/// pass treats them as Tessera's again. The objects and their other fields stay.
pub(crate) async fn release(
    target: &Target,
    owner: Owner<'_>,
    entries: &[Entry],
) -> Result<(), ModuleError> {
    for entry in entries {
        let key = &entry.key;
        let Some(kind) = target.kind(&key.api_version, &key.kind).await? else {
            continue;
        };
        let api = target.api(&kind, key.namespace.as_deref());
        let recorded = entry.uid.as_deref();
        let_go(target, &api, key, owner, recorded, Last::Release).await?;
    }
    Ok(())
}

/// Remove Tessera's labels and annotations from `live` (its uid, and when `unchanged` its
/// resourceVersion, a precondition); `false` when it changed since it was read.
async fn strip_labels(
    api: &Api<DynamicObject>,
    key: &ObjectKey,
    live: &DynamicObject,
    unchanged: bool,
) -> Result<bool, ModuleError> {
    let mut body = serde_json::json!({"metadata": {
        "uid": live.metadata.uid,
        "labels": {MANAGED_BY: null, labels::MODULE: null},
        "annotations": {labels::MODULE_SET: null, labels::SHARED_BY: null, labels::EARLIER_HOLDER: null},
    }});
    if unchanged {
        body["metadata"]["resourceVersion"] = live.metadata.resource_version.clone().into();
    }
    match api
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if api::is_conflict(&e) && unchanged => Ok(false),
        // Gone or replaced meanwhile: nothing of this module's left to release.
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(true),
        Err(e) => Err(api_error(key, e)),
    }
}

/// Delete the objects `selector` reaches that are this module's own (a delete answer's
/// `remove`); others are left alone, shared ones pass on.
pub(crate) async fn remove_own(
    target: &Target,
    owner: Owner<'_>,
    record: &ModuleRecord,
    kind: &super::target::Kind,
    objects: Vec<DynamicObject>,
) -> Result<(), ModuleError> {
    for live in objects {
        let live_json = serde_json::to_value(&live).expect("an object serializes");
        let Some(key) = ObjectKey::of(&live_json) else {
            continue;
        };
        if !record.lists(&key) {
            continue;
        }
        let api = target.api(kind, key.namespace.as_deref());
        let_go(target, &api, &key, owner, record.uid(&key), Last::Delete).await?;
    }
    Ok(())
}

/// Custom resources of the CRDs `crds` that this module did not create (they keep its
/// CRDs from being removed: deleting a CRD deletes every resource of it).
pub(crate) async fn foreign_custom_resources(
    target: &Target,
    owner: Owner<'_>,
    record: &ModuleRecord,
    crds: &[Value],
) -> Result<Vec<String>, ModuleError> {
    let mut foreign = Vec::new();
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let kind_name = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let versions = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(version) = versions
            .iter()
            .find(|v| v["storage"] == true)
            .or(versions.first())
            .and_then(|v| v["name"].as_str())
        else {
            continue;
        };
        let Some(kind) = target
            .kind(&format!("{group}/{version}"), kind_name)
            .await?
        else {
            continue;
        };
        for item in target
            .api(&kind, None)
            .list(&Default::default())
            .await?
            .items
        {
            let json = serde_json::to_value(&item).expect("an object serializes");
            let Some(key) = ObjectKey::of(&json) else {
                continue;
            };
            if !(record.lists(&key) && whose(&json, owner, record.uid(&key)) == Whose::Ours) {
                foreign.push(key.to_string());
            }
        }
    }
    Ok(foreign)
}

#[cfg(test)]
mod against_the_api;

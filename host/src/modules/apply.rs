//! Server-side apply of a module's objects, in an order the API server accepts (namespaces,
//! then CRDs, then what uses them), and pruning of objects a module no longer wants.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use kube::api::{
    Api, DeleteParams, DynamicObject, GetParams, PartialObjectMeta, Patch, PatchParams,
    Preconditions, PropagationPolicy,
};
use serde_json::Value;

use super::error::ModuleError;
use super::inventory::{Entry, ModuleRecord, ObjectKey};
use super::labels;
use super::ownership::{Whose, conflicting_managers, is_field_conflict, is_uid_mismatch, whose};
use super::sharing;
use super::target::{Kind, Target};
use super::types::{Change, MODULE_MANAGER_PREFIX, Owner};
use crate::api;
use crate::crd::labels::{MANAGED_BY, MANAGED_BY_VALUE};

/// The field manager of a module: each module owns its fields, so two modules wanting one
/// field show up as a conflict instead of silent flapping.
pub(crate) fn field_manager(module: &str) -> String {
    format!("tessera-module-{module}")
}

/// How long to wait for a CRD applied in the same batch to be served.
const CRD_SERVED: Duration = Duration::from_secs(20);

fn rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "ServiceAccount" | "ClusterRole" | "Role" | "ConfigMap" | "Secret" | "PriorityClass" => 2,
        "ClusterRoleBinding" | "RoleBinding" | "Service" => 3,
        _ => 4,
    }
}

/// Sort objects for applying (deleting goes in reverse).
pub(crate) fn order(objects: &mut [(ObjectKey, Value)]) {
    objects.sort_by_key(|(key, _)| rank(&key.kind));
}

/// Label and annotate `object` as applied by `module` of `set`, and key it.
pub(crate) fn prepare(
    mut object: Value,
    set: &str,
    module: &str,
) -> Result<(ObjectKey, Value), ModuleError> {
    let key = ObjectKey::of(&object).ok_or_else(|| {
        ModuleError::module(
            module,
            format!(
                "the plugin returned an object without apiVersion, kind or metadata.name: {}",
                truncate(&object.to_string())
            ),
        )
    })?;
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("ObjectKey::of checked metadata");
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
        labels.insert(labels::MODULE.into(), module.into());
    }
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(labels::MODULE_SET.into(), set.into());
        // The host's own bookkeeping: a plugin that set these could erase the sharers.
        annotations.remove(labels::SHARED_BY);
        annotations.remove(labels::EARLIER_HOLDER);
    }
    Ok((key, object))
}

fn truncate(text: &str) -> String {
    text.chars().take(120).collect()
}

/// One applied object as the API server returned it.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub(crate) key: ObjectKey,
    pub(crate) object: Value,
}

impl Applied {
    /// The uid the API server gave the object.
    pub(crate) fn uid(&self) -> Option<String> {
        self.object["metadata"]["uid"].as_str().map(str::to_string)
    }
}

/// Who applies, and whether objects others made may be taken over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applier<'a> {
    pub(crate) owner: Owner<'a>,
    /// The set allows taking over objects Tessera did not create.
    pub(crate) adopt: bool,
}

/// How one object of an answer is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The uid of the object this module made, sent as a precondition; `None`: the object
    /// does not exist yet and is created.
    pub(crate) uid: Option<String>,
    /// Take the fields over (an object the set adopts).
    pub(crate) force: bool,
    /// Another module holds this shareable object: be listed among its sharers instead of
    /// writing it ([`sharing`]).
    pub(crate) share: bool,
}

impl Plan {
    const CREATE: Plan = Plan {
        uid: None,
        force: false,
        share: false,
    };
    const SHARE: Plan = Plan {
        uid: None,
        force: false,
        share: true,
    };

    fn update(uid: Option<String>, force: bool) -> Plan {
        Plan {
            uid,
            force,
            share: false,
        }
    }
}

/// How often an object that keeps changing under a write is read again before the pass
/// gives up on it (the next pass tries again).
const ATTEMPTS: usize = 5;

/// Objects looked up at once while planning.
const LOOKUPS: usize = 16;

/// Decide, before anything is written, how each object of an answer is written: objects
/// the inventory lists with a uid are updated under that uid; others are looked up, and an
/// existing object this module did not make refuses the whole answer (unless the set
/// adopts it; never another module's).
pub(crate) async fn plan(
    target: &Target,
    applier: Applier<'_>,
    objects: &[(ObjectKey, Value)],
    record: &ModuleRecord,
) -> Result<Result<Vec<Plan>, String>, ModuleError> {
    use futures::{StreamExt, TryStreamExt};
    // Collected first: a lazy `map` closure in the stream trips the compiler's higher-ranked
    // lifetime check on the controller's future.
    let mut lookups = Vec::with_capacity(objects.len());
    for (key, _) in objects {
        lookups.push(look_up(target, key, record));
    }
    let looked_up: Vec<Option<PartialObjectMeta<DynamicObject>>> = futures::stream::iter(lookups)
        .buffered(LOOKUPS)
        .try_collect()
        .await?;
    let mut plans = Vec::with_capacity(objects.len());
    for ((key, _), live) in objects.iter().zip(looked_up) {
        let plan = match (record.uid(key), live) {
            (_, Some(live)) if sharing::shareable(key) => planned(key, &live, applier),
            (Some(uid), _) => Ok(Plan::update(Some(uid.to_string()), false)),
            (None, None) => Ok(Plan::CREATE),
            (None, Some(live)) => planned(key, &live, applier),
        };
        match plan {
            Ok(plan) => plans.push(plan),
            Err(why) => return Ok(Err(why)),
        }
    }
    Ok(Ok(plans))
}

/// How to write over the existing object `live`, by whose it is.
fn planned(
    key: &ObjectKey,
    live: &PartialObjectMeta<DynamicObject>,
    applier: Applier<'_>,
) -> Result<Plan, String> {
    let json = serde_json::to_value(live).expect("an object serializes");
    let uid = live.metadata.uid.clone();
    match whose(&json, applier.owner, None) {
        // Made by this module; the inventory lost its uid (a crash).
        Whose::Ours => Ok(Plan::update(uid, false)),
        Whose::Foreign { .. } if applier.adopt => Ok(Plan::update(uid, true)),
        other if shares(key, &other, applier.owner) => Ok(Plan::SHARE),
        other => Err(format!("{key}: {}", refusal(key, &other))),
    }
}

/// Whether this module shares (or may join) an object `whose` says another module holds.
fn shares(key: &ObjectKey, whose: &Whose, owner: Owner<'_>) -> bool {
    match whose {
        Whose::Sharing => true,
        Whose::Tessera { set, .. } => sharing::shareable(key) && sharing::may_share(set, owner),
        _ => false,
    }
}

/// Why `key` is not written, saying why a shareable one is not shared either.
fn refusal(key: &ObjectKey, whose: &Whose) -> String {
    match whose {
        Whose::Tessera { .. } if sharing::shareable(key) => format!(
            "{}; CRDs and Namespaces are shared only between ModuleSets of one namespace",
            whose.refusal()
        ),
        other => other.refusal(),
    }
}

/// The metadata of the live object `key` names, unless the inventory knows its uid and it
/// cannot be shared (no lookup needed) or the cluster does not serve its kind yet. Read from the API server's
/// watch cache: metadata is all ownership needs, and the cache spares etcd a read per object
/// (an object created in between is refused by the apply's own conflict check).
async fn look_up(
    target: &Target,
    key: &ObjectKey,
    record: &ModuleRecord,
) -> Result<Option<PartialObjectMeta<DynamicObject>>, ModuleError> {
    if record.uid(key).is_some() && !sharing::shareable(key) {
        return Ok(None);
    }
    let Some(kind) = target.kind(&key.api_version, &key.kind).await? else {
        return Ok(None);
    };
    let api = target.api(&kind, key.namespace.as_deref());
    Ok(api
        .get_metadata_opt_with(&key.name, &GetParams::any())
        .await?)
}

/// Server-side apply `objects` (already ordered, checked against the grants and planned)
/// with the module's field manager, without force unless adopting.
pub(crate) async fn apply(
    target: &Target,
    applier: Applier<'_>,
    objects: Vec<(ObjectKey, Value)>,
    plans: Vec<Plan>,
) -> Result<Vec<Applied>, ModuleError> {
    let crds = batch_crds(&objects);
    let mut applied = Vec::with_capacity(objects.len());
    for ((mut key, mut object), plan) in objects.into_iter().zip(plans) {
        let kind = served(target, &key, &crds).await?;
        scope(&kind, &mut key, &mut object)?;
        let api = target.api(&kind, key.namespace.as_deref());
        let result = write(target, &api, applier, &key, &object, plan).await?;
        applied.push(Applied {
            key,
            object: serde_json::to_value(&result).expect("an object serializes"),
        });
    }
    Ok(applied)
}

/// Fit `key` and `object` to the kind's scope: a cluster-scoped object loses its
/// namespace; a namespaced one without a namespace is refused.
fn scope(kind: &Kind, key: &mut ObjectKey, object: &mut Value) -> Result<(), ModuleError> {
    if !kind.namespaced && key.namespace.is_some() {
        key.namespace = None;
        if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("namespace");
        }
    }
    if kind.namespaced && key.namespace.is_none() {
        let message = format!("{} is namespaced: set metadata.namespace", key.kind);
        return Err(ModuleError::object(key, message));
    }
    Ok(())
}

/// What applying `object` would do, asked of the API server with a server-side dry run
/// (nothing is written); an object another owner holds is refused as [`apply`] would.
pub(crate) async fn dry_run(
    target: &Target,
    applier: Applier<'_>,
    key: &ObjectKey,
    object: &Value,
    crds: &[(String, String)],
) -> Result<Change, ModuleError> {
    let Some(kind) = target.kind(&key.api_version, &key.kind).await? else {
        let from_batch = crds.iter().any(|(g, k)| g == key.group() && k == &key.kind);
        return Ok(if from_batch {
            Change::Unchecked("its CRD is created by this apply".into())
        } else {
            Change::Refused(format!(
                "the cluster does not serve {} {}",
                key.api_version, key.kind
            ))
        });
    };
    let (mut key, mut object) = (key.clone(), object.clone());
    if let Err(e) = scope(&kind, &mut key, &mut object) {
        return Ok(Change::Refused(e.to_string()));
    }
    let api = target.api(&kind, key.namespace.as_deref());
    let mut params = PatchParams::apply(&field_manager(applier.owner.module)).dry_run();
    let before = match api.get_opt(&key.name).await? {
        None => None,
        Some(live) => {
            let live = serde_json::to_value(&live).expect("an object serializes");
            match whose(&live, applier.owner, None) {
                Whose::Ours => {}
                Whose::Foreign { .. } if applier.adopt => {}
                Whose::Sharing | Whose::Tessera { .. } if sharing::shareable(&key) => {
                    return Ok(Change::Unchecked(shared_note(&live)));
                }
                other => return Ok(Change::Refused(other.refusal())),
            }
            // As the apply would: this module's (or an adopted) object's fields are taken.
            params.force = true;
            Some(live)
        }
    };
    match api.patch(&key.name, &params, &Patch::Apply(&object)).await {
        Ok(after) => Ok(Change::between(
            before,
            serde_json::to_value(&after).expect("an object serializes"),
        )),
        Err(kube::Error::Api(e)) => Ok(Change::Refused(e.message)),
        Err(e) => Err(e.into()),
    }
}

/// Why a dry run does not diff a shared object another module holds.
fn shared_note(live: &Value) -> String {
    let meta = &live["metadata"];
    format!(
        "shared: held by module {} of ModuleSet {}; this module is listed among its sharers and writes nothing",
        meta["labels"][labels::MODULE].as_str().unwrap_or("?"),
        meta["annotations"][labels::MODULE_SET]
            .as_str()
            .unwrap_or("?"),
    )
}

/// (group, kind) of every CRD in the batch.
pub(crate) fn batch_crds(objects: &[(ObjectKey, Value)]) -> Vec<(String, String)> {
    objects
        .iter()
        .filter(|(k, _)| k.is_crd())
        .map(|(_, o)| {
            (
                o["spec"]["group"].as_str().unwrap_or_default().to_string(),
                o["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

async fn patch(
    api: &Api<DynamicObject>,
    key: &ObjectKey,
    object: &Value,
    uid: Option<&str>,
    params: &PatchParams,
) -> kube::Result<DynamicObject> {
    match uid {
        None => api.patch(&key.name, params, &Patch::Apply(object)).await,
        Some(uid) => {
            let mut body = object.clone();
            body["metadata"]["uid"] = uid.into();
            api.patch(&key.name, params, &Patch::Apply(&body)).await
        }
    }
}

/// The next step of writing one object.
enum Step {
    Done(Box<DynamicObject>),
    /// The object changed under the plan: write it this way instead.
    Then(Plan),
}

/// Write one object as planned, following it as it changes under the plan (deleted,
/// replaced, edited, shared or handed over meanwhile). A shareable object this module
/// holds loses the fields earlier holders left on it.
async fn write(
    target: &Target,
    api: &Api<DynamicObject>,
    applier: Applier<'_>,
    key: &ObjectKey,
    object: &Value,
    mut plan: Plan,
) -> Result<DynamicObject, ModuleError> {
    for _ in 0..ATTEMPTS {
        let step = if plan.share {
            share(target, api, applier, key).await?
        } else {
            apply_one(api, applier, key, object, &plan).await?
        };
        match step {
            Step::Done(done) if !plan.share && sharing::shareable(key) => {
                return retire_earlier_holders(api, applier, key, *done).await;
            }
            Step::Done(done) => return Ok(*done),
            Step::Then(next) => plan = next,
        }
    }
    Err(ModuleError::object(
        key,
        "changed under every attempt to write it; tried again on the next pass",
    ))
}

/// Be listed among the sharers of the object another module holds; when nobody holds it
/// (gone, handed to this module, or its holder's set went without letting go), write it
/// instead.
async fn share(
    target: &Target,
    api: &Api<DynamicObject>,
    applier: Applier<'_>,
    key: &ObjectKey,
) -> Result<Step, ModuleError> {
    let Some(live) = api.get_opt(&key.name).await? else {
        return Ok(Step::Then(Plan::CREATE));
    };
    if sharing::is_deleting(&live) {
        return Err(ModuleError::object(
            key,
            "is being deleted by the module that held it; made again once it is gone",
        ));
    }
    let json = serde_json::to_value(&live).expect("an object serializes");
    let uid = live.metadata.uid.clone();
    let owner = applier.owner;
    let whose = whose(&json, owner, None);
    let joined = match &whose {
        Whose::Ours => return Ok(Step::Then(Plan::update(uid, false))),
        Whose::Foreign { .. } if applier.adopt => {
            return Ok(Step::Then(Plan::update(uid, true)));
        }
        w if !shares(key, w, owner) => {
            return Err(ModuleError::object(key, refusal(key, w)));
        }
        // The holder's set went without letting go: this module takes the object over.
        _ if !sharing::holder_wants(target, key, &json).await? => {
            let me = format!("{}/{}", owner.set, owner.module);
            let rest = sharing::wanting(target, key, &json, owner).await?;
            let taken = sharing::hand_over(api, &live, &me, &rest).await?;
            return Ok(Step::Then(match taken {
                Some(_) => Plan::update(uid, false),
                None => Plan::SHARE,
            }));
        }
        Whose::Sharing => return Ok(Step::Done(Box::new(live))),
        _ => sharing::join(api, &live, owner).await?,
    };
    if joined.is_some() {
        tracing::info!(object = %key, set = owner.set, module = owner.module, "sharing an object another module holds");
    }
    Ok(joined.map_or(Step::Then(Plan::SHARE), |o| Step::Done(Box::new(o))))
}

/// Give up, on behalf of the module that held a shared object before this one, the fields
/// only it set (its manager applies the object's identity alone). A refusal (say, a CRD
/// version still stored) is logged and left: the object keeps those fields.
async fn retire_earlier_holders(
    api: &Api<DynamicObject>,
    applier: Applier<'_>,
    key: &ObjectKey,
    done: DynamicObject,
) -> Result<DynamicObject, ModuleError> {
    let own = field_manager(applier.owner.module);
    if done
        .metadata
        .annotations
        .as_ref()
        .is_none_or(|a| !a.contains_key(labels::EARLIER_HOLDER))
    {
        return Ok(done);
    }
    if let Some(manager) = sharing::earlier_holder(&done, &own) {
        let params = PatchParams::apply(&manager);
        let body = sharing::withdrawal(key);
        match api.patch(&key.name, &params, &Patch::Apply(&body)).await {
            Ok(_) => {
                tracing::info!(object = %key, earlier = %manager, module = applier.owner.module, "retired the fields an earlier holder of a shared object set");
            }
            Err(e) => {
                tracing::warn!(object = %key, earlier = %manager, error = %crate::report::kube_error(&e), "could not retire the fields an earlier holder of a shared object set; they stay");
            }
        }
    }
    let body = sharing::without_earlier_holder();
    api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(|e| api_error(key, e))
}

/// Apply one object as planned. When the object changed under the plan (deleted, replaced,
/// or fields edited by another manager), look at whose it is now.
async fn apply_one(
    api: &Api<DynamicObject>,
    applier: Applier<'_>,
    key: &ObjectKey,
    object: &Value,
    plan: &Plan,
) -> Result<Step, ModuleError> {
    let mut params = PatchParams::apply(&field_manager(applier.owner.module));
    params.force = plan.force;
    let error = match patch(api, key, object, plan.uid.as_deref(), &params).await {
        Ok(done) => return Ok(Step::Done(Box::new(done))),
        Err(kube::Error::Api(e))
            if is_uid_mismatch(e.code, &e.message) || is_field_conflict(e.code, &e.message) =>
        {
            e
        }
        Err(e) => return Err(api_error(key, e)),
    };
    let Some(live) = api.get_opt(&key.name).await? else {
        // Deleted (by hand, or by drift) since the module made it: make it again.
        return Ok(Step::Then(Plan::CREATE));
    };
    let live_json = serde_json::to_value(&live).expect("an object serializes");
    let uid = live.metadata.uid.clone();
    match whose(&live_json, applier.owner, None) {
        Whose::Ours => {
            let others = conflicting_managers(&error.message);
            let module = others.iter().find(|m| m.starts_with(MODULE_MANAGER_PREFIX));
            // An earlier holder's fields on a shared object are this module's to take.
            if let Some(module) = module.filter(|_| !sharing::shareable(key)) {
                return Err(ModuleError::object(
                    key,
                    format!(
                        "fields are also set by {module}, another module; not taken over ({})",
                        error.message
                    ),
                ));
            }
            // This module's object: a field edited by hand is put back (drift repair).
            if !others.is_empty() {
                tracing::info!(object = %key, managers = %others.join(", "), "restoring fields of a module object edited by hand");
            }
            Ok(Step::Then(Plan::update(uid, true)))
        }
        Whose::Foreign { .. } if applier.adopt => Ok(Step::Then(Plan::update(uid, true))),
        other if shares(key, &other, applier.owner) => Ok(Step::Then(Plan::SHARE)),
        other => Err(ModuleError::object(key, refusal(key, &other))),
    }
}

fn api_error(key: &ObjectKey, e: kube::Error) -> ModuleError {
    match e {
        kube::Error::Api(e) => ModuleError::object(key, e.message),
        other => other.into(),
    }
}

/// The kind of `key`, waiting a little when a CRD of this batch is about to serve it.
async fn served(
    target: &Target,
    key: &ObjectKey,
    crds: &[(String, String)],
) -> Result<super::target::Kind, ModuleError> {
    let group = key.group();
    let from_batch = crds.iter().any(|(g, k)| g == group && k == &key.kind);
    let started = Instant::now();
    loop {
        if let Some(kind) = target.kind(&key.api_version, &key.kind).await? {
            return Ok(kind);
        }
        if !from_batch || started.elapsed() > CRD_SERVED {
            return Err(ModuleError::object(
                key,
                format!(
                    "the cluster does not serve {} {}",
                    key.api_version, key.kind
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaces_and_crds_go_first() {
        let objects = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ];
        let mut prepared: Vec<_> = objects
            .into_iter()
            .map(|o| prepare(o, "ns/set", "m").unwrap())
            .collect();
        order(&mut prepared);
        let kinds: Vec<&str> = prepared.iter().map(|(k, _)| k.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "ConfigMap",
                "Deployment"
            ]
        );
        let (_, first) = &prepared[0];
        assert_eq!(first["metadata"]["labels"][labels::MODULE], "m");
        assert_eq!(
            first["metadata"]["annotations"][labels::MODULE_SET],
            "ns/set"
        );
    }

    #[test]
    fn a_plugin_cannot_write_the_sharing_bookkeeping() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x", "annotations": {
                labels::SHARED_BY: "", labels::EARLIER_HOLDER: "tessera-module-other", "kept": "yes"}}});
        let (_, prepared) = prepare(crd, "ns/set", "m").unwrap();
        let annotations = prepared["metadata"]["annotations"].as_object().unwrap();
        assert!(!annotations.contains_key(labels::SHARED_BY));
        assert!(!annotations.contains_key(labels::EARLIER_HOLDER));
        assert_eq!(annotations["kept"], "yes");
    }

    #[test]
    fn objects_need_kind_and_name() {
        let err = prepare(
            json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
            "s",
            "m",
        )
        .unwrap_err();
        assert!(err.to_string().contains("module m"), "{err}");
    }
}

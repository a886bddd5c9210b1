//! Writing a module's objects: server-side apply in an order the API server accepts
//! (namespaces, then CRDs, then what uses them), each object planned from whose it is and
//! followed as it changes under the write. Letting go of objects is `release.rs`.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, GetParams, PartialObjectMeta, Patch, PatchParams};
use serde_json::Value;

use super::error::ModuleError;
use super::inventory::{ModuleRecord, ObjectKey};
use super::labels;
use super::ownership::{Whose, conflicting_managers, is_field_conflict, is_uid_mismatch, whose};
use super::sharing;
use super::target::{Kind, Target};
use super::types::{Change, MODULE_MANAGER_PREFIX, Owner};
use crate::crd::labels::{MANAGED_BY, MANAGED_BY_VALUE};

/// The field manager of a module: each module owns its fields, so two modules wanting one
/// field show up as a conflict instead of silent flapping.
pub(crate) fn field_manager(module: &str) -> String {
    format!("tessera-module-{module}")
}

/// How long to wait for a CRD applied in the same batch to be served.
const CRD_SERVED: Duration = Duration::from_secs(20);

pub(super) fn rank(kind: &str) -> u8 {
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
pub(super) const ATTEMPTS: usize = 5;

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

pub(super) fn api_error(key: &ObjectKey, e: kube::Error) -> ModuleError {
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

#[cfg(test)]
mod against_the_api;

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

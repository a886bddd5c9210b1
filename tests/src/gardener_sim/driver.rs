//! Moves Shoots through Gardener's operations as the gardenlet does
//! (gardener pkg/gardenlet/controller/shoot/shoot/reconciler.go): an operation starts
//! `Processing` with `observedGeneration` set, then ends `Succeeded` or, when the script
//! says, with `lastErrors` and `Error` (retried by Gardener itself) or `Failed` (until
//! `gardener.cloud/operation: retry` or a spec change). All progress is kept in the Shoot
//! itself (`status.lastOperation.lastUpdateTime`), so the driver can restart at any time.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::rules;
use super::{Failure, Sim, resource};

const FINALIZER: &str = "gardener";
const OPERATION: &str = "gardener.cloud/operation";
const FORCE_DELETION: &str = "confirmation.gardener.cloud/force-deletion";

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

pub async fn run(sim: Arc<Sim>) {
    let api: Api<DynamicObject> = Api::all_with(sim.client.clone(), &resource("shoots"));
    Controller::new_with(api, watcher::Config::default(), resource("shoots"))
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_millis(500)),
            sim,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// The description a starting operation gets (reconciler.go `updateShootStatusOperationStart`).
fn started(type_: &str) -> &'static str {
    match type_ {
        "Delete" => "Deletion of Shoot cluster in progress.",
        _ => "Reconciliation of Shoot cluster initialized.",
    }
}

/// One Shoot as the driver sees it.
struct Shoot {
    api: Api<DynamicObject>,
    name: String,
    obj: Arc<DynamicObject>,
    op_type: String,
    op_state: String,
    elapsed: Duration,
}

impl Shoot {
    fn new(sim: &Sim, obj: Arc<DynamicObject>) -> Self {
        let ns = obj.metadata.namespace.clone().unwrap_or_default();
        let op = &obj.data["status"]["lastOperation"];
        let updated: jiff::Timestamp = op["lastUpdateTime"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(now);
        Self {
            api: Api::namespaced_with(sim.client.clone(), &ns, &resource("shoots")),
            name: obj.metadata.name.clone().unwrap_or_default(),
            op_type: op["type"].as_str().unwrap_or("").to_string(),
            op_state: op["state"].as_str().unwrap_or("").to_string(),
            elapsed: now().duration_since(updated).unsigned_abs(),
            obj,
        }
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.obj
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    fn finalizers(&self) -> Vec<String> {
        self.obj.metadata.finalizers.clone().unwrap_or_default()
    }

    async fn status(&self, status: Value) -> Result<(), Error> {
        let patch = Patch::Merge(json!({ "status": status }));
        self.api
            .patch_status(&self.name, &PatchParams::default(), &patch)
            .await?;
        Ok(())
    }

    async fn metadata(&self, metadata: Value) -> Result<(), Error> {
        let patch = Patch::Merge(json!({ "metadata": metadata }));
        self.api
            .patch(&self.name, &PatchParams::default(), &patch)
            .await?;
        Ok(())
    }

    /// Start an operation of `type_`: Processing, `observedGeneration` caught up, errors of
    /// the previous attempt dropped.
    async fn start(&self, type_: &str) -> Result<(), Error> {
        self.status(json!({
            "lastOperation": operation(type_, "Processing", 0, started(type_)),
            "lastErrors": null,
            "observedGeneration": self.obj.metadata.generation.unwrap_or(0),
        }))
        .await
    }
}

fn operation(type_: &str, state: &str, progress: i64, description: &str) -> Value {
    json!({
        "type": type_, "state": state, "progress": progress,
        "description": description, "lastUpdateTime": now().to_string(),
    })
}

async fn reconcile(obj: Arc<DynamicObject>, sim: Arc<Sim>) -> Result<Action, Error> {
    record_uid(&sim, &obj);
    let shoot = Shoot::new(&sim, obj);
    if shoot.obj.metadata.deletion_timestamp.is_some() {
        return delete(&sim, &shoot).await;
    }
    if !shoot.finalizers().iter().any(|f| f == FINALIZER) {
        let mut with = shoot.finalizers();
        with.push(FINALIZER.into());
        shoot.metadata(json!({ "finalizers": with })).await?;
    }
    let generation = shoot.obj.metadata.generation.unwrap_or(0);
    let observed = shoot.obj.data["status"]["observedGeneration"]
        .as_i64()
        .unwrap_or(0);
    let created = shoot.op_type != "Create" || shoot.op_state == "Succeeded";
    let next = if created { "Reconcile" } else { "Create" };
    let delay = delay(&sim, next);
    match shoot.op_state.as_str() {
        "" => shoot.start("Create").await?,
        "Failed" if shoot.annotation(OPERATION) == Some("retry") => {
            // Gardener honours `retry` only after a failure: the annotation goes, the
            // operation starts again.
            shoot
                .metadata(json!({ "annotations": { OPERATION: null } }))
                .await?;
            shoot.start(next).await?;
        }
        "Succeeded" | "Failed" if observed < generation => shoot.start(next).await?,
        "Processing" if shoot.elapsed >= delay => return finish(&sim, &shoot).await,
        // The gardenlet retries an `Error` by itself.
        "Error" if shoot.elapsed >= delay => shoot.start(&shoot.op_type).await?,
        "Processing" | "Error" => return Ok(Action::requeue(delay - shoot.elapsed)),
        _ => return Ok(Action::await_change()),
    }
    Ok(Action::requeue(delay))
}

/// Note each uid a Shoot name had (`byObject["shoot/<name>"]["uids"]`): a Shoot created
/// twice (made again after a delete, or by two hosts) has two.
fn record_uid(sim: &Sim, obj: &DynamicObject) {
    let (Some(name), Some(uid)) = (&obj.metadata.name, &obj.metadata.uid) else {
        return;
    };
    let mut by = sim.stats.by_object.lock().expect("stats lock");
    let entry = by
        .entry(format!("shoot/{name}"))
        .or_insert_with(|| json!({}));
    match entry["uids"].as_array_mut() {
        Some(uids) if uids.iter().any(|u| u == uid) => {}
        Some(uids) => uids.push(json!(uid)),
        None => entry["uids"] = json!([uid]),
    }
}

/// End a Create or Reconcile attempt: what the gardenlet finds wrong with referenced
/// ConfigMaps, else a scripted failure, else success (with the API server's address).
async fn finish(sim: &Sim, shoot: &Shoot) -> Result<Action, Error> {
    let delay = delay(sim, &shoot.op_type);
    if let Some(problem) = configuration_problem(sim, shoot).await {
        fail(shoot, &Failure::of(&[]).described(problem)).await?;
        return Ok(Action::requeue(delay));
    }
    if let Some(failure) = next_failure(sim, &shoot.name, &shoot.op_type) {
        fail(shoot, &failure).await?;
        return Ok(Action::requeue(delay));
    }
    let description = "Shoot cluster has been successfully reconciled.";
    shoot
        .status(json!({
            "lastOperation": operation(&shoot.op_type, "Succeeded", 100, description),
            "lastErrors": null,
            "advertisedAddresses": [{"name": "external", "url": sim.config.runtime_server}],
        }))
        .await?;
    Ok(Action::await_change())
}

/// Record a failed attempt as the gardenlet does: `Error` (retried) or `Failed`.
async fn fail(shoot: &Shoot, failure: &Failure) -> Result<(), Error> {
    let forced = failure.state.as_deref() == Some("Failed");
    let (state, description) = rules::failed_attempt(&failure.codes, &failure.description, forced);
    let progress = shoot.obj.data["status"]["lastOperation"]["progress"]
        .as_i64()
        .unwrap_or(0);
    shoot
        .status(json!({
            "lastOperation": operation(&shoot.op_type, state, progress, &description),
            "lastErrors": [{
                "description": failure.description,
                "codes": failure.codes,
                "lastUpdateTime": now().to_string(),
            }],
        }))
        .await
}

/// What the gardenlet refuses at reconcile about ConfigMaps the API server does not check
/// (gardener pkg/gardenlet/operation/botanist/kubeapiserver.go: the audit policy and the
/// structured authentication configuration must exist and hold their key).
async fn configuration_problem(sim: &Sim, shoot: &Shoot) -> Option<String> {
    let ns = shoot.obj.metadata.namespace.clone();
    let api_server = &shoot.obj.data["spec"]["kubernetes"]["kubeAPIServer"];
    let audit = api_server["auditConfig"]["auditPolicy"]["configMapRef"]["name"].as_str();
    let auth = api_server["structuredAuthentication"]["configMapName"].as_str();
    for (name, key, what) in [
        (audit, "policy", "audit policy"),
        (auth, "config.yaml", "authentication configuration"),
    ] {
        let Some(name) = name else { continue };
        let at = format!("{}/{name}", ns.clone().unwrap_or_default());
        match sim
            .garden_object("configmaps", ns.clone(), name.into())
            .await
        {
            None if what == "audit policy" => {
                return Some(format!(
                    "retrieving audit policy from the ConfigMap {at} failed: configmaps \"{name}\" not found"
                ));
            }
            None => {
                return Some(format!(
                    "retrieving authentication configuration from the ConfigMap {at} failed: configmaps \"{name}\" not found"
                ));
            }
            Some(cm) if cm["data"][key].is_null() => {
                return Some(format!("missing '.data[{key}]' in {what} ConfigMap {at}"));
            }
            Some(_) => {}
        }
    }
    None
}

/// Deletion: Delete runs (failing as scripted; a force deletion always completes), and
/// once it succeeded the `gardener` finalizer goes.
async fn delete(sim: &Sim, shoot: &Shoot) -> Result<Action, Error> {
    let delay = delay(sim, "Delete");
    let forced = shoot
        .annotation(FORCE_DELETION)
        .is_some_and(|v| v.parse() == Ok(true));
    match (shoot.op_type.as_str(), shoot.op_state.as_str()) {
        ("Delete", "Succeeded") => {
            let rest: Vec<String> = shoot
                .finalizers()
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            shoot.metadata(json!({ "finalizers": rest })).await?;
            return Ok(Action::await_change());
        }
        ("Delete", "Processing") if shoot.elapsed >= delay => {
            match next_failure(sim, &shoot.name, "Delete").filter(|_| !forced) {
                Some(failure) => fail(shoot, &failure).await?,
                None => {
                    let done = "Shoot cluster has been successfully deleted.";
                    let op = operation("Delete", "Succeeded", 100, done);
                    shoot
                        .status(json!({ "lastOperation": op, "lastErrors": null }))
                        .await?;
                }
            }
        }
        ("Delete", "Processing") => return Ok(Action::requeue(delay - shoot.elapsed)),
        ("Delete", "Error") if shoot.elapsed < delay => {
            return Ok(Action::requeue(delay - shoot.elapsed));
        }
        ("Delete", "Failed") if !forced && shoot.annotation(OPERATION) != Some("retry") => {
            return Ok(Action::await_change());
        }
        ("Delete", "Failed") if !forced => {
            shoot
                .metadata(json!({ "annotations": { OPERATION: null } }))
                .await?;
            shoot.start("Delete").await?;
        }
        _ => shoot.start("Delete").await?,
    }
    Ok(Action::requeue(delay))
}

fn delay(sim: &Sim, op_type: &str) -> Duration {
    let script = sim.script();
    Duration::from_millis(match op_type {
        "Create" => script.create_ms,
        "Delete" => script.delete_ms,
        _ => script.reconcile_ms,
    })
}

/// The next scripted failure for this Shoot and operation, if any is left.
fn next_failure(sim: &Sim, shoot: &str, op_type: &str) -> Option<Failure> {
    let script = sim.script();
    let plan = script.shoots.get(shoot)?;
    let list = match op_type {
        "Create" => &plan.create,
        "Delete" => &plan.delete,
        _ => &plan.reconcile,
    };
    let mut consumed = sim.consumed.lock().expect("lock");
    let used = consumed
        .entry((shoot.to_string(), op_type.to_string()))
        .or_insert(0);
    let failure = list.get(*used).cloned()?;
    *used += 1;
    Some(failure)
}

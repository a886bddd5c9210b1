//! Moves Shoots through Gardener's operations. All progress is kept in the Shoot itself
//! (`status.lastOperation.lastUpdateTime`), so the driver can restart at any time.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::{Failure, Sim};

const FINALIZER: &str = "gardener";
const RETRY: &str = "gardener.cloud/operation";

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

pub async fn run(sim: Arc<Sim>) {
    let api: Api<DynamicObject> =
        Api::all_with(sim.client.clone(), &tessera::gardener::shoot_resource());
    Controller::new_with(
        api,
        watcher::Config::default(),
        tessera::gardener::shoot_resource(),
    )
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

fn operation(type_: &str, state: &str, progress: i64, description: &str) -> Value {
    json!({
        "type": type_, "state": state, "progress": progress,
        "description": description, "lastUpdateTime": now().to_string(),
    })
}

async fn reconcile(shoot: Arc<DynamicObject>, sim: Arc<Sim>) -> Result<Action, Error> {
    let ns = shoot.metadata.namespace.clone().unwrap_or_default();
    let name = shoot.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(
        sim.client.clone(),
        &ns,
        &tessera::gardener::shoot_resource(),
    );
    let script = sim.script();
    let status = &shoot.data["status"];
    let op = &status["lastOperation"];
    let op_type = op["type"].as_str().unwrap_or("");
    let op_state = op["state"].as_str().unwrap_or("");
    let updated: jiff::Timestamp = op["lastUpdateTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(now);
    let elapsed = now().duration_since(updated).unsigned_abs();
    let finalizers = shoot.metadata.finalizers.clone().unwrap_or_default();
    let set_status = |status: Value| {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
        }
    };

    if shoot.metadata.deletion_timestamp.is_some() {
        if op_type != "Delete" {
            set_status(json!({ "lastOperation": operation("Delete", "Processing", 0, "Deleting Shoot cluster") })).await?;
            return Ok(Action::requeue(Duration::from_millis(script.delete_ms)));
        }
        let wait = Duration::from_millis(script.delete_ms);
        if elapsed < wait {
            return Ok(Action::requeue(wait - elapsed));
        }
        let rest: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": { "finalizers": rest } })),
        )
        .await?;
        return Ok(Action::await_change());
    }
    if !finalizers.iter().any(|f| f == FINALIZER) {
        let mut with = finalizers.clone();
        with.push(FINALIZER.into());
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": { "finalizers": with } })),
        )
        .await?;
    }
    let generation = shoot.metadata.generation.unwrap_or(0);
    let observed = status["observedGeneration"].as_i64().unwrap_or(0);
    let retry = shoot
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RETRY))
        .is_some_and(|v| v == "retry");

    if retry {
        // Gardener removes the operation annotation and starts the operation again.
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": { "annotations": { RETRY: null } } })),
        )
        .await?;
        let again = if op_type.is_empty() {
            "Create"
        } else {
            op_type
        };
        set_status(json!({ "lastOperation": operation(again, "Processing", 0, "Retrying") }))
            .await?;
        return Ok(Action::requeue(delay(&script, again)));
    }
    if op.is_null() {
        set_status(json!({ "lastOperation": operation("Create", "Processing", 0, "Creating Shoot cluster") })).await?;
        return Ok(Action::requeue(delay(&script, "Create")));
    }
    if op_state == "Succeeded" && observed < generation {
        set_status(json!({ "lastOperation": operation("Reconcile", "Processing", 0, "Reconciling Shoot cluster") })).await?;
        return Ok(Action::requeue(delay(&script, "Reconcile")));
    }
    if op_state == "Processing" || op_state == "Error" {
        let wait = delay(&script, op_type);
        if elapsed < wait {
            return Ok(Action::requeue(wait - elapsed));
        }
        match next_failure(&sim, &script, &name, op_type) {
            Some(failure) => {
                set_status(json!({
                    "lastOperation": operation(op_type, &failure.state, 50, &failure.description),
                    "lastErrors": [{
                        "description": failure.description,
                        "codes": failure.codes,
                        "lastUpdateTime": now().to_string(),
                    }],
                }))
                .await?;
                // An `Error` is retried by Gardener itself after the same delay.
                return Ok(Action::requeue(wait));
            }
            None => {
                set_status(json!({
                    "lastOperation": operation(op_type, "Succeeded", 100, "Shoot cluster has been successfully reconciled"),
                    "lastErrors": null,
                    "observedGeneration": generation,
                }))
                .await?;
            }
        }
    }
    Ok(Action::await_change())
}

fn delay(script: &super::Script, op_type: &str) -> Duration {
    Duration::from_millis(match op_type {
        "Create" => script.create_ms,
        "Delete" => script.delete_ms,
        _ => script.reconcile_ms,
    })
}

/// The next scripted failure for this Shoot and operation, if any is left.
fn next_failure(sim: &Sim, script: &super::Script, shoot: &str, op_type: &str) -> Option<Failure> {
    let plan = script.shoots.get(shoot)?;
    let list = if op_type == "Create" {
        &plan.create
    } else {
        &plan.reconcile
    };
    let mut consumed = sim.consumed.lock().expect("lock");
    let used = consumed
        .entry((shoot.to_string(), op_type.to_string()))
        .or_insert(0);
    let failure = list.get(*used).cloned()?;
    *used += 1;
    Some(failure)
}

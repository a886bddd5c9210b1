//! Finalizer, deletion branch, and the Shoot snapshot every later step reads.

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::{ReconcileError, labels};
use crate::crd::RuntimeState;

pub async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let has_finalizer = m
        .runtime
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == labels::RUNTIME_FINALIZER));
    if m.runtime.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Transition::Stop(Action::await_change()));
        }
        m.set_state(RuntimeState::Terminating);
        return Ok(Transition::Next(Step::DeleteKubeconfig));
    }
    // A fatal failure stays until the Runtime changes or a patch is forced.
    if m.status.state == Some(RuntimeState::Failed)
        && m.status.observed_generation == Some(m.generation())
        && !m.annotated(labels::FORCE_PATCH)
    {
        return Ok(Transition::Stop(Action::await_change()));
    }
    if !has_finalizer {
        let mut finalizers = m.runtime.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(labels::RUNTIME_FINALIZER.to_string());
        let patch = json!({ "metadata": {
            "finalizers": finalizers,
            "resourceVersion": m.runtime.metadata.resource_version,
        }});
        m.runtimes()
            .patch(&m.id(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if m.status.state.is_none() {
        m.set_state(RuntimeState::Pending);
    }
    m.shoot = match &m.status.shoot {
        Some(r) => m.ctx.shoots.get(&r.namespace, &r.name).await?,
        None => None,
    };
    // No Shoot recorded: create_shoot renders the name and adopts a Shoot of that name if
    // it is ours (created just before a crash, status never written). Listing by label
    // here would scan every Shoot for every new Runtime.
    Ok(Transition::Next(match m.shoot {
        Some(_) => Step::SelectProcessing,
        None => Step::CreateShoot,
    }))
}

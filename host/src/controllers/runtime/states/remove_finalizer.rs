//! Deletion, last: everything is gone, let the Runtime go.

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::super::machine::{Machine, Transition};
use crate::controllers::{ReconcileError, labels};

pub async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let finalizers: Vec<String> = m
        .runtime
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != labels::RUNTIME_FINALIZER)
        .collect();
    let patch = json!({ "metadata": {
        "finalizers": finalizers,
        "resourceVersion": m.runtime.metadata.resource_version,
    }});
    match m
        .runtimes()
        .patch(&m.id(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(runtime = %m.id(), "Runtime deleted");
    m.finalizer_removed = true;
    Ok(Transition::Stop(Action::await_change()))
}

//! Render against the current Shoot and apply the difference.

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::super::machine::{Machine, Transition};
use super::render::{record_applied, render};
use crate::controllers::{ReconcileError, labels};
use crate::crd::RuntimeState;

pub async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let current = m.shoot.clone();
    let (desired, output) = match render(m, current.as_ref()).await? {
        Ok(rendered) => rendered,
        Err(failed) => return Ok(failed),
    };
    let applied = m.ctx.shoots.apply(&desired).await?;
    let name = applied.metadata.name.clone().unwrap_or_default();
    tracing::info!(runtime = %m.id(), shoot = %name, generation = m.generation(), "Shoot patched");
    record_applied(m, &desired, &output);
    m.shoot = Some(applied);
    if m.annotated(labels::FORCE_PATCH) {
        let patch = json!({ "metadata": { "annotations": { labels::FORCE_PATCH: null } } });
        m.runtimes()
            .patch(&m.id(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if m.status.state != Some(RuntimeState::Provisioning) {
        m.set_state(RuntimeState::Updating);
    }
    Ok(super::wait_for_shoot::await_gardener(m, false, &name))
}

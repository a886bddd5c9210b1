//! Render against the current Shoot and apply the difference. When only plugin digests
//! changed and the render is the Shoot already applied, nothing is sent.

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::super::machine::{Machine, Step, Transition};
use super::super::shoot_doc;
use super::render::{history_record, record_applied, render};
use super::structured_auth;
use crate::controllers::{ReconcileError, labels};
use crate::crd::Reason;
use crate::crd::RuntimeState;
use crate::history::{self, Operation};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let current = m.shoot.clone();
    let (desired, output) = match render(m, current.as_ref()).await? {
        Ok(rendered) => rendered,
        Err(failed) => return Ok(failed),
    };
    let shoot = current.as_ref().expect("select_processing read the Shoot");
    let identity = m.identity();
    if let Some(why) = identity.mismatch_existing(&serde_json::to_value(shoot).unwrap_or_default())
    {
        return Ok(m.fail(
            Reason::ShootIdentityChanged,
            format!(
                "the Runtime now describes another Shoot than the one it created ({why}); a Shoot's name, project and credentials binding cannot change (field spec.shoot)"
            ),
        ));
    }
    let behind = shoot_doc::rendered_generation(shoot).unwrap_or(0) < m.generation();
    if !behind
        && !m.annotated(labels::FORCE_PATCH)
        && m.status.shoot_hash.as_deref() == Some(shoot_doc::hash(&desired).as_str())
    {
        tracing::info!(runtime = %m.id(), "new plugin versions render the same Shoot; nothing to patch");
        record_applied(m, &desired, &output);
        return Ok(Transition::Next(Step::WaitForShoot));
    }
    if let Some(refused) = structured_auth::write(m, &identity.namespace, &desired).await? {
        return Ok(refused);
    }
    let applied = m.ctx.shoots.apply(&identity, &desired).await?;
    let name = applied.metadata.name.clone().unwrap_or_default();
    // The Shoot named a ConfigMap and no longer does: it goes.
    let before = current
        .as_ref()
        .map(|c| serde_json::to_value(c).unwrap_or_default());
    if let Some(config_map) = before.as_ref().and_then(structured_auth::config_map_name)
        && structured_auth::config_map_name(&desired).is_none()
    {
        structured_auth::remove(m, &identity.namespace, &config_map).await?;
    }
    tracing::info!(runtime = %m.id(), shoot = %name, generation = m.generation(), "Shoot patched");
    let record = history_record(m, Operation::Patch, current.as_ref(), &desired, &output);
    history::record(&m.ctx.client, &m.runtime, record).await?;
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

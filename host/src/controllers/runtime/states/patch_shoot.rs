//! Render against the current Shoot and apply the difference. When only plugin digests
//! changed and the render is the Shoot already applied, nothing is sent.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::super::machine::{Ask, Machine, Step, Transition};
use super::super::{shoot_doc, takeover};
use super::render::{history_record, record_applied, render};
use super::structured_auth;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{EventReason, Reason};
use crate::crd::{FIELD_MANAGER, RuntimeState};
use crate::history::{self, Operation};
use crate::render::diff as shoot_diff;
use kube::runtime::events::EventType;

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    if let Some(again) = m.fresh_shoot(Step::SelectProcessing).await? {
        return Ok(Transition::Next(again));
    }
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
    let behind = takeover::rendered_generation(shoot, &m.status) < m.generation();
    let forced = m.asks(Ask::ForcePatch);
    if !behind
        && !forced
        && m.status.shoot_hash.as_deref() == Some(shoot_doc::hash(&desired).as_str())
    {
        tracing::info!(runtime = %m.id(), "new plugin versions render the same Shoot; nothing to patch");
        record_applied(m, &desired, &output);
        return Ok(Transition::Next(Step::WaitForShoot));
    }
    if !shoot_doc::is_ours(shoot, &m.runtime) {
        let live = serde_json::to_value(shoot).unwrap_or_default();
        if let Some(next) = take_over(m, &identity.namespace, &desired, &live, forced).await? {
            record_applied(m, &desired, &output);
            return Ok(next);
        }
        hand_over(m, shoot).await?;
    }
    if let Some(refused) = structured_auth::write(m, &identity.namespace, &desired).await? {
        return Ok(refused);
    }
    let applied = m.ctx.shoots.apply(&identity, &desired).await?;
    let name = applied.metadata.name.clone().unwrap_or_default();
    drop_unnamed_config_map(m, current.as_ref(), &desired, &identity.namespace).await?;
    tracing::info!(runtime = %m.id(), shoot = %name, generation = m.generation(), "Shoot patched");
    let record = history_record(m, Operation::Patch, current.as_ref(), &desired, &output);
    history::record(&m.ctx.client, &m.runtime, record).await?;
    record_applied(m, &desired, &output);
    // The Shoot carries Tessera's generation annotation from now on.
    m.status.adopted_generation = None;
    m.shoot = Some(applied);
    if forced {
        clear_force(m).await?;
    }
    if m.status.state != Some(RuntimeState::Provisioning) {
        m.set_state(RuntimeState::Updating);
    }
    Ok(super::wait_for_shoot::await_gardener(m, false, &name))
}

/// A Shoot KIM made (takeover is on, or the Runtime would have failed before): when the
/// render matches it in every field the render sets, it is taken as it is — its
/// structured-authentication ConfigMap adopted, the Shoot not written — and the Runtime
/// follows Gardener. Otherwise `None`: the Shoot is patched like any other, which adds
/// Tessera's labels; the Event names the fields that differ.
async fn take_over(
    m: &mut Machine,
    namespace: &str,
    desired: &serde_json::Value,
    live: &serde_json::Value,
    forced: bool,
) -> Result<Option<Transition>, ReconcileError> {
    let name = live["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut ignore = shoot_diff::bookkeeping();
    let kim_generation = &m.ctx.config.kim.generation_annotation;
    ignore.push(format!("metadata.annotations.{kim_generation}"));
    let diffs = shoot_diff::differences(desired, live, &ignore);
    if !diffs.is_empty() || forced {
        let lines = shoot_diff::describe(&diffs, 10).join("; ");
        m.event(
            EventType::Normal,
            EventReason::ShootTakenOver,
            format!("taking over Shoot {namespace}/{name} from KIM with a patch: {lines}"),
        );
        return Ok(None);
    }
    if let Some(refused) = structured_auth::write(m, namespace, desired).await? {
        return Ok(Some(refused));
    }
    m.status.adopted_generation = Some(m.generation());
    tracing::info!(runtime = %m.id(), shoot = %name, "Shoot taken over from KIM unchanged");
    m.event(
        EventType::Normal,
        EventReason::ShootTakenOver,
        format!(
            "took over Shoot {namespace}/{name} from KIM: the render matches it, nothing written"
        ),
    );
    Ok(Some(Transition::Next(Step::WaitForShoot)))
}

/// KIM's fields become Tessera's before its first apply, so that apply also removes what
/// KIM set and the render no longer has (a binding KIM named, an extension dropped).
async fn hand_over(m: &Machine, shoot: &DynamicObject) -> Result<(), ReconcileError> {
    let entries = shoot.metadata.managed_fields.as_deref().unwrap_or_default();
    if let Some(entries) = takeover::hand_over_fields(entries, &m.ctx.config.kim, FIELD_MANAGER) {
        m.ctx.shoots.set_managed_fields(shoot, &entries).await?;
        tracing::info!(runtime = %m.id(), "KIM's Shoot fields handed over to Tessera's field manager");
    }
    Ok(())
}

/// The force-patch annotation is used once, whichever key asked (KIM removes its own the
/// same way).
async fn clear_force(m: &Machine) -> Result<(), ReconcileError> {
    let patch = json!({ "metadata": { "annotations": {
        labels::FORCE_PATCH: null, labels::KIM_FORCE_PATCH: null } } });
    m.runtimes()
        .patch(&m.id(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The Shoot named a structured-authentication ConfigMap and no longer does: it goes.
async fn drop_unnamed_config_map(
    m: &Machine,
    current: Option<&kube::api::DynamicObject>,
    desired: &serde_json::Value,
    namespace: &str,
) -> Result<(), ReconcileError> {
    let before = current.map(|c| serde_json::to_value(c).unwrap_or_default());
    if let Some(config_map) = before.as_ref().and_then(structured_auth::config_map_name)
        && structured_auth::config_map_name(desired).is_none()
    {
        structured_auth::remove(m, namespace, &config_map).await?;
    }
    Ok(())
}

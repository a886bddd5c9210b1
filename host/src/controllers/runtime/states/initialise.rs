//! Finalizer, deletion branch, and the Shoot snapshot every later step reads (from the
//! watch's cache when it can answer for it; a step that writes reads it afresh).

use kube::runtime::controller::Action;

use super::super::machine::{Ask, Machine, Step, Transition};
use crate::controllers::kit::finalizer;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{Reason, RuntimeState};
use crate::gardener::{ShootFreshness, ShootSource};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let has_finalizer = finalizer::has(m.runtime.as_ref(), labels::RUNTIME_FINALIZER);
    if m.runtime.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Transition::Stop(Action::await_change()));
        }
        m.set_state(RuntimeState::Terminating);
        return Ok(Transition::Next(Step::DeleteKubeconfig));
    }
    // A fatal failure stays until the Runtime changes or a patch is forced (or the
    // operator turned on the takeover it asked for).
    if m.status.state == Some(RuntimeState::Failed)
        && m.status.observed_generation == Some(m.generation())
        && !m.asks(Ask::ForcePatch)
        && !(m.ctx.config.kim.enabled && m.failed_for(Reason::TakeoverDisabled))
    {
        return Ok(Transition::Stop(Action::await_change()));
    }
    finalizer::add(&m.runtimes(), m.runtime.as_ref(), labels::RUNTIME_FINALIZER).await?;
    if m.status.state.is_none() {
        m.set_state(RuntimeState::Pending);
    }
    // Judged from the watch's cache, without a request to Gardener: a settled Runtime
    // always, one in progress only after a recent event of its Shoot (half a poll
    // interval), so that its poll sees Gardener's progress even while the watch lags or
    // stalls. A write reads the Shoot afresh either way.
    let freshness = match m.is_settled() {
        true => ShootFreshness::Any,
        false => ShootFreshness::DeliveredWithin(m.ctx.config.requeue.pending / 2),
    };
    (m.shoot, m.shoot_source) = match &m.status.shoot {
        Some(r) => m.ctx.shoots.read(&r.namespace, &r.name, freshness).await?,
        None => (None, ShootSource::Gardener),
    };
    m.gardener_answered |= m.status.shoot.is_some();
    // No Shoot recorded: create_shoot renders the name and adopts a Shoot of that name if
    // it is ours (created just before a crash, status never written). Listing by label
    // here would scan every Shoot for every new Runtime.
    Ok(Transition::Next(match m.shoot {
        Some(_) => Step::SelectProcessing,
        None => Step::CreateShoot,
    }))
}

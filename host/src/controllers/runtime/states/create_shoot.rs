//! Render the Runtime and create its Shoot.

use super::super::machine::{Machine, Step, Transition};
use super::render::{history_record, record_applied, render};
use super::structured_auth;
use crate::controllers::ReconcileError;
use crate::crd::{Reason, RuntimeState, ShootRef};
use crate::history::{self, Operation};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let (desired, output) = match render(m, None).await? {
        Ok(rendered) => rendered,
        Err(failed) => return Ok(failed),
    };
    let identity = m.identity();
    let (name, namespace) = (identity.name.clone(), identity.namespace.clone());
    let existing = m.ctx.shoots.get(&namespace, &name).await?;
    m.gardener_answered = true;
    if let Some(existing) = existing {
        // Ours (created just before a crash), or KIM's to take over: patched, if at all,
        // by the next step.
        if let Some(refused) = m.refuse_foreign(&existing) {
            return Ok(refused);
        }
        m.shoot = Some(existing);
        return Ok(Transition::Next(Step::SelectProcessing));
    }
    // Only a Shoot about to be created is checked (KIM's order): an existing one, ours or
    // taken over, runs wherever Gardener put it.
    if let Some(missing) = seed_missing(m).await? {
        return Ok(m.fail(Reason::SeedNotFound, missing));
    }
    if let Some(refused) = structured_auth::write(m, &namespace, &desired).await? {
        return Ok(refused);
    }
    let applied = m.ctx.shoots.apply(&identity, &desired).await?;
    tracing::info!(runtime = %m.id(), shoot = %name, namespace = %namespace, "Shoot created");
    let record = history_record(m, Operation::Create, None, &desired, &output);
    history::record(&m.ctx.client, &m.runtime, record).await?;
    record_applied(m, &desired, &output);
    m.status.shoot = Some(ShootRef {
        name: name.clone(),
        namespace,
    });
    m.shoot = Some(applied);
    m.set_state(RuntimeState::Provisioning);
    Ok(super::wait_for_shoot::await_gardener(m, true, &name))
}

/// KIM's pre-check: with `enforceSeedLocation`, why no usable Seed of the Runtime's provider
/// runs in its region (`None`: one does, or the Runtime does not ask).
async fn seed_missing(m: &mut Machine) -> Result<Option<String>, ReconcileError> {
    let shoot = &m.runtime.spec.inner.shoot;
    if shoot.enforce_seed_location != Some(true) {
        return Ok(None);
    }
    let seeds = m.ctx.shoots.list_seeds().await?;
    m.gardener_answered = true;
    Ok(super::super::seeds::missing_seed(
        &seeds,
        &shoot.provider.type_,
        &shoot.region,
    ))
}

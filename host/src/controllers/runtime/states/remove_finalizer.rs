//! Deletion, last: everything is gone, let the Runtime go.

use kube::runtime::controller::Action;

use super::super::machine::{Machine, Transition};
use crate::controllers::kit::finalizer;
use crate::controllers::{ReconcileError, labels};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    // Its render history goes with it (also where no garbage collector follows owners).
    crate::history::forget(&m.ctx.client, &m.runtime).await?;
    // So does the structured-authentication ConfigMap of its Shoot (gone by now).
    let shoot = m.status.shoot.clone();
    let identity = m.identity();
    let (name, namespace) = match &shoot {
        Some(s) => (s.name.clone(), s.namespace.clone()),
        None => (identity.name, identity.namespace),
    };
    let config_map = super::structured_auth::default_name(&name);
    super::structured_auth::remove(m, &namespace, &config_map).await?;
    // And the project copies of its registry-cache credentials.
    super::super::registry_cache::remove_all(m).await?;
    finalizer::remove(&m.runtimes(), m.runtime.as_ref(), labels::RUNTIME_FINALIZER).await?;
    tracing::info!(runtime = %m.id(), "Runtime deleted");
    m.finalizer_removed = true;
    Ok(Transition::Stop(Action::await_change()))
}

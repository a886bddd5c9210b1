//! Deletion, last: everything is gone, let the Runtime go.

use kube::runtime::controller::Action;

use super::super::machine::{Machine, Transition};
use crate::controllers::kit::finalizer;
use crate::controllers::{ReconcileError, labels};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    // Its render history goes with it (also where no garbage collector follows owners).
    crate::history::forget(&m.ctx.client, &m.runtime).await?;
    finalizer::remove(&m.runtimes(), m.runtime.as_ref(), labels::RUNTIME_FINALIZER).await?;
    tracing::info!(runtime = %m.id(), "Runtime deleted");
    m.finalizer_removed = true;
    Ok(Transition::Stop(Action::await_change()))
}

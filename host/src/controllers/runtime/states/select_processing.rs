//! Patch when the Shoot is behind its Runtime (or a patch is forced), unless suspended.

use super::super::machine::{Machine, Step, Transition};
use super::super::shoot_doc;
use crate::controllers::{ReconcileError, labels};
use crate::crd::ShootRef;

pub async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let shoot = m.shoot.as_ref().expect("initialise read the Shoot");
    if !shoot_doc::is_ours(shoot, &m.runtime) {
        let name = shoot.metadata.name.clone().unwrap_or_default();
        return Ok(m.fail(
            "ShootNameTaken",
            format!("Shoot {name} belongs to another Runtime (field spec.shoot.name)"),
        ));
    }
    if m.status.shoot.is_none() {
        m.status.shoot = Some(ShootRef {
            name: shoot.metadata.name.clone().unwrap_or_default(),
            namespace: shoot.metadata.namespace.clone().unwrap_or_default(),
        });
    }
    let behind = shoot_doc::rendered_generation(shoot).unwrap_or(0) < m.generation();
    let forced = m.annotated(labels::FORCE_PATCH);
    if m.annotated(labels::SUSPEND_PATCH) {
        if behind || forced {
            tracing::info!(runtime = %m.id(), "Shoot patching is suspended by annotation");
        }
        return Ok(Transition::Next(Step::WaitForShoot));
    }
    Ok(Transition::Next(if behind || forced {
        Step::PatchShoot
    } else {
        Step::WaitForShoot
    }))
}

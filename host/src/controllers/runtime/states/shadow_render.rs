//! Only the shadow versions changed: render to compare, apply nothing.

use super::super::machine::{Machine, Step, Transition};
use super::render::render;
use crate::controllers::ReconcileError;

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    if let Some(again) = m.fresh_shoot(Step::SelectProcessing).await? {
        return Ok(Transition::Next(again));
    }
    let current = m.shoot.clone();
    match render(m, current.as_ref()).await? {
        Ok(_) => Ok(Transition::Next(Step::WaitForShoot)),
        Err(transition) => Ok(transition),
    }
}

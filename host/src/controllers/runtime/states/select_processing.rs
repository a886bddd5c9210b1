//! Patch when the Shoot is behind its Runtime, a patch is forced or the chain's plugins
//! changed (a channel moved), unless suspended; render the shadows alone when only they
//! changed.

use super::super::machine::{Machine, Step, Transition};
use super::super::shoot_doc;
use crate::controllers::{ReconcileError, labels};
use crate::crd::Reason;
use crate::crd::ShootRef;

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let shoot = m.shoot.as_ref().expect("initialise read the Shoot");
    if !shoot_doc::is_ours(shoot, &m.runtime) {
        let name = shoot.metadata.name.clone().unwrap_or_default();
        return Ok(m.fail(
            Reason::ShootNameTaken,
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
    let (plugins_changed, shadows_changed) = match super::render::resolve(m) {
        Ok(chain) => {
            let applied: Vec<(&str, &str)> = m
                .status
                .plugins
                .iter()
                .map(|p| (p.name.as_str(), p.digest.as_str()))
                .collect();
            let stamps = chain.chain.stamps();
            let wanted: Vec<(&str, &str)> = stamps
                .iter()
                .map(|s| (s.name.as_str(), s.digest.as_str()))
                .collect();
            // Runtimes from before digests were recorded are not re-rendered for that alone.
            let plugins_changed = !applied.is_empty() && applied != wanted;
            let shown: Vec<(&str, &str)> = m
                .status
                .shadow
                .iter()
                .map(|s| (s.plugin.as_str(), s.digest.as_str()))
                .collect();
            let shadows: Vec<(&str, &str)> = chain
                .shadows
                .iter()
                .map(|s| (s.step.plugin.name(), s.digest.as_str()))
                .collect();
            let shadows_changed = shown != shadows;
            if shadows.is_empty() {
                m.status.shadow.clear();
            }
            (
                plugins_changed,
                shadows_changed && !chain.shadows.is_empty(),
            )
        }
        // Only a render needs the plugins; a settled Runtime waits where it is.
        Err(err) if behind || forced => return Ok(super::render::wait_for_plugins(m, &err)),
        Err(_) => (false, false),
    };
    if plugins_changed {
        tracing::info!(runtime = %m.id(), "plugin versions changed; re-rendering");
    }
    if m.annotated(labels::SUSPEND_PATCH) {
        if behind || forced || plugins_changed {
            tracing::info!(runtime = %m.id(), "Shoot patching is suspended by annotation");
        }
        return Ok(Transition::Next(Step::WaitForShoot));
    }
    Ok(Transition::Next(if behind || forced || plugins_changed {
        Step::PatchShoot
    } else if shadows_changed {
        Step::ShadowRender
    } else {
        Step::WaitForShoot
    }))
}

//! Patch when the Shoot is behind its Runtime, a patch is forced, the chain's plugins
//! changed (a channel moved) or the Shoot names other registry-cache credentials than the
//! project holds for it, unless suspended; render the shadows alone when only they changed.

use super::super::machine::{Ask, Machine, Step, Transition};
use super::super::{registry_cache, takeover};
use crate::controllers::ReconcileError;
use crate::crd::{PluginStamp, ShootRef};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let shoot = m.shoot.clone().expect("initialise read the Shoot");
    if let Some(refused) = m.refuse_foreign(&shoot) {
        return Ok(refused);
    }
    if m.status.shoot.is_none() {
        m.status.shoot = Some(ShootRef {
            name: shoot.metadata.name.clone().unwrap_or_default(),
            namespace: shoot.metadata.namespace.clone().unwrap_or_default(),
        });
    }
    let caches = registry_cache::sync(m).await?;
    m.caches_waiting = caches.waiting;
    let behind = takeover::rendered_generation(&shoot, &m.status) < m.generation();
    let forced = m.asks(Ask::ForcePatch);
    let (plugins_changed, shadows_changed) = match super::render::resolve(m) {
        Ok(chain) => {
            let plugins_changed = plugins_changed(&m.status.plugins, &chain.chain.stamps());
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
    let suspended = m.asks(Ask::SuspendPatch);
    let wants_patch = behind || forced || plugins_changed || caches.stale;
    if suspended && wants_patch {
        tracing::info!(runtime = %m.id(), "Shoot patching is suspended by annotation");
    }
    Ok(Transition::Next(next_step(
        wants_patch,
        shadows_changed,
        suspended,
    )))
}

/// Whether the chain now runs other plugin components than the ones that rendered the
/// applied Shoot. No record counts as a change: a Shoot created by a reconcile whose status
/// write was lost (found existing by the next one) would otherwise never record its
/// plugins and never follow a channel. Rendering it again costs one render; an unchanged
/// Shoot is not sent to Gardener.
pub(crate) fn plugins_changed(applied: &[PluginStamp], wanted: &[PluginStamp]) -> bool {
    let key = |s: &PluginStamp| (s.name.clone(), s.digest.clone());
    !wanted.is_empty() && !applied.iter().map(key).eq(wanted.iter().map(key))
}

/// Patch when something asks for it (unless suspended), else render only the shadows
/// when they changed, else follow Gardener.
pub(crate) fn next_step(wants_patch: bool, shadows_changed: bool, suspended: bool) -> Step {
    match (suspended, wants_patch, shadows_changed) {
        (true, _, _) => Step::WaitForShoot,
        (false, true, _) => Step::PatchShoot,
        (false, false, true) => Step::ShadowRender,
        (false, false, false) => Step::WaitForShoot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(name: &str, digest: &str, version: &str) -> PluginStamp {
        PluginStamp {
            name: name.into(),
            version: version.into(),
            digest: digest.into(),
            channel: None,
        }
    }

    #[test]
    fn a_new_component_digest_is_a_plugin_change_a_new_channel_label_is_not() {
        let applied = [stamp("provider", "sha256:a", "1.0.0")];
        assert!(!plugins_changed(
            &applied,
            &[stamp("provider", "sha256:a", "1.0.0")]
        ));
        assert!(plugins_changed(
            &applied,
            &[stamp("provider", "sha256:b", "1.0.0")]
        ));
        let mut relabelled = stamp("provider", "sha256:a", "1.0.0");
        relabelled.channel = Some("fast".into());
        assert!(!plugins_changed(&applied, &[relabelled]));
        assert!(plugins_changed(
            &applied,
            &[
                stamp("provider", "sha256:a", "1.0.0"),
                stamp("dns", "sha256:c", "1.0.0")
            ]
        ));
    }

    #[test]
    fn a_shoot_without_recorded_stamps_is_rendered_again_once() {
        let wanted = [stamp("provider", "sha256:a", "1.0.0")];
        assert!(plugins_changed(&[], &wanted));
        assert!(!plugins_changed(&wanted, &wanted));
        assert!(!plugins_changed(&[], &[]));
    }

    #[test]
    fn suspension_wins_then_patches_then_shadows() {
        assert_eq!(next_step(true, true, true), Step::WaitForShoot);
        assert_eq!(next_step(true, false, false), Step::PatchShoot);
        assert_eq!(next_step(true, true, false), Step::PatchShoot);
        assert_eq!(next_step(false, true, false), Step::ShadowRender);
        assert_eq!(next_step(false, false, false), Step::WaitForShoot);
    }
}

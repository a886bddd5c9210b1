//! Deletion, second: confirm and delete the Shoot, then wait until Gardener removed it.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::super::machine::{Machine, Step, Transition};
use super::super::shoot_doc;
use crate::controllers::ReconcileError;
use crate::crd::ConditionStatus;
use crate::crd::EventReason;
use crate::crd::{ConditionType, Reason};
use crate::gardener::{CONFIRM_DELETION, FORCE_DELETION};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let mut shoot = match &m.status.shoot {
        Some(r) => {
            let shoot = m.ctx.shoots.get(&r.namespace, &r.name).await?;
            m.gardener_answered = true;
            shoot
        }
        None => None,
    };
    if shoot.is_none() {
        shoot = m
            .ctx
            .shoots
            .list(&shoot_doc::selector(&m.runtime))
            .await?
            .into_iter()
            .next();
    }
    let Some(shoot) = shoot else {
        m.condition(
            ConditionType::Deprovisioned,
            ConditionStatus::True,
            Reason::ShootDeleted,
            "the Shoot is gone",
        );
        return Ok(Transition::Next(Step::RemoveFinalizer));
    };
    let name = shoot.metadata.name.clone().unwrap_or_default();
    if !shoot_doc::is_ours(&shoot, &m.runtime) {
        // The recorded Shoot was replaced by one this Runtime did not create: not ours to
        // delete.
        m.condition(
            ConditionType::Deprovisioned,
            ConditionStatus::True,
            Reason::ShootNotOurs,
            format!("Shoot {name} belongs to another Runtime; left alone"),
        );
        return Ok(Transition::Next(Step::RemoveFinalizer));
    }
    if shoot.metadata.deletion_timestamp.is_none() {
        let annotations = shoot.metadata.annotations.clone().unwrap_or_default();
        let mut wanted = vec![(CONFIRM_DELETION, Some("true"))];
        if m.ctx.config.force_deletion {
            wanted.push((FORCE_DELETION, Some("true")));
        }
        wanted.retain(|(k, v)| annotations.get(*k).map(String::as_str) != *v);
        if !wanted.is_empty() {
            m.ctx.shoots.annotate(&shoot, &wanted).await?;
        }
        m.ctx.shoots.delete(&shoot).await?;
        tracing::info!(runtime = %m.id(), shoot = %name, "Shoot deletion requested");
        m.event(
            EventType::Normal,
            EventReason::ShootDeleting,
            format!("Shoot {name} deletion confirmed and requested"),
        );
    }
    m.condition(
        ConditionType::Deprovisioned,
        ConditionStatus::Unknown,
        Reason::ShootDeletionPending,
        format!("waiting for Gardener to delete Shoot {name}"),
    );
    Ok(Transition::Stop(Action::requeue(
        m.ctx.config.requeue.pending,
    )))
}

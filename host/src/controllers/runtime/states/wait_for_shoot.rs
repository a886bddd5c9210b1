//! Follow Gardener's `status.lastOperation` until the Shoot is reconciled.

use kube::runtime::controller::Action;

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::ReconcileError;
use crate::crd::{ConditionStatus, RuntimeState};
use crate::crd::{ConditionType, Reason};
use crate::gardener::{ErrorClass, OPERATION_ANNOTATION, ShootProgress, classify_codes};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let shoot = m.shoot.clone().expect("initialise read the Shoot");
    let name = shoot.metadata.name.clone().unwrap_or_default();
    let progress = ShootProgress::of(&shoot);
    let pending = m.ctx.config.requeue.pending;
    let creating = progress
        .last_operation
        .as_ref()
        .is_none_or(|op| op.type_ == "Create");
    let (working_state, pending_reason) = if creating {
        (RuntimeState::Provisioning, Reason::ShootCreationPending)
    } else {
        (RuntimeState::Updating, Reason::ShootUpdatePending)
    };
    let Some(op) = progress.last_operation.clone() else {
        m.condition(
            ConditionType::Provisioned,
            ConditionStatus::Unknown,
            pending_reason,
            pending_message(creating, &name),
        );
        return Ok(Transition::Stop(Action::requeue(pending)));
    };
    let caught_up = progress.observed_generation >= progress.generation;
    match op.state.as_str() {
        "Succeeded" if caught_up => {
            if m.is_settled() {
                // Nothing changed since the Runtime became Ready: skip the runtime
                // cluster; `Ready` rewrites nothing that is already true.
                return Ok(Transition::Next(Step::Ready));
            }
            Ok(Transition::Next(Step::HandleKubeconfig))
        }
        "Failed" | "Aborted" => {
            let codes = progress.error_codes.join(", ");
            let detail = if progress.error_description.is_empty() {
                op.description.clone()
            } else {
                progress.error_description.clone()
            };
            match classify_codes(
                progress.error_codes.iter().map(String::as_str),
                progress.non_retryable,
            ) {
                ErrorClass::Fatal => Ok(m.fail(
                    Reason::GardenerErrorFatal,
                    format!("{} of Shoot {name} failed [{codes}]: {detail}", op.type_),
                )),
                ErrorClass::Retryable => {
                    // Back off: ask for a retry once the failure is `requeue.retry` old.
                    let retry_after = m.ctx.config.requeue.retry;
                    let age = op
                        .last_update
                        .map(|t| jiff::Timestamp::now().duration_since(t).unsigned_abs())
                        .unwrap_or(retry_after);
                    let requested = shoot.metadata.annotations.as_ref().is_some_and(|a| {
                        a.get(OPERATION_ANNOTATION).map(String::as_str) == Some("retry")
                    });
                    let wait = if requested {
                        retry_after
                    } else if age >= retry_after {
                        tracing::info!(runtime = %m.id(), shoot = %name, codes = %codes, "asking Gardener to retry");
                        m.ctx
                            .shoots
                            .annotate(&shoot, &[(OPERATION_ANNOTATION, Some("retry"))])
                            .await?;
                        retry_after
                    } else {
                        retry_after - age
                    };
                    m.set_state(working_state);
                    m.condition(
                        ConditionType::Provisioned,
                        ConditionStatus::Unknown,
                        Reason::GardenerErrorRetrying,
                        format!(
                            "{} of Shoot {name} failed [{codes}]: {detail}; retrying",
                            op.type_
                        ),
                    );
                    Ok(Transition::Stop(Action::requeue(wait)))
                }
            }
        }
        "Error" => {
            // Gardener retries by itself; report and wait.
            m.set_state(working_state);
            m.condition(
                ConditionType::Provisioned,
                ConditionStatus::Unknown,
                Reason::GardenerError,
                format!(
                    "{} of Shoot {name} hit an error, Gardener retries [{}]: {}",
                    op.type_,
                    progress.error_codes.join(", "),
                    progress.error_description
                ),
            );
            Ok(Transition::Stop(Action::requeue(pending)))
        }
        _ => {
            if m.status.state != Some(RuntimeState::Ready) || !caught_up {
                m.set_state(working_state);
            }
            m.condition(
                ConditionType::Provisioned,
                ConditionStatus::Unknown,
                pending_reason,
                // Progress percentages stay in the Shoot: one status write per phase.
                pending_message(creating, &name),
            );
            Ok(Transition::Stop(Action::requeue(pending)))
        }
    }
}

/// After a Shoot was written: wait for Gardener, with `Provisioned` saying so and an Event.
pub(crate) fn await_gardener(m: &mut Machine, creating: bool, shoot: &str) -> Transition {
    let (reason, event, verb) = if creating {
        (Reason::ShootCreationPending, "ShootCreated", "created")
    } else {
        (Reason::ShootUpdatePending, "ShootPatched", "patched")
    };
    m.condition(
        ConditionType::Provisioned,
        ConditionStatus::Unknown,
        reason,
        pending_message(creating, shoot),
    );
    m.event(
        kube::runtime::events::EventType::Normal,
        event,
        format!("Shoot {shoot} {verb}"),
    );
    Transition::Stop(Action::requeue(m.ctx.config.requeue.pending))
}

/// The `Provisioned` message while Gardener works; the same text from creation until
/// success, so Gardener's progress updates cause no Runtime writes.
pub(crate) fn pending_message(creating: bool, shoot: &str) -> String {
    if creating {
        format!("waiting for Gardener to create Shoot {shoot}")
    } else {
        format!("waiting for Gardener to reconcile Shoot {shoot}")
    }
}

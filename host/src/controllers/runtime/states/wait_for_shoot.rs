//! Follow Gardener's `status.lastOperation` until the Shoot is reconciled.

use std::time::Duration;

use kube::runtime::controller::Action;

use super::super::machine::{Machine, Step, Transition};
use super::super::seeds::no_matching_seeds;
use crate::controllers::ReconcileError;
use crate::crd::EventReason;
use crate::crd::{ConditionStatus, RuntimeState};
use crate::crd::{ConditionType, Reason};
use crate::gardener::{ErrorClass, OPERATION_ANNOTATION, ShootProgress, classify_codes};

/// What Gardener's progress on the Shoot means for the Runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Reconciled, and Gardener has seen the latest generation.
    Done,
    /// Gardener is working on it (or has not started).
    Working,
    /// Failed for good: the Runtime fails with this message.
    Fatal(String),
    /// Failed, retryable: ask Gardener to retry (`ask`) unless asked already, and look again
    /// after `wait`.
    Retry {
        message: String,
        ask: bool,
        wait: Duration,
    },
    /// Gardener hit an error and retries by itself.
    GardenerRetries(String),
}

/// Decide from `progress` of Shoot `name`: `retry_requested` when the retry annotation is
/// set; a retryable failure is retried once it is `retry_after` old.
pub(crate) fn verdict(
    progress: &ShootProgress,
    name: &str,
    retry_requested: bool,
    retry_after: Duration,
    now: jiff::Timestamp,
) -> Verdict {
    let Some(op) = &progress.last_operation else {
        return Verdict::Working;
    };
    // KIM fails a Runtime Gardener cannot schedule for lack of a Seed of its provider.
    if op.type_ == "Create" && op.state != "Succeeded" && no_matching_seeds(&op.description) {
        return Verdict::Fatal(format!("Create of Shoot {name} failed: {}", op.description));
    }
    let caught_up = progress.observed_generation >= progress.generation;
    let codes = progress.error_codes.join(", ");
    match op.state.as_str() {
        "Succeeded" if caught_up => Verdict::Done,
        "Failed" | "Aborted" => {
            let detail = match progress.error_description.as_str() {
                "" => op.description.as_str(),
                d => d,
            };
            let message = format!("{} of Shoot {name} failed [{codes}]: {detail}", op.type_);
            let codes = progress.error_codes.iter().map(String::as_str);
            if classify_codes(codes) == ErrorClass::Fatal {
                return Verdict::Fatal(message);
            }
            let age = op
                .last_update
                .map(|t| now.duration_since(t).unsigned_abs())
                .unwrap_or(retry_after);
            let (ask, wait) = match (retry_requested, age >= retry_after) {
                (true, _) => (false, retry_after),
                (false, true) => (true, retry_after),
                (false, false) => (false, retry_after - age),
            };
            Verdict::Retry {
                message: format!("{message}; retrying"),
                ask,
                wait,
            }
        }
        "Error" => Verdict::GardenerRetries(format!(
            "{} of Shoot {name} hit an error, Gardener retries [{codes}]: {}",
            op.type_, progress.error_description
        )),
        _ => Verdict::Working,
    }
}

/// Gardener was asked to retry the Shoot's failed operation and has not started it yet.
pub(crate) fn retry_requested(shoot: &kube::api::DynamicObject) -> bool {
    let annotations = shoot.metadata.annotations.as_ref();
    annotations
        .and_then(|a| a.get(OPERATION_ANNOTATION))
        .map(String::as_str)
        == Some("retry")
}

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
    let requested = retry_requested(&shoot);
    let retry_after = m.ctx.config.requeue.retry;
    let provisioned = ConditionType::Provisioned;
    let unknown = ConditionStatus::Unknown;
    match verdict(
        &progress,
        &name,
        requested,
        retry_after,
        jiff::Timestamp::now(),
    ) {
        // Nothing changed since the Runtime became Ready: skip the runtime cluster;
        // `Ready` rewrites nothing that is already true.
        Verdict::Done if m.is_settled() => Ok(Transition::Next(Step::Ready)),
        Verdict::Done => Ok(Transition::Next(Step::HandleKubeconfig)),
        Verdict::Fatal(message) => Ok(m.fail(Reason::GardenerErrorFatal, message)),
        Verdict::Retry { message, ask, wait } => {
            if ask && let Some(again) = m.fresh_shoot(Step::WaitForShoot).await? {
                return Ok(Transition::Next(again));
            }
            if ask {
                tracing::info!(runtime = %m.id(), shoot = %name, "asking Gardener to retry");
                let retry = [(OPERATION_ANNOTATION, Some("retry"))];
                m.ctx.shoots.annotate(&shoot, &retry).await?;
            }
            m.set_state(working_state);
            m.condition(provisioned, unknown, Reason::GardenerErrorRetrying, message);
            Ok(Transition::Stop(Action::requeue(wait)))
        }
        Verdict::GardenerRetries(message) => {
            m.set_state(working_state);
            m.condition(provisioned, unknown, Reason::GardenerError, message);
            Ok(Transition::Stop(Action::requeue(pending)))
        }
        Verdict::Working => {
            let caught_up = progress.observed_generation >= progress.generation;
            if progress.last_operation.is_some()
                && (m.status.state != Some(RuntimeState::Ready) || !caught_up)
            {
                m.set_state(working_state);
            }
            // Progress percentages stay in the Shoot: one status write per phase.
            m.condition(
                provisioned,
                unknown,
                pending_reason,
                pending_message(creating, &name),
            );
            Ok(Transition::Stop(Action::requeue(pending)))
        }
    }
}

/// After a Shoot was written: wait for Gardener, with `Provisioned` saying so and an Event.
pub(crate) fn await_gardener(m: &mut Machine, creating: bool, shoot: &str) -> Transition {
    let (reason, event, verb) = if creating {
        (
            Reason::ShootCreationPending,
            EventReason::ShootCreated,
            "created",
        )
    } else {
        (
            Reason::ShootUpdatePending,
            EventReason::ShootPatched,
            "patched",
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gardener::LastOperation;

    fn progress(state: &str, codes: &[&str], age_s: i64) -> (ShootProgress, jiff::Timestamp) {
        let now = jiff::Timestamp::now();
        let op = LastOperation {
            type_: "Create".into(),
            state: state.into(),
            description: "described".into(),
            progress: 50,
            last_update: Some(now - jiff::SignedDuration::from_secs(age_s)),
        };
        let p = ShootProgress {
            last_operation: Some(op),
            error_codes: codes.iter().map(|c| c.to_string()).collect(),
            error_description: String::new(),
            generation: 2,
            observed_generation: 2,
        };
        (p, now)
    }

    const RETRY: Duration = Duration::from_secs(30);

    #[test]
    fn a_reconciled_shoot_that_caught_up_is_done() {
        let (p, now) = progress("Succeeded", &[], 0);
        assert_eq!(verdict(&p, "s", false, RETRY, now), Verdict::Done);
        let behind = ShootProgress { generation: 3, ..p };
        assert_eq!(verdict(&behind, "s", false, RETRY, now), Verdict::Working);
    }

    #[test]
    fn no_operation_yet_is_working() {
        let (mut p, now) = progress("Processing", &[], 0);
        assert_eq!(verdict(&p, "s", false, RETRY, now), Verdict::Working);
        p.last_operation = None;
        assert_eq!(verdict(&p, "s", false, RETRY, now), Verdict::Working);
    }

    #[test]
    fn a_fatal_error_code_fails_the_runtime_naming_it() {
        let (p, now) = progress("Failed", &["ERR_INFRA_UNAUTHORIZED"], 0);
        let Verdict::Fatal(message) = verdict(&p, "s", false, RETRY, now) else {
            panic!("fatal expected");
        };
        assert!(message.contains("ERR_INFRA_UNAUTHORIZED") && message.contains("Shoot s"));
    }

    /// KIM `sFnWaitForShootCreation`: a Shoot Gardener's scheduler finds no Seed of its
    /// provider for fails the Runtime.
    #[test]
    fn no_seed_of_the_provider_fails_the_runtime() {
        let (mut p, now) = progress("Pending", &[], 0);
        if let Some(op) = p.last_operation.as_mut() {
            op.description = "Failed to schedule Shoot: none out of the 4 seeds has a matching provider for \"alicloud\"".into();
        }
        let Verdict::Fatal(message) = verdict(&p, "s", false, RETRY, now) else {
            panic!("fatal expected");
        };
        assert!(
            message.contains("matching provider for \"alicloud\""),
            "{message}"
        );
    }

    #[test]
    fn a_retryable_failure_asks_gardener_once_it_is_old_enough() {
        let (young, now) = progress("Failed", &["ERR_INFRA_QUOTA_EXCEEDED"], 10);
        match verdict(&young, "s", false, RETRY, now) {
            Verdict::Retry { ask, wait, .. } => {
                assert!(!ask);
                assert!(wait <= Duration::from_secs(20) && wait >= Duration::from_secs(19));
            }
            other => panic!("{other:?}"),
        }
        let (old, now) = progress("Failed", &["ERR_INFRA_QUOTA_EXCEEDED"], 40);
        assert!(matches!(
            verdict(&old, "s", false, RETRY, now),
            Verdict::Retry { ask: true, .. }
        ));
        // Asked already: wait, do not ask again.
        assert!(matches!(
            verdict(&old, "s", true, RETRY, now),
            Verdict::Retry {
                ask: false,
                wait: RETRY,
                ..
            }
        ));
    }

    #[test]
    fn an_error_gardener_retries_itself_is_reported() {
        let (p, now) = progress("Error", &["ERR_X"], 0);
        assert!(
            matches!(verdict(&p, "s", false, RETRY, now), Verdict::GardenerRetries(m) if m.contains("ERR_X"))
        );
    }
}

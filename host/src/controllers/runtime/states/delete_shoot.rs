//! Deletion, second: confirm and delete the Shoot, then follow Gardener's deletion until the
//! Shoot is gone. A deletion Gardener fails is reported with its error codes; with
//! `--force-deletion` the host sets Gardener's force-deletion annotation, but only once
//! Gardener allows it (the Shoot is being deleted and its last errors carry one of the
//! codes Gardener names: gardener pkg/api/core/validation/shoot.go `ValidateForceDeletion`).

use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::super::machine::{Machine, Step, Transition};
use super::super::{shoot_doc, takeover};
use super::wait_for_shoot::{Verdict, retry_requested, verdict};
use crate::controllers::{ReconcileError, labels};
use crate::crd::{ConditionStatus, ConditionType, EventReason, Reason};
use crate::gardener::{
    CONFIRM_DELETION, FORCE_DELETION, FORCE_DELETION_CODES, OPERATION_ANNOTATION, ShootProgress,
};

/// What to do about a Shoot this Runtime owns, on the way to its deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// Not deleted yet: confirm (these annotations are missing) and delete.
    Request { confirm: bool },
    /// Gardener deletes it (or has not started): wait.
    Pending,
    /// Gardener failed the deletion and retries by itself, or was asked to, or cannot
    /// (credentials): wait (this long, if not the usual), saying so.
    Failing(String, Option<Duration>),
    /// Gardener failed the deletion for good: ask it to retry.
    AskRetry(String),
    /// Gardener allows force deletion and the operator wants it: set the annotation.
    Force(String),
}

/// Decide from the Shoot what deleting it needs next.
pub(crate) fn decide(
    shoot: &DynamicObject,
    force_configured: bool,
    retry_after: Duration,
    now: jiff::Timestamp,
) -> Deletion {
    if shoot.metadata.deletion_timestamp.is_none() {
        let confirm = !labels::is_true(shoot.metadata.annotations.as_ref(), CONFIRM_DELETION);
        return Deletion::Request { confirm };
    }
    let progress = ShootProgress::of(shoot);
    let name = shoot.metadata.name.as_deref().unwrap_or_default();
    let deleting = progress
        .last_operation
        .as_ref()
        .is_some_and(|op| op.type_ == "Delete");
    if !deleting {
        return Deletion::Pending;
    }
    if labels::is_true(shoot.metadata.annotations.as_ref(), FORCE_DELETION) {
        // Asked for already: Gardener force-deletes it.
        return Deletion::Pending;
    }
    let allowed = progress
        .error_codes
        .iter()
        .any(|c| FORCE_DELETION_CODES.contains(&c.as_str()));
    match verdict(&progress, name, retry_requested(shoot), retry_after, now) {
        Verdict::Fatal(message)
        | Verdict::Retry { message, .. }
        | Verdict::GardenerRetries(message)
            if force_configured && allowed =>
        {
            Deletion::Force(message)
        }
        Verdict::Retry {
            message, ask: true, ..
        } => Deletion::AskRetry(message),
        Verdict::Retry { message, wait, .. } => Deletion::Failing(message, Some(wait)),
        // A code Gardener never retries (credentials): retrying would fail again; an
        // operator has to act, the condition says why.
        Verdict::Fatal(message) | Verdict::GardenerRetries(message) => {
            Deletion::Failing(message, None)
        }
        Verdict::Done | Verdict::Working => Deletion::Pending,
    }
}

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let Some(shoot) = find(m).await? else {
        m.condition(
            ConditionType::Deprovisioned,
            ConditionStatus::True,
            Reason::ShootDeleted,
            "the Shoot is gone",
        );
        return Ok(Transition::Next(Step::RemoveFinalizer));
    };
    let name = shoot.metadata.name.clone().unwrap_or_default();
    let owner = takeover::owner(&shoot, &m.runtime, &m.ctx.config.kim);
    if !takeover::claims(owner, &m.runtime, &m.ctx.config.kim) {
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
    let retry = m.ctx.config.requeue.retry;
    let decision = decide(
        &shoot,
        m.ctx.config.force_deletion,
        retry,
        jiff::Timestamp::now(),
    );
    act(m, &shoot, &name, decision).await
}

/// The Shoot the Runtime recorded, else one carrying its labels in the project.
async fn find(m: &mut Machine) -> Result<Option<DynamicObject>, ReconcileError> {
    if let Some(r) = &m.status.shoot {
        let shoot = m.ctx.shoots.get(&r.namespace, &r.name).await?;
        m.gardener_answered = true;
        if shoot.is_some() {
            return Ok(shoot);
        }
    }
    let namespace = m.identity().namespace;
    let selector = shoot_doc::selector(&m.runtime);
    let found = m.ctx.shoots.list(&namespace, &selector).await;
    Ok(found.map_err(ReconcileError::Gardener)?.into_iter().next())
}

async fn act(
    m: &mut Machine,
    shoot: &DynamicObject,
    name: &str,
    decision: Deletion,
) -> Result<Transition, ReconcileError> {
    let (reason, message, wait) = match decision {
        Deletion::Request { confirm } => {
            if confirm {
                m.ctx
                    .shoots
                    .annotate(shoot, &[(CONFIRM_DELETION, Some("true"))])
                    .await?;
            }
            m.ctx.shoots.delete(shoot).await?;
            tracing::info!(runtime = %m.id(), shoot = %name, "Shoot deletion requested");
            let note = format!("Shoot {name} deletion confirmed and requested");
            m.event(EventType::Normal, EventReason::ShootDeleting, note);
            pending(name)
        }
        Deletion::Pending => pending(name),
        Deletion::Failing(message, wait) => (Reason::ShootDeletionFailing, message, wait),
        Deletion::AskRetry(message) => {
            tracing::info!(runtime = %m.id(), shoot = %name, "asking Gardener to retry the deletion");
            let retry = [(OPERATION_ANNOTATION, Some("retry"))];
            m.ctx.shoots.annotate(shoot, &retry).await?;
            let message = format!("{message}; asked Gardener to retry");
            m.event(EventType::Warning, EventReason::Retrying, message.clone());
            (
                Reason::ShootDeletionFailing,
                message,
                Some(m.ctx.config.requeue.retry),
            )
        }
        Deletion::Force(message) => {
            m.ctx
                .shoots
                .annotate(shoot, &[(FORCE_DELETION, Some("true"))])
                .await?;
            let note = format!("{message}; Gardener allows force deletion: requested");
            m.event(
                EventType::Warning,
                EventReason::ShootForceDeleting,
                note.clone(),
            );
            (Reason::ShootForceDeletion, note, None)
        }
    };
    m.condition(
        ConditionType::Deprovisioned,
        ConditionStatus::Unknown,
        reason,
        message,
    );
    let wait = wait.unwrap_or(m.ctx.config.requeue.pending);
    Ok(Transition::Stop(Action::requeue(wait)))
}

fn pending(name: &str) -> (Reason, String, Option<Duration>) {
    (
        Reason::ShootDeletionPending,
        format!("waiting for Gardener to delete Shoot {name}"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RETRY: Duration = Duration::from_secs(30);

    fn shoot(
        deleting: bool,
        state: &str,
        codes: &[&str],
        annotations: serde_json::Value,
    ) -> DynamicObject {
        let mut doc = json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "s", "namespace": "garden-p", "generation": 2, "annotations": annotations},
            "status": {
                "observedGeneration": 2,
                "lastOperation": {"type": "Delete", "state": state, "progress": 40,
                    "description": "deleting", "lastUpdateTime": "2026-01-01T00:00:00Z"},
                "lastErrors": [{"description": "hanging", "codes": codes}],
            },
        });
        if deleting {
            doc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(doc).unwrap()
    }

    fn now() -> jiff::Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_shoot_not_yet_deleted_is_confirmed_then_deleted_never_forced() {
        let plain = shoot(false, "Succeeded", &[], json!({}));
        assert_eq!(
            decide(&plain, true, RETRY, now()),
            Deletion::Request { confirm: true }
        );
        let confirmed = shoot(false, "Succeeded", &[], json!({CONFIRM_DELETION: "true"}));
        assert_eq!(
            decide(&confirmed, true, RETRY, now()),
            Deletion::Request { confirm: false }
        );
    }

    #[test]
    fn force_deletion_only_when_gardener_allows_it_and_the_operator_wants_it() {
        let allowed = shoot(
            true,
            "Failed",
            &["ERR_CLEANUP_CLUSTER_RESOURCES"],
            json!({}),
        );
        assert!(
            matches!(decide(&allowed, true, RETRY, now()), Deletion::Force(m) if m.contains("ERR_CLEANUP_CLUSTER_RESOURCES"))
        );
        // Not configured: ask Gardener to retry instead.
        assert!(matches!(
            decide(&allowed, false, RETRY, now()),
            Deletion::AskRetry(_)
        ));
        // A code Gardener does not force-delete for: never forced.
        let quota = shoot(true, "Failed", &["ERR_INFRA_QUOTA_EXCEEDED"], json!({}));
        assert!(matches!(
            decide(&quota, true, RETRY, now()),
            Deletion::AskRetry(_)
        ));
        // Credentials: neither forced (not configured) nor retried, reported.
        let unauthorized = shoot(true, "Failed", &["ERR_INFRA_UNAUTHORIZED"], json!({}));
        assert!(
            matches!(decide(&unauthorized, false, RETRY, now()), Deletion::Failing(m, None) if m.contains("ERR_INFRA_UNAUTHORIZED"))
        );
        // Already forced: wait for Gardener.
        let forced = shoot(
            true,
            "Failed",
            &["ERR_INFRA_DEPENDENCIES"],
            json!({FORCE_DELETION: "true"}),
        );
        assert!(!matches!(
            decide(&forced, true, RETRY, now()),
            Deletion::Force(_)
        ));
    }

    #[test]
    fn an_error_gardener_retries_is_reported_with_its_codes() {
        let error = shoot(
            true,
            "Error",
            &["ERR_RETRYABLE_INFRA_DEPENDENCIES"],
            json!({}),
        );
        assert!(
            matches!(decide(&error, false, RETRY, now()), Deletion::Failing(m, None) if m.contains("ERR_RETRYABLE_INFRA_DEPENDENCIES"))
        );
        let processing = shoot(true, "Processing", &[], json!({}));
        assert_eq!(decide(&processing, true, RETRY, now()), Deletion::Pending);
    }
}

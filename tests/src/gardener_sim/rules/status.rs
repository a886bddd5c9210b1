//! The gardenlet's `status.lastOperation` (§11.3): Error vs Failed, and the descriptions
//! of starting, succeeding and failing operations.

use super::gofmt::q;

/// gardener pkg/api/core/v1beta1/helper/errors.go `HasNonRetryableErrorCode`: the codes after
/// which the gardenlet does not retry.
const NON_RETRYABLE: [&str; 7] = [
    "ERR_INFRA_UNAUTHENTICATED",
    "ERR_INFRA_UNAUTHORIZED",
    "ERR_INFRA_DEPENDENCIES",
    "ERR_INFRA_QUOTA_EXCEEDED",
    "ERR_INFRA_RATE_LIMITS_EXCEEDED",
    "ERR_CONFIGURATION_PROBLEM",
    "ERR_PROBLEMATIC_WEBHOOK",
];

/// gardener pkg/gardenlet/controller/shoot/shoot/reconciler.go `patchShootStatusOperationError`:
/// `("Failed", description)` if a code is non-retryable or the retry window (default 12h) is
/// over, else `("Error", description + " Operation will be retried.")`.
pub fn failed_attempt(
    codes: &[String],
    description: &str,
    retry_window_over: bool,
) -> (&'static str, String) {
    let will_not_retry =
        retry_window_over || codes.iter().any(|c| NON_RETRYABLE.contains(&c.as_str()));
    match will_not_retry {
        true => ("Failed", description.to_string()),
        false => ("Error", format!("{description} Operation will be retried.")),
    }
}

/// gardener pkg/gardenlet/controller/shoot/shoot/reconciler.go `updateShootStatusOperationStart`:
/// the description of an operation (`Create`, `Reconcile`, `Delete`, `Restore`, `Migrate`)
/// that starts.
pub fn start_description(operation_type: &str) -> Option<&'static str> {
    match operation_type {
        "Create" | "Reconcile" => Some("Reconciliation of Shoot cluster initialized."),
        "Restore" => Some("Restoration of Shoot cluster initialized."),
        "Migrate" => Some("Preparation of Shoot cluster for migration initialized."),
        "Delete" => Some("Deletion of Shoot cluster in progress."),
        _ => None,
    }
}

/// gardener pkg/gardenlet/controller/shoot/shoot/reconciler.go `patchShootStatusOperationSuccess`:
/// the description of an operation that succeeded.
pub fn success_description(operation_type: &str) -> Option<&'static str> {
    match operation_type {
        "Create" | "Reconcile" => Some("Shoot cluster has been successfully reconciled."),
        "Migrate" => Some("Shoot cluster has been successfully prepared for migration."),
        "Restore" => Some("Shoot cluster has been successfully restored."),
        "Delete" => Some("Shoot cluster has been successfully deleted."),
        _ => None,
    }
}

/// gardener pkg/utils/flow/flow.go `flowFailed.Error` + v1beta1/helper `FormatLastErrDescription`:
/// `Flow "<flow>" encountered task errors: [task "<id>" failed: <cause> …]` for the failed
/// `(task id, cause)` pairs; the flow of `Create`/`Reconcile` is `Shoot cluster
/// reconciliation`, of `Delete` `Shoot cluster deletion`. Each pair's `lastErrors[]`
/// description is its `task "<id>" failed: <cause>`.
pub fn flow_failure_description(operation_type: &str, tasks: &[(&str, &str)]) -> String {
    let flow = match operation_type {
        "Delete" => "Shoot cluster deletion",
        "Restore" => "Shoot cluster restoration",
        "Migrate" => "Shoot cluster preparation for migration",
        _ => "Shoot cluster reconciliation",
    };
    let errs: Vec<String> = tasks
        .iter()
        .map(|(id, cause)| format!("task {} failed: {cause}", q(id)))
        .collect();
    format!(
        "Flow {} encountered task errors: [{}]",
        q(flow),
        errs.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_vs_failed() {
        let retryable = vec!["ERR_INFRA_RESOURCES_DEPLETED".to_string()];
        assert_eq!(
            failed_attempt(&retryable, "Flow x.", false),
            ("Error", "Flow x. Operation will be retried.".to_string())
        );
        assert_eq!(failed_attempt(&[], "d", false).0, "Error");
        assert_eq!(
            failed_attempt(&retryable, "d", true),
            ("Failed", "d".to_string())
        );
        let fatal = vec!["ERR_INFRA_UNAUTHORIZED".to_string()];
        assert_eq!(
            failed_attempt(&fatal, "d", false),
            ("Failed", "d".to_string())
        );
    }

    #[test]
    fn descriptions() {
        assert_eq!(
            start_description("Delete"),
            Some("Deletion of Shoot cluster in progress.")
        );
        assert_eq!(
            success_description("Create"),
            Some("Shoot cluster has been successfully reconciled.")
        );
        assert_eq!(
            flow_failure_description("Reconcile", &[("deployInfrastructure", "boom")]),
            "Flow \"Shoot cluster reconciliation\" encountered task errors: [task \"deployInfrastructure\" failed: boom]"
        );
    }
}

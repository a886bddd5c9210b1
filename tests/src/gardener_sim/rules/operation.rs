//! The operation annotations `gardener.cloud/operation` and
//! `maintenance.gardener.cloud/operation` (O1).

use serde_json::Value;

use super::errors::{FieldError, forbidden, not_supported};
use super::gofmt::q;
use super::obj::{annotation, k8s_version};
use super::versions::below;

const OPERATION: &str = "gardener.cloud/operation";
const MAINTENANCE_OPERATION: &str = "maintenance.gardener.cloud/operation";

/// `availableShootOperations` as `sets.List` orders it.
const AVAILABLE: [&str; 20] = [
    "force-in-place-update",
    "maintain",
    "reconcile",
    "retry",
    "rollout-workers",
    "rotate-ca-complete",
    "rotate-ca-start",
    "rotate-ca-start-without-workers-rollout",
    "rotate-credentials-complete",
    "rotate-credentials-start",
    "rotate-credentials-start-without-workers-rollout",
    "rotate-etcd-encryption-key",
    "rotate-etcd-encryption-key-complete",
    "rotate-etcd-encryption-key-start",
    "rotate-observability-credentials",
    "rotate-rollout-workers",
    "rotate-serviceaccount-key-complete",
    "rotate-serviceaccount-key-start",
    "rotate-serviceaccount-key-start-without-workers-rollout",
    "rotate-ssh-keypair",
];

/// The operations that may not run together with others (all others are in
/// `availableShootOperationsToRunInParallel`).
const ALONE: [&str; 3] = ["force-in-place-update", "maintain", "retry"];

/// `incompatibleShootOperations`.
const INCOMPATIBLE: [(&str, &[&str]); 5] = [
    (
        "rotate-credentials-start",
        &[
            "rotate-ca-start-without-workers-rollout",
            "rotate-serviceaccount-key-start-without-workers-rollout",
            "rotate-credentials-start-without-workers-rollout",
        ],
    ),
    (
        "rotate-credentials-start-without-workers-rollout",
        &["rotate-ca-start", "rotate-serviceaccount-key-start"],
    ),
    (
        "rotate-ca-start",
        &["rotate-ca-start-without-workers-rollout"],
    ),
    (
        "rotate-serviceaccount-key-start",
        &["rotate-serviceaccount-key-start-without-workers-rollout"],
    ),
    (
        "rotate-etcd-encryption-key",
        &["rotate-etcd-encryption-key-start"],
    ),
];

/// gardener pkg/utils/miscellaneous.go `SplitAndTrimString(value, ";")` (empty items kept).
fn operations(shoot: &Value, key: &str) -> Vec<String> {
    match annotation(shoot, key) {
        None | Some("") => Vec::new(),
        Some(v) => v.split(';').map(|s| s.trim().to_string()).collect(),
    }
}

/// `rotate-rollout-workers=…` / `rollout-workers=…` (prefix match, as Gardener checks them).
fn rollout(op: &str) -> bool {
    op.starts_with("rotate-rollout-workers") || op.starts_with("rollout-workers")
}

/// gardener pkg/api/core/validation/shoot.go `validateShootOperation`: the first unknown
/// operation (NotSupported), else the first one that may not run in
/// parallel with others (Forbidden) — Gardener returns at once with that single error.
fn first_refusal(ops: &[String], path: &str) -> Option<FieldError> {
    for op in ops {
        if !AVAILABLE.contains(&op.as_str()) && !rollout(op) {
            return Some(not_supported(path, q(op), &AVAILABLE, "O1"));
        }
        if ops.len() > 1 && ALONE.contains(&op.as_str()) {
            let msg = format!(
                "operation '{op}' is not permitted to be run in parallel with other operations"
            );
            return Some(forbidden(path, msg, "O1"));
        }
    }
    None
}

/// gardener pkg/api/core/validation/shoot.go `validateShootOperation`: the per-operation
/// checks: no etcd start/complete from 1.34, no incompatible pairs.
fn combination_errors(
    ops: &[String],
    path: &str,
    op_path: &str,
    k8s_below_134: bool,
    suffix: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for op in ops {
        if matches!(
            op.as_str(),
            "rotate-etcd-encryption-key-start" | "rotate-etcd-encryption-key-complete"
        ) && !k8s_below_134
        {
            let msg = format!(
                "for Kubernetes versions >= 1.34, operation '{op}' is no longer supported, please use 'rotate-etcd-encryption-key' instead, which performs a complete etcd encryption key rotation"
            );
            errs.push(forbidden(op_path, msg, "O1"));
        }
        let clash = INCOMPATIBLE.iter().find(|(o, _)| o == op);
        if let Some((_, others)) =
            clash.filter(|(_, others)| others.iter().any(|x| ops.iter().any(|o| o == x)))
        {
            let msg = format!(
                "operation '{op}' is not permitted to be run together with {} {suffix}",
                others.join(", ")
            );
            errs.push(forbidden(path, msg, "O1"));
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateShootOperation` (O1): only known
/// operations, `maintain`/`retry`/`force-in-place-update` alone, no operation in both
/// annotations, no etcd start/complete from 1.34, no incompatible rotations together. (The
/// context checks of `validateShootOperationContext` — rotation phases, pool names — are
/// not simulated.)
pub(crate) fn validate(shoot: &Value) -> Vec<FieldError> {
    let op_path = format!("metadata.annotations[{OPERATION}]");
    let maint_path = format!("metadata.annotations[{MAINTENANCE_OPERATION}]");
    let (ops, maint) = (
        operations(shoot, OPERATION),
        operations(shoot, MAINTENANCE_OPERATION),
    );
    if let Some(e) = first_refusal(&ops, &op_path).or_else(|| first_refusal(&maint, &maint_path)) {
        return vec![e];
    }
    let mut errs = Vec::new();
    if ops.iter().any(|o| maint.contains(o)) {
        let msg =
            format!("annotations {op_path} and {maint_path} must not have any equal operations");
        errs.push(forbidden("metadata.annotations", msg, "O1"));
    }
    let k8s_below_134 = below(k8s_version(shoot), 1, 34);
    errs.extend(combination_errors(
        &ops,
        &op_path,
        &op_path,
        k8s_below_134,
        "operations",
    ));
    errs.extend(combination_errors(
        &maint,
        &maint_path,
        &op_path,
        k8s_below_134,
        "maintenance operations",
    ));
    errs
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::json;

    fn op(value: &str) -> serde_json::Value {
        with(
            shoot(),
            "/metadata/annotations",
            json!({"gardener.cloud/operation": value}),
        )
    }

    #[test]
    fn o1_unknown_operation() {
        let r = refused(create(&op("migrate")));
        assert_eq!(r.code, 422);
        assert!(r.message.starts_with(
            "Shoot.core.gardener.cloud \"s\" is invalid: metadata.annotations[gardener.cloud/operation]: Unsupported value: \"migrate\": supported values: \"force-in-place-update\", \"maintain\", \"reconcile\", \"retry\", \"rollout-workers\", "
        ));
        assert!(r.message.ends_with("\"rotate-ssh-keypair\""));
        assert_eq!(r.rules, vec!["O1"]);
        assert_eq!(create(&op("reconcile")), Ok(()));
        assert_eq!(create(&op("rotate-ssh-keypair;reconcile")), Ok(()));
    }

    #[test]
    fn o1_not_in_parallel() {
        let r = refused(create(&op("reconcile;retry")));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: metadata.annotations[gardener.cloud/operation]: Forbidden: operation 'retry' is not permitted to be run in parallel with other operations"
        );
    }

    #[test]
    fn o1_etcd_start_from_134() {
        let errs = super::validate(&op("rotate-etcd-encryption-key-start"));
        assert_eq!(
            errs[0].message(),
            "metadata.annotations[gardener.cloud/operation]: Forbidden: for Kubernetes versions >= 1.34, operation 'rotate-etcd-encryption-key-start' is no longer supported, please use 'rotate-etcd-encryption-key' instead, which performs a complete etcd encryption key rotation"
        );
        let old = with(
            op("rotate-etcd-encryption-key-start"),
            "/spec/kubernetes/version",
            json!("1.33.5"),
        );
        assert!(super::validate(&old).is_empty());
    }
}

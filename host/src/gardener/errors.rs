//! Gardener error codes, classified as KIM does.

/// What the host does about a failed Gardener operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// Ask Gardener to retry.
    Retryable,
    /// Give up: the Runtime becomes `Failed` until its spec changes.
    Fatal,
}

const NEVER_RETRY: &[&str] = &["ERR_INFRA_UNAUTHENTICATED", "ERR_INFRA_UNAUTHORIZED"];
/// The codes whose presence in `status.lastErrors` lets a Shoot being deleted carry the
/// force-deletion annotation (gardener pkg/api/core/validation/shoot.go
/// `ValidateForceDeletion`).
pub(crate) const FORCE_DELETION_CODES: [&str; 5] = [
    "ERR_INFRA_UNAUTHENTICATED",
    "ERR_INFRA_UNAUTHORIZED",
    "ERR_INFRA_DEPENDENCIES",
    "ERR_CLEANUP_CLUSTER_RESOURCES",
    "ERR_CONFIGURATION_PROBLEM",
];

/// Classify the codes of a `Failed` operation's `lastErrors` (Gardener gave up: a code it
/// never retries, or its retry window is over), as KIM does: a never-retry code wins over
/// everything; anything else is worth asking Gardener to retry. (`lastErrors` carry no
/// `retryable` field: gardener pkg/apis/core/v1beta1/types_common.go `LastError`.)
pub(crate) fn classify_codes<'a>(codes: impl IntoIterator<Item = &'a str>) -> ErrorClass {
    let codes: Vec<&str> = codes.into_iter().collect();
    if codes.iter().any(|c| NEVER_RETRY.contains(c)) {
        return ErrorClass::Fatal;
    }
    ErrorClass::Retryable
}

/// How a request to Gardener failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GardenerFailure {
    /// No usable answer: connection failures, 404 (the Shoot API is not there), 5xx, 429.
    Down,
    /// Gardener answered and refused this request (validation, admission, permissions).
    Rejected,
}

impl GardenerFailure {
    /// Both, for metrics that start every combination at zero.
    pub(crate) const ALL: [Self; 2] = [Self::Down, Self::Rejected];

    /// The word `tessera_gardener_errors_total` labels the failure with.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Down => "unavailable",
            Self::Rejected => "rejected",
        }
    }
}

pub(crate) fn gardener_failure(e: &kube::Error) -> GardenerFailure {
    match crate::api::status(e) {
        Some(code) if (400..500).contains(&code) && code != 404 && code != 429 => {
            GardenerFailure::Rejected
        }
        _ => GardenerFailure::Down,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::api::answered as api;

    #[test]
    fn a_missing_or_failing_shoot_api_is_gardener_down() {
        for code in [404, 429, 500, 503] {
            assert_eq!(
                gardener_failure(&api(code)),
                GardenerFailure::Down,
                "{code}"
            );
        }
    }

    #[test]
    fn a_refusal_of_the_shoot_is_a_rejection() {
        for code in [400, 403, 422] {
            assert_eq!(
                gardener_failure(&api(code)),
                GardenerFailure::Rejected,
                "{code}"
            );
        }
    }

    /// Codes KIM always retries: with no never-retry code beside them they are retried.
    const ALWAYS_RETRY: &[&str] = &[
        "ERR_INFRA_RATE_LIMITS_EXCEEDED",
        "ERR_INFRA_QUOTA_EXCEEDED",
        "ERR_INFRA_DEPENDENCIES",
        "ERR_CONFIGURATION_PROBLEM",
        "ERR_PROBLEMATIC_WEBHOOK",
    ];

    #[test]
    fn classification_follows_kim() {
        use ErrorClass::*;
        assert_eq!(classify_codes(["ERR_INFRA_UNAUTHORIZED"]), Fatal);
        assert_eq!(classify_codes(["ERR_INFRA_UNAUTHENTICATED"]), Fatal);
        assert_eq!(
            classify_codes(["ERR_INFRA_QUOTA_EXCEEDED", "ERR_INFRA_UNAUTHORIZED"]),
            Fatal
        );
        for code in ALWAYS_RETRY {
            assert_eq!(classify_codes([*code]), Retryable, "{code}");
        }
        assert_eq!(classify_codes(["ERR_SOMETHING_ELSE"]), Retryable);
        assert_eq!(classify_codes([]), Retryable);
    }
}

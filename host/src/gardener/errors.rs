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
const ALWAYS_RETRY: &[&str] = &[
    "ERR_INFRA_RATE_LIMITS_EXCEEDED",
    "ERR_INFRA_QUOTA_EXCEEDED",
    "ERR_INFRA_DEPENDENCIES",
    "ERR_CONFIGURATION_PROBLEM",
    "ERR_PROBLEMATIC_WEBHOOK",
];
/// Classify the codes of a failed operation's `lastErrors`. A never-retry code wins over
/// everything; then an always-retry code; otherwise retry unless Gardener marked an error
/// `retryable: false` (`gardener_non_retryable`).
pub(crate) fn classify_codes<'a>(
    codes: impl IntoIterator<Item = &'a str>,
    gardener_non_retryable: bool,
) -> ErrorClass {
    let codes: Vec<&str> = codes.into_iter().collect();
    if codes.iter().any(|c| NEVER_RETRY.contains(c)) {
        return ErrorClass::Fatal;
    }
    if codes.iter().any(|c| ALWAYS_RETRY.contains(c)) {
        return ErrorClass::Retryable;
    }
    if gardener_non_retryable {
        ErrorClass::Fatal
    } else {
        ErrorClass::Retryable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_kim() {
        use ErrorClass::*;
        assert_eq!(classify_codes(["ERR_INFRA_UNAUTHORIZED"], false), Fatal);
        assert_eq!(classify_codes(["ERR_INFRA_UNAUTHENTICATED"], false), Fatal);
        assert_eq!(
            classify_codes(
                ["ERR_INFRA_QUOTA_EXCEEDED", "ERR_INFRA_UNAUTHORIZED"],
                false
            ),
            Fatal
        );
        for code in ALWAYS_RETRY {
            assert_eq!(classify_codes([*code], true), Retryable, "{code}");
        }
        assert_eq!(classify_codes(["ERR_SOMETHING_ELSE"], false), Retryable);
        assert_eq!(classify_codes([], false), Retryable);
        assert_eq!(classify_codes(["ERR_SOMETHING_ELSE"], true), Fatal);
    }
}

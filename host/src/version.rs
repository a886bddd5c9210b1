//! The one version type: plugin and module versions are semver, written with or without a
//! leading `v` (`v1.2.0` and `1.2.0` are the same version).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A semver version, parsed leniently about a leading `v`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(semver::Version);

/// A version that is not semver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a semantic version (like 1.2.3 or v1.2.3): {reason}")]
pub struct VersionError {
    text: String,
    reason: String,
}

impl FromStr for Version {
    type Err = VersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let bare = trimmed.strip_prefix(['v', 'V']).unwrap_or(trimmed);
        semver::Version::parse(bare)
            .map(Self)
            .map_err(|e| VersionError {
                text: text.to_string(),
                reason: e.to_string(),
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How `candidate` compares with `applied` when both are versions (`None` otherwise).
pub fn compare(candidate: &str, applied: &str) -> Option<Ordering> {
    let candidate: Version = candidate.parse().ok()?;
    let applied: Version = applied.parse().ok()?;
    Some(candidate.cmp(&applied))
}

/// Whether moving from `applied` to `candidate` is a downgrade. Text that is not a version
/// never is: the guard cannot judge it, and refusing would block every such plugin.
pub fn is_downgrade(applied: &str, candidate: &str) -> bool {
    compare(candidate, applied) == Some(Ordering::Less)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_v_is_the_same_version() {
        assert_eq!(compare("v1.2.0", "1.2.0"), Some(Ordering::Equal));
        assert!(is_downgrade("v1.2.0", "1.1.0"));
        assert!(is_downgrade("1.2.0", "v1.1.0"));
        assert!(!is_downgrade("v1.1.0", "1.2.0"));
    }

    #[test]
    fn versions_compare_as_semver_not_as_text() {
        assert!(is_downgrade("1.10.0", "1.9.0"));
        assert!(is_downgrade("1.0.0", "1.0.0-rc.1"));
        assert!(!is_downgrade("1.0.0", "1.0.0"));
    }

    #[test]
    fn text_that_is_no_version_is_never_a_downgrade_and_says_why() {
        assert!(!is_downgrade("latest", "1.0.0"));
        assert_eq!(compare("1.0", "1.0.0"), None);
        let err = "main".parse::<Version>().unwrap_err().to_string();
        assert!(err.contains("\"main\" is not a semantic version"), "{err}");
    }
}

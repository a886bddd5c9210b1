//! The one rotation decision for the credentials the host issues and keeps fresh (a
//! Runtime's admin kubeconfig, a RuntimeAccess's token): one clamp of the fraction, one
//! floor, one reading of "due".

use std::time::Duration;

use jiff::Timestamp;

/// The fraction of a lifetime after which a credential is replaced is kept within 1 %..95 %:
/// a misconfiguration neither spins nor lets a credential expire before its replacement.
const FRACTION: (f64, f64) = (0.01, 0.95);

/// No rotation sooner than this after the last: a lifetime that is gone already (a clock
/// off by more than it) must not rotate every second.
const MIN_ROTATION: Duration = Duration::from_secs(5);

/// No requeue sooner than this, however little is left.
const MIN_WAIT: Duration = Duration::from_secs(1);

/// Whether to replace a credential now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rotation {
    Rotate,
    /// Fresh: come back when it is due.
    Wait(Duration),
}

/// How long after it was issued a credential living `lifetime` is replaced: `fraction`
/// of it (clamped), never sooner than [`MIN_ROTATION`].
pub(crate) fn rotate_after(lifetime: Duration, fraction: f64) -> Duration {
    lifetime
        .mul_f64(fraction.clamp(FRACTION.0, FRACTION.1))
        .max(MIN_ROTATION)
}

/// Rotate a credential issued at `issued` (never: `None`) living `lifetime` when it is
/// `stale` (forced by the annotation, missing, or for an older spec) or [`rotate_after`]
/// has passed since it was issued; else wait for that, at least [`MIN_WAIT`].
pub(crate) fn rotation(
    issued: Option<Timestamp>,
    lifetime: Duration,
    stale: bool,
    now: Timestamp,
    fraction: f64,
) -> Rotation {
    let Some(issued) = issued else {
        return Rotation::Rotate;
    };
    let age = Duration::try_from(now.duration_since(issued)).unwrap_or_default();
    let after = rotate_after(lifetime, fraction);
    if stale || age >= after {
        return Rotation::Rotate;
    }
    Rotation::Wait((after - age).max(MIN_WAIT))
}

/// When to look again after issuing a credential that lives `lifetime` (as granted).
pub(crate) fn after_issue(lifetime: Duration, fraction: f64) -> Duration {
    rotate_after(lifetime, fraction).max(MIN_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn at(hours: i64) -> Timestamp {
        "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap()
            + jiff::SignedDuration::from_hours(hours)
    }

    #[test]
    fn the_fraction_is_kept_between_one_and_ninety_five_percent() {
        assert_eq!(rotate_after(24 * HOUR, 0.5), 12 * HOUR);
        assert_eq!(rotate_after(100 * HOUR, 0.0), HOUR);
        assert_eq!(rotate_after(100 * HOUR, 2.0), 95 * HOUR);
        assert_eq!(rotate_after(Duration::ZERO, 0.57), MIN_ROTATION);
    }

    #[test]
    fn a_credential_is_replaced_once_due_and_waited_for_until_then() {
        let lifetime = 24 * HOUR;
        assert_eq!(
            rotation(None, lifetime, false, at(0), 0.5),
            Rotation::Rotate
        );
        assert_eq!(
            rotation(Some(at(0)), lifetime, false, at(3), 0.5),
            Rotation::Wait(9 * HOUR)
        );
        assert_eq!(
            rotation(Some(at(0)), lifetime, false, at(12), 0.5),
            Rotation::Rotate
        );
        assert_eq!(after_issue(lifetime, 0.5), 12 * HOUR);
    }

    #[test]
    fn a_stale_credential_is_replaced_at_once() {
        assert_eq!(
            rotation(Some(at(0)), 24 * HOUR, true, at(0), 0.5),
            Rotation::Rotate
        );
    }

    #[test]
    fn a_credential_from_the_future_waits_its_whole_period() {
        // A clock behind the issuer's: the age reads as zero, not as negative.
        assert_eq!(
            rotation(Some(at(1)), 24 * HOUR, false, at(0), 0.5),
            Rotation::Wait(12 * HOUR)
        );
    }
}

//! Maintenance windows: when a module version marked as needing downtime may be installed.
//! Daily windows in UTC from the operator's file (`tessera run --maintenance-windows`), per
//! ModuleSet, else per target region, else the default.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::civil::Time;
use jiff::{Timestamp, ToSpan, tz::TimeZone};
use serde::Deserialize;

/// One daily window, `begin` to `end` in UTC; `end` before `begin` spans midnight.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// `HH:MM` or `HH:MM:SS`, UTC.
    #[serde(deserialize_with = "time_of_day")]
    pub begin: Time,
    #[serde(deserialize_with = "time_of_day")]
    pub end: Time,
}

fn time_of_day<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(|e| {
        serde::de::Error::custom(format!("{text:?} is not a time of day (HH:MM[:SS]): {e}"))
    })
}

/// The operator's windows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceWindows {
    /// For targets without a more specific entry.
    #[serde(default)]
    pub default: Vec<Window>,
    /// By the target's region (`spec.target.region`).
    #[serde(default)]
    pub regions: BTreeMap<String, Vec<Window>>,
    /// By ModuleSet, `namespace/name`.
    #[serde(default)]
    pub sets: BTreeMap<String, Vec<Window>>,
}

/// Whether a downtime upgrade may run now, and if not, how long until it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    Open,
    /// Closed; the next window opens at this time.
    Closed {
        opens: Timestamp,
    },
}

impl MaintenanceWindows {
    /// Read and check the windows file (YAML).
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The windows of set `set` with a target in `region`: the set's, else the region's,
    /// else the default. None at all: always open.
    fn for_set(&self, set: &str, region: Option<&str>) -> &[Window] {
        if let Some(w) = self.sets.get(set) {
            return w;
        }
        match region.and_then(|r| self.regions.get(r)) {
            Some(w) => w,
            None => &self.default,
        }
    }

    /// Whether set `set` (target in `region`) is in a window at `now`.
    pub fn at(&self, set: &str, region: Option<&str>, now: Timestamp) -> Maintenance {
        let windows = self.for_set(set, region);
        if windows.is_empty() {
            return Maintenance::Open;
        }
        let now_utc = now.to_zoned(TimeZone::UTC);
        let time = now_utc.time();
        if windows.iter().any(|w| w.contains(time)) {
            return Maintenance::Open;
        }
        let today = now_utc.date();
        let opens = windows
            .iter()
            .map(|w| {
                let day = if w.begin > time {
                    today
                } else {
                    today + 1.day()
                };
                day.to_datetime(w.begin)
                    .to_zoned(TimeZone::UTC)
                    .expect("a UTC time")
                    .timestamp()
            })
            .min()
            .expect("at least one window");
        Maintenance::Closed { opens }
    }
}

impl Maintenance {
    /// How long from `now` until it opens (zero when open).
    pub fn opens_in(&self, now: Timestamp) -> Duration {
        match self {
            Maintenance::Open => Duration::ZERO,
            Maintenance::Closed { opens } => {
                Duration::try_from(opens.duration_since(now)).unwrap_or_default()
            }
        }
    }
}

impl Window {
    fn contains(&self, t: Time) -> bool {
        if self.begin <= self.end {
            self.begin <= t && t < self.end
        } else {
            t >= self.begin || t < self.end
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(yaml: &str) -> MaintenanceWindows {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_sets_window_wins_over_the_regions_over_the_default() {
        let w = windows(
            "default: [{begin: '02:00', end: '04:00'}]\n\
             regions: {eu: [{begin: '10:00', end: '11:00'}]}\n\
             sets: {ns/a: [{begin: '20:00', end: '21:00'}]}\n",
        );
        let noon_past_ten = at("2026-11-24T10:30:00Z");
        assert_eq!(w.at("ns/b", Some("eu"), noon_past_ten), Maintenance::Open);
        let closed = w.at("ns/a", Some("eu"), noon_past_ten);
        assert_eq!(
            closed,
            Maintenance::Closed {
                opens: at("2026-11-24T20:00:00Z")
            }
        );
        assert_eq!(
            w.at("ns/b", None, noon_past_ten),
            Maintenance::Closed {
                opens: at("2026-11-25T02:00:00Z")
            }
        );
        assert_eq!(
            closed.opens_in(noon_past_ten),
            Duration::from_secs(9 * 3600 + 1800)
        );
    }

    #[test]
    fn a_window_may_span_midnight_and_none_means_always_open() {
        let w = windows("default: [{begin: '23:00', end: '01:00:30'}]\n");
        assert_eq!(
            w.at("s", None, at("2026-11-24T00:30:00Z")),
            Maintenance::Open
        );
        assert_eq!(
            w.at("s", None, at("2026-11-24T23:30:00Z")),
            Maintenance::Open
        );
        assert!(matches!(
            w.at("s", None, at("2026-11-24T01:00:31Z")),
            Maintenance::Closed { .. }
        ));
        assert_eq!(
            MaintenanceWindows::default().at("s", None, at("2026-11-24T12:00:00Z")),
            Maintenance::Open
        );
        assert!(
            serde_saphyr::from_str::<MaintenanceWindows>(
                "default: [{begin: '25:00', end: '01:00'}]"
            )
            .is_err()
        );
    }
}

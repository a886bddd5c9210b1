//! In what order and how many at once a set's modules run: waves by dependency, and within
//! a wave the set's first module always plus more from the host-wide pool of spare runs
//! (a deliberate process-wide budget: plugin instances in memory at once).

use std::collections::{BTreeMap, HashSet};

/// How many modules of one set reconcile at once (within a wave of independent modules).
pub(super) const MODULES_AT_ONCE: usize = 4;

/// Module runs beyond each set's first that may go on at once in the whole host. Running a
/// set's modules side by side shortens that set's pass; on a busy host it only adds
/// plugin instances in memory at once (measured: 1,000 sets × 5 modules peaked at 759 MiB
/// with four per set and no host-wide bound, 298 MiB one at a time), so the extra runs
/// come from this pool and a set runs its modules one after another when it is empty.
const SPARE_RUNS: usize = 8;

static SPARE: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(SPARE_RUNS));

/// How many of the modules `left` (independent of each other) run together now: the first,
/// and as many more (up to [`MODULES_AT_ONCE`]) as spare runs are free; with their permits.
pub(super) fn together(left: &[String]) -> (usize, Vec<tokio::sync::SemaphorePermit<'static>>) {
    let wanted = left.len().min(MODULES_AT_ONCE).saturating_sub(1);
    let permits: Vec<_> = (0..wanted)
        .map_while(|_| SPARE.try_acquire().ok())
        .collect();
    (1 + permits.len(), permits)
}

/// Modules in waves where each module's dependencies are in earlier waves (a wave's
/// modules may run at once), and the modules that are in (or depend on) a cycle, in a last
/// wave of their own.
pub(super) fn waves(deps: &BTreeMap<String, Vec<String>>) -> (Vec<Vec<String>>, HashSet<String>) {
    let mut done: HashSet<&String> = HashSet::new();
    let mut waves = Vec::new();
    let mut left: Vec<&String> = deps.keys().collect();
    while !left.is_empty() {
        let (wave, rest): (Vec<&String>, Vec<&String>) = left.iter().partition(|name| {
            deps[**name]
                .iter()
                .all(|d| !deps.contains_key(d) || done.contains(d))
        });
        if wave.is_empty() {
            let cyclic: HashSet<String> = rest.iter().map(|s| (*s).clone()).collect();
            waves.push(rest.into_iter().cloned().collect());
            return (waves, cyclic);
        }
        done.extend(wave.iter().copied());
        waves.push(wave.into_iter().cloned().collect());
        left = rest;
    }
    (waves, HashSet::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_runs_its_first_module_always_and_more_from_the_spare_runs() {
        let names: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).into();
        let (batch, permits) = together(&names);
        assert!((1..=MODULES_AT_ONCE).contains(&batch), "{batch}");
        assert_eq!(permits.len(), batch - 1);
        assert_eq!(together(&names[..1]).0, 1);
        // With every spare run taken elsewhere, a set goes one module at a time.
        let held: Vec<_> = std::iter::from_fn(|| SPARE.try_acquire().ok()).collect();
        assert_eq!(together(&names).0, 1);
        drop((held, permits));
    }

    #[test]
    fn dependencies_come_in_earlier_waves_and_cycles_are_found() {
        let deps = |pairs: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            pairs
                .iter()
                .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
                .collect()
        };
        let (order, cyclic) = waves(&deps(&[("a", &["c"]), ("b", &[]), ("c", &["b"])]));
        assert_eq!(order, [vec!["b"], vec!["c"], vec!["a"]]);
        assert!(cyclic.is_empty());
        // Independent modules share a wave; a requirement outside the set does not hold
        // one back (the gate refuses it).
        let (order, _) = waves(&deps(&[
            ("crds", &[]),
            ("dashboard", &[]),
            ("telemetry", &["crds"]),
            ("agent", &["telemetry", "elsewhere"]),
        ]));
        assert_eq!(
            order,
            [vec!["crds", "dashboard"], vec!["telemetry"], vec!["agent"]]
        );
        let (order, cyclic) = waves(&deps(&[("a", &["b"]), ("b", &["a"]), ("c", &[])]));
        assert_eq!(cyclic, HashSet::from(["a".to_string(), "b".to_string()]));
        assert_eq!(order, [vec!["c"], vec!["a", "b"]]);
    }
}

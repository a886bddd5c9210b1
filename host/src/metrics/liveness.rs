//! Liveness as `/healthz` and `tessera_controller_stalled` report it: which controllers
//! have work waiting and made no progress on it (the controllers' watchdog decides).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use prometheus::IntGaugeVec;

/// The controllers that stopped making progress, with why.
#[derive(Debug, Default)]
pub(crate) struct Stalls {
    stalled: Mutex<BTreeMap<&'static str, String>>,
    gauge: OnceLock<IntGaugeVec>,
}

impl Stalls {
    /// `controller` has work waiting that nothing moved; `why` names the object.
    pub(crate) fn stalled(&self, controller: &'static str, why: String) {
        self.set(controller, 1);
        self.stalled
            .lock()
            .expect("stalls lock")
            .insert(controller, why);
    }

    /// `controller` makes progress (or has nothing waiting).
    pub(crate) fn progressing(&self, controller: &'static str) {
        self.set(controller, 0);
        self.stalled.lock().expect("stalls lock").remove(controller);
    }

    /// One line per stalled controller; empty while the host is live.
    pub(crate) fn problems(&self) -> Vec<String> {
        let stalled = self.stalled.lock().expect("stalls lock");
        stalled
            .iter()
            .map(|(c, why)| format!("{c}: {why}"))
            .collect()
    }

    pub(super) fn with_gauge(&self, gauge: IntGaugeVec) {
        let _ = self.gauge.set(gauge);
    }

    fn set(&self, controller: &str, value: i64) {
        if let Some(gauge) = self.gauge.get() {
            gauge.with_label_values(&[controller]).set(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_reported_until_progress() {
        let stalls = Stalls::default();
        assert!(stalls.problems().is_empty());
        stalls.stalled("runtime", "Runtime/ns/a waited 30s".into());
        stalls.stalled("moduleset", "ModuleSet/ns/b waited 40s".into());
        assert_eq!(
            stalls.problems(),
            [
                "moduleset: ModuleSet/ns/b waited 40s",
                "runtime: Runtime/ns/a waited 30s"
            ]
        );
        stalls.progressing("runtime");
        assert_eq!(stalls.problems(), ["moduleset: ModuleSet/ns/b waited 40s"]);
    }
}

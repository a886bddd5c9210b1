//! The harness-less integration tests' runner: one local control plane shared by every
//! scenario of a test binary, each scenario an async function of it, run as libtest-mimic
//! trials (so `cargo test -- NAME` filters as usual).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

use crate::env::{ControlPlane, PlaneOptions};
use crate::gardener_sim::Script;

/// A scenario: an async function of the shared control plane.
pub type Scenario =
    for<'a> fn(&'a ControlPlane) -> Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

/// `scenario!(f)`: the async function `f` as a named [`Scenario`].
#[macro_export]
macro_rules! scenario {
    ($f:ident) => {
        (
            stringify!($f),
            (|cp| Box::pin($f(cp))) as $crate::scenarios::Scenario,
        )
    };
}

/// Start one control plane (simulator binary `sim`, `script`), run `scenarios` on it, and
/// exit with the outcome.
pub fn run(sim: &Path, script: &Script, scenarios: Vec<(&'static str, Scenario)>) -> ! {
    run_with(sim, script, &PlaneOptions::default(), scenarios)
}

/// [`run`] on a control plane started with `options` (a real node, say).
pub fn run_with(
    sim: &Path,
    script: &Script,
    options: &PlaneOptions,
    scenarios: Vec<(&'static str, Scenario)>,
) -> ! {
    let args = Arguments::from_args();
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let shared = match ControlPlane::start_with(sim, script, options) {
        Ok(c) => Arc::new(c),
        Err(e) => panic!("local control plane: {e}"),
    };
    let trials = scenarios
        .into_iter()
        .map(|(name, scenario)| {
            let rt = rt.clone();
            let cp = shared.clone();
            Trial::test(name, move || {
                rt.block_on(scenario(&cp)).map_err(Failed::from)
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(shared);
    conclusion.exit()
}

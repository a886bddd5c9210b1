//! Golden cases for shoot extensions, shared by `cargo test` (native) and
//! `tessera plugin test` (the Wasm build in the host), so both check the same expectations.
//!
//! A case is one YAML file:
//!
//! ```yaml
//! description: AWS, three zones, create
//! operation: create            # or patch; default create
//! runtimeFile: ../../../examples/runtime-aws.yaml   # or `runtime:` inline
//! runtimePatch: {spec: {shoot: {enforceSeedLocation: true}}}   # JSON merge patch, optional
//! draft: {...}                 # or draftFile; default: an empty Shoot
//! currentShoot: {...}          # or currentShootFile; only for patch
//! config: {...}                # the plugin's configuration; default {}
//! expect:
//!   shoot: {...}               # or shootFile: the whole expected Shoot
//!   warnings: [...]            # optional; exact when given
//!   # or
//!   error: {kind: invalid-input, field: spec.shoot.networking.nodes, messageContains: overlaps}
//! ```

mod case;
mod diff;

pub use case::{CaseError, ExpectedError, GoldenCase, load_cases};
pub use diff::{to_yaml, yaml_diff};

use crate::error::PluginError;
use crate::glue::{RawExtendInput, RawExtendOutput, extend_json};
use crate::shoot_extension::ShootExtension;

/// How one execution of a case ended, from the runner's point of view.
#[derive(Debug)]
pub enum Outcome {
    Output(RawExtendOutput),
    /// The plugin returned a `plugin-error`.
    PluginError(PluginError),
    /// The host could not get an answer (trap, timeout, bad output ...).
    HostError(String),
}

/// The result of one case.
#[derive(Debug)]
pub struct CaseResult {
    pub name: String,
    pub description: String,
    /// `None` when the case passed; otherwise a readable explanation (often a diff).
    pub failure: Option<String>,
}

/// Run every case in `dir` through `run` and compare with the expectations.
pub fn run_cases(
    dir: &std::path::Path,
    mut run: impl FnMut(&RawExtendInput) -> Outcome,
) -> Result<Vec<CaseResult>, CaseError> {
    let cases = load_cases(dir)?;
    Ok(cases
        .into_iter()
        .map(|case| {
            let input = case.input();
            let failure = case.check(run(&input));
            CaseResult {
                name: case.name.clone(),
                description: case.description.clone(),
                failure,
            }
        })
        .collect())
}

/// Run the cases of `dir` natively against `P` and panic with every failure's diff.
///
/// With `TESSERA_BLESS=1`, cases whose expectation is a `shootFile` get that file rewritten
/// with the actual output instead (review the diff before committing it).
/// Plugins call this from a `#[test]` (see `tessera_sdk::golden_tests!`).
pub fn assert_golden_cases<P: ShootExtension>(dir: &str) {
    if std::env::var_os("TESSERA_BLESS").is_some() {
        bless::<P>(dir);
    }
    let results = run_cases(std::path::Path::new(dir), |input| {
        match extend_json::<P>(input) {
            Ok(out) => Outcome::Output(out),
            Err(err) => Outcome::PluginError(err),
        }
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert!(!results.is_empty(), "no golden cases in {dir}");
    let failures: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("case {}: {f}", r.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed:\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

fn bless<P: ShootExtension>(dir: &str) {
    let cases = load_cases(std::path::Path::new(dir)).unwrap_or_else(|err| panic!("{err}"));
    for case in cases {
        let Some(path) = &case.expected_shoot_file else {
            continue;
        };
        if let Ok(out) = extend_json::<P>(&case.input()) {
            let shoot: serde_json::Value =
                serde_json::from_str(&out.shoot).expect("plugin output is JSON");
            std::fs::write(path, to_yaml(&shoot)).expect("write snapshot");
        }
    }
}

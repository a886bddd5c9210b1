//! Golden cases for both plugin kinds, shared by `cargo test` (native) and
//! `tessera plugin test` (the Wasm build in the host), so both check the same expectations.
//! Each case is one YAML file in the plugin's `cases/` directory; `TESSERA_BLESS=1` rewrites
//! the snapshot files a case names (`shootFile`, `desiredFile`) with the actual output.
//!
//! A shoot-extension case:
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
//!
//! A module-reconciler case. The runner talks to the plugin as the host does: it answers
//! each requirement from `observed` (no objects when the case lists none for a selector),
//! calls again, at most five times, and checks the last answer:
//!
//! ```yaml
//! description: the CRD is established, so the gateway is rendered
//! call: reconcile              # or delete; default reconcile
//! module: telemetry            # the module's name in the ModuleSet; default the plugin's name
//! version: 1.0.0               # default 1.0.0
//! config: {...}                # the module's configuration; default {}
//! cluster: {kubernetesVersion: 1.20.2, provider: aws, region: eu-central-1}
//! observed:                    # what the cluster holds, per selector the plugin may ask for
//!   - selector: {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: pipelines.telemetry.tessera.dev}
//!     objects: [...]           # or objectsFile
//! expect:
//!   state: Ready               # Ready, Processing, Warning, Error or Deleting
//!   desired: [...]             # or desiredFile; exact, in order (reconcile)
//!   remove: [...]              # selectors (delete)
//!   message: ...               # or messageContains
//!   requeueAfterSeconds: 5
//!   requirements: [...]        # every selector asked for on the way, in order
//!   # or, instead of state:
//!   error: {kind: invalid-input, field: config.endpoint}
//! ```
//! Parts of `expect` that are left out are not checked.

mod case;
mod diff;
mod module_case;

pub use case::{CaseError, ExpectedError, GoldenCase, load_cases};
pub use diff::{to_yaml, yaml_diff, yaml_diff_labelled};
pub use module_case::{
    Conversation, ModuleAnswer, ModuleCall, ModuleCase, ModuleExpectation, ModuleOutcome,
    desired_values, load_module_cases,
};

use crate::error::PluginError;
use crate::glue::{RawExtendInput, RawExtendOutput, extend_json};
use crate::module::{ModuleReconciler, RawModuleInput, delete_json, reconcile_json};
use crate::shoot_extension::ShootExtension;

/// The crate's `cases/` directory, for the test macros. The run-time `CARGO_MANIFEST_DIR`
/// wins over the compile-time one: a build cached from another checkout keeps the
/// compile-time path of that checkout.
pub fn cases_dir(compile_time_manifest_dir: &str) -> String {
    format!("{}/cases", manifest_dir(compile_time_manifest_dir))
}

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
    assert_passed(&results, std::path::Path::new(dir));
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
            case::write_snapshot(dir, &case.name, path, &to_yaml(&shoot))
                .unwrap_or_else(|err| panic!("{err}"));
        }
    }
}

/// Run every module case in `dir` through `call` (one plugin call each time) and compare
/// with the expectations. `plugin` is the plugin's name, the default module name.
pub fn run_module_cases(
    dir: &std::path::Path,
    plugin: &str,
    mut call: impl FnMut(ModuleCall, &RawModuleInput) -> ModuleOutcome,
) -> Result<Vec<CaseResult>, CaseError> {
    Ok(load_module_cases(dir)?
        .into_iter()
        .map(|case| {
            let conversation = case.converse(plugin, &mut call);
            CaseResult {
                failure: case.check(&conversation),
                name: case.name,
                description: case.description,
            }
        })
        .collect())
}

/// A module reconciler called natively, as the Wasm export calls it.
pub fn call_module_natively<P: ModuleReconciler>(
    call: ModuleCall,
    input: &RawModuleInput,
) -> ModuleOutcome {
    let answer = match call {
        ModuleCall::Reconcile => reconcile_json::<P>(input.clone()).map(ModuleAnswer::Reconcile),
        ModuleCall::Delete => delete_json::<P>(input.clone()).map(ModuleAnswer::Delete),
    };
    match answer {
        Ok(answer) => ModuleOutcome::Answer(answer),
        Err(err) => ModuleOutcome::PluginError(err),
    }
}

/// Run the module cases of `dir` natively against `P` and panic with every failure's diff.
///
/// With `TESSERA_BLESS=1`, cases whose expectation is a `desiredFile` get that file
/// rewritten with the actual desired objects first (review the diff before committing it).
/// Plugins call this from a `#[test]` (see `tessera_sdk::module_golden_tests!`).
pub fn assert_module_cases<P: ModuleReconciler>(dir: &str) {
    let dir = std::path::Path::new(dir);
    if std::env::var_os("TESSERA_BLESS").is_some() {
        bless_module::<P>(dir);
    }
    let results = run_module_cases(dir, P::NAME, call_module_natively::<P>)
        .unwrap_or_else(|err| panic!("{err}"));
    assert_passed(&results, dir);
}

fn bless_module<P: ModuleReconciler>(dir: &std::path::Path) {
    let cases = load_module_cases(dir).unwrap_or_else(|err| panic!("{err}"));
    for case in cases {
        let Some(path) = &case.expect.desired_file else {
            continue;
        };
        let conversation = case.converse(P::NAME, call_module_natively::<P>);
        if let ModuleOutcome::Answer(ModuleAnswer::Reconcile(out)) = &conversation.outcome {
            let desired = desired_values(out).unwrap_or_else(|err| panic!("{err}"));
            case::write_snapshot(
                &dir.display().to_string(),
                &case.name,
                path,
                &to_yaml(&serde_json::Value::from(desired)),
            )
            .unwrap_or_else(|err| panic!("{err}"));
        }
    }
}

/// Panic with every failure, or when there were no cases at all.
fn assert_passed(results: &[CaseResult], dir: &std::path::Path) {
    assert!(!results.is_empty(), "no golden cases in {}", dir.display());
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

/// The crate's directory: `cargo test` sets `CARGO_MANIFEST_DIR` when it runs a test too,
/// and that one names this checkout; the compile-time value (`compiled`) can name another
/// checkout when a build cache is shared between them.
pub fn manifest_dir(compiled: &str) -> String {
    std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| compiled.to_string())
}

/// Check that the file at `path` holds the JSON Schema of `C` (what
/// [`declare_config_schema!`](crate::declare_config_schema) embeds), and panic with a diff
/// when it does not. With `TESSERA_BLESS=1` the file is written instead.
pub fn assert_config_schema<C: schemars::JsonSchema>(path: &str) {
    let schema = serde_json::to_value(schemars::schema_for!(C)).expect("a schema serializes");
    if std::env::var_os("TESSERA_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
        std::fs::write(path, text + "\n").unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
        return;
    }
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{path}: {e}; `TESSERA_BLESS=1 cargo test` writes the configuration's schema")
    });
    let written: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    if written != schema {
        panic!(
            "{path} is not the schema of {}; `TESSERA_BLESS=1 cargo test` rewrites it:\n{}",
            std::any::type_name::<C>(),
            yaml_diff_labelled(&written, &schema, (path, "from the type"))
        );
    }
}

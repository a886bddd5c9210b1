//! The plugin author's harness: golden cases and micro-benchmarks on the Wasm build, for
//! both plugin kinds.

use std::path::Path;
use std::time::{Duration, Instant};

use tessera_sdk::glue::RawExtendInput;
use tessera_sdk::module::RawModuleInput;
use tessera_sdk::testing::{
    CaseError, CaseResult, Conversation, ModuleAnswer, ModuleCall, ModuleCase, ModuleOutcome,
    Outcome, load_cases, load_module_cases, run_cases, run_module_cases,
};

use crate::wasm::{CallContext, Failure, Limits, LoadedModule, LoadedPlugin, WasmRuntime};

/// Run the golden cases in `cases` against a loaded component.
pub fn test_plugin(
    rt: &WasmRuntime,
    plugin: &LoadedPlugin,
    cases: &Path,
    limits: &Limits,
) -> Result<Vec<CaseResult>, CaseError> {
    let ctx = CallContext {
        runtime_id: "golden-case".into(),
    };
    run_cases(cases, |input| {
        match plugin.extend(rt, input.clone(), limits, &ctx) {
            Ok(output) => Outcome::Output(output),
            Err(err) => match err.cause {
                Failure::Plugin(plugin_error) => Outcome::PluginError(plugin_error),
                other => Outcome::HostError(other.to_string()),
            },
        }
    })
}

/// Latency percentiles of repeated calls.
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
    pub min: Duration,
    pub max: Duration,
    pub samples: usize,
}

impl Percentiles {
    /// Compute from raw samples (sorted in place).
    pub fn from_samples(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self {
            p50: at(0.50),
            p99: at(0.99),
            min: samples[0],
            max: samples[samples.len() - 1],
            samples: samples.len(),
        }
    }
}

/// Time `iterations` calls (after a warm-up) of `f`.
pub fn measure(iterations: usize, mut f: impl FnMut()) -> Percentiles {
    for _ in 0..iterations.min(50) {
        f();
    }
    let mut samples: Vec<Duration> = (0..iterations.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    Percentiles::from_samples(&mut samples)
}

/// Time `iterations` rounds of `a` and `b` alternately, so that both see the same machine
/// conditions (frequency, noisy neighbours) and their ratio is meaningful.
pub fn measure_pair(
    iterations: usize,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (Percentiles, Percentiles) {
    for _ in 0..iterations.min(50) {
        a();
        b();
    }
    let (mut sa, mut sb) = (
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    );
    for _ in 0..iterations.max(1) {
        let start = Instant::now();
        a();
        sa.push(start.elapsed());
        let start = Instant::now();
        b();
        sb.push(start.elapsed());
    }
    (
        Percentiles::from_samples(&mut sa),
        Percentiles::from_samples(&mut sb),
    )
}

/// Benchmark one plugin on the inputs of the golden cases in `cases` that succeed.
pub fn bench_plugin(
    rt: &WasmRuntime,
    plugin: &LoadedPlugin,
    cases: &Path,
    iterations: usize,
) -> Result<Vec<(String, Percentiles)>, CaseError> {
    let limits = Limits::default();
    let ctx = CallContext::default();
    let mut results = Vec::new();
    for case in load_cases(cases)? {
        if case.expected_error.is_some() {
            continue;
        }
        let input: RawExtendInput = case.input();
        let stats = measure(iterations, || {
            let _ = plugin.extend(rt, input.clone(), &limits, &ctx);
        });
        results.push((case.name.clone(), stats));
    }
    Ok(results)
}

/// Run one module case against a loaded module reconciler: the whole conversation, without
/// judging it (`tessera plugin run`).
pub fn converse_module(
    rt: &WasmRuntime,
    module: &LoadedModule,
    case: &ModuleCase,
    limits: &Limits,
) -> Conversation {
    case.converse(&module.info.name, |call, input| {
        call_module(rt, module, call, input, limits)
    })
}

/// Run the module cases in `cases` against a loaded module reconciler, talking to it as the
/// ModuleSet controller does (requirements answered, called again).
pub fn test_module(
    rt: &WasmRuntime,
    module: &LoadedModule,
    cases: &Path,
    limits: &Limits,
) -> Result<Vec<CaseResult>, CaseError> {
    run_module_cases(cases, &module.info.name, |call, input| {
        call_module(rt, module, call, input, limits)
    })
}

/// One call of a module reconciler on raw input.
fn call_module(
    rt: &WasmRuntime,
    module: &LoadedModule,
    call: ModuleCall,
    input: &RawModuleInput,
    limits: &Limits,
) -> ModuleOutcome {
    let answer = match call {
        ModuleCall::Reconcile => module
            .reconcile_raw(rt, input, limits)
            .map(ModuleAnswer::Reconcile),
        ModuleCall::Delete => module
            .delete_raw(rt, input, limits)
            .map(ModuleAnswer::Delete),
    };
    match answer {
        Ok(answer) => ModuleOutcome::Answer(answer),
        Err(err) => match err.cause {
            Failure::Plugin(plugin_error) => ModuleOutcome::PluginError(plugin_error),
            other => ModuleOutcome::HostError(other.to_string()),
        },
    }
}

/// Benchmark a module reconciler on the module cases in `cases` that do not expect an
/// error: one sample is the whole conversation (every round) of a case.
pub fn bench_module(
    rt: &WasmRuntime,
    module: &LoadedModule,
    cases: &Path,
    iterations: usize,
) -> Result<Vec<(String, Percentiles)>, CaseError> {
    let limits = Limits::default();
    let mut results = Vec::new();
    for case in load_module_cases(cases)? {
        if case.expect.error.is_some() {
            continue;
        }
        let stats = measure(iterations, || {
            case.converse(&module.info.name, |call, input| {
                call_module(rt, module, call, input, &limits)
            });
        });
        results.push((case.name.clone(), stats));
    }
    Ok(results)
}

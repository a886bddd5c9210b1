//! `cargo bench -p tessera` (or `cargo xtask bench`): the default shoot-extension chain in
//! Wasm (fresh instance per plugin call) against the same plugin crates compiled natively,
//! plus compile and cache-hit load times per plugin. Prints figures; asserts nothing.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tessera::harness::{Percentiles, measure, measure_pair};
use tessera::plugins::memo::DraftCache;
use tessera::plugins::{ChainConfig, DEFAULT_PROJECT, FIRST_PARTY, ShootChain, ShootIdentity};
use tessera::render::{RuntimeDocument, parse_runtime};
use tessera::wasm::{CallSplit, EngineOptions, Limits, WasmRuntime, module_api};
use tessera_sdk::glue::{
    RawExtendInput, RawExtendOutput, extend_json, parse_document, parse_trusted,
};
use tessera_sdk::{ExtendInput, ModuleReconciler, Operation, PluginError, ShootExtension};

type NativeStep = fn(&RawExtendInput) -> Result<RawExtendOutput, PluginError>;
/// Native time of one step split into parsing the input, the plugin's logic, serializing.
type SplitStep = fn(&RawExtendInput) -> [Duration; 3];

fn native_split<P: ShootExtension>(input: &RawExtendInput) -> [Duration; 3] {
    let started = Instant::now();
    let runtime = parse_trusted(&input.runtime, "runtime").unwrap();
    let draft = parse_trusted(&input.draft, "draft").unwrap();
    let config = parse_document(&input.config, "config").unwrap();
    let parsed = Instant::now();
    let output = P::extend(ExtendInput {
        runtime,
        draft,
        operation: input.operation,
        current: None,
        config,
    })
    .unwrap();
    let done = Instant::now();
    black_box(serde_json::to_string(&output.shoot).unwrap());
    [parsed - started, done - parsed, done.elapsed()]
}

macro_rules! native {
    ($($name:literal => $plugin:ty),* $(,)?) => {
        &[$(($name, extend_json::<$plugin> as NativeStep, native_split::<$plugin> as SplitStep)),*]
    };
}

const NATIVE: &[(&str, NativeStep, SplitStep)] = native![
    "base" => tessera_plugin_base::Base,
    "annotations" => tessera_plugin_annotations::Annotations,
    "labels" => tessera_plugin_labels::Labels,
    "seed-selector" => tessera_plugin_seed_selector::SeedSelector,
    "oidc" => tessera_plugin_oidc::Oidc,
    "cloud-profile" => tessera_plugin_cloud_profile::CloudProfile,
    "exposure-class" => tessera_plugin_exposure_class::ExposureClass,
    "access-restrictions" => tessera_plugin_access_restrictions::AccessRestrictions,
    "provider" => tessera_plugin_provider::Provider,
    "control-plane" => tessera_plugin_control_plane::ControlPlanePlugin,
    "tolerations" => tessera_plugin_tolerations::Tolerations,
    "dns" => tessera_plugin_dns::Dns,
    "extensions" => tessera_plugin_extensions::Extensions,
    "kubernetes-version" => tessera_plugin_kubernetes_version::KubernetesVersion,
    "maintenance" => tessera_plugin_maintenance::MaintenancePlugin,
    "auditlog" => tessera_plugin_auditlog::Auditlog,
    "deletion" => tessera_plugin_deletion::Deletion,
];

fn plugin_dir() -> PathBuf {
    std::env::var_os("TESSERA_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().join("plugins")
        })
}

/// The chain natively. `viewed`: each plugin sees and returns its view of the draft, as in
/// the host; otherwise the whole draft (the two must agree).
fn native_chain(b: &Bench, viewed: bool) -> serde_json::Value {
    let mut shoot = b.identity.draft();
    for (step, (_, native_step, _)) in b.chain.steps.iter().zip(NATIVE) {
        let seen = if viewed {
            step.view().project(&shoot)
        } else {
            shoot.clone()
        };
        let input = RawExtendInput {
            runtime: b.runtime.json.clone(),
            draft: seen.to_string(),
            operation: Operation::Create,
            current_shoot: None,
            config: step.config.clone(),
        };
        let out = native_step(&input).expect("native step").shoot;
        let returned: serde_json::Value = serde_json::from_str(&out).unwrap();
        if viewed {
            step.view().merge(&mut shoot, returned);
        } else {
            shoot = returned;
        }
    }
    shoot
}

/// Minor page faults of this process so far (Linux), to see what fresh instances cost.
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(7)?.parse().ok()
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn row(label: &str, p: &Percentiles) {
    println!(
        "{label:<34} p50 {:>12}   p99 {:>12}   ({} samples)",
        us(p.p50),
        us(p.p99),
        p.samples
    );
}

/// What every section measures on.
struct Bench {
    iterations: usize,
    rt: WasmRuntime,
    chain: ShootChain,
    runtime: RuntimeDocument,
    identity: ShootIdentity,
}

fn main() {
    let iterations: usize = std::env::var("TESSERA_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = plugin_dir();
    assert!(
        dir.join("base.wasm").is_file(),
        "no plugins in {}: run `cargo xtask bench`",
        dir.display()
    );
    let cache = tempfile::tempdir().unwrap();
    // Pooled memory kept resident between instances (memset instead of page faults).
    let keep_resident_kib = std::env::var("TESSERA_BENCH_KEEP_RESIDENT_KIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(EngineOptions::default().keep_resident_kib);
    let options = EngineOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        keep_resident_kib,
        ..EngineOptions::default()
    };
    compile_and_load(&dir, &options);
    let rt = WasmRuntime::new(options.clone()).unwrap();
    let chain = ShootChain::load(&rt, &ChainConfig::default(), &dir).unwrap();
    let text = std::fs::read_to_string(
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
            .join("../examples/runtime-aws.yaml"),
    )
    .unwrap();
    let runtime = parse_runtime(&text, "runtime-aws.yaml").unwrap();
    let identity = ShootIdentity::of(&runtime.runtime.spec, DEFAULT_PROJECT);
    let bench = Bench {
        iterations,
        rt,
        chain,
        runtime,
        identity,
    };
    full_chain(&bench, &dir, options);
    per_step(&bench);
    grant_check(&bench);
    one_call(&bench);
    memo(&bench);
    module_call(&bench, &dir);
}

fn compile_and_load(dir: &std::path::Path, options: &EngineOptions) {
    println!("== compile (cold, no cache) and cache-hit load, per plugin");
    let mut compile_total = Duration::ZERO;
    let mut hits = Vec::new();
    let cold = WasmRuntime::new(options.clone()).unwrap();
    println!(
        "pooling allocator: {}, kept resident: {} KiB",
        cold.pooling(),
        options.keep_resident_kib
    );
    for name in FIRST_PARTY {
        let bytes = std::fs::read(dir.join(format!("{name}.wasm"))).unwrap();
        let plugin = cold.load(&bytes, name).unwrap();
        assert!(!plugin.from_cache);
        compile_total += plugin.load_time;
        let warm = WasmRuntime::new(options.clone()).unwrap();
        let started = Instant::now();
        let again = warm.load(&bytes, name).unwrap();
        let full = started.elapsed();
        assert!(again.from_cache);
        hits.push(full);
        println!(
            "{name:<22} {:>7} KiB   compile {:>10}   cache hit: deserialize {:>9}, full load {:>9}",
            bytes.len() / 1024,
            ms(plugin.load_time),
            ms(again.load_time),
            ms(full)
        );
    }
    hits.sort();
    println!(
        "compile total {}, cache-hit full load median {} max {}",
        ms(compile_total),
        ms(hits[hits.len() / 2]),
        ms(*hits.last().unwrap())
    );
}

fn run_wasm(b: &Bench) {
    b.chain
        .run(&b.rt, &b.runtime.json, &b.identity, "bench", None)
        .unwrap();
}

fn full_chain(b: &Bench, dir: &std::path::Path, options: EngineOptions) {
    // Same result both ways, or the comparison is meaningless.
    let wasm_out = b
        .chain
        .run(&b.rt, &b.runtime.json, &b.identity, "bench", None)
        .unwrap()
        .shoot;
    assert_eq!(
        wasm_out,
        native_chain(b, true),
        "Wasm and native chains disagree"
    );
    assert_eq!(
        wasm_out,
        native_chain(b, false),
        "plugins that see only their view render another Shoot than with the whole draft"
    );
    println!(
        "\n== full default chain ({} plugins), examples/runtime-aws.yaml, create",
        FIRST_PARTY.len()
    );
    let (wasm, native) = measure_pair(
        b.iterations,
        || run_wasm(b),
        || {
            native_chain(b, true);
        },
    );
    row("wasm (fresh instance per call)", &wasm);
    let on_demand = WasmRuntime::new(EngineOptions {
        pooling: false,
        ..options
    })
    .unwrap();
    let od_chain = ShootChain::load(&on_demand, &ChainConfig::default(), dir).unwrap();
    let od = measure(b.iterations, || {
        od_chain
            .run(&on_demand, &b.runtime.json, &b.identity, "bench", None)
            .unwrap();
    });
    row("wasm, on-demand allocator", &od);
    row("native", &native);
    if let Some(before) = minor_faults() {
        let runs = 200;
        (0..runs).for_each(|_| run_wasm(b));
        let wasm_faults = (minor_faults().unwrap_or(before) - before) / runs;
        let before = minor_faults().unwrap_or(0);
        (0..runs).for_each(|_| {
            native_chain(b, true);
        });
        let native_faults = (minor_faults().unwrap_or(before) - before) / runs;
        println!("minor page faults per chain run: wasm {wasm_faults}, native {native_faults}");
    }
    println!(
        "wasm/native ratio: p50 {:.2}x, p99 {:.2}x",
        wasm.p50.as_secs_f64() / native.p50.as_secs_f64(),
        wasm.p99.as_secs_f64() / native.p99.as_secs_f64()
    );
}

/// The input of every step of the chain, each with the draft it receives.
fn step_inputs(b: &Bench) -> Vec<RawExtendInput> {
    let mut shoot = b.identity.draft();
    let mut inputs = Vec::new();
    for (step, (_, native_step, _)) in b.chain.steps.iter().zip(NATIVE) {
        let input = RawExtendInput {
            runtime: b.runtime.json.clone(),
            draft: step.view().project(&shoot).to_string(),
            operation: Operation::Create,
            current_shoot: None,
            config: step.config.clone(),
        };
        let returned = native_step(&input).unwrap().shoot;
        step.view()
            .merge(&mut shoot, serde_json::from_str(&returned).unwrap());
        inputs.push(input);
    }
    inputs
}

/// p50 of each of three parts over `runs` samples.
fn split_p50(runs: usize, mut sample: impl FnMut() -> [Duration; 3]) -> [Duration; 3] {
    let mut parts: [Vec<Duration>; 3] = Default::default();
    for _ in 0..runs {
        for (all, one) in parts.iter_mut().zip(sample()) {
            all.push(one);
        }
    }
    parts.map(|mut all| {
        all.sort();
        all[all.len() / 2]
    })
}

fn per_step(b: &Bench) {
    println!("\n== per step of the chain (each with the draft it receives)");
    println!(
        "{:<20} {:>9} {:>9} {:>6}   wasm: {:>9} {:>9} {:>9}   native: {:>8} {:>8} {:>8}",
        "plugin",
        "wasm",
        "native",
        "ratio",
        "instance",
        "call",
        "output",
        "input",
        "logic",
        "output"
    );
    let ctx = tessera::wasm::CallContext::default();
    for ((step, (name, native_step, split)), input) in
        b.chain.steps.iter().zip(NATIVE).zip(step_inputs(b))
    {
        let (w, n) = measure_pair(
            b.iterations / 4,
            || {
                step.plugin
                    .extend(&b.rt, input.clone(), &step.limits, &ctx)
                    .unwrap();
            },
            || {
                native_step(&input).unwrap();
            },
        );
        let wasm_split = split_p50(b.iterations / 4, || {
            let CallSplit {
                instantiate,
                call,
                output,
            } = step
                .plugin
                .extend_split(&b.rt, input.clone(), &step.limits)
                .unwrap();
            [instantiate, call, output]
        });
        let native = split_p50(b.iterations / 4, || split(&input));
        println!(
            "{name:<20} {:>9} {:>9} {:>5.1}x   wasm: {:>9} {:>9} {:>9}   native: {:>8} {:>8} {:>8}",
            us(w.p50),
            us(n.p50),
            w.p50.as_secs_f64() / n.p50.as_secs_f64(),
            us(wasm_split[0]),
            us(wasm_split[1]),
            us(wasm_split[2]),
            us(native[0]),
            us(native[1]),
            us(native[2]),
        );
    }
}

fn grant_check(b: &Bench) {
    println!("\n== the grant check: what each plugin changed against its granted Shoot paths");
    // Each step's view before and after it ran.
    let pairs: Vec<(serde_json::Value, serde_json::Value)> = step_inputs(b)
        .iter()
        .zip(NATIVE)
        .zip(&b.chain.steps)
        .map(|((input, (_, native_step, _)), step)| {
            let mut returned = serde_json::from_str(&native_step(input).unwrap().shoot).unwrap();
            step.view().prune(&mut returned);
            (serde_json::from_str(&input.draft).unwrap(), returned)
        })
        .collect();
    let check = measure(b.iterations, || {
        for (step, (before, after)) in b.chain.steps.iter().zip(&pairs) {
            step.check(before, after).unwrap();
        }
    });
    row("all 17 steps (diff + path match of each view)", &check);
}

fn one_call(b: &Bench) {
    println!("\n== one plugin call (labels): instantiate + call in a fresh store");
    let labels = &b.chain.steps[2];
    let ctx = tessera::wasm::CallContext::default();
    let input = RawExtendInput {
        runtime: b.runtime.json.clone(),
        draft: "{}".into(),
        operation: Operation::Create,
        current_shoot: None,
        config: "{}".into(),
    };
    let (call, native_labels) = measure_pair(
        b.iterations * 5,
        || {
            labels
                .plugin
                .extend(&b.rt, input.clone(), &labels.limits, &ctx)
                .unwrap();
        },
        || {
            NATIVE[2].1(&input).unwrap();
        },
    );
    row("labels, wasm", &call);
    let info = measure(b.iterations * 5, || {
        labels.plugin.call_info(&b.rt).unwrap();
    });
    row("labels, wasm instantiate + info()", &info);
    row("labels, native", &native_labels);
}

/// Renders through the draft cache: nothing changed, and one plugin rolled out (a new
/// component digest; the chain is otherwise the same, so the plugin's output is too).
fn memo(b: &Bench) {
    println!("\n== incremental rendering (draft cache, 64 MiB)");
    let memo = DraftCache::new(64 << 20);
    let render = |chain: &ShootChain| {
        chain
            .run_memo(
                &b.rt,
                Some(&memo),
                &b.runtime.json,
                &b.identity,
                "bench",
                None,
            )
            .unwrap()
    };
    // Steps that roll out come from registry channels: the drafts before them are kept.
    let rolling = [0, 8, b.chain.steps.len() - 1];
    let mut base = b.chain.clone();
    for index in rolling {
        base.steps[index].channel = Some("fast".into());
    }
    let first = render(&base);
    assert_eq!(first.cached_steps, 0);
    let again = measure(b.iterations * 5, || {
        assert_eq!(render(&base).cached_steps, base.steps.len());
    });
    row("no change: every draft cached", &again);
    let mut rollout = 0u64;
    for index in rolling {
        // The runs before filled the cache with their own drafts: start from the chain's.
        render(&base);
        let mut chain = base.clone();
        let timed = measure(b.iterations, || {
            rollout += 1;
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&rollout.to_le_bytes());
            chain.steps[index].memo_key = std::sync::OnceLock::from(key);
            assert_eq!(render(&chain).cached_steps, index);
        });
        let label = format!("rollout of step {} ({})", index + 1, NATIVE[index].0);
        row(&label, &timed);
    }
    println!(
        "cache after the runs: {} drafts, {:.1} MiB",
        memo.len(),
        memo.bytes() as f64 / (1 << 20) as f64
    );
}

/// A bundle of `n` ConfigMaps with values, as an operator would lock it on the Plugin.
fn bundle(n: usize) -> String {
    let docs: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{i}\n  namespace: ${{namespace}}\n  labels: {{app: bench, index: \"{i}\"}}\ndata:\n  region: ${{region}}\n  replicas: \"${{replicas}}\"\n  note: object {i} of the bundle\n"
            )
        })
        .collect();
    docs.join("---\n")
}

fn module_call(b: &Bench, dir: &std::path::Path) {
    println!("\n== module reconciler call: manifest with a 50-object bundle");
    let bytes = std::fs::read(dir.join("manifest.wasm")).unwrap();
    let module = b.rt.load_module(&bytes, "manifest").unwrap();
    let config = serde_json::json!({
        "manifest": bundle(50),
        "values": {"namespace": "kyma-system", "region": "eu-west-1", "replicas": 3},
    })
    .to_string();
    let input = module_api::ReconcileInput {
        module: "bench".into(),
        version: "1.0.0".into(),
        config: config.clone(),
        cluster: module_api::ClusterFacts {
            kubernetes_version: Some("1.30.0".into()),
            provider: Some("aws".into()),
            region: Some("eu-west-1".into()),
        },
        observed: Vec::new(),
    };
    let limits = Limits::default();
    let out = module.reconcile(&b.rt, &input, &limits).unwrap();
    assert_eq!(out.desired.len(), 50);
    let raw = || tessera_sdk::module::RawModuleInput {
        module: "bench".into(),
        version: "1.0.0".into(),
        config: config.clone(),
        cluster: tessera_sdk::ClusterFacts {
            kubernetes_version: Some("1.30.0".into()),
            provider: Some("aws".into()),
            region: Some("eu-west-1".into()),
        },
        observed: Vec::new(),
    };
    let (wasm, native) = measure_pair(
        b.iterations,
        || {
            module.reconcile(&b.rt, &input, &limits).unwrap();
        },
        || {
            let typed = tessera_sdk::module::typed_input(raw()).unwrap();
            let out = tessera_plugin_manifest::Manifest::reconcile(typed).unwrap();
            black_box(
                out.desired
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>(),
            );
        },
    );
    row("manifest, wasm", &wasm);
    row("manifest, native", &native);
    println!(
        "wasm/native ratio: p50 {:.2}x ({} bytes of configuration)",
        wasm.p50.as_secs_f64() / native.p50.as_secs_f64(),
        config.len()
    );
}

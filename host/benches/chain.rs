//! `cargo bench -p tessera` (or `cargo xtask bench`): the default shoot-extension chain in
//! Wasm (fresh instance per plugin call) against the same plugin crates compiled natively,
//! plus compile and cache-hit load times per plugin. Prints figures; asserts nothing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tessera::harness::{Percentiles, measure, measure_pair};
use tessera::plugins::{ChainConfig, DEFAULT_PROJECT, FIRST_PARTY, ShootChain, ShootIdentity};
use tessera::render::parse_runtime;
use tessera::wasm::{EngineOptions, WasmRuntime};
use tessera_sdk::glue::{RawExtendInput, RawExtendOutput, extend_json};
use tessera_sdk::{Operation, PluginError};

type NativeStep = fn(&RawExtendInput) -> Result<RawExtendOutput, PluginError>;

const NATIVE: &[(&str, NativeStep)] = &[
    ("base", extend_json::<tessera_plugin_base::Base>),
    (
        "annotations",
        extend_json::<tessera_plugin_annotations::Annotations>,
    ),
    ("labels", extend_json::<tessera_plugin_labels::Labels>),
    (
        "seed-selector",
        extend_json::<tessera_plugin_seed_selector::SeedSelector>,
    ),
    ("oidc", extend_json::<tessera_plugin_oidc::Oidc>),
    (
        "cloud-profile",
        extend_json::<tessera_plugin_cloud_profile::CloudProfile>,
    ),
    (
        "exposure-class",
        extend_json::<tessera_plugin_exposure_class::ExposureClass>,
    ),
    (
        "access-restrictions",
        extend_json::<tessera_plugin_access_restrictions::AccessRestrictions>,
    ),
    ("provider", extend_json::<tessera_plugin_provider::Provider>),
    (
        "control-plane",
        extend_json::<tessera_plugin_control_plane::ControlPlanePlugin>,
    ),
    (
        "tolerations",
        extend_json::<tessera_plugin_tolerations::Tolerations>,
    ),
    ("dns", extend_json::<tessera_plugin_dns::Dns>),
    (
        "extensions",
        extend_json::<tessera_plugin_extensions::Extensions>,
    ),
    (
        "kubernetes-version",
        extend_json::<tessera_plugin_kubernetes_version::KubernetesVersion>,
    ),
    (
        "maintenance",
        extend_json::<tessera_plugin_maintenance::MaintenancePlugin>,
    ),
    ("auditlog", extend_json::<tessera_plugin_auditlog::Auditlog>),
    ("deletion", extend_json::<tessera_plugin_deletion::Deletion>),
];

fn plugin_dir() -> PathBuf {
    std::env::var_os("TESSERA_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().join("plugins")
        })
}

fn native_chain(runtime: &str, start: &str) -> String {
    let mut draft = start.to_string();
    for (_, step) in NATIVE {
        let input = RawExtendInput {
            runtime: runtime.to_string(),
            draft,
            operation: Operation::Create,
            current_shoot: None,
            config: "{}".into(),
        };
        draft = step(&input).expect("native step").shoot;
    }
    draft
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
    let options = EngineOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..EngineOptions::default()
    };

    println!("== compile (cold, no cache) and cache-hit load, per plugin");
    let mut compile_total = Duration::ZERO;
    let mut hits = Vec::new();
    {
        let cold = WasmRuntime::new(options.clone()).unwrap();
        println!("pooling allocator: {}", cold.pooling());
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
    }
    hits.sort();
    println!(
        "compile total {}, cache-hit full load median {} max {}",
        ms(compile_total),
        ms(hits[hits.len() / 2]),
        ms(*hits.last().unwrap())
    );

    let on_demand = WasmRuntime::new(EngineOptions {
        pooling: false,
        ..options.clone()
    })
    .unwrap();
    let rt = WasmRuntime::new(options).unwrap();
    let chain = ShootChain::load(&rt, &ChainConfig::default(), &dir).unwrap();
    let text = std::fs::read_to_string(
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
            .join("../examples/runtime-aws.yaml"),
    )
    .unwrap();
    let runtime = parse_runtime(&text, "runtime-aws.yaml").unwrap();
    let identity = ShootIdentity::of(&runtime.runtime.spec, DEFAULT_PROJECT);
    let start = identity.draft().to_string();

    // Same result both ways, or the comparison is meaningless.
    let wasm_out = chain
        .run(&rt, &runtime.json, &identity, "bench", None)
        .unwrap()
        .shoot;
    let native_out: serde_json::Value =
        serde_json::from_str(&native_chain(&runtime.json, &start)).unwrap();
    assert_eq!(wasm_out, native_out, "Wasm and native chains disagree");

    println!(
        "\n== full default chain ({} plugins), examples/runtime-aws.yaml, create",
        FIRST_PARTY.len()
    );
    let (wasm, native) = measure_pair(
        iterations,
        || {
            chain
                .run(&rt, &runtime.json, &identity, "bench", None)
                .unwrap();
        },
        || {
            native_chain(&runtime.json, &start);
        },
    );
    row("wasm (fresh instance per call)", &wasm);
    let od_chain = ShootChain::load(&on_demand, &ChainConfig::default(), &dir).unwrap();
    let od = measure(iterations, || {
        od_chain
            .run(&on_demand, &runtime.json, &identity, "bench", None)
            .unwrap();
    });
    row("wasm, on-demand allocator", &od);
    row("native", &native);
    if let Some(before) = minor_faults() {
        let runs = 200;
        for _ in 0..runs {
            chain
                .run(&rt, &runtime.json, &identity, "bench", None)
                .unwrap();
        }
        let wasm_faults = (minor_faults().unwrap_or(before) - before) / runs;
        let before = minor_faults().unwrap_or(0);
        for _ in 0..runs {
            native_chain(&runtime.json, &start);
        }
        let native_faults = (minor_faults().unwrap_or(before) - before) / runs;
        println!("minor page faults per chain run: wasm {wasm_faults}, native {native_faults}");
    }
    println!(
        "wasm/native ratio: p50 {:.2}x, p99 {:.2}x",
        wasm.p50.as_secs_f64() / native.p50.as_secs_f64(),
        wasm.p99.as_secs_f64() / native.p99.as_secs_f64()
    );

    println!("\n== per step of the chain (each with the draft it receives)");
    let ctx = tessera::wasm::CallContext::default();
    let mut draft = start.clone();
    let mut drafts = vec![identity.draft()];
    for (step, (name, native_step)) in chain.steps.iter().zip(NATIVE) {
        let input = RawExtendInput {
            runtime: runtime.json.clone(),
            draft: draft.clone(),
            operation: Operation::Create,
            current_shoot: None,
            config: step.config.clone(),
        };
        let (w, n) = measure_pair(
            iterations / 4,
            || {
                step.plugin
                    .extend(&rt, input.clone(), &step.limits, &ctx)
                    .unwrap();
            },
            || {
                native_step(&input).unwrap();
            },
        );
        println!(
            "{name:<22} wasm p50 {:>10}  native p50 {:>10}  ratio {:>5.1}x  (draft {} B)",
            us(w.p50),
            us(n.p50),
            w.p50.as_secs_f64() / n.p50.as_secs_f64(),
            input.draft.len()
        );
        draft = native_step(&input).unwrap().shoot;
        drafts.push(serde_json::from_str(&draft).unwrap());
    }

    println!("\n== the grant check: what each plugin changed against its granted Shoot paths");
    let check = measure(iterations, || {
        for (step, pair) in chain.steps.iter().zip(drafts.windows(2)) {
            step.check(&pair[0], &pair[1]).unwrap();
        }
    });
    row("all 17 steps (diff + path match)", &check);

    println!("\n== one plugin call (labels): instantiate + call in a fresh store");
    let labels = &chain.steps[2];
    let input = RawExtendInput {
        runtime: runtime.json.clone(),
        draft: "{}".into(),
        operation: Operation::Create,
        current_shoot: None,
        config: "{}".into(),
    };
    let (call, native_labels) = measure_pair(
        iterations * 5,
        || {
            labels
                .plugin
                .extend(&rt, input.clone(), &labels.limits, &ctx)
                .unwrap();
        },
        || {
            NATIVE[2].1(&input).unwrap();
        },
    );
    row("labels, wasm", &call);
    let info = measure(iterations * 5, || {
        labels.plugin.call_info(&rt).unwrap();
    });
    row("labels, wasm instantiate + info()", &info);
    row("labels, native", &native_labels);
}

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use tessera::harness::{bench_plugin, test_plugin};
use tessera::plugins::LimitsOverride;
use tessera::wasm::{Limits, WasmRuntime};

use super::oci as remote;
use super::registry::RegistryArgs;

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Run golden cases (one YAML file each) against a plugin component.
    Test {
        /// The plugin component (`.wasm`).
        plugin: PathBuf,
        /// Directory of golden case files.
        #[arg(long)]
        cases: PathBuf,
        /// Memory limit per call, MiB.
        #[arg(long)]
        memory_mib: Option<u64>,
        /// Time budget per call, milliseconds.
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Show a plugin's contract version, kind, exports, imports, size and digest. Given a
    /// registry reference instead of a file, show the remote metadata (no component download).
    Inspect {
        /// The plugin component (`.wasm`) or `registry/repository[:tag|@digest]`.
        plugin: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Push a component to a registry in the Wasm OCI layout, with version, kind and
    /// contract annotations. Prints the manifest digest.
    Push {
        /// The plugin component (`.wasm`).
        file: PathBuf,
        /// `registry/repository:tag`.
        reference: String,
        /// Version annotation [default: the version the component reports].
        #[arg(long)]
        version: Option<String>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a plugin (by tag or digest) and write its component, checking every digest.
    Pull {
        /// `registry/repository[:tag|@digest]`.
        reference: String,
        /// Output file [default: `<repository name>.wasm`].
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Refuse the plugin unless its signature verifies with this public key (PEM).
        #[arg(long)]
        key: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Sign a pushed plugin (cosign simple signing, stored as `sha256-<hex>.sig`).
    /// The key's password comes from $COSIGN_PASSWORD.
    Sign {
        /// `registry/repository[:tag|@digest]`.
        reference: String,
        /// Private key: cosign's encrypted PEM or an unencrypted PKCS#8 PEM.
        #[arg(long)]
        key: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Check a plugin's signature with a public key (PEM).
    Verify {
        /// `registry/repository[:tag|@digest]`.
        reference: String,
        /// The public key (PEM).
        #[arg(long)]
        key: PathBuf,
        /// A repository the signature may name instead of this one (the plugin was signed
        /// there and copied here; repeatable).
        #[arg(long, value_name = "REPOSITORY")]
        signed_as: Vec<String>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Create a cosign-compatible ECDSA P-256 key pair: PREFIX.key (encrypted with
    /// $COSIGN_PASSWORD) and PREFIX.pub.
    Keygen {
        #[arg(long, default_value = "cosign")]
        output_prefix: PathBuf,
    },
    /// Copy plugins (and their signatures) into an OCI image-layout directory.
    Save {
        /// References to save.
        #[arg(required = true)]
        references: Vec<String>,
        /// The layout directory (created or added to).
        #[arg(long, short)]
        output: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Push everything in an OCI image-layout directory written by `save`.
    Load {
        /// The layout directory.
        dir: PathBuf,
        /// Push to this registry (`host[:port]`) instead of the one each plugin came from;
        /// repository paths are kept.
        #[arg(long = "to")]
        to_registry: Option<String>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Measure per-call latency (p50/p99) on the inputs of golden cases.
    Bench {
        /// The plugin component (`.wasm`).
        plugin: PathBuf,
        /// Directory of golden case files; every successful case is one workload.
        #[arg(long)]
        cases: PathBuf,
        /// Calls per case.
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
}

fn read(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn run(rt: &WasmRuntime, command: PluginCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginCommand::Test {
            plugin,
            cases,
            memory_mib,
            timeout_ms,
        } => {
            let limits = LimitsOverride {
                memory_mib,
                timeout_ms,
                ..LimitsOverride::default()
            }
            .apply(Limits::default());
            test(rt, &plugin, &cases, &limits)
        }
        PluginCommand::Inspect {
            plugin,
            json,
            registry,
        } => {
            let path = PathBuf::from(&plugin);
            if !path.exists() {
                return block_on(remote::inspect_remote(&registry, &plugin, json));
            }
            inspect(rt, &path, json)
        }
        PluginCommand::Push {
            file,
            reference,
            version,
            registry,
        } => block_on(remote::push(rt, &registry, &file, &reference, version)),
        PluginCommand::Pull {
            reference,
            output,
            key,
            registry,
        } => block_on(remote::pull(&registry, &reference, output, key)),
        PluginCommand::Sign {
            reference,
            key,
            registry,
        } => block_on(remote::sign(&registry, &reference, &key)),
        PluginCommand::Verify {
            reference,
            key,
            signed_as,
            registry,
        } => block_on(remote::verify(&registry, &reference, &key, &signed_as)),
        PluginCommand::Keygen { output_prefix } => remote::keygen(&output_prefix),
        PluginCommand::Save {
            references,
            output,
            registry,
        } => block_on(remote::save(&registry, &references, &output)),
        PluginCommand::Load {
            dir,
            to_registry,
            registry,
        } => block_on(remote::load(&registry, &dir, to_registry.as_deref())),
        PluginCommand::Bench {
            plugin,
            cases,
            iterations,
        } => bench(rt, &plugin, &cases, iterations),
    }
}

/// `tessera plugin test`: every golden case, its outcome, a summary; status 1 on a failure.
fn test(
    rt: &WasmRuntime,
    plugin: &PathBuf,
    cases: &Path,
    limits: &Limits,
) -> anyhow::Result<ExitCode> {
    let loaded = rt.load(&read(plugin)?, &plugin.display().to_string())?;
    let results = test_plugin(rt, &loaded, cases, limits)?;
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    for result in &results {
        match &result.failure {
            None => println!("ok    {} {}", result.name, dim(&result.description)),
            Some(failure) => {
                println!("FAIL  {} {}", result.name, dim(&result.description));
                for line in failure.lines() {
                    println!("      {line}");
                }
            }
        }
    }
    println!(
        "{} {}: {} passed, {} failed",
        loaded.info.name,
        loaded.info.version,
        results.len() - failed,
        failed
    );
    if results.is_empty() {
        anyhow::bail!("no golden cases in {}", cases.display());
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `tessera plugin inspect FILE`: what the component is and whether this host loads it.
fn inspect(rt: &WasmRuntime, plugin: &PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    let bytes = read(plugin)?;
    let source = plugin.display().to_string();
    let inspection = rt.inspect(&bytes, &source)?;
    let loaded = match inspection.kind {
        Some(tessera::wasm::PluginKind::ModuleReconciler) => {
            rt.load_module(&bytes, &source).map(|m| m.info)
        }
        _ => rt.load(&bytes, &source).map(|p| p.info.clone()),
    };
    if json {
        let info = loaded.as_ref().ok();
        let error = loaded.as_ref().err().map(|e| e.to_string());
        let doc = serde_json::json!({ "inspection": inspection, "info": info, "loadError": error });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("file:      {source}");
    println!("digest:    sha256:{}", inspection.digest);
    println!("size:      {} bytes", inspection.size);
    println!(
        "kind:      {}",
        inspection
            .kind
            .map(|k| k.to_string())
            .unwrap_or_else(|| "not a Tessera plugin".into())
    );
    println!(
        "contract:  {}",
        inspection.contract.as_deref().unwrap_or("-")
    );
    match &loaded {
        Ok(info) => {
            println!("name:      {}", info.name);
            println!("version:   {}", info.version);
            println!("about:     {}", info.description);
        }
        Err(err) => println!("loads:     no — {err}"),
    }
    print_interface(&inspection)?;
    Ok(ExitCode::SUCCESS)
}

/// Exports, imports (marking those this host does not offer) and declared requests.
fn print_interface(inspection: &tessera::wasm::inspect::Inspection) -> anyhow::Result<()> {
    println!("exports:");
    for export in &inspection.exports {
        println!("  {export}");
    }
    println!("imports:");
    for import in &inspection.imports {
        let mark = if inspection.missing_imports.contains(import) {
            "  (not offered by this host)"
        } else {
            ""
        };
        println!("  {import}{mark}");
    }
    match &inspection.requests {
        Some(requests) => print!(
            "requests (granted only by the operator):\n{}",
            indent(&serde_saphyr::to_string(requests)?)
        ),
        None => println!("requests:  none declared"),
    }
    Ok(())
}

/// `tessera plugin bench`: p50/p99/max per golden case.
fn bench(
    rt: &WasmRuntime,
    plugin: &PathBuf,
    cases: &Path,
    iterations: usize,
) -> anyhow::Result<ExitCode> {
    let loaded = rt.load(&read(plugin)?, &plugin.display().to_string())?;
    println!(
        "{} {} ({} bytes, loaded in {:.2?}{})",
        loaded.info.name,
        loaded.info.version,
        loaded.inspection.size,
        loaded.load_time,
        if loaded.from_cache {
            " from cache"
        } else {
            ", compiled"
        }
    );
    println!("{:<40} {:>10} {:>10} {:>10}", "case", "p50", "p99", "max");
    for (case, stats) in bench_plugin(rt, &loaded, cases, iterations)? {
        println!(
            "{:<40} {:>10.1?} {:>10.1?} {:>10.1?}",
            case, stats.p50, stats.p99, stats.max
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

fn dim(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("— {text}")
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

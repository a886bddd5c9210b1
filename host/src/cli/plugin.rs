use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use tessera::harness::{bench_module, bench_plugin, test_module, test_plugin};
use tessera::plugins::LimitsOverride;
use tessera::wasm::{Limits, Loaded, WasmRuntime};

use super::oci as remote;
use super::registry::RegistryArgs;
use super::run_case::run_case;
use super::scaffold::{Lang, NewKind, new_plugin};
use super::{DocFormat, ReportFormat};

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Start a new plugin: a crate with a sample plugin, golden cases and its grant requests
    /// that builds and passes `cargo test` and `tessera plugin test` right away. Inside a
    /// Tessera checkout's `plugins/` it joins the workspace; elsewhere it is a crate of its
    /// own using the SDK at `--sdk` (found automatically inside a checkout).
    New {
        /// The plugin's name: lower-case letters, digits and dashes.
        name: String,
        /// Which world the plugin implements.
        #[arg(long, value_enum)]
        kind: NewKind,
        /// The plugin's language (Python: module reconcilers, built by componentize-py).
        #[arg(long, value_enum, default_value_t)]
        lang: Lang,
        /// Where to create the crate [default: ./NAME].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The Tessera SDK (`sdk/` of a Tessera checkout), for a crate outside a checkout.
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
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
        /// Time budget per call, e.g. `500ms` or `2s`.
        #[arg(long, value_parser = super::duration)]
        timeout: Option<std::time::Duration>,
    },
    /// Run a plugin once on a case file and print what it answers (for a module reconciler,
    /// after answering its requirements from the case's `observed`), without comparing it
    /// with the case's expectation. Status 1 when the plugin refuses or fails.
    Run {
        /// The plugin component (`.wasm`).
        plugin: PathBuf,
        /// A golden case file: its input is used, its `expect` ignored.
        #[arg(long)]
        case: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t)]
        output: DocFormat,
    },
    /// Show a plugin's contract version, kind, exports, imports, size and digest; exit with
    /// status 1 when this host cannot load it. Given a registry reference instead of a file,
    /// show the remote metadata (no component download).
    Inspect {
        /// The plugin component (`.wasm`) or `registry/repository[:tag|@digest]`.
        plugin: String,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t)]
        output: ReportFormat,
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
        /// Sign the pushed digest with this private key too (as `tessera plugin sign`; the
        /// password comes from $COSIGN_PASSWORD).
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a plugin (by tag or digest) and write its component, checking every digest.
    Pull {
        /// `registry/repository[:tag|@digest]`.
        reference: String,
        /// The file to write [default: `<repository name>.wasm`].
        #[arg(long)]
        dest: Option<PathBuf>,
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
        /// Write PREFIX.key and PREFIX.pub.
        #[arg(long, default_value = "cosign")]
        output_prefix: PathBuf,
        /// Write the private key unencrypted when $COSIGN_PASSWORD is empty (refused
        /// otherwise).
        #[arg(long)]
        allow_empty_password: bool,
    },
    /// Copy plugins (and their signatures) into an OCI image-layout directory.
    Save {
        /// References to save.
        #[arg(required = true)]
        references: Vec<String>,
        /// The layout directory (created or added to).
        #[arg(long)]
        dir: PathBuf,
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
        PluginCommand::New {
            name,
            kind,
            lang,
            dir,
            sdk,
        } => new_plugin(&name, kind, lang, dir, sdk).map(|()| ExitCode::SUCCESS),
        PluginCommand::Run {
            plugin,
            case,
            output,
        } => run_case(rt, &plugin, &case, &Limits::default(), output),
        PluginCommand::Test {
            plugin,
            cases,
            memory_mib,
            timeout,
        } => {
            let limits = LimitsOverride {
                memory_mib,
                timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                ..LimitsOverride::default()
            }
            .apply(Limits::default());
            test(rt, &plugin, &cases, &limits)
        }
        PluginCommand::Inspect {
            plugin,
            output,
            registry,
        } => {
            let json = output == ReportFormat::Json;
            let path = PathBuf::from(&plugin);
            if !path.exists() {
                return block_on(remote::inspect_remote(&registry, &plugin, json));
            }
            inspect(rt, &path, json)
        }
        PluginCommand::Bench {
            plugin,
            cases,
            iterations,
        } => bench(rt, &plugin, &cases, iterations),
        registry_command => run_registry(rt, registry_command),
    }
}

/// The commands that talk to a registry or handle keys.
fn run_registry(rt: &WasmRuntime, command: PluginCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginCommand::Push {
            file,
            reference,
            version,
            sign,
            registry,
        } => block_on(remote::push(
            rt,
            &registry,
            &file,
            &reference,
            version,
            sign.as_deref(),
        )),
        PluginCommand::Pull {
            reference,
            dest,
            key,
            registry,
        } => block_on(remote::pull(&registry, &reference, dest, key)),
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
        PluginCommand::Keygen {
            output_prefix,
            allow_empty_password,
        } => remote::keygen(&output_prefix, allow_empty_password),
        PluginCommand::Save {
            references,
            dir,
            registry,
        } => block_on(remote::save(&registry, &references, &dir)),
        PluginCommand::Load {
            dir,
            to_registry,
            registry,
        } => block_on(remote::load(&registry, &dir, to_registry.as_deref())),
        other => anyhow::bail!("not a registry command: {other:?}"),
    }
}

/// The component at `path`, loaded as whichever kind it is.
pub(crate) fn read_plugin(rt: &WasmRuntime, path: &Path) -> anyhow::Result<Loaded> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(rt.load_any(&bytes, &path.display().to_string())?)
}

/// `tessera plugin test`: every golden case, its outcome, a summary; status 1 on a failure.
/// Shoot-extension cases or module cases, by the component's kind.
fn test(
    rt: &WasmRuntime,
    plugin: &Path,
    cases: &Path,
    limits: &Limits,
) -> anyhow::Result<ExitCode> {
    let loaded = read_plugin(rt, plugin)?;
    let results = match &loaded {
        Loaded::Extension(p) => test_plugin(rt, p, cases, limits)?,
        Loaded::Module(m) => test_module(rt, m, cases, limits)?,
    };
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
    let info = loaded.info();
    println!(
        "{} {}: {} passed, {} failed",
        info.name,
        info.version,
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
    let kind = inspection
        .kind
        .unwrap_or(tessera::wasm::PluginKind::ShootExtension);
    let loaded = rt
        .load_kind(&bytes, &source, kind)
        .map(|l| l.info().clone());
    if json {
        let info = loaded.as_ref().ok();
        let error = loaded.as_ref().err().map(|e| e.to_string());
        let doc = serde_json::json!({ "inspection": inspection, "info": info, "loadError": error });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(loads_status(&loaded));
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
    Ok(loads_status(&loaded))
}

/// Status 1 when this host cannot load the plugin: scripts and CI see it fail.
fn loads_status<T, E>(loaded: &Result<T, E>) -> ExitCode {
    if loaded.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
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
    match &inspection.config_schema {
        Some(schema) => print!("{}", config_summary(schema)),
        None => println!("config:    no schema declared"),
    }
    Ok(())
}

/// The configuration's top-level fields from its JSON Schema: name, type, default and
/// description (`-o json` shows the whole schema).
fn config_summary(schema: &serde_json::Value) -> String {
    let mut out = String::from("config (-o json shows the whole schema):\n");
    let Some(properties) = schema["properties"].as_object() else {
        return out + "  no fields\n";
    };
    let closed = schema["additionalProperties"] == serde_json::Value::Bool(false);
    for (name, field) in properties {
        let ty = match &field["type"] {
            serde_json::Value::String(t) => t.clone(),
            serde_json::Value::Array(ts) => ts
                .iter()
                .filter_map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join("|"),
            _ => field["$ref"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
                .unwrap_or("-")
                .to_string(),
        };
        let default = match field.get("default") {
            Some(d) => format!(" = {d}"),
            None => String::new(),
        };
        let about = field["description"]
            .as_str()
            .unwrap_or("")
            .replace('\n', " ");
        out += &format!("  {name}: {ty}{default}\n");
        if !about.is_empty() {
            out += &format!("      {about}\n");
        }
    }
    if closed {
        out += "  (no other fields)\n";
    }
    out
}

/// `tessera plugin bench`: p50/p99/max per golden case (for a module reconciler, one
/// sample is a case's whole conversation, every round).
fn bench(
    rt: &WasmRuntime,
    plugin: &Path,
    cases: &Path,
    iterations: usize,
) -> anyhow::Result<ExitCode> {
    let loaded = read_plugin(rt, plugin)?;
    let size = loaded.inspection().size;
    let (load_time, from_cache) = loaded.loading();
    let info = loaded.info();
    println!(
        "{} {} ({size} bytes, loaded in {load_time:.2?}{})",
        info.name,
        info.version,
        if from_cache {
            " from cache"
        } else {
            ", compiled"
        }
    );
    let results = match &loaded {
        Loaded::Extension(p) => bench_plugin(rt, p, cases, iterations)?,
        Loaded::Module(m) => bench_module(rt, m, cases, iterations)?,
    };
    println!("{:<40} {:>10} {:>10} {:>10}", "case", "p50", "p99", "max");
    for (case, stats) in results {
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

#[cfg(test)]
mod tests {
    use super::config_summary;

    #[test]
    fn config_fields_show_type_default_and_description() {
        let schema = serde_json::json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "endpoint": {"type": "string", "default": "", "description": "Where to export."},
                "replicas": {"type": ["integer", "null"]},
                "budget": {"$ref": "#/$defs/Budget"},
            },
        });
        let text = config_summary(&schema);
        for line in [
            "  endpoint: string = \"\"\n      Where to export.",
            "  replicas: integer|null",
            "  budget: Budget",
            "(no other fields)",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}

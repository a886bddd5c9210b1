use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tessera::plugins::{ChainConfig, ShootChain, ShootIdentity, default_plugin_dir};
use tessera::render::{diff, parse_current_shoot, parse_runtime, render};
use tessera::wasm::WasmRuntime;

use super::DocFormat;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The Runtime manifest (YAML or JSON).
    #[arg(
        long,
        required_unless_present = "revision",
        conflicts_with = "revision"
    )]
    runtime: Option<PathBuf>,
    /// The Shoot as it exists on the Gardener side; renders a patch instead of a create.
    #[arg(long)]
    current_shoot: Option<PathBuf>,
    /// Instead of the Shoot, list the fields where the render differs from
    /// `--current-shoot` (e.g. `kubectl get shoot NAME -o yaml` of a Shoot KIM made): the
    /// fields the render sets that the live Shoot lacks or holds otherwise; what Gardener
    /// defaulted, others set, and KIM's generation annotation are not compared. Exits 1 when any differ: a host taking the
    /// landscape over would patch that Shoot.
    #[arg(long, requires = "current_shoot")]
    compare_live: bool,
    /// Chain configuration: plugin order, per-plugin configuration and limits.
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// Directory with `<plugin>.wasm` components [default: $TESSERA_PLUGIN_DIR, or
    /// `plugins/` next to the binary].
    #[arg(long)]
    pub(super) plugins: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    pub(super) output: DocFormat,
    /// Instead of the Shoot, write what step STEP is given in this render (its view of
    /// the draft the steps before it made, and of the current Shoot) and what it answers,
    /// as a golden case that `tessera plugin test` replays.
    #[arg(long, value_name = "STEP")]
    record: Option<String>,
    /// With `--record`: the case file to write [default: standard output].
    #[arg(long, requires = "record")]
    case: Option<PathBuf>,
    /// Replay revision N of the render history of Runtime `--of` (see `tessera history`):
    /// its components by digest (from the content store, else the registry the Plugin
    /// resource names, or `--plugins`), its recorded
    /// inputs, grants and configurations (kept in the content store by the host, or given
    /// with `--config`). Prints the Shoot and says whether its hash is the recorded one;
    /// exits 1 when it is not.
    #[arg(long, value_name = "N", requires = "of", conflicts_with_all = ["current_shoot", "record"])]
    revision: Option<i64>,
    /// With `--revision`: the Runtime (its name is the runtime id).
    #[arg(long, value_name = "RUNTIME", requires = "revision")]
    pub(super) of: Option<String>,
    /// With `--revision`: namespace of the Runtime.
    #[arg(long, short, default_value = "default", requires = "revision")]
    pub(super) namespace: String,
    /// With `--revision`: control-plane kubeconfig [default: in-cluster, else
    /// $KUBECONFIG, else ~/.kube/config].
    #[arg(long, requires = "revision")]
    pub(super) kubeconfig: Option<PathBuf>,
    /// With `--revision`: the host's content store [default: ~/.cache/tessera/plugins].
    /// Components of registry plugins it lacks are pulled into it, from the reference the
    /// `Plugin` resource lists for the recorded digest.
    #[arg(long, requires = "revision")]
    pub(super) plugin_store: Option<PathBuf>,
    /// With `--revision`: how to reach the registries of the plugins pulled (credentials
    /// need `--registry-host`: a replay may pull from several registries).
    #[command(flatten)]
    pub(super) registry: super::registry::RegistryArgs,
}

fn read(path: &PathBuf) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn run(rt: &WasmRuntime, args: RenderArgs) -> anyhow::Result<ExitCode> {
    if let Some(number) = args.revision {
        return super::replay::run(rt, number, &args);
    }
    let path = args.runtime.clone().context("--runtime is required")?;
    let runtime = parse_runtime(&read(&path)?, &path.display().to_string())?;
    let current = match &args.current_shoot {
        Some(path) => Some(parse_current_shoot(
            &read(path)?,
            &path.display().to_string(),
        )?),
        None => None,
    };
    let config = match &args.config {
        Some(path) => ChainConfig::from_file(path)?,
        None => ChainConfig::default(),
    };
    let plugin_dir = args.plugins.or_else(default_plugin_dir).context(
        "no plugin directory: pass --plugins DIR or set TESSERA_PLUGIN_DIR (build them with `cargo xtask build-plugins`)",
    )?;
    let chain = ShootChain::load(rt, &config, &plugin_dir)?;
    if let Some(step) = &args.record {
        let identity = ShootIdentity::of(&runtime.runtime.spec, config.project())
            .with_credentials_binding(config.enable_credential_binding);
        let id = runtime.runtime.id();
        let Some(recorded) =
            chain.record_step(rt, &runtime.json, &identity, id, current.as_deref(), step)?
        else {
            anyhow::bail!("--record {step}: no step of the chain is called {step}");
        };
        let description = format!("recorded from step {step} of Runtime {id}");
        let case = super::record::shoot_case(&recorded, &description)?;
        super::record::write_case(&case, args.case.as_deref())?;
        return Ok(ExitCode::SUCCESS);
    }
    let output = render(rt, &chain, &runtime, &config, current.as_deref())?;
    for (plugin, warning) in &output.warnings {
        eprintln!("warning: [{plugin}] {warning}");
    }
    if args.compare_live {
        return Ok(compare_live(
            &output.shoot,
            current.as_deref().unwrap_or("null"),
        ));
    }
    args.output.print(&output.shoot)?;
    Ok(ExitCode::SUCCESS)
}

/// Print where `rendered` differs from the live Shoot (JSON text); 1 when it does.
fn compare_live(rendered: &serde_json::Value, live: &str) -> ExitCode {
    let live: serde_json::Value = serde_json::from_str(live).unwrap_or_default();
    // As a host taking over compares: without its own bookkeeping and KIM's generation.
    let mut ignore = diff::bookkeeping();
    let kim = tessera::controllers::KimTakeover::default();
    ignore.push(format!(
        "metadata.annotations.{}",
        kim.generation_annotation
    ));
    let diffs = diff::differences(rendered, &live, &ignore);
    if diffs.is_empty() {
        println!("the render matches the live Shoot in every field it sets");
        return ExitCode::SUCCESS;
    }
    println!("{} field(s) differ from the live Shoot:", diffs.len());
    for line in diff::describe(&diffs, usize::MAX) {
        println!("  {line}");
    }
    ExitCode::from(1)
}

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tessera::plugins::{ChainConfig, ShootChain, ShootIdentity, default_plugin_dir};
use tessera::render::{parse_current_shoot, parse_runtime, render};
use tessera::wasm::WasmRuntime;

use super::DocFormat;

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The Runtime manifest (YAML or JSON).
    #[arg(long)]
    runtime: PathBuf,
    /// The Shoot as it exists on the Gardener side; renders a patch instead of a create.
    #[arg(long)]
    current_shoot: Option<PathBuf>,
    /// Chain configuration: plugin order, per-plugin configuration and limits.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory with `<plugin>.wasm` components [default: $TESSERA_PLUGIN_DIR, or
    /// `plugins/` next to the binary].
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    output: DocFormat,
    /// Instead of the Shoot, write what step STEP is given in this render (its view of
    /// the draft the steps before it made, and of the current Shoot) and what it answers,
    /// as a golden case that `tessera plugin test` replays.
    #[arg(long, value_name = "STEP")]
    record: Option<String>,
    /// With `--record`: the case file to write [default: standard output].
    #[arg(long, requires = "record")]
    case: Option<PathBuf>,
}

fn read(path: &PathBuf) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn run(rt: &WasmRuntime, args: RenderArgs) -> anyhow::Result<ExitCode> {
    let runtime = parse_runtime(&read(&args.runtime)?, &args.runtime.display().to_string())?;
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
        let identity = ShootIdentity::of(&runtime.runtime.spec, config.project());
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
    let output = render(rt, &chain, &runtime, config.project(), current.as_deref())?;
    for (plugin, warning) in &output.warnings {
        eprintln!("warning: [{plugin}] {warning}");
    }
    args.output.print(&output.shoot)?;
    Ok(ExitCode::SUCCESS)
}

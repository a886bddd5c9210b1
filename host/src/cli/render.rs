use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tessera::plugins::{ChainConfig, ShootChain, default_plugin_dir};
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
    let output = render(rt, &chain, &runtime, config.project(), current.as_deref())?;
    for (plugin, warning) in &output.warnings {
        eprintln!("warning: [{plugin}] {warning}");
    }
    args.output.print(&output.shoot)?;
    Ok(ExitCode::SUCCESS)
}

//! Command-line interface. Library errors are typed; here they become `anyhow` reports.

mod crds;
mod dev;
mod history;
mod modules;
mod oci;
mod plugin;
mod preview;
mod record;
mod registry;
mod render;
mod replay;
mod run;
mod run_case;
mod scaffold;
mod shadow;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tessera::wasm::{EngineOptions, WasmRuntime};

/// `-o/--output` for commands that print a document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DocFormat {
    #[default]
    Yaml,
    Json,
}

impl DocFormat {
    pub(crate) fn print(self, doc: &impl serde::Serialize) -> anyhow::Result<()> {
        match self {
            DocFormat::Yaml => print!("{}", serde_saphyr::to_string(doc)?),
            DocFormat::Json => println!("{}", serde_json::to_string_pretty(doc)?),
        }
        Ok(())
    }
}

/// `-o/--output` for commands that print a report for people, or JSON for scripts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    #[default]
    Text,
    Json,
}

/// A duration flag, written the same way everywhere: `30s`, `5m`, `1h30m`, `500ms`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    tessera::time::parse_duration(text)
}

/// The version this build reports (`--version`, the start-up log line): the crate's, or
/// `TESSERA_VERSION` at build time, so two builds of one source can be told apart (the
/// install test upgrades between such builds).
pub(crate) const VERSION: &str = match option_env!("TESSERA_VERSION") {
    Some(version) => version,
    None => env!("CARGO_PKG_VERSION"),
};

/// Tessera: Kubernetes control-plane reconciler whose cluster-shaping logic runs as
/// sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "tessera", version = VERSION, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Directory for precompiled plugins [default: ~/.cache/tessera/wasm].
    #[arg(long, global = true, env = "TESSERA_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile plugins every time instead of using the precompiled cache.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// The secret the precompiled cache's artifacts are signed with (outside the cache
    /// directory; created when missing) [default: ~/.config/tessera/cache.key].
    #[arg(long, global = true, env = "TESSERA_CACHE_KEY_FILE")]
    pub cache_key_file: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "TESSERA_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `tessera=debug`.
    #[arg(long, global = true, default_value = "warn", env = "TESSERA_LOG")]
    pub log: String,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render a Runtime into a Gardener Shoot with the plugin chain and print it as YAML.
    Render(render::RenderArgs),
    /// Plugin author tools: golden tests, inspection, benchmarks.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Run the operator: Runtimes into Gardener Shoots and kubeconfig Secrets, Plugins from
    /// registries, ModuleSets onto their target clusters.
    Run(Box<run::RunArgs>),
    /// Print the CustomResourceDefinitions (or write them with --dir DIR).
    Crds(crds::CrdsArgs),
    /// Install, update or remove modules on a cluster once, without a control plane.
    #[command(subcommand)]
    Modules(modules::ModulesCommand),
    /// Show how shadow plugin versions would have changed a Runtime's Shoot.
    Shadow(shadow::ShadowArgs),
    /// A local Kubernetes API server and OCI registry for trying plugins and modules
    /// (`tessera dev up`, `tessera dev down`).
    #[command(subcommand)]
    Dev(dev::DevCommand),
    /// List the Shoots the host applied for a Runtime (its render history), or show what
    /// changed between two of them.
    History(history::HistoryArgs),
}

pub fn init_tracing(global: &Global) {
    let mut filter = tracing_subscriber::EnvFilter::try_new(&global.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // kube's client logs every failed request at ERROR, in its own words; the host reports
    // each failure once, in words, under its error policy's log cap. Asked for by name, it
    // still shows.
    if !global.log.contains("kube_client") {
        filter = filter.add_directive(
            "kube_client::client::builder=off"
                .parse()
                .expect("directive"),
        );
    }
    // kube's watcher logs every 403 of a watch at WARN, each retry again; the host reports a
    // failing watch itself, once, under its log cap (and in /readyz and conditions).
    if !global.log.contains("kube_runtime") {
        filter = filter.add_directive("kube_runtime::watcher=error".parse().expect("directive"));
    }
    // Colour only for a person at a terminal, never in files and pipes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match global.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn runtime(global: &Global) -> anyhow::Result<WasmRuntime> {
    let mut options = EngineOptions::default();
    if global.no_cache {
        options.cache_dir = None;
    } else if let Some(dir) = &global.cache_dir {
        options.cache_dir = Some(dir.clone());
    }
    options.cache_key_file = global.cache_key_file.clone();
    Ok(WasmRuntime::new(options)?)
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Only the commands that run plugins pay for the engine (and its cache).
    let rt = || runtime(&cli.global);
    match cli.command {
        Command::Crds(args) => crds::run(args),
        Command::Shadow(args) => shadow::run(args),
        Command::History(args) => history::run(args),
        Command::Dev(command) => dev::run(command),
        Command::Render(args) => render::run(&rt()?, args),
        Command::Plugin(command) => plugin::run(&rt()?, command),
        Command::Run(args) => run::run(rt()?, *args),
        Command::Modules(command) => modules::run(rt()?, command),
    }
}

#[cfg(test)]
mod tests {
    /// clap checks a command's arguments only when that command is parsed (in debug
    /// builds); this checks every subcommand's at once (unique names, valid defaults).
    #[test]
    fn every_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}

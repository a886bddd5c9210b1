//! `tessera modules apply|delete`: reconcile one ModuleSet file against a cluster and
//! exit, without a control plane (module plugins from a directory).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use tessera::crd::ModuleSet;
use tessera::modules::set::{Notice, SetRequest, reconcile_set};
use tessera::modules::{DirectorySource, State, Target};
use tessera::wasm::WasmRuntime;

#[derive(Debug, Subcommand)]
pub enum ModulesCommand {
    /// Install or update the modules of a ModuleSet file, wait until they settle, print a
    /// summary. Exit status 0 when every module is Ready (or Warning), 1 otherwise.
    Apply(ModulesArgs),
    /// Remove every module the ModuleSet file's inventory lists from the cluster.
    Delete(ModulesArgs),
}

#[derive(Debug, Args)]
pub struct ModulesArgs {
    /// The cluster [default: in-cluster, else $KUBECONFIG, else ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A ModuleSet (YAML); its namespace/name keys the inventory on the cluster.
    #[arg(long = "set")]
    set: PathBuf,
    /// Directory with one component per module, `<module>.wasm`
    /// [default: the first-party plugin directory].
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// The component for one module, `NAME=PATH` (repeatable).
    #[arg(long = "module", value_name = "NAME=PATH")]
    modules: Vec<String>,
    /// Configuration file: per module (`modules.<name>`) its grants, limits, operator
    /// configuration and locked keys. Without grants a module may write and read nothing,
    /// except first-party plugins from the plugin directory, which get what they declare.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Give up waiting for modules to settle after this long.
    #[arg(long, value_parser = humantime_secs, default_value = "300")]
    timeout: Duration,
    /// Cloud provider and region passed to plugins as cluster facts.
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    region: Option<String>,
    /// Apply versions lower than the installed ones.
    #[arg(long)]
    allow_downgrade: bool,
}

fn humantime_secs(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = n.parse().map_err(|_| format!("not a duration: {s}"))?;
    match unit {
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("not a duration: {s} (use 90s or 5m)")),
    }
}

pub fn run(rt: WasmRuntime, command: ModulesCommand) -> anyhow::Result<ExitCode> {
    let (args, deleting) = match command {
        ModulesCommand::Apply(a) => (a, false),
        ModulesCommand::Delete(a) => (a, true),
    };
    let text = std::fs::read_to_string(&args.set)
        .with_context(|| format!("cannot read {}", args.set.display()))?;
    let set: ModuleSet = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a ModuleSet: {e}", args.set.display()))?;
    if set.metadata.name.is_none() {
        bail!("{}: metadata.name is required", args.set.display());
    }
    let key = format!(
        "{}/{}",
        set.metadata.namespace.as_deref().unwrap_or("default"),
        set.metadata.name.as_deref().unwrap_or_default()
    );
    let mut files = HashMap::new();
    for m in &args.modules {
        let (name, path) = m
            .split_once('=')
            .with_context(|| format!("--module {m}: expected NAME=PATH"))?;
        files.insert(name.to_string(), PathBuf::from(path));
    }
    let dir = args
        .plugins
        .clone()
        .or_else(tessera::plugins::default_plugin_dir)
        .unwrap_or_else(|| PathBuf::from("."));
    let settings = match &args.config {
        Some(path) => tessera::plugins::ChainConfig::from_file(path)?.modules,
        None => Default::default(),
    };
    let wasm = Arc::new(rt);
    let source = DirectorySource::new(dir, files, settings, wasm.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let kubeconfig = match &args.kubeconfig {
            Some(path) => Some(
                kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("kubeconfig {}", path.display()))?,
            ),
            None => None,
        };
        let (client, server) = tessera::modules::target::connect_kubeconfig(kubeconfig)
            .await
            .map_err(anyhow::Error::msg)?;
        let target = Target::connect(client, server, args.provider.clone(), args.region.clone())
            .await
            .context("cannot reach the cluster")?;
        let request = SetRequest {
            set: key.clone(),
            channel: set.spec.channel.as_deref(),
            modules: &set.spec.modules,
            deleting,
            allow_downgrade: args.allow_downgrade,
        };
        let started = Instant::now();
        loop {
            let outcome = reconcile_set(&target, &wasm, &source, &request).await?;
            for notice in &outcome.notices {
                match notice {
                    Notice::DowngradeRefused { module, offered, installed } => eprintln!(
                        "warning: module {module}: {offered} is lower than the installed {installed}; kept {installed}"
                    ),
                    Notice::Upgraded { module, from, to } => {
                        eprintln!("module {module}: {from} → {to}")
                    }
                    Notice::Removed { module } => eprintln!("module {module}: removed"),
                }
            }
            let state = outcome.state.unwrap_or(State::Ready);
            let settled = if deleting {
                outcome.deleted
            } else {
                !matches!(state, State::Processing | State::Deleting)
            };
            if settled || started.elapsed() > args.timeout {
                println!("ModuleSet {key}: {}", if deleting && outcome.deleted { "removed".to_string() } else { state.to_string() });
                for m in &outcome.modules {
                    println!(
                        "  {:<24} {:<10} {:<10} {:>4} objects  {}",
                        m.name,
                        m.version.as_deref().unwrap_or("-"),
                        m.state.to_string(),
                        m.objects,
                        m.message.as_deref().unwrap_or("")
                    );
                }
                if !settled {
                    eprintln!("gave up after {:?}", args.timeout);
                    return Ok(ExitCode::FAILURE);
                }
                let ok = deleting || matches!(state, State::Ready | State::Warning);
                return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
            }
            let wait = outcome
                .requeue
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(200), Duration::from_secs(2));
            tokio::time::sleep(wait).await;
        }
    })
}

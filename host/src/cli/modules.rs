//! `tessera modules apply|delete`: reconcile one ModuleSet file against a cluster and
//! exit, without a control plane (module plugins from a directory).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use kube::ResourceExt;
use tessera::crd::ModuleSet;
use tessera::modules::set::{Notice, SetOutcome, SetRequest, reconcile_set};
use tessera::modules::{DirectorySource, State, Target};
use tessera::wasm::WasmRuntime;

use super::duration;

#[derive(Debug, Subcommand)]
pub enum ModulesCommand {
    /// Install or update the modules of a ModuleSet file, wait until they settle, print a
    /// summary. Exit status 0 when every module is Ready (or Warning), 1 otherwise.
    Apply(ApplyArgs),
    /// Remove every module the ModuleSet file's inventory lists from the cluster.
    Delete(ModulesArgs),
    /// Write what one module's plugin is given by the cluster now (its requirements read
    /// live, Secrets redacted) and what it answers, as a golden case that `tessera plugin
    /// test` replays. Applies nothing.
    Record(RecordArgs),
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    set: ModulesArgs,
    /// Write nothing: show, module by module, what one pass would create, change (a diff
    /// of the live object and the API server's dry-run answer) and delete. Exit status 1
    /// when a module errs or an object would be refused.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    set: ModulesArgs,
    /// The module to record (its name in the set).
    #[arg(value_name = "MODULE")]
    module: String,
    /// The case file to write [default: standard output].
    #[arg(long)]
    case: Option<PathBuf>,
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
    /// Grant each `--module` component what it asks for itself (the `requests.yaml` embedded
    /// in it), printing those grants first, unless `--config` grants it something. For trying
    /// a module on a cluster of one's own; `tessera run` never does this: there the
    /// operator's grants on the `Plugin` are the only ones.
    #[arg(long)]
    grant_requested: bool,
    /// Give up waiting for modules to settle after this long.
    #[arg(long, value_parser = duration, default_value = "5m")]
    timeout: Duration,
    /// Cloud provider passed to plugins as a cluster fact (e.g. `aws`).
    #[arg(long)]
    provider: Option<String>,
    /// Region passed to plugins as a cluster fact (e.g. `eu-central-1`).
    #[arg(long)]
    region: Option<String>,
    /// Apply versions lower than the installed ones.
    #[arg(long)]
    allow_downgrade: bool,
}

pub fn run(rt: WasmRuntime, command: ModulesCommand) -> anyhow::Result<ExitCode> {
    let (args, deleting, mode) = match command {
        ModulesCommand::Apply(a) if a.dry_run => (a.set, false, Mode::Preview),
        ModulesCommand::Apply(a) => (a.set, false, Mode::Settle),
        ModulesCommand::Delete(a) => (a, true, Mode::Settle),
        ModulesCommand::Record(r) => (r.set, false, Mode::Record(r.module, r.case)),
    };
    let set = read_set(&args.set)?;
    let key = format!(
        "{}/{}",
        set.metadata.namespace.as_deref().unwrap_or("default"),
        set.metadata.name.as_deref().unwrap_or_default()
    );
    let wasm = Arc::new(rt);
    let source = module_source(&args, wasm.clone())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let target = connect(&args).await?;
        let request = SetRequest {
            set: key.clone(),
            channel: set.spec.channel.as_deref(),
            modules: &set.spec.modules,
            deleting,
            allow_downgrade: args.allow_downgrade,
            labels: set.labels(),
            // No control plane, no windows: what is applied is what the user asked now.
            maintenance: tessera::modules::windows::Maintenance::Open,
        };
        match &mode {
            Mode::Record(module, case) => {
                super::record::record(&target, &wasm, &source, &request, module, case.as_deref())
                    .await
            }
            Mode::Preview => super::preview::preview(&target, &wasm, &source, &request).await,
            Mode::Settle => settle(&target, &wasm, &source, &request, args.timeout).await,
        }
    })
}

/// What a `modules` command does with the set.
enum Mode {
    /// Reconcile until settled (`apply`, `delete`).
    Settle,
    /// `apply --dry-run`.
    Preview,
    /// `record MODULE [--case FILE]`.
    Record(String, Option<PathBuf>),
}

/// The ModuleSet file: one ModuleSet (not a Runtime or anything else), no unknown fields,
/// with a name (it keys the inventory on the cluster).
fn read_set(path: &Path) -> anyhow::Result<ModuleSet> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let set: ModuleSet = tessera::input::object(&text, &path.display().to_string())?;
    if set.metadata.name.is_none() {
        bail!("{}: metadata.name is required", path.display());
    }
    Ok(set)
}

/// Where each module's component comes from, with the operator's settings per module.
fn module_source(args: &ModulesArgs, wasm: Arc<WasmRuntime>) -> anyhow::Result<DirectorySource> {
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
    let mut settings = match &args.config {
        Some(path) => tessera::plugins::ChainConfig::from_file(path)?.modules,
        None => Default::default(),
    };
    if args.grant_requested {
        grant_requested(&files, &mut settings)?;
    }
    Ok(DirectorySource::new(dir, files, settings, wasm))
}

/// `--grant-requested`: each `--module` component's own requests become its grants where
/// the configuration grants nothing; what is granted is printed, so nothing is granted
/// unseen.
fn grant_requested(
    files: &HashMap<String, PathBuf>,
    settings: &mut std::collections::BTreeMap<String, tessera::plugins::ModuleSettings>,
) -> anyhow::Result<()> {
    let mut names: Vec<&String> = files.keys().collect();
    names.sort();
    for name in names {
        let entry = settings.entry(name.clone()).or_default();
        if entry.grants.is_some() {
            eprintln!("module {name}: granted what --config lists (not its requests)");
            continue;
        }
        let path = &files[name];
        let bytes =
            std::fs::read(path).with_context(|| format!("--module {name}={}", path.display()))?;
        let declared = tessera::wasm::inspect::declared(&bytes)
            .map_err(|e| anyhow::anyhow!("--module {name}={}: {e}", path.display()))?;
        let grants = declared.requests.map(|r| r.grants).unwrap_or_default();
        let shown = serde_saphyr::to_string(&grants).context("grants as YAML")?;
        eprintln!("module {name}: granting what its component requests (--grant-requested):");
        for line in shown.lines() {
            eprintln!("  {line}");
        }
        entry.grants = Some(grants);
    }
    Ok(())
}

async fn connect(args: &ModulesArgs) -> anyhow::Result<Target> {
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
    Target::connect(client, server, args.provider.clone(), args.region.clone())
        .await
        .context("cannot reach the cluster")
}

/// Reconcile until the modules settle (or `timeout` passes), showing each module's state as
/// it changes, then print the summary.
async fn settle(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &DirectorySource,
    request: &SetRequest<'_>,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let mut before = Snapshot::new();
    loop {
        let outcome = reconcile_set(target, wasm, source, request).await?;
        announce(&outcome.notices);
        let now = snapshot(&outcome);
        progress(started, &before, &now);
        before = now;
        let done = settled(request.deleting, outcome.deleted, &states(&outcome));
        if done || started.elapsed() > timeout {
            print_summary(&request.set, &outcome, request.deleting);
            if !done {
                eprintln!("gave up after {:?}", timeout);
                return Ok(ExitCode::FAILURE);
            }
            let state = outcome.state.unwrap_or(State::Ready);
            let ok = request.deleting || matches!(state, State::Ready | State::Warning);
            return Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        let wait = outcome
            .requeue
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_millis(200), Duration::from_secs(2));
        tokio::time::sleep(wait).await;
    }
}

/// What one pass showed of each module, to see whether anything still changes.
type Snapshot = Vec<(String, String, Option<String>)>;

fn snapshot(outcome: &SetOutcome) -> Snapshot {
    outcome
        .modules
        .iter()
        .map(|m| (m.name.clone(), m.state.to_string(), m.message.clone()))
        .collect()
}

/// Whether to stop reconciling: deletion is done, or no module (nor the set) is still
/// Processing or Deleting. One module's Error does not stop the others.
fn settled(deleting: bool, deleted: bool, states: &[State]) -> bool {
    if deleting {
        return deleted;
    }
    !states
        .iter()
        .any(|s| matches!(s, State::Processing | State::Deleting))
}

/// The states of every module and of the set.
fn states(outcome: &SetOutcome) -> Vec<State> {
    outcome
        .modules
        .iter()
        .map(|m| m.state)
        .chain(outcome.state)
        .collect()
}

/// One line per module whose state or message changed since the last pass.
fn progress(started: Instant, before: &Snapshot, now: &Snapshot) {
    for entry @ (name, state, message) in now {
        if !before.contains(entry) {
            eprintln!(
                "{:>5.0?}  {name:<24} {state:<10} {}",
                started.elapsed(),
                message.as_deref().unwrap_or("")
            );
        }
    }
}

fn announce(notices: &[Notice]) {
    for notice in notices {
        match notice {
            Notice::DowngradeRefused {
                module,
                offered,
                installed,
            } => eprintln!(
                "warning: module {module}: {offered} is lower than the installed {installed}; kept {installed}"
            ),
            Notice::Upgraded { module, from, to } => eprintln!("module {module}: {from} → {to}"),
            Notice::Removed { module } => eprintln!("module {module}: removed"),
        }
    }
}

fn print_summary(key: &str, outcome: &SetOutcome, deleting: bool) {
    let state = outcome.state.unwrap_or(State::Ready);
    let shown = if deleting && outcome.deleted {
        "removed".to_string()
    } else {
        state.to_string()
    };
    println!("ModuleSet {key}: {shown}");
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_waits_for_every_module_not_the_first_error() {
        use State::*;
        assert!(settled(false, false, &[Ready, Warning]));
        assert!(!settled(false, false, &[Error, Processing]));
        assert!(settled(false, false, &[Error, Ready]));
        assert!(!settled(true, false, &[Ready]));
        assert!(settled(true, true, &[]));
    }
}

//! The sandbox every call runs in: a store state with no ambient authority, and the one
//! linker all plugins are instantiated with.
//!
//! Offered: the `tessera:plugin/host` logging import, and the WASI interfaces a plain
//! `wasm32-wasip2` std build imports. Those are inert: stdio goes to a small in-memory
//! buffer (kept for panic messages), there are no preopened directories, and the HashMap
//! seed is a constant. Reading the clocks, randomness or the filesystem traps with
//! [`Denied`], so a plugin finds out at once instead of silently computing with made-up
//! values. The environment reads as empty, because Rust's panic handler looks up
//! `RUST_BACKTRACE` before printing its message; a call that read it and still returned is
//! refused afterwards (see [`PluginState::environment_read`]). Anything else (sockets, HTTP,
//! …) is refused when the plugin is loaded.

use std::sync::Arc;

use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable, Val};
use wasmtime::{Engine, Result};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::{LogLevel, shoot};
use super::limits::{Limits, MemoryLimiter};

/// Bytes of guest stdout/stderr kept per call (enough for a panic message).
const STDIO_CAPTURE: usize = 64 * 1024;
/// Longest log line forwarded, in characters; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;

/// Who is calling: attached to every log line a plugin emits.
#[derive(Debug, Clone)]
pub struct LogContext {
    pub plugin: Arc<str>,
    pub version: Arc<str>,
    pub runtime_id: Arc<str>,
}

/// One budget per call for everything a plugin emits: log lines count against it as they
/// come, the returned output when the call ends ([`PluginState::emit`]).
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    used: usize,
    lines: u32,
    max_lines: u32,
    dropped: u32,
}

/// The state of one store, i.e. of one call.
pub struct PluginState {
    /// Built on first use: plugins built without WASI never pay for it.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdio: MemoryOutputPipe,
    log: LogContext,
    pub(crate) budget: Budget,
    /// Set when the guest asked for its environment variables.
    pub(crate) environment_read: bool,
    /// A panic the guest reported through `log` (guests without WASI have no stderr).
    panic: Option<String>,
}

impl PluginState {
    pub fn new(limits: &Limits, log: LogContext) -> Self {
        let stdio = MemoryOutputPipe::new(STDIO_CAPTURE);
        Self {
            wasi: None,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes()),
            stdio,
            log,
            budget: Budget {
                limit: limits.output_bytes(),
                used: 0,
                lines: 0,
                max_lines: limits.log_lines,
                dropped: 0,
            },
            environment_read: false,
            panic: None,
        }
    }

    /// Count `bytes` of output against the call's budget; `Err(total)` when it is spent.
    pub(crate) fn emit(&mut self, bytes: usize) -> Result<(), usize> {
        self.budget.used = self.budget.used.saturating_add(bytes);
        if self.budget.used > self.budget.limit {
            return Err(self.budget.used);
        }
        Ok(())
    }

    /// The call's budget in bytes.
    pub(crate) fn budget_limit(&self) -> usize {
        self.budget.limit
    }

    /// The inert WASI context, built on first use.
    fn wasi(&mut self) -> &mut WasiCtx {
        let stdio = &self.stdio;
        self.wasi.get_or_insert_with(|| inert_wasi(stdio))
    }

    /// What the guest wrote to stdout/stderr, then the panic it logged, if any.
    pub fn stdio_text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.stdio.contents()).into_owned();
        if let Some(panic) = &self.panic {
            text.push_str(panic);
        }
        text
    }
}

/// WASI with nothing behind it: stdio into `stdio`, a constant HashMap seed.
fn inert_wasi(stdio: &MemoryOutputPipe) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(stdio.clone())
        .stderr(stdio.clone())
        .insecure_random_seed(0)
        .build()
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stdio = &self.stdio;
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| inert_wasi(stdio)),
            table: &mut self.table,
        }
    }
}

impl shoot::tessera::plugin::types::Host for PluginState {}

impl shoot::tessera::plugin::host::Host for PluginState {
    fn log(&mut self, level: LogLevel, message: String) {
        if matches!(level, LogLevel::Error) && message.starts_with("panicked at ") {
            // The SDK's panic hook: kept (unescaped, escaped when reported) for the trap's
            // error, whatever the log budget says.
            self.panic = Some(message.chars().take(MAX_LOG_LINE).collect());
        }
        let line = super::text::clamp(&message, MAX_LOG_LINE);
        let budget = &mut self.budget;
        budget.lines += 1;
        if budget.lines > budget.max_lines || budget.used + line.len() > budget.limit {
            budget.dropped += 1;
            if budget.dropped == 1 {
                tracing::warn!(plugin = %self.log.plugin, plugin_version = %self.log.version,
                    runtime_id = %self.log.runtime_id, "plugin log budget spent; dropping further lines");
            }
            return;
        }
        budget.used += line.len();
        let LogContext {
            plugin,
            version,
            runtime_id,
        } = &self.log;
        match level {
            LogLevel::Trace => {
                tracing::trace!(plugin = %plugin, plugin_version = %version, runtime_id = %runtime_id, "{line}")
            }
            LogLevel::Debug => {
                tracing::debug!(plugin = %plugin, plugin_version = %version, runtime_id = %runtime_id, "{line}")
            }
            LogLevel::Info => {
                tracing::info!(plugin = %plugin, plugin_version = %version, runtime_id = %runtime_id, "{line}")
            }
            LogLevel::Warn => {
                tracing::warn!(plugin = %plugin, plugin_version = %version, runtime_id = %runtime_id, "{line}")
            }
            LogLevel::Error => {
                tracing::error!(plugin = %plugin, plugin_version = %version, runtime_id = %runtime_id, "{line}")
            }
        }
    }
}

/// A capability the sandbox refuses; carried as the trap's error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugins are not granted {capability}")]
pub struct Denied {
    pub capability: &'static str,
}

const WASI_VERSION: &str = "0.2.12";

/// WASI functions that would hand out ambient authority, and what they grant.
const DENIED: &[(&str, &[&str], &str)] = &[
    (
        "wasi:clocks/wall-clock",
        &["now", "resolution"],
        "the clock",
    ),
    (
        "wasi:clocks/monotonic-clock",
        &[
            "now",
            "resolution",
            "subscribe-instant",
            "subscribe-duration",
        ],
        "the clock",
    ),
    (
        "wasi:random/random",
        &["get-random-bytes", "get-random-u64"],
        "randomness",
    ),
    (
        "wasi:random/insecure",
        &["get-insecure-random-bytes", "get-insecure-random-u64"],
        "randomness",
    ),
    (
        "wasi:filesystem/preopens",
        &["get-directories"],
        "the filesystem",
    ),
];

/// Interfaces linked from wasmtime-wasi as inert implementations.
const INERT: &[&str] = &[
    "wasi:cli/environment",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:filesystem/types",
    "wasi:random/insecure-seed",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
];

/// Our own imports.
const TESSERA: &[&str] = &["tessera:plugin/host", "tessera:plugin/types"];

/// The semver-compatibility key of an interface name: `pkg:ns/iface@1` or `@0.2`.
pub fn compat_key(name: &str) -> String {
    match name.split_once('@') {
        Some((base, version)) => {
            let mut parts = version.split('.');
            let major = parts.next().unwrap_or("0");
            if major == "0" {
                format!("{base}@0.{}", parts.next().unwrap_or("0"))
            } else {
                format!("{base}@{major}")
            }
        }
        None => name.to_string(),
    }
}

/// Every import a plugin may have, as compatibility keys.
pub fn offered_imports() -> Vec<String> {
    let wasi = DENIED
        .iter()
        .map(|(name, _, _)| *name)
        .chain(INERT.iter().copied())
        .map(|name| compat_key(&format!("{name}@{WASI_VERSION}")));
    let ours = TESSERA
        .iter()
        .map(|name| compat_key(&format!("{name}@{}", tessera_sdk::CONTRACT_VERSION)));
    wasi.chain(ours).collect()
}

struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// The linker all plugins share.
pub fn linker(engine: &Engine) -> Result<Linker<PluginState>> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::{cli, random, sync};
    use wasmtime_wasi::random::WasiRandom;

    let mut linker = Linker::new(engine);
    let l = &mut linker;
    sync::io::error::add_to_linker::<PluginState, HasIo>(l, |t| &mut t.table)?;
    sync::io::poll::add_to_linker::<PluginState, HasIo>(l, |t| &mut t.table)?;
    sync::io::streams::add_to_linker::<PluginState, HasIo>(l, |t| &mut t.table)?;
    sync::filesystem::types::add_to_linker::<PluginState, WasiFilesystem>(
        l,
        PluginState::filesystem,
    )?;
    random::insecure_seed::add_to_linker::<PluginState, WasiRandom>(l, |t| t.wasi().random())?;
    cli::exit::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::stdin::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::stdout::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::stderr::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::terminal_input::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::terminal_output::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::terminal_stdin::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::terminal_stdout::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;
    cli::terminal_stderr::add_to_linker::<PluginState, WasiCli>(l, PluginState::cli)?;

    for (interface, functions, capability) in DENIED {
        let mut instance = linker.instance(&format!("{interface}@{WASI_VERSION}"))?;
        for function in *functions {
            let capability: &'static str = capability;
            instance.func_new(function, move |_, _, _, _| {
                Err(wasmtime::Error::new(Denied { capability }))
            })?;
        }
    }

    // An empty environment that remembers it was asked.
    let mut env = linker.instance(&format!("wasi:cli/environment@{WASI_VERSION}"))?;
    env.func_new("get-environment", |mut store, _, _, results| {
        store.data_mut().environment_read = true;
        results[0] = Val::List(Vec::new());
        Ok(())
    })?;
    env.func_new("get-arguments", |_, _, _, results| {
        results[0] = Val::List(Vec::new());
        Ok(())
    })?;
    env.func_new("initial-cwd", |_, _, _, results| {
        results[0] = Val::Option(None);
        Ok(())
    })?;

    shoot::ShootExtension::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)?;
    Ok(linker)
}

//! A loaded plugin: compiled once, checked against the contract, pre-instantiated; every
//! call gets a fresh store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tessera_sdk::glue::{RawExtendInput, RawExtendOutput};
use tessera_sdk::{ErrorKind, Operation, PluginError};
use wasmtime::Store;
use wasmtime::component::Component;

use super::bindings::{self, shoot, shoot_api};
use super::engine::WasmRuntime;
use super::error::{CallError, Failure, LoadError};
use super::inspect::{Declared, Inspection, contract_supported, declared, inspect, sha256_hex};
use super::limits::Limits;
use super::sandbox::{Denied, LogContext, PluginState};
use super::text;
use super::{PluginKind, SUPPORTED_CONTRACTS};

/// What the plugin says about itself (`info()`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    pub contract_version: String,
    pub description: String,
}

impl PluginInfo {
    /// From a plugin's own words, clamped: names and versions end up in status and logs.
    pub(crate) fn clamped(
        name: String,
        version: String,
        contract_version: String,
        description: String,
    ) -> Self {
        Self {
            name: text::clamp(&name, text::NAME_CHARS),
            version: text::clamp(&version, text::VERSION_CHARS),
            contract_version: text::clamp(&contract_version, text::VERSION_CHARS),
            description: text::clamp(&description, text::DESCRIPTION_CHARS),
        }
    }
}

/// A component that passed the load-time checks.
pub(crate) struct Checked {
    pub instance_pre: wasmtime::component::InstancePre<PluginState>,
    pub inspection: Inspection,
    pub contract: String,
    pub from_cache: bool,
    pub load_time: Duration,
}

fn declared_by(bytes: &[u8], source: &str) -> Result<Declared, LoadError> {
    declared(bytes).map_err(|message| LoadError::Declared {
        source_name: source.to_string(),
        message,
    })
}

/// Per-call context for logs.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    pub runtime_id: String,
}

/// A compiled, checked, pre-instantiated shoot extension.
pub struct LoadedPlugin {
    pub source: String,
    pub inspection: Inspection,
    pub info: PluginInfo,
    /// Whether the compiled code came from the on-disk cache.
    pub from_cache: bool,
    /// Time to compile or deserialize.
    pub load_time: Duration,
    pre: shoot::ShootExtensionPre<PluginState>,
    names: (Arc<str>, Arc<str>),
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("source", &self.source)
            .field("info", &self.info)
            .field("digest", &self.inspection.digest)
            .finish()
    }
}

impl WasmRuntime {
    /// Compile (or fetch from the cache) and check a component.
    pub fn compile(
        &self,
        bytes: &[u8],
        source: &str,
    ) -> Result<(Component, bool, String), LoadError> {
        let digest = sha256_hex(bytes);
        if let Some(cache) = &self.cache
            && let Some(component) = cache.get(&self.engine, &digest)
        {
            return Ok((component, true, digest));
        }
        let component =
            Component::from_binary(&self.engine, bytes).map_err(|e| LoadError::Compile {
                source_name: source.to_string(),
                message: format!("{e:#}"),
            })?;
        if let Some(cache) = &self.cache {
            match component.serialize() {
                Ok(artifact) => {
                    if let Err(err) = cache.put(&digest, &artifact) {
                        tracing::warn!(error = %err, dir = %cache.dir().display(), "cannot write the precompiled cache");
                    }
                }
                Err(err) => tracing::warn!(error = %err, "cannot serialize a compiled component"),
            }
        }
        Ok((component, false, digest))
    }

    /// Static inspection of component bytes (no instantiation).
    pub fn inspect(&self, bytes: &[u8], source: &str) -> Result<Inspection, LoadError> {
        let (component, _, digest) = self.compile(bytes, source)?;
        let declared = declared_by(bytes, source)?;
        Ok(inspect(
            &self.engine,
            &component,
            digest,
            bytes.len(),
            declared,
        ))
    }

    /// Load a shoot extension from a file.
    pub fn load_file(&self, path: &std::path::Path) -> Result<Arc<LoadedPlugin>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        self.load(&bytes, &path.display().to_string())
    }

    /// Compile and run every load-time check for a plugin of `kind`: a Tessera export of a
    /// supported contract version, nothing imported beyond what the sandbox offers, and a
    /// successful link. Shared by both plugin kinds.
    pub(crate) fn checked(
        &self,
        bytes: &[u8],
        source: &str,
        kind: PluginKind,
    ) -> Result<Checked, LoadError> {
        let started = Instant::now();
        let (component, from_cache, digest) = self.compile(bytes, source)?;
        let load_time = started.elapsed();
        let declared = declared_by(bytes, source)?;
        let inspection = inspect(&self.engine, &component, digest, bytes.len(), declared);
        let source_name = source.to_string();
        let Some(contract) = inspection.contract.clone() else {
            return Err(LoadError::NotAPlugin {
                source_name,
                exports: inspection.exports.join(", "),
            });
        };
        if !contract_supported(&contract) {
            return Err(LoadError::ContractMismatch {
                source_name,
                found: contract,
                supported: SUPPORTED_CONTRACTS
                    .iter()
                    .map(|v| format!("{v}.x"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if !inspection.missing_imports.is_empty() {
            return Err(LoadError::MissingImports {
                source_name,
                missing: inspection.missing_imports.join(", "),
            });
        }
        if inspection.kind != Some(kind) {
            return Err(LoadError::Link {
                source_name,
                message: format!(
                    "expected a {kind} plugin, found a {} plugin",
                    inspection.kind.map(|k| k.to_string()).unwrap_or_default()
                ),
            });
        }
        let instance_pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| LoadError::Link {
                    source_name: source_name.clone(),
                    message: format!("{e:#}"),
                })?;
        Ok(Checked {
            instance_pre,
            inspection,
            contract,
            from_cache,
            load_time,
        })
    }

    /// Compile, check contract and imports, pre-instantiate, and ask the shoot extension
    /// who it is ([`WasmRuntime::load`] keeps it by digest).
    pub(crate) fn load_uncached(
        &self,
        bytes: &[u8],
        source: &str,
    ) -> Result<LoadedPlugin, LoadError> {
        let Checked {
            instance_pre,
            inspection,
            contract,
            from_cache,
            load_time,
        } = self.checked(bytes, source, PluginKind::ShootExtension)?;
        let source_name = source.to_string();
        let pre = shoot::ShootExtensionPre::new(instance_pre).map_err(|e| LoadError::Link {
            source_name: source_name.clone(),
            message: format!("{e:#}"),
        })?;
        let mut plugin = LoadedPlugin {
            source: source_name.clone(),
            inspection,
            info: PluginInfo {
                name: source_name.clone(),
                version: "?".into(),
                contract_version: contract,
                description: String::new(),
            },
            from_cache,
            load_time,
            pre,
            names: (Arc::from(source_name.as_str()), Arc::from("?")),
        };
        let info = plugin.call_info(self).map_err(|e| LoadError::Info {
            source_name: source_name.clone(),
            cause: e.cause,
        })?;
        if !contract_supported(&info.contract_version) {
            return Err(LoadError::ContractMismatch {
                source_name,
                found: info.contract_version,
                supported: SUPPORTED_CONTRACTS.join(", "),
            });
        }
        plugin.names = (
            Arc::from(info.name.as_str()),
            Arc::from(info.version.as_str()),
        );
        plugin.info = info;
        Ok(plugin)
    }
}

impl LoadedPlugin {
    /// The plugin's name from `info()`.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    fn store(&self, rt: &WasmRuntime, limits: &Limits, runtime_id: &str) -> Store<PluginState> {
        new_store(rt, limits, &self.names, runtime_id)
    }

    fn fail(&self, cause: Failure) -> CallError {
        CallError {
            plugin: self.info.name.clone(),
            version: self.info.version.clone(),
            cause,
        }
    }

    /// Instantiate in a fresh store and call `info()`: the fixed cost of every call.
    pub fn call_info(&self, rt: &WasmRuntime) -> Result<PluginInfo, CallError> {
        let limits = Limits::default();
        let mut store = self.store(rt, &limits, "");
        let result = self.pre.instantiate(&mut store).and_then(|instance| {
            instance
                .tessera_plugin_shoot_extension_api()
                .call_info(&mut store)
        });
        match result {
            Ok(info) => Ok(PluginInfo::clamped(
                info.name,
                info.version,
                info.contract_version,
                info.description,
            )),
            Err(err) => Err(self.fail(classify(err, &store, &limits))),
        }
    }

    /// Run `extend` in a fresh sandbox.
    pub fn extend(
        &self,
        rt: &WasmRuntime,
        input: RawExtendInput,
        limits: &Limits,
        ctx: &CallContext,
    ) -> Result<RawExtendOutput, CallError> {
        self.extend_parsed(rt, input, limits, ctx)
            .map(|(out, _)| out)
    }

    /// Run `extend` in a fresh sandbox; also return the new draft parsed.
    #[tracing::instrument(
        name = "plugin_call",
        skip_all,
        fields(plugin = %self.info.name, version = %self.info.version, call = "extend")
    )]
    pub fn extend_parsed(
        &self,
        rt: &WasmRuntime,
        input: RawExtendInput,
        limits: &Limits,
        ctx: &CallContext,
    ) -> Result<(RawExtendOutput, serde_json::Value), CallError> {
        let mut store = self.store(rt, limits, &ctx.runtime_id);
        let wit_input = to_wit(input);
        let result = self.pre.instantiate(&mut store).and_then(|instance| {
            instance
                .tessera_plugin_shoot_extension_api()
                .call_extend(&mut store, &wit_input)
        });
        let answer = evaluate(&mut store, limits, result, |r| match r {
            Ok(o) => o.shoot.len() + o.warnings.iter().map(String::len).sum::<usize>(),
            Err(e) => e.message.len(),
        });
        let output = match answer.map_err(|f| self.fail(f))? {
            Ok(output) => output,
            Err(err) => return Err(self.fail(Failure::Plugin(from_wit_error(err)))),
        };
        let shoot = match serde_json::from_str::<serde_json::Value>(&output.shoot) {
            Ok(value @ serde_json::Value::Object(_)) => value,
            Ok(other) => {
                return Err(self.fail(Failure::InvalidOutput(format!(
                    "the Shoot must be a JSON object, got {}",
                    json_type(&other)
                ))));
            }
            Err(err) => {
                return Err(self.fail(Failure::InvalidOutput(format!(
                    "the Shoot is not JSON: {err}"
                ))));
            }
        };
        let raw = RawExtendOutput {
            shoot: output.shoot,
            warnings: text::clamp_warnings(output.warnings),
        };
        Ok((raw, shoot))
    }
}

/// Where the time of one `extend` call goes, for benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallSplit {
    /// A fresh store and instance.
    pub instantiate: Duration,
    /// The call: input copied in, parsed by the plugin, its logic, the output serialized
    /// and copied out.
    pub call: Duration,
    /// The host parsing the returned Shoot.
    pub output: Duration,
}

impl LoadedPlugin {
    /// Run `extend` once like [`LoadedPlugin::extend`] and say where the time went.
    pub fn extend_split(
        &self,
        rt: &WasmRuntime,
        input: RawExtendInput,
        limits: &Limits,
    ) -> Result<CallSplit, CallError> {
        let started = Instant::now();
        let mut store = self.store(rt, limits, "");
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.fail(classify(e, &store, limits)))?;
        let instantiated = Instant::now();
        let output = instance
            .tessera_plugin_shoot_extension_api()
            .call_extend(&mut store, &to_wit(input))
            .map_err(|e| self.fail(classify(e, &store, limits)))?
            .map_err(|e| self.fail(Failure::Plugin(from_wit_error(e))))?;
        let called = Instant::now();
        serde_json::from_str::<serde_json::Value>(&output.shoot)
            .map_err(|e| self.fail(Failure::InvalidOutput(e.to_string())))?;
        Ok(CallSplit {
            instantiate: instantiated - started,
            call: called - instantiated,
            output: called.elapsed(),
        })
    }
}

fn to_wit(input: RawExtendInput) -> shoot_api::ExtendInput {
    shoot_api::ExtendInput {
        runtime: input.runtime,
        draft: input.draft,
        operation: match input.operation {
            Operation::Create => shoot_api::Operation::Create,
            Operation::Patch => shoot_api::Operation::Patch,
        },
        current_shoot: input.current_shoot,
        config: input.config,
    }
}

/// The one evaluator every call of either world ends in: a trap or limit becomes its typed
/// failure, reading the environment is refused, and what the call returned counts against
/// its budget (measured by `size`).
pub(crate) fn evaluate<R>(
    store: &mut Store<PluginState>,
    limits: &Limits,
    result: wasmtime::Result<R>,
    size: impl FnOnce(&R) -> usize,
) -> Result<R, Failure> {
    let value = result.map_err(|err| classify(err, store, limits))?;
    if store.data().environment_read {
        return Err(Failure::CapabilityDenied {
            capability: "the environment".into(),
        });
    }
    emitted(store, size(&value))?;
    Ok(value)
}

/// Count what a call returned against its budget (log lines already count).
pub(crate) fn emitted(store: &mut Store<PluginState>, bytes: usize) -> Result<(), Failure> {
    let limit = store.data().budget_limit();
    store
        .data_mut()
        .emit(bytes)
        .map_err(|size| Failure::OutputTooLarge { size, limit })
}

/// A fresh store for one call: memory limiter, epoch deadline, log context.
pub(crate) fn new_store(
    rt: &WasmRuntime,
    limits: &Limits,
    names: &(Arc<str>, Arc<str>),
    runtime_id: &str,
) -> Store<PluginState> {
    let log = LogContext {
        plugin: names.0.clone(),
        version: names.1.clone(),
        runtime_id: Arc::from(runtime_id),
    };
    let mut store = Store::new(&rt.engine, PluginState::new(limits, log));
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(rt.deadline_ticks(limits.timeout()));
    store.epoch_deadline_trap();
    store
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A plugin's error, clamped: it ends up in conditions and Events.
pub(crate) fn from_wit_error(err: shoot_api::PluginError) -> PluginError {
    PluginError {
        kind: match err.kind {
            bindings::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
            bindings::ErrorKind::Unsupported => ErrorKind::Unsupported,
            bindings::ErrorKind::Internal => ErrorKind::Internal,
        },
        message: text::clamp(&err.message, text::MESSAGE_CHARS),
        field: err.field.map(|f| text::clamp(&f, text::FIELD_CHARS)),
    }
}

/// Turn a wasmtime error from a call into a typed failure.
pub(crate) fn classify(
    err: wasmtime::Error,
    store: &Store<PluginState>,
    limits: &Limits,
) -> Failure {
    let state = store.data();
    if state.limiter.hit {
        return Failure::MemoryLimit {
            limit_mib: limits.memory_mib,
        };
    }
    if let Some(busy) = err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        return Failure::Busy {
            detail: busy.to_string(),
        };
    }
    if let Some(denied) = err.downcast_ref::<Denied>() {
        return Failure::CapabilityDenied {
            capability: denied.capability.to_string(),
        };
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        // wasi:cli/exit only carries success or failure, not the code.
        let status = if exit.0 == 0 { "success" } else { "failure" };
        return Failure::Trap {
            message: format!("the plugin called exit ({status}) instead of returning"),
            panic: panic_message(&state.stdio_text()),
        };
    }
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => Failure::Timeout {
            budget: limits.timeout(),
        },
        Some(wasmtime::Trap::StackOverflow) => Failure::Trap {
            message: "stack overflow (call stack exhausted; too deep a recursion?)".into(),
            panic: None,
        },
        Some(wasmtime::Trap::MemoryOutOfBounds) => Failure::Trap {
            // Rust keeps large locals on a shadow stack in linear memory; overflowing it
            // shows up as an out-of-bounds access rather than a stack overflow.
            message: "out of bounds memory access (or an overflow of the plugin's shadow stack)"
                .into(),
            panic: panic_message(&state.stdio_text()),
        },
        Some(trap) => Failure::Trap {
            message: trap.to_string(),
            panic: panic_message(&state.stdio_text()),
        },
        None => Failure::Trap {
            message: format!("{err:#}"),
            panic: panic_message(&state.stdio_text()),
        },
    }
}

/// Extract `location: message` from Rust's panic output on the guest's stderr (clamped).
fn panic_message(stdio: &str) -> Option<String> {
    panic_text(stdio).map(|p| text::clamp(&p, text::MESSAGE_CHARS))
}

fn panic_text(stdio: &str) -> Option<String> {
    let start = stdio.find("panicked at ")?;
    let rest = &stdio[start + "panicked at ".len()..];
    let (location, message) = rest.split_once(":\n").unwrap_or((rest, ""));
    let message: Vec<&str> = message
        .lines()
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    Some(format!("{}: {}", location.trim(), message.join(" ").trim()))
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_extracted() {
        let out = "thread '<unnamed>' panicked at src/lib.rs:7:9:\nboom: bad input\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(out).as_deref(),
            Some("src/lib.rs:7:9: boom: bad input")
        );
        assert_eq!(panic_message("nothing here"), None);
    }

    #[test]
    fn a_panic_sent_through_log_is_reported_like_one_on_stderr() {
        use super::super::bindings::{LogLevel, shoot::tessera::plugin::host::Host};
        use super::super::sandbox::{LogContext, PluginState};
        let log = LogContext {
            plugin: "p".into(),
            version: "1".into(),
            runtime_id: "rt".into(),
        };
        let mut state = PluginState::new(&super::Limits::default(), log);
        state.log(LogLevel::Info, "panicked at nothing: an info line".into());
        assert_eq!(panic_message(&state.stdio_text()), None);
        state.log(
            LogLevel::Error,
            "panicked at src/lib.rs:7:9:\nboom: bad input".into(),
        );
        assert_eq!(
            panic_message(&state.stdio_text()).as_deref(),
            Some("src/lib.rs:7:9: boom: bad input")
        );
    }
}

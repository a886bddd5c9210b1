//! The process-wide engine: component model, epoch interruption driven by a ticker thread,
//! the pooling allocator when the address space allows it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::{CacheKey, PrecompiledCache};
use super::error::LoadError;
use super::sandbox::{self, PluginState};

/// How the engine is set up.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Where precompiled components are kept; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// The secret proving an artifact was written by this host; `None`: the default file
    /// (`~/.config/tessera/cache.key`, created when missing).
    pub cache_key_file: Option<PathBuf>,
    /// Epoch tick; time budgets are enforced with this granularity.
    pub tick: Duration,
    /// Concurrent plugin instances the pooling allocator reserves slots for.
    pub pool_slots: u32,
    /// The largest memory limit any plugin may be given, MiB (pooling slot size).
    pub max_memory_mib: u64,
    /// Try the pooling allocator (falls back to on-demand when it cannot reserve memory).
    pub pooling: bool,
    /// Linear memory per pooled slot kept resident between instances, KiB.
    pub keep_resident_kib: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            cache_key_file: None,
            tick: Duration::from_millis(5),
            pool_slots: 128,
            max_memory_mib: 1024,
            pooling: true,
            keep_resident_kib: 0,
        }
    }
}

/// `$XDG_CACHE_HOME/tessera/wasm` or `~/.cache/tessera/wasm`.
pub fn default_cache_dir() -> Option<PathBuf> {
    crate::paths::cache_dir("wasm")
}

/// Stops the ticker thread when the runtime goes away.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Engine, linker and precompiled cache shared by every plugin of the process.
pub struct WasmRuntime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<PluginState>,
    pub(crate) cache: Option<PrecompiledCache>,
    pub(crate) tick: Duration,
    /// Loaded plugins of both kinds by component digest: each component is compiled and
    /// checked once.
    pub(crate) loaded: std::sync::Mutex<std::collections::HashMap<String, super::Loaded>>,
    pooling: bool,
    _ticker: Ticker,
}

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // For profiling: `perf` then names the functions of plugins (/tmp/perf-PID.map).
    if std::env::var_os("TESSERA_WASM_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

impl WasmRuntime {
    /// Build the engine, the sandbox linker and the cache, and start the epoch ticker.
    pub fn new(options: EngineOptions) -> Result<Self, LoadError> {
        let (engine, pooling) = build_engine(&options)?;
        let linker = sandbox::linker(&engine).map_err(|e| LoadError::Engine(e.to_string()))?;
        let cache = match &options.cache_dir {
            Some(dir) => {
                let key_file = options
                    .cache_key_file
                    .clone()
                    .or_else(super::cache::default_key_file)
                    .ok_or_else(|| {
                        LoadError::Engine(
                            "no home directory for the cache key: pass --cache-key-file".into(),
                        )
                    })?;
                let key = CacheKey::load_or_create(&key_file, dir).map_err(LoadError::Engine)?;
                Some(PrecompiledCache::open(dir, &engine, key).map_err(LoadError::Engine)?)
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (ticking_engine, flag, tick) = (engine.clone(), stop.clone(), options.tick);
        std::thread::Builder::new()
            .name("tessera-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    ticking_engine.increment_epoch();
                }
            })
            .map_err(|e| LoadError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Self {
            engine,
            linker,
            cache,
            tick,
            loaded: Default::default(),
            pooling,
            _ticker: Ticker { stop },
        })
    }

    /// True when the pooling allocator is in use.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Epoch ticks that make up `budget` (at least one).
    pub(crate) fn deadline_ticks(&self, budget: Duration) -> u64 {
        (budget.as_micros() / self.tick.as_micros().max(1)).max(1) as u64 + 1
    }
}

fn build_engine(options: &EngineOptions) -> Result<(Engine, bool), LoadError> {
    if options.pooling {
        let mut pool = PoolingAllocationConfig::default();
        let slots = options.pool_slots;
        pool.total_component_instances(slots)
            .total_core_instances(slots * 8)
            .total_memories(slots * 2)
            .total_tables(slots * 4)
            .max_memory_size((options.max_memory_mib as usize) << 20)
            // Plugins are instantiated per call: resetting the first pages of a reused slot
            // with memset is cheaper than faulting them back in after madvise.
            .linear_memory_keep_resident(options.keep_resident_kib << 10)
            .table_keep_resident(64 << 10);
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match Engine::new(&config) {
            Ok(engine) => return Ok((engine, true)),
            Err(err) => tracing::warn!(
                error = %err,
                "pooling allocator unavailable (address space limits?); using on-demand allocation"
            ),
        }
    }
    Engine::new(&base_config())
        .map(|e| (e, false))
        .map_err(|e| LoadError::Engine(e.to_string()))
}

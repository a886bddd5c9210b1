//! Per-call resource limits and the memory limiter that enforces them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits for one plugin call. Defaults: 64 MiB memory, 1 s, 4 MiB output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Linear memory cap per call, MiB.
    pub memory_mib: u64,
    /// Wall-clock budget per call (instantiation included), milliseconds.
    pub timeout_ms: u64,
    /// Cap on the returned document plus warnings, KiB.
    pub output_kib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: 64,
            timeout_ms: 1000,
            output_kib: 4096,
        }
    }
}

impl Limits {
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mib as usize) << 20
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn output_bytes(&self) -> usize {
        (self.output_kib as usize) << 10
    }
}

/// Refuses memory and table growth past the cap and remembers that it did, so that the
/// resulting trap can be reported as a memory-limit failure rather than a generic one.
#[derive(Debug)]
pub struct MemoryLimiter {
    max_bytes: usize,
    max_table_elements: usize,
    pub hit: bool,
}

impl MemoryLimiter {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            max_table_elements: 100_000,
            hit: false,
        }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_table_elements {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }
}

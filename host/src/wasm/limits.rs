//! Per-call resource limits and the memory limiter that enforces them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::LimitsOverride;

/// Limits for one plugin call. Defaults: 64 MiB memory, 1 s, 4 MiB of everything the
/// plugin emits, 256 log lines; module reconcilers may read 500 objects and 4 MiB per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Linear memory cap per call, MiB.
    pub memory_mib: u64,
    /// Wall-clock budget per call (instantiation included), milliseconds.
    pub timeout_ms: u64,
    /// One budget for everything a call emits: its output, warnings, messages and log
    /// lines together, KiB.
    pub output_kib: u64,
    /// Log lines a call may emit; the rest are dropped (and counted).
    pub log_lines: u32,
    /// Objects a module reconciler's requirements may return, per reconcile.
    pub read_objects: u32,
    /// Bytes those objects may take, KiB.
    #[serde(rename = "readKiB")]
    pub read_kib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: 64,
            timeout_ms: 1000,
            output_kib: 4096,
            log_lines: 256,
            read_objects: 500,
            read_kib: 4096,
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

    pub fn read_bytes(&self) -> usize {
        (self.read_kib as usize) << 10
    }
}

impl LimitsOverride {
    /// Apply on top of `base`.
    pub fn apply(&self, base: Limits) -> Limits {
        Limits {
            memory_mib: self.memory_mib.unwrap_or(base.memory_mib),
            timeout_ms: self.timeout_ms.unwrap_or(base.timeout_ms),
            output_kib: self.output_kib.unwrap_or(base.output_kib),
            log_lines: self.log_lines.unwrap_or(base.log_lines),
            read_objects: self.read_objects.unwrap_or(base.read_objects),
            read_kib: self.read_kib.unwrap_or(base.read_kib),
        }
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

//! Shared helpers for the integration tests: where the built components are, and one
//! engine per test binary.

pub mod blackhole;
pub mod clusters;
pub mod env;
pub mod gardener_sim;
pub mod install;
pub mod modules;
pub mod probe;
pub mod prometheus;
pub mod registry;
pub mod rollout;
pub mod runtimes;
pub mod scaffold;
pub mod scenarios;
pub mod stop;

/// What every test helper and scenario returns: `Err` says what went wrong, in words.
pub type Result<T = (), E = String> = std::result::Result<T, E>;

// The local pieces (API servers, nodes, their CAs) are the ones `tessera dev up` starts.
pub use tessera::devenv::{certs, cluster, node};

use std::path::PathBuf;
use std::sync::OnceLock;

use tessera::wasm::{EngineOptions, WasmRuntime};

/// The cargo target directory the tests were built in.
pub fn target_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp for integration tests; tests/src is a library,
    // so derive it from this crate's build output instead.
    let exe = std::env::current_exe().expect("test executable path");
    exe.ancestors()
        .find(|p| p.join("plugins").join("base.wasm").is_file() || p.join("test-plugins").is_dir())
        .map(PathBuf::from)
        .unwrap_or_else(|| exe.parent().unwrap().to_path_buf())
}

fn dir(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join(name));
    assert!(
        dir.is_dir(),
        "{} does not exist: run `cargo xtask build-plugins` (or `cargo xtask test`) first",
        dir.display()
    );
    dir
}

/// The first-party components (`<target>/plugins`).
pub fn plugin_dir() -> PathBuf {
    dir("TESSERA_PLUGIN_DIR", "plugins")
}

/// The test guests (`<target>/test-plugins`).
pub fn test_plugin_dir() -> PathBuf {
    dir("TESSERA_TEST_PLUGIN_DIR", "test-plugins")
}

/// The workspace root. `cargo test` and `cargo run` (xtask, whose children inherit it) set
/// `CARGO_MANIFEST_DIR` at run time to a crate directory right under the root; the
/// compile-time value can name another checkout when the target directory is shared.
pub fn workspace() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One engine per test binary, caching precompiled components in a temporary directory.
pub fn runtime() -> &'static WasmRuntime {
    static RUNTIME: OnceLock<WasmRuntime> = OnceLock::new();
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let cache = CACHE.get_or_init(|| tempfile::tempdir().expect("temp dir"));
        WasmRuntime::new(EngineOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            ..EngineOptions::default()
        })
        .expect("engine")
    })
}

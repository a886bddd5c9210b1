//! The first-party shoot extensions and where their components live.

use std::path::PathBuf;

/// First-party module reconcilers (`plugins/manifest`, `availability`, `telemetry`).
pub const FIRST_PARTY_MODULES: &[&str] = &["manifest", "availability", "telemetry"];

/// First-party shoot extensions in chain order (KIM's converter order).
pub const FIRST_PARTY: &[&str] = &[
    "base",
    "annotations",
    "labels",
    "seed-selector",
    "oidc",
    "cloud-profile",
    "exposure-class",
    "access-restrictions",
    "provider",
    "control-plane",
    "tolerations",
    "dns",
    "extensions",
    "kubernetes-version",
    "maintenance",
    "auditlog",
    "deletion",
];

/// Where plugin components are looked up when no directory is given:
/// `$TESSERA_PLUGIN_DIR`, then `plugins/` next to the binary or one level up (the layout
/// `cargo xtask build-plugins` produces in the target directory).
pub fn default_plugin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TESSERA_PLUGIN_DIR") {
        return Some(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().ok()?;
    let exe_dir = exe.parent()?;
    [exe_dir.join("plugins"), exe_dir.parent()?.join("plugins")]
        .into_iter()
        .find(|dir| dir.join("base.wasm").is_file())
}

//! The first-party plugins, what they declare they need, and where their components live.

use std::path::PathBuf;

use crate::grants::Requests;

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

/// What each first-party plugin declares (its `requests.yaml`, also embedded in its
/// component): the grants it runs with when the configuration gives none.
const FIRST_PARTY_REQUESTS: &[(&str, &str)] = &[
    ("base", include_str!("../../../plugins/base/requests.yaml")),
    (
        "annotations",
        include_str!("../../../plugins/annotations/requests.yaml"),
    ),
    (
        "labels",
        include_str!("../../../plugins/labels/requests.yaml"),
    ),
    (
        "seed-selector",
        include_str!("../../../plugins/seed-selector/requests.yaml"),
    ),
    ("oidc", include_str!("../../../plugins/oidc/requests.yaml")),
    (
        "cloud-profile",
        include_str!("../../../plugins/cloud-profile/requests.yaml"),
    ),
    (
        "exposure-class",
        include_str!("../../../plugins/exposure-class/requests.yaml"),
    ),
    (
        "access-restrictions",
        include_str!("../../../plugins/access-restrictions/requests.yaml"),
    ),
    (
        "provider",
        include_str!("../../../plugins/provider/requests.yaml"),
    ),
    (
        "control-plane",
        include_str!("../../../plugins/control-plane/requests.yaml"),
    ),
    (
        "tolerations",
        include_str!("../../../plugins/tolerations/requests.yaml"),
    ),
    ("dns", include_str!("../../../plugins/dns/requests.yaml")),
    (
        "extensions",
        include_str!("../../../plugins/extensions/requests.yaml"),
    ),
    (
        "kubernetes-version",
        include_str!("../../../plugins/kubernetes-version/requests.yaml"),
    ),
    (
        "maintenance",
        include_str!("../../../plugins/maintenance/requests.yaml"),
    ),
    (
        "auditlog",
        include_str!("../../../plugins/auditlog/requests.yaml"),
    ),
    (
        "deletion",
        include_str!("../../../plugins/deletion/requests.yaml"),
    ),
    (
        "manifest",
        include_str!("../../../plugins/manifest/requests.yaml"),
    ),
    (
        "availability",
        include_str!("../../../plugins/availability/requests.yaml"),
    ),
    (
        "telemetry",
        include_str!("../../../plugins/telemetry/requests.yaml"),
    ),
];

/// The declared requests of first-party plugin `name` (`None` for any other name).
pub fn first_party_requests(name: &str) -> Option<Requests> {
    let (_, text) = FIRST_PARTY_REQUESTS.iter().find(|(n, _)| *n == name)?;
    Some(Requests::parse(text).expect("first-party requests parse (tested)"))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_first_party_plugin_declares_valid_requests() {
        for name in FIRST_PARTY.iter().chain(FIRST_PARTY_MODULES) {
            let (_, text) = FIRST_PARTY_REQUESTS
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} has no requests.yaml"));
            if let Err(e) = Requests::parse(text) {
                panic!("plugins/{name}/requests.yaml: {e}");
            }
        }
        assert_eq!(
            FIRST_PARTY_REQUESTS.len(),
            FIRST_PARTY.len() + FIRST_PARTY_MODULES.len()
        );
    }
}

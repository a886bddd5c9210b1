//! Problems in a Plugin's spec itself, found before anything is fetched and named by field.

use std::collections::BTreeSet;

use crate::crd::PluginSpec;
use crate::wasm::PluginKind;

fn kind_of(spec: &PluginSpec) -> Result<PluginKind, String> {
    match spec.kind.as_str() {
        "shoot-extension" => Ok(PluginKind::ShootExtension),
        "module-reconciler" => Ok(PluginKind::ModuleReconciler),
        other => Err(format!(
            "spec.kind: {other:?} is neither shoot-extension nor module-reconciler"
        )),
    }
}

/// The plugin's kind, or the first problem in the spec, named by field.
pub(crate) fn validate(spec: &PluginSpec) -> Result<PluginKind, String> {
    let kind = kind_of(spec)?;
    let versions = validate_versions(spec)?;
    validate_channels(spec, &versions)?;
    validate_grants(spec, kind)?;
    Ok(kind)
}

/// Every version listed once with a reference that parses; returns the version names.
fn validate_versions(spec: &PluginSpec) -> Result<BTreeSet<&str>, String> {
    let mut seen = BTreeSet::new();
    for (i, v) in spec.versions.iter().enumerate() {
        if !seen.insert(v.version.as_str()) {
            return Err(format!(
                "spec.versions[{i}].version: {} is listed twice",
                v.version
            ));
        }
        crate::oci::parse_reference(&v.reference)
            .map_err(|e| format!("spec.versions[{i}].ref: {e}"))?;
    }
    Ok(seen)
}

/// Every channel listed once, running (and shadowing) listed versions only.
fn validate_channels(spec: &PluginSpec, versions: &BTreeSet<&str>) -> Result<(), String> {
    let mut channels = BTreeSet::new();
    for (i, c) in spec.channels.iter().enumerate() {
        if !channels.insert(c.name.as_str()) {
            return Err(format!(
                "spec.channels[{i}].name: {} is listed twice",
                c.name
            ));
        }
        if !versions.contains(c.version.as_str()) {
            return Err(format!(
                "spec.channels[{i}].version: {} is not in spec.versions",
                c.version
            ));
        }
        if let Some(shadow) = &c.shadow
            && !versions.contains(shadow.as_str())
        {
            return Err(format!(
                "spec.channels[{i}].shadow: {shadow} is not in spec.versions"
            ));
        }
    }
    Ok(())
}

/// Grants that are well formed and of the kind's world: Shoot paths for shoot extensions,
/// objects for module reconcilers.
fn validate_grants(spec: &PluginSpec, kind: PluginKind) -> Result<(), String> {
    let Some(grants) = &spec.grants else {
        return Ok(());
    };
    grants.validate("spec.grants")?;
    let wrong = match kind {
        PluginKind::ShootExtension if !(grants.write.is_empty() && grants.read.is_empty()) => {
            Some("write/read: a shoot extension writes and reads no objects; grant shootPaths")
        }
        PluginKind::ModuleReconciler if !grants.shoot_paths.is_empty() => {
            Some("shootPaths: a module reconciler sets no Shoot paths; grant write/read")
        }
        _ => None,
    };
    match wrong {
        Some(why) => Err(format!("spec.grants.{why}")),
        None => Ok(()),
    }
}

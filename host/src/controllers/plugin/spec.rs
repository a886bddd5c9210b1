//! Problems in a Plugin's spec itself, found before anything is fetched and named by field.

use std::collections::BTreeSet;

use crate::crd::PluginSpec;
use crate::wasm::PluginKind;

/// The plugin's kind, or the first problem in the spec, named by field.
pub(crate) fn validate(spec: &PluginSpec) -> Result<PluginKind, String> {
    // An unknown kind never gets here: the CRD schema and the type refuse it.
    let kind = spec.kind;
    let versions = validate_versions(spec)?;
    validate_channels(spec, &versions)?;
    validate_grants(spec, kind)?;
    validate_selector(spec, kind)?;
    validate_mandatory(spec, kind, &versions)?;
    Ok(kind)
}

/// A mandatory module: a module reconciler, at a listed version, with a selector that
/// parses.
fn validate_mandatory(
    spec: &PluginSpec,
    kind: PluginKind,
    versions: &BTreeSet<&str>,
) -> Result<(), String> {
    let Some(mandatory) = &spec.mandatory else {
        return Ok(());
    };
    if kind != PluginKind::ModuleReconciler {
        return Err("spec.mandatory: only module reconcilers are installed on ModuleSets".into());
    }
    if !versions.contains(mandatory.version.as_str()) {
        return Err(format!(
            "spec.mandatory.version: {} is not in spec.versions",
            mandatory.version
        ));
    }
    match &mandatory.module_set_selector {
        Some(selector) => kube::core::Selector::try_from(selector.clone())
            .map(drop)
            .map_err(|e| format!("spec.mandatory.moduleSetSelector: {e}")),
        None => Ok(()),
    }
}

/// A ModuleSet selector only on module reconcilers, and one that parses.
fn validate_selector(spec: &PluginSpec, kind: PluginKind) -> Result<(), String> {
    let Some(selector) = &spec.module_set_selector else {
        return Ok(());
    };
    if kind != PluginKind::ModuleReconciler {
        return Err(
            "spec.moduleSetSelector: only module reconcilers are offered to ModuleSets".into(),
        );
    }
    kube::core::Selector::try_from(selector.clone())
        .map(drop)
        .map_err(|e| format!("spec.moduleSetSelector: {e}"))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(doc: serde_json::Value) -> PluginSpec {
        let mut base = json!({
            "kind": "shoot-extension",
            "versions": [
                {"version": "1.0.0", "ref": "registry.test/p:1.0.0"},
                {"version": "2.0.0", "ref": "registry.test/p:2.0.0"},
            ],
            "channels": [{"name": "stable", "version": "1.0.0"}],
        });
        for (k, v) in doc.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn a_well_formed_spec_names_its_kind() {
        assert_eq!(validate(&spec(json!({}))), Ok(PluginKind::ShootExtension));
        let module = spec(json!({"kind": "module-reconciler"}));
        assert_eq!(validate(&module), Ok(PluginKind::ModuleReconciler));
    }

    #[test]
    fn an_unknown_kind_does_not_even_parse() {
        let doc = json!({"kind": "operator", "versions": [], "channels": []});
        let err = serde_json::from_value::<PluginSpec>(doc)
            .unwrap_err()
            .to_string();
        assert!(err.contains("operator"), "{err}");
    }

    #[test]
    fn a_module_set_selector_only_on_module_reconcilers_and_well_formed() {
        let selector = json!({"matchLabels": {"tier": "premium"}});
        let err = validate(&spec(json!({"moduleSetSelector": selector}))).unwrap_err();
        assert!(err.starts_with("spec.moduleSetSelector"), "{err}");
        let module = json!({"kind": "module-reconciler", "moduleSetSelector": selector});
        assert_eq!(validate(&spec(module)), Ok(PluginKind::ModuleReconciler));
        let bad = json!({"matchExpressions": [{"key": "tier", "operator": "In"}]});
        let module = json!({"kind": "module-reconciler", "moduleSetSelector": bad});
        let err = validate(&spec(module)).unwrap_err();
        assert!(err.starts_with("spec.moduleSetSelector"), "{err}");
    }

    #[test]
    fn a_version_listed_twice_is_refused() {
        let versions = json!([
            {"version": "1.0.0", "ref": "registry.test/p:1.0.0"},
            {"version": "1.0.0", "ref": "registry.test/p:1.0.1"},
        ]);
        let err = validate(&spec(json!({ "versions": versions }))).unwrap_err();
        assert_eq!(err, "spec.versions[1].version: 1.0.0 is listed twice");
    }

    #[test]
    fn a_channel_of_an_unlisted_version_is_refused() {
        let channels = json!([{"name": "stable", "version": "3.0.0"}]);
        let err = validate(&spec(json!({ "channels": channels }))).unwrap_err();
        assert_eq!(
            err,
            "spec.channels[0].version: 3.0.0 is not in spec.versions"
        );
    }

    #[test]
    fn a_shadow_of_an_unlisted_version_is_refused() {
        let channels = json!([{"name": "stable", "version": "1.0.0", "shadow": "3.0.0"}]);
        let err = validate(&spec(json!({ "channels": channels }))).unwrap_err();
        assert_eq!(
            err,
            "spec.channels[0].shadow: 3.0.0 is not in spec.versions"
        );
    }

    #[test]
    fn a_channel_listed_twice_is_refused() {
        let channels = json!([
            {"name": "stable", "version": "1.0.0"},
            {"name": "stable", "version": "2.0.0"},
        ]);
        let err = validate(&spec(json!({ "channels": channels }))).unwrap_err();
        assert_eq!(err, "spec.channels[1].name: stable is listed twice");
    }

    #[test]
    fn a_module_reconciler_is_granted_no_shoot_paths() {
        let doc = json!({"kind": "module-reconciler", "grants": {"shootPaths": ["spec.region"]}});
        let err = validate(&spec(doc)).unwrap_err();
        assert!(err.starts_with("spec.grants.shootPaths:"), "{err}");
    }
}

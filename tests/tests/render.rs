//! Runtime → Shoot through the full default chain of Wasm components.

use std::path::Path;

use tessera::plugins::{ChainConfig, DEFAULT_PROJECT, DraftCache, ShootChain, ShootIdentity};
use tessera::render::{RenderError, RuntimeDocument, parse_current_shoot, parse_runtime, render};
use tessera::wasm::Failure;
use tessera_tests::{plugin_dir, runtime, workspace};

fn chain() -> ShootChain {
    ShootChain::load(runtime(), &ChainConfig::default(), &plugin_dir())
        .expect("default chain loads")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(path: &Path) -> serde_json::Value {
    serde_saphyr::from_str(&read(path)).unwrap()
}

fn render_file(
    runtime_file: &str,
    patch: serde_json::Value,
) -> Result<serde_json::Value, RenderError> {
    let mut doc = yaml(&workspace().join(runtime_file));
    tessera_sdk::util::merge_patch(&mut doc, &patch);
    let parsed = parse_runtime(&doc.to_string(), runtime_file)?;
    Ok(render(runtime(), &chain(), &parsed, &ChainConfig::default(), None)?.shoot)
}

#[test]
fn examples_render_to_their_expected_shoots() {
    for provider in ["aws", "azure", "gcp", "openstack"] {
        let shoot = render_file(
            &format!("examples/runtime-{provider}.yaml"),
            serde_json::json!({}),
        )
        .unwrap_or_else(|e| panic!("{provider}: {e}"));
        let expected_path = workspace().join(format!("examples/expected/shoot-{provider}.yaml"));
        if std::env::var_os("TESSERA_BLESS").is_some() {
            std::fs::write(&expected_path, tessera_sdk::testing::to_yaml(&shoot)).unwrap();
        }
        let expected = yaml(&expected_path);
        assert!(
            shoot == expected,
            "{provider}:\n{}",
            tessera_sdk::testing::yaml_diff(&expected, &shoot)
        );
    }
}

/// KIM's newer Runtime options, as a KIM Runtime writes them, through the whole chain of
/// components (their grants included), for create and for a patch of the result.
#[test]
fn kim_runtime_options_render_and_patch_stably() {
    let options = serde_json::json!({"spec": {
        "shoot": {
            "credentialsBindingName": "aws-credentials",
            "kubernetes": {"kubeAPIServer": {"acl": {"allowedCIDRs": ["10.0.0.0/8"]}}},
            "networking": {"dualStack": true},
        },
        "security": {"networking": {"filter": {"egress": {"enabled": true}, "ingress": {"enabled": true}}}},
        "imageRegistryCache": [{"name": "hub", "namespace": "kyma-system", "uid": "u1",
            "config": {"upstream": "docker.io", "secretReferenceName": "hub-credentials"}},
            {"name": "quay", "namespace": "kyma-system", "uid": "u2",
            "config": {"upstream": "quay.io"}}],
    }});
    let shoot = render_file("examples/runtime-aws.yaml", options.clone()).unwrap();
    let spec = &shoot["spec"];
    assert_eq!(spec["credentialsBindingName"], "aws-credentials");
    assert!(spec.get("secretBindingName").is_none());
    assert_eq!(
        spec["networking"]["ipFamilies"],
        serde_json::json!(["IPv4", "IPv6"])
    );
    let extension = |type_: &str| {
        spec["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == type_)
            .cloned()
            .unwrap_or_else(|| panic!("no {type_} extension: {spec}"))
    };
    assert_eq!(
        extension("acl")["providerConfig"]["rule"]["cidrs"],
        serde_json::json!(["10.0.0.0/8"])
    );
    // The cache with credentials waits for the host's copy in the project; offline it is
    // left out with a warning.
    assert_eq!(
        extension("registry-cache")["providerConfig"]["caches"],
        serde_json::json!([{"upstream": "quay.io"}])
    );
    assert_eq!(
        extension("shoot-networking-filter")["providerConfig"]["egressFilter"]["blackholingEnabled"],
        true
    );
    let mut doc = yaml(&workspace().join("examples/runtime-aws.yaml"));
    tessera_sdk::util::merge_patch(&mut doc, &options);
    let parsed = parse_runtime(&doc.to_string(), "kim.yaml").unwrap();
    assert_patch_is_stable(&parsed, &shoot, "kim");
    cache_names_the_live_copy(&parsed, &shoot);
}

/// Against a live Shoot whose cache of the same upstream names the host's copy, the render
/// names that copy, in the extension and in `spec.resources`.
fn cache_names_the_live_copy(parsed: &RuntimeDocument, created: &serde_json::Value) {
    let mut live = created.clone();
    let caches = serde_json::json!([{"upstream": "docker.io", "secretReferenceName": "reg-cache-1"},
        {"upstream": "quay.io"}]);
    for e in live["spec"]["extensions"].as_array_mut().unwrap() {
        if e["type"] == "registry-cache" {
            e["providerConfig"]["caches"] = caches.clone();
        }
    }
    let current = parse_current_shoot(&live.to_string(), "live").unwrap();
    let out = render(
        runtime(),
        &chain(),
        parsed,
        &ChainConfig::default(),
        Some(&current),
    );
    let spec = out.unwrap().shoot["spec"].clone();
    let cache = spec["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "registry-cache")
        .map(|e| e["providerConfig"]["caches"].clone());
    assert_eq!(cache, Some(caches));
    let named = spec["resources"].as_array().unwrap().iter();
    assert!(
        named
            .clone()
            .any(|r| r["resourceRef"]["name"] == "reg-cache-1"),
        "{spec}"
    );
}

/// Rendering `parsed` against the Shoot `created` it rendered to changes nothing.
fn assert_patch_is_stable(parsed: &RuntimeDocument, created: &serde_json::Value, what: &str) {
    let current = parse_current_shoot(&created.to_string(), "created").unwrap();
    let patched = render(
        runtime(),
        &chain(),
        parsed,
        &ChainConfig::default(),
        Some(&current),
    )
    .unwrap()
    .shoot;
    assert!(
        *created == patched,
        "{what}:\n{}",
        tessera_sdk::testing::yaml_diff(created, &patched)
    );
}

#[test]
fn patch_of_the_rendered_shoot_is_stable() {
    // Rendering against the Shoot we produced ourselves changes nothing: no spurious writes.
    for provider in ["aws", "azure", "gcp", "openstack"] {
        let file = format!("examples/runtime-{provider}.yaml");
        let created = render_file(&file, serde_json::json!({})).unwrap();
        let parsed = parse_runtime(&read(&workspace().join(&file)), &file).unwrap();
        assert_patch_is_stable(&parsed, &created, provider);
    }
}

#[test]
fn warnings_name_their_plugin_and_digests_are_recorded() {
    let doc = read(&workspace().join("examples/runtime-aws.yaml"));
    let parsed = parse_runtime(&doc, "aws").unwrap();
    let out = render(runtime(), &chain(), &parsed, &ChainConfig::default(), None).unwrap();
    assert!(
        out.warnings
            .iter()
            .any(|(p, w)| p == "auditlog" && w.contains("eu-central-1"))
    );
    assert_eq!(out.stamps.len(), tessera::plugins::FIRST_PARTY.len());
    assert!(
        out.stamps
            .iter()
            .all(|s| s.digest.len() == "sha256:".len() + 64)
    );
}

fn plugin_failure(err: RenderError) -> (String, Option<String>, String) {
    match err {
        RenderError::Plugin(call) => match &call.cause {
            Failure::Plugin(e) => (call.plugin.clone(), e.field.clone(), call.to_string()),
            other => panic!("expected a plugin error, got {other:?}"),
        },
        other => panic!("expected a plugin error, got {other}"),
    }
}

#[test]
fn rejections_name_plugin_and_field() {
    let cases = [
        (
            serde_json::json!({"spec": {"shoot": {"provider": {"type": "ibm"}}}}),
            "cloud-profile",
            "spec.shoot.provider.type",
            "ibm",
        ),
        (
            serde_json::json!({"spec": {"shoot": {"networking": {"services": "10.250.16.0/20"}}}}),
            "base",
            "spec.shoot.networking.services",
            "overlaps nodes",
        ),
        (
            serde_json::json!({"spec": {"shoot": {"provider": {"additionalWorkers": [
                {"name": "gpu", "machine": {"type": "g5.xlarge"}, "minimum": 0, "maximum": 1, "zones": ["eu-central-1d"]}
            ]}}}}),
            "provider",
            "spec.shoot.provider.additionalWorkers[0].zones",
            "missing from the main pool",
        ),
    ];
    for (patch, plugin, field, message) in cases {
        let err = render_file("examples/runtime-aws.yaml", patch).unwrap_err();
        let (p, f, text) = plugin_failure(err);
        assert_eq!((p.as_str(), f.as_deref()), (plugin, Some(field)), "{text}");
        assert!(text.contains(message), "{text}");
    }
}

#[test]
fn invalid_manifests_are_refused_before_any_plugin_runs() {
    let err = parse_runtime(
        "apiVersion: tessera.dev/v1alpha1\nkind: Runtime\nspec: [unclosed",
        "bad.yaml",
    )
    .unwrap_err();
    assert!(matches!(err, RenderError::InvalidYaml { .. }), "{err}");
    assert!(
        err.to_string().starts_with("bad.yaml: not valid YAML"),
        "{err}"
    );

    // A Shoot given as the Runtime: both kinds named in words, no `Some("Shoot")`.
    let err = parse_runtime(
        "apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\n",
        "s.yaml",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "s.yaml: invalid Runtime at kind: expected a Runtime, found a Shoot"
    );

    let kim = read(&workspace().join("examples/runtime-aws.yaml")).replace(
        "tessera.dev/v1alpha1",
        "infrastructuremanager.kyma-project.io/v1",
    );
    let err = parse_runtime(&kim, "kim.yaml").unwrap_err();
    assert!(
        err.to_string()
            .contains("a KIM Runtime ports by setting apiVersion: tessera.dev/v1alpha1"),
        "{err}"
    );

    let missing = read(&workspace().join("examples/runtime-aws.yaml"))
        .replace("      pods: 10.96.0.0/13\n", "");
    match parse_runtime(&missing, "m.yaml").unwrap_err() {
        RenderError::InvalidRuntime { field, message, .. } => {
            assert_eq!(field, "spec.shoot.networking");
            assert!(message.contains("missing field `pods`"), "{message}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn unchanged_inputs_run_no_plugin_and_a_rollout_reruns_from_its_step() {
    let mut chain = chain();
    // As if `maintenance` came from a registry channel: the draft before it is kept.
    let index = chain
        .steps
        .iter()
        .position(|s| s.plugin.name() == "maintenance")
        .unwrap();
    chain.steps[index].channel = Some("regular".into());
    let file = "examples/runtime-aws.yaml";
    let parsed = parse_runtime(&read(&workspace().join(file)), file).unwrap();
    let identity = ShootIdentity::of(&parsed.runtime.spec, DEFAULT_PROJECT);
    let memo = DraftCache::new(16 << 20);
    let run = |chain: &ShootChain, runtime_json: &str, current: Option<&str>| {
        chain
            .run_memo(
                runtime(),
                Some(&memo),
                runtime_json,
                &identity,
                "rt",
                current,
            )
            .unwrap()
    };
    let first = run(&chain, &parsed.json, None);
    assert_eq!(
        (first.cached_steps, first.timings.len()),
        (0, chain.steps.len())
    );
    let again = run(&chain, &parsed.json, None);
    assert_eq!(
        (again.cached_steps, again.timings.len()),
        (chain.steps.len(), 0)
    );
    assert_eq!(
        (&again.shoot, &again.warnings),
        (&first.shoot, &first.warnings)
    );

    // Another input renders again: a patch, a changed Runtime.
    let current = first.shoot.to_string();
    assert_eq!(run(&chain, &parsed.json, Some(&current)).cached_steps, 0);
    // Gardener's status and bookkeeping are in no plugin's view: no plugin runs again.
    let mut touched = first.shoot.clone();
    touched["metadata"]["resourceVersion"] = "42".into();
    touched["status"] = serde_json::json!({"lastOperation": {"state": "Succeeded"}});
    let served = run(&chain, &parsed.json, Some(&touched.to_string()));
    assert_eq!(served.cached_steps, chain.steps.len());
    let mut changed: serde_json::Value = serde_json::from_str(&parsed.json).unwrap();
    changed["metadata"]["labels"]["extra"] = "1".into();
    assert_eq!(run(&chain, &changed.to_string(), None).cached_steps, 0);

    // A new component for `maintenance` (its key stands for its digest): it and the steps
    // after it run, the ones before come from the cache, and the Shoot is the same.
    let mut rolled = chain.clone();
    rolled.steps[index].memo_key = std::sync::OnceLock::from([7; 32]);
    let out = run(&rolled, &parsed.json, None);
    assert_eq!(out.cached_steps, index);
    assert_eq!(out.timings.len(), chain.steps.len() - index);
    assert_eq!(out.shoot, first.shoot);
}

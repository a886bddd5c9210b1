//! Every first-party plugin's golden cases, on its Wasm build, through the same harness as
//! `tessera plugin test` (the same cases also run natively in each plugin crate).

use tessera::harness::{test_module, test_plugin};
use tessera::plugins::FIRST_PARTY;
use tessera::wasm::Limits;
use tessera_tests::{plugin_dir, runtime, workspace};

#[test]
fn first_party_golden_cases_pass_on_the_wasm_builds() {
    let mut failures = Vec::new();
    let mut total = 0;
    for name in FIRST_PARTY {
        let plugin = runtime()
            .load_file(&plugin_dir().join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(plugin.name(), *name);
        let cases = workspace().join("plugins").join(name).join("cases");
        let results = test_plugin(runtime(), &plugin, &cases, &Limits::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            results.len() >= 2,
            "{name} ships only {} golden cases",
            results.len()
        );
        total += results.len();
        failures.extend(
            results
                .into_iter()
                .filter_map(|r| r.failure.map(|f| format!("{name}/{}: {f}", r.name))),
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The module reconcilers' cases, on their Wasm builds, talking to them as the ModuleSet
/// controller does.
#[test]
fn first_party_module_cases_pass_on_the_wasm_builds() {
    let mut failures = Vec::new();
    for name in ["availability", "manifest", "telemetry"] {
        let path = plugin_dir().join(format!("{name}.wasm"));
        let bytes = std::fs::read(&path).unwrap();
        let module = runtime()
            .load_module(&bytes, name)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let cases = workspace().join("plugins").join(name).join("cases");
        let results = test_module(runtime(), &module, &cases, &Limits::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            results.len() >= 4,
            "{name} ships only {} cases",
            results.len()
        );
        failures.extend(
            results
                .into_iter()
                .filter_map(|r| r.failure.map(|f| format!("{name}/{}: {f}", r.name))),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn harness_reports_a_mismatch_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let runtime_file = workspace().join("examples/runtime-aws.yaml");
    std::fs::write(
        dir.path().join("wrong.yaml"),
        format!(
            "runtimeFile: {}\nexpect:\n  shoot: {{apiVersion: core.gardener.cloud/v1beta1, kind: Shoot, metadata: {{}}, spec: {{cloudProfile: {{kind: CloudProfile, name: gcp}}}}}}\n",
            runtime_file.display()
        ),
    )
    .unwrap();
    let plugin = runtime()
        .load_file(&plugin_dir().join("cloud-profile.wasm"))
        .unwrap();
    let results = test_plugin(runtime(), &plugin, dir.path(), &Limits::default()).unwrap();
    let failure = results[0].failure.as_deref().expect("the case must fail");
    assert!(failure.contains("-    name: gcp"), "{failure}");
    assert!(failure.contains("+    name: aws"), "{failure}");
}

//! The CRDs in the chart are generated from the Rust types; this fails when they drift.
//! Regenerate with `cargo run -p tessera -- crds --dir charts/tessera/crds`.

use std::path::Path;

#[test]
fn chart_crds_are_up_to_date() {
    // Run time, not compile time: the binary may be cached from another checkout.
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../charts/tessera/crds");
    let mut expected_files = Vec::new();
    for (file, crd) in tessera::crd::all() {
        let path = dir.join(file);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == tessera::crd::to_yaml(&crd),
            "{} is out of date: run `cargo run -p tessera -- crds --dir charts/tessera/crds`",
            path.display()
        );
        expected_files.push(file.to_string());
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    expected_files.sort();
    assert_eq!(present, expected_files, "stray files in {}", dir.display());
}

#[test]
fn runtime_crd_has_printer_columns_and_status() {
    let crd = tessera::crd::all()
        .into_iter()
        .find(|(f, _)| f.starts_with("runtimes."))
        .unwrap()
        .1;
    let version = &crd.spec.versions[0];
    let columns: Vec<&str> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for want in ["State", "Shoot", "Provider", "Region", "Age"] {
        assert!(columns.contains(&want), "{columns:?}");
    }
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let yaml = tessera::crd::to_yaml(&crd);
    // Unknown worker fields survive (KIM's Runtime carries full Gardener workers).
    assert!(yaml.contains("x-kubernetes-preserve-unknown-fields: true"));
    assert!(yaml.contains("x-kubernetes-int-or-string: true"));
}

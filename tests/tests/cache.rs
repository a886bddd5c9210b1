//! The precompiled cache: hits skip compilation, and only artifacts this host wrote for the
//! same component are ever deserialized.

use tessera::wasm::{EngineOptions, WasmRuntime};
use tessera_tests::plugin_dir;

fn runtime(dir: &std::path::Path) -> WasmRuntime {
    keyed(
        dir,
        &dir.parent().unwrap().join(format!(
            "{}.key",
            dir.file_name().unwrap().to_string_lossy()
        )),
    )
}

/// A runtime whose cache at `dir` is signed with the key in `key`.
fn keyed(dir: &std::path::Path, key: &std::path::Path) -> WasmRuntime {
    WasmRuntime::new(EngineOptions {
        cache_dir: Some(dir.to_path_buf()),
        cache_key_file: Some(key.to_path_buf()),
        pooling: false,
        ..EngineOptions::default()
    })
    .unwrap()
}

fn artifacts(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flat_map(|engine_dir| std::fs::read_dir(engine_dir.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

#[test]
fn second_load_comes_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(plugin_dir().join("labels.wasm")).unwrap();
    let first = runtime(dir.path()).load(&bytes, "labels.wasm").unwrap();
    assert!(!first.from_cache);
    let second = runtime(dir.path()).load(&bytes, "labels.wasm").unwrap();
    assert!(second.from_cache);
    let rt = runtime(dir.path());
    let a = rt.load(&bytes, "labels.wasm").unwrap();
    let b = rt.load(&bytes, "other-name.wasm").unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&a, &b),
        "one process loads a component once"
    );
    assert_eq!(second.info, first.info);
    let files = artifacts(dir.path());
    assert_eq!(files.len(), 1);
    assert!(
        files[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&first.inspection.digest)
    );
}

#[test]
fn tampered_or_foreign_artifacts_are_recompiled_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let labels = std::fs::read(plugin_dir().join("labels.wasm")).unwrap();
    let base = std::fs::read(plugin_dir().join("base.wasm")).unwrap();
    let loaded = runtime(dir.path()).load(&labels, "labels.wasm").unwrap();
    let file = artifacts(dir.path()).pop().unwrap();

    // Flip one byte of the machine code.
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let again = runtime(dir.path()).load(&labels, "labels.wasm").unwrap();
    assert!(
        !again.from_cache,
        "a modified artifact must not be deserialized"
    );
    assert_eq!(again.info, loaded.info);

    // Put another component's (valid) artifact under this digest.
    let rt = runtime(dir.path());
    let base_loaded = rt.load(&base, "base.wasm").unwrap();
    let base_file = file.with_file_name(format!("{}.cwasm", base_loaded.inspection.digest));
    std::fs::copy(&base_file, &file).unwrap();
    let swapped = runtime(dir.path()).load(&labels, "labels.wasm").unwrap();
    assert!(
        !swapped.from_cache,
        "an artifact bound to another digest must not be loaded"
    );
    assert_eq!(swapped.name(), "labels");
}

#[test]
fn artifacts_written_by_someone_else_are_recompiled_not_loaded() {
    // Whoever can write the cache directory but does not hold the key: here, a host with
    // another key writes a perfectly valid artifact for the same component.
    let dir = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let labels = std::fs::read(plugin_dir().join("labels.wasm")).unwrap();
    let theirs = keyed(&cache, &keys.path().join("theirs.key"));
    assert!(!theirs.load(&labels, "labels.wasm").unwrap().from_cache);
    assert!(
        keyed(&cache, &keys.path().join("theirs.key"))
            .load(&labels, "labels.wasm")
            .unwrap()
            .from_cache
    );
    let ours = keyed(&cache, &keys.path().join("ours.key"))
        .load(&labels, "labels.wasm")
        .unwrap();
    assert!(
        !ours.from_cache,
        "an artifact signed with another key must not be deserialized"
    );
    assert_eq!(ours.name(), "labels");
    // A key file inside the cache directory is refused outright.
    let inside = WasmRuntime::new(EngineOptions {
        cache_dir: Some(cache.clone()),
        cache_key_file: Some(cache.join("cache.key")),
        pooling: false,
        ..EngineOptions::default()
    });
    assert!(inside.is_err());
}

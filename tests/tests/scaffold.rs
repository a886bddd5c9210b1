//! `tessera plugin new` as a new plugin team uses it: the crate it writes outside any
//! checkout passes its golden cases natively, builds to a component, and passes
//! `tessera plugin test` and `tessera plugin inspect` on that component. Each step's time is
//! printed (`--nocapture`), not asserted.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tessera_tests::env::tessera_bin;
use tessera_tests::{target_dir, workspace};

fn run(what: &str, cmd: &mut Command) -> String {
    let started = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    eprintln!("{what}: {:.1?}", started.elapsed());
    stdout
}

/// `cargo` for the new crate: none of the outer `cargo test`'s variables (they describe this
/// crate), a target directory shared between runs, and no network (its `Cargo.lock` is the
/// checkout's, so every crate is already in the local registry cache).
fn cargo(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" {
            cmd.env_remove(key);
        }
    }
    cmd.current_dir(dir)
        .args(args)
        .arg("--offline")
        .env("CARGO_TARGET_DIR", target_dir().join("scaffold"));
    cmd
}

fn new_plugin_passes_everywhere(kind: &str, name: &str, cases: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    let sdk = workspace().join("sdk");
    run(
        "tessera plugin new",
        Command::new(tessera_bin()).args([
            "plugin",
            "new",
            name,
            "--kind",
            kind,
            "--dir",
            dir.to_str().unwrap(),
            "--sdk",
            sdk.to_str().unwrap(),
        ]),
    );
    let tests = run("cargo test", &mut cargo(&dir, &["test"]));
    assert!(tests.contains("test golden_cases ... ok"), "{tests}");
    let wasm_target = ["--target", "wasm32-unknown-unknown", "--profile", "plugin"];
    run(
        "cargo build (Wasm)",
        &mut cargo(&dir, &[&["build"][..], &wasm_target].concat()),
    );
    let component = target_dir()
        .join("scaffold/wasm32-unknown-unknown/plugin")
        .join(format!("tessera_plugin_{}.wasm", name.replace('-', "_")));
    let cases_dir = dir.join("cases");
    let out = run(
        "tessera plugin test",
        Command::new(tessera_bin()).args([
            "plugin",
            "test",
            component.to_str().unwrap(),
            "--cases",
            cases_dir.to_str().unwrap(),
        ]),
    );
    assert!(
        out.contains(&format!("{name} 0.1.0: {cases} passed, 0 failed")),
        "{out}"
    );
    let first_case = std::fs::read_dir(&cases_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| !p.to_string_lossy().contains("required"))
        .unwrap();
    let answer = run(
        "tessera plugin run",
        Command::new(tessera_bin()).args([
            "plugin",
            "run",
            component.to_str().unwrap(),
            "--case",
            first_case.to_str().unwrap(),
        ]),
    );
    assert!(answer.contains(answer_mark(kind)), "{answer}");
    let inspected = run(
        "tessera plugin inspect",
        Command::new(tessera_bin()).args(["plugin", "inspect", component.to_str().unwrap()]),
    );
    assert!(
        inspected.contains(&format!("kind:      {kind}")),
        "{inspected}"
    );
}

/// A line `tessera plugin run` prints for the sample's rendered case.
fn answer_mark(kind: &str) -> &'static str {
    if kind == "module-reconciler" {
        "state: Ready"
    } else {
        "example.com/team: platform"
    }
}

/// One test: the two crates share a target directory and must not build at once.
#[test]
fn a_new_plugin_passes_its_cases_natively_and_on_the_wasm_build() {
    new_plugin_passes_everywhere("module-reconciler", "hello-module", 2);
    new_plugin_passes_everywhere("shoot-extension", "team-label", 2);
}

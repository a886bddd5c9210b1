//! What a new plugin team does first: `tessera plugin new`, `cargo test`, a Wasm build. Used
//! by the scaffold test (both kinds, `plugin test/run/inspect`) and by the module test that
//! takes a new module all the way to Ready through a registry and a ModuleSet.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::env::tessera_bin;
use crate::{target_dir, workspace};

/// Run `cmd`, panic with its output when it fails, print how long it took; its stdout.
pub fn run(what: &str, cmd: &mut Command) -> String {
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

/// `cargo` for a new crate: none of the outer `cargo test`'s variables (they describe this
/// crate), a target directory shared between runs, and no network (its `Cargo.lock` is the
/// checkout's, so every crate is already in the local registry cache).
pub fn cargo(dir: &Path, args: &[&str]) -> Command {
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

/// The `tessera` binary with `args`.
pub fn tessera(args: &[&str]) -> Command {
    let mut cmd = Command::new(tessera_bin());
    cmd.args(args);
    cmd
}

/// `tessera plugin new NAME --kind KIND` in `dir` (outside the checkout), its golden cases
/// natively (`cargo test`), then its component; the component's path.
pub fn new_plugin_built(kind: &str, name: &str, dir: &Path) -> PathBuf {
    let sdk = workspace().join("sdk");
    let (dir_arg, sdk_arg) = (dir.to_str().unwrap(), sdk.to_str().unwrap());
    run(
        "tessera plugin new",
        &mut tessera(&[
            "plugin", "new", name, "--kind", kind, "--dir", dir_arg, "--sdk", sdk_arg,
        ]),
    );
    let tests = run("cargo test", &mut cargo(dir, &["test"]));
    assert!(tests.contains("test golden_cases ... ok"), "{tests}");
    let wasm_target = ["--target", "wasm32-unknown-unknown", "--profile", "plugin"];
    run(
        "cargo build (Wasm)",
        &mut cargo(dir, &[&["build"][..], &wasm_target].concat()),
    );
    target_dir()
        .join("scaffold/wasm32-unknown-unknown/plugin")
        .join(format!("tessera_plugin_{}.wasm", name.replace('-', "_")))
}

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

/// The shell blocks of a README between `<!-- walkthrough` and `<!-- end walkthrough -->`,
/// as one bash script that says when each block starts and how long it took.
pub fn walkthrough_script(readme: &str) -> String {
    let start = readme
        .find("<!-- walkthrough")
        .expect("a walkthrough marker");
    let end = readme
        .find("<!-- end walkthrough -->")
        .expect("an end marker");
    let mut script = String::from(
        "set -euo pipefail\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n\
         step() { echo \"== $1\" >&2; started=$(date +%s%3N); }\n\
         took() { echo \"== took $(( $(date +%s%3N) - started )) ms\" >&2; }\n",
    );
    let (mut in_block, mut first, mut n) = (false, false, 0);
    for line in readme[start..end].lines() {
        match (in_block, line.trim_end()) {
            (false, "```sh") => (in_block, first, n) = (true, true, n + 1),
            (true, "```") => {
                in_block = false;
                script.push_str("took\n");
            }
            (true, text) => {
                if std::mem::take(&mut first) {
                    let label = text.replace(['\'', '"', '$', '`', '\\'], "");
                    script.push_str(&format!("step \"{n}: {label}\"\n"));
                }
                script.push_str(text);
                script.push('\n');
            }
            _ => {}
        }
    }
    assert!(!in_block && n > 0, "the walkthrough's blocks do not close");
    script
}

/// `bash` running `script` in `dir` as an author would: `tessera` and `cargo` on the
/// `PATH`, none of the outer `cargo test`'s variables, the shared scaffold target
/// directory, no network for cargo.
pub fn author_shell(dir: &Path, script: &str) -> Command {
    let tessera_dir = tessera_bin().parent().unwrap().to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cargo_dir = Path::new(&cargo).parent().map(Path::to_path_buf);
    let path = std::env::join_paths([Some(tessera_dir), cargo_dir].into_iter().flatten().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut cmd = Command::new("bash");
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" {
            cmd.env_remove(key);
        }
    }
    cmd.current_dir(dir)
        .args(["-c", script])
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", target_dir().join("scaffold"));
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walkthrough_is_the_readmes_shell_blocks_in_order() {
        let readme = "intro\n```sh\nnot this\n```\n<!-- walkthrough -->\ntext\n```sh\na=1\necho $a\n```\nmore\n```yaml\nno: 1\n```\n```sh\nb\n```\n<!-- end walkthrough -->\n```sh\nnor this\n```\n";
        let script = walkthrough_script(readme);
        assert!(
            script.contains("step \"1: a=1\"\na=1\necho $a\ntook\n"),
            "{script}"
        );
        assert!(script.contains("step \"2: b\"\nb\ntook\n"), "{script}");
        assert!(
            !script.contains("not this")
                && !script.contains("nor this")
                && !script.contains("no: 1")
        );
    }
}

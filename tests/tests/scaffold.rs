//! What a new plugin team does, on the real pieces: `tessera plugin new` outside any
//! checkout, the crate's golden cases natively, its component, `tessera plugin
//! test/run/inspect` on it; and for a module, the whole path on to a cluster: push and sign
//! to the local registry, a `Plugin` and a `ModuleSet`, the module Ready on the target.
//! Each step's time is printed (`--nocapture`), not asserted.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use tessera::modules::State;
use tessera_tests::env::ControlPlane;
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{Fixture, kubectl_ok, state_is};
use tessera_tests::scaffold::{author_shell, new_plugin_built, run, tessera, walkthrough_script};
use tessera_tests::{scenario, scenarios, workspace};

use tessera_tests::Result;

/// The crate passes its cases on the Wasm build too; `run` and `inspect` work on it.
fn passes_everywhere(kind: &str, name: &str, mark: &str) -> Result {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join(name);
    let component = new_plugin_built(kind, name, &dir);
    let (component, cases) = (component.display().to_string(), dir.join("cases"));
    let cases_arg = cases.display().to_string();
    let out = run(
        "tessera plugin test",
        &mut tessera(&["plugin", "test", &component, "--cases", &cases_arg]),
    );
    if !out.contains(&format!("{name} 0.1.0: 2 passed, 0 failed")) {
        return Err(out);
    }
    let rendered = cases.join(if kind == "module-reconciler" {
        "renders.yaml"
    } else {
        "labels-the-shoot.yaml"
    });
    let case_arg = rendered.display().to_string();
    let answer = run(
        "tessera plugin run",
        &mut tessera(&["plugin", "run", &component, "--case", &case_arg]),
    );
    if !answer.contains(mark) {
        return Err(format!("plugin run lacks {mark:?}:\n{answer}"));
    }
    let inspected = run(
        "tessera plugin inspect",
        &mut tessera(&["plugin", "inspect", &component]),
    );
    // The configuration's schema, from the crate's `Config` type, travels in the component.
    let field = if kind == "module-reconciler" {
        "greeting: string"
    } else {
        "team: string"
    };
    if !inspected.contains(&format!("kind:      {kind}")) || !inspected.contains(field) {
        return Err(inspected);
    }
    Ok(())
}

async fn both_kinds_pass_their_cases(_: &ControlPlane) -> Result {
    passes_everywhere("module-reconciler", "hello-module", "state: Ready")?;
    passes_everywhere(
        "shoot-extension",
        "team-label",
        "example.com/team: platform",
    )
}

/// `plugin new`, then every step of the new module's README as written, outside the
/// checkout: tests and the Wasm build, `tessera dev up`, `modules apply` with the
/// component's requested grants, a config change seen with `--dry-run` then applied,
/// `modules delete`, a signed push, then a host running the module controllers with a
/// trust policy, a `Plugin` on a channel and the ModuleSet Ready, clean-up. Each step's
/// time is printed.
async fn the_module_readme_walks_to_ready(_: &ControlPlane) -> Result {
    let started = Instant::now();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join("greeter");
    let sdk = workspace().join("sdk");
    run(
        "tessera plugin new",
        &mut tessera(&[
            "plugin",
            "new",
            "greeter",
            "--kind",
            "module-reconciler",
            "--dir",
            dir.to_str().unwrap(),
            "--sdk",
            sdk.to_str().unwrap(),
        ]),
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).map_err(|e| e.to_string())?;
    let script = walkthrough_script(&readme);
    let out = author_shell(&dir, &script)
        .output()
        .map_err(|e| e.to_string())?;
    // Whatever happened, nothing of `tessera dev up` stays behind.
    let dev = dir.join(".tessera-dev").display().to_string();
    let down = tessera(&["dev", "down", "--dir", &dev]).output();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("{stderr}\n--- the walkthrough's standard output:\n{stdout}");
    if !out.status.success() {
        let host = std::fs::read_to_string(dir.join(".tessera-dev/host.log")).unwrap_or_default();
        return Err(format!(
            "the README's walkthrough failed ({}):\n{stdout}\n--- host log:\n{host}",
            out.status
        ));
    }
    let down = down.map_err(|e| e.to_string())?;
    if !down.status.success() || !String::from_utf8_lossy(&down.stderr).contains("nothing runs") {
        return Err(format!("tessera dev down after the walkthrough: {down:?}"));
    }
    for expected in ["hello again", "greeter-try", "Ready"] {
        if !stdout.contains(expected) {
            return Err(format!(
                "the walkthrough's output lacks {expected:?}:\n{stdout}"
            ));
        }
    }
    eprintln!(
        "plugin new → README walkthrough done: {:.1?}",
        started.elapsed()
    );
    Ok(())
}

/// A Python project from `plugin new --lang python`, built by componentize-py (from PyPI)
/// and tested with the same harness; the component's path. Sizes and times are printed.
fn python_component(f: &Fixture<'_>) -> Result<String> {
    let componentize = run(
        "ensure componentize-py",
        &mut std::process::Command::new(workspace().join("tests/python/ensure-componentize.sh")),
    );
    let dir = f.dir.path().join("py-greeter");
    let dir_arg = dir.display().to_string();
    let new = [
        "plugin",
        "new",
        "py-greeter",
        "--kind",
        "module-reconciler",
        "--lang",
        "python",
    ];
    run(
        "tessera plugin new --lang python",
        &mut tessera(&[&new[..], &["--dir", &dir_arg]].concat()),
    );
    let component = dir.join("py-greeter.wasm").display().to_string();
    run(
        "componentize-py",
        std::process::Command::new(componentize.trim())
            .current_dir(&dir)
            .args([
                "-d",
                "wit",
                "-w",
                "module-reconciler",
                "componentize",
                "app",
            ])
            .args(["-p", ".", "--stub-wasi", "-o", &component]),
    );
    let size = std::fs::metadata(&component)
        .map_err(|e| e.to_string())?
        .len();
    eprintln!("Python component: {size} bytes");
    let cases = dir.join("cases").display().to_string();
    let out = run(
        "tessera plugin test (compiles)",
        &mut tessera(&["plugin", "test", &component, "--cases", &cases]),
    );
    if !out.contains("py-greeter 0.1.0: 2 passed, 0 failed") {
        return Err(out);
    }
    let bench = [
        "plugin",
        "bench",
        &component,
        "--cases",
        &cases,
        "--iterations",
        "200",
    ];
    eprint!("{}", run("tessera plugin bench", &mut tessera(&bench)));
    Ok(component)
}

/// A Python module reconciler: built and tested as above, then a registry, a Plugin and a
/// ModuleSet, and the module Ready on the cluster.
async fn a_python_module_reaches_ready(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "scaffold-py").await?;
    let component = python_component(&f)?;
    f.push_path(std::path::Path::new(&component), "py-greeter", "0.1.0")?;
    f.plugin(
        "py-greeter",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "0.1.0", "ref": f.reference("py-greeter", "0.1.0")}],
            "channels": [{"name": "regular", "version": "0.1.0"}],
            "grants": {"write": [
                {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true, "names": ["py-greeter"]},
                {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["py-greeter"]},
            ]},
        }),
    )
    .await?;
    let host = f.host("a");
    f.apply_set(
        "py",
        json!({"modules": [{"name": "py-greeter", "config": {"greeting": "hi from Python"}}]}),
    )
    .await?;
    f.wait_set("py", &host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let settings = kubectl_ok(
        &cp.garden,
        &[
            "get",
            "configmap",
            "py-greeter-settings",
            "-n",
            "py-greeter",
            "-o",
            "json",
        ],
    )?;
    if !settings.contains("hi from Python") {
        return Err(format!("the module's ConfigMap:\n{settings}"));
    }
    Ok(())
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    scenarios::run(
        &sim,
        &Script::quick(),
        vec![
            scenario!(both_kinds_pass_their_cases),
            scenario!(the_module_readme_walks_to_ready),
            scenario!(a_python_module_reaches_ready),
        ],
    )
}

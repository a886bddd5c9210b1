//! Build, test and demo orchestration: `cargo xtask <command>`.
//!
//! - `build-plugins`: first-party plugins (and the test guests) → `<target>/plugins/*.wasm`
//!   and `<target>/test-plugins/*.wasm`.
//! - `demo`: build what the chosen mode needs (the Kubernetes build in the background while
//!   cargo builds), start the local control plane (etcd, garden and runtime API servers,
//!   Gardener simulator), run the host and follow the Runtime to Ready (`--kubeconfig
//!   FILE`: a real cluster). A stop signal to `./x demo` is passed on to the demo, which
//!   stops everything it started.
//! - `load --runtimes N [--rollout] [--replicas R]`: the operator load benchmark on the
//!   local control plane; `--rollout` takes one step from a registry Plugin with two
//!   channels and measures a new digest released on one of them
//!   (`--host-arg=--render-cache-mib=0`: the same without the render cache); `--replicas R`
//!   shards the Runtimes over R hosts and measures one of them killed.
//! - `chaos [--seed S] [--kills K] [--hosts H] [--runtimes N] [--sharding] [--modulesets M]`:
//!   hosts killed with SIGKILL at random moments while Runtimes, RuntimeAccesses and
//!   ModuleSets come and go and Gardener fails for a while, then every convergence check (`tests/src/bin/chaos/main.rs`); release build.
//! - `test [--jobs N] [-- ARGS]`: build the plugins, (once per machine, in the background)
//!   Kubernetes, and every test binary once, then run them side by side (`suites`) with
//!   `ARGS` each; closes with every suite's duration and one line over all.
//! - `lint`: `cargo fmt --check` and `cargo clippy -D warnings` (host and Wasm targets).
//! - `bench`: build the plugins, then `cargo bench -p tessera`.
//! - `bench-plugins`: registry figures (pull + verify + compile per plugin, host start-up
//!   with 20 Plugins in its store) against a local docker-registry and control plane.
//! - `bench-modules [--sets N] [--targets N] [--replicas R]`: module figures (a 10-module
//!   ModuleSet to Ready; per-replica CPU and memory with N ModuleSets × 5 modules on N
//!   distinct clusters, and a killed replica's handover) on the local control plane.
//! - `image [--push REF] [--check-reproducible]`: the container image (static musl host and
//!   the first-party plugins) as an OCI layout and tar, built without a container engine.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};

mod background;
mod cycles;
mod image;
mod signals;
mod suites;

use background::Background;

/// First-party plugins: no WASI imports, linked into components by `wasm-component-ld`
/// (`.cargo/config.toml`), so a fresh instance costs less.
const PLUGIN_TARGET: &str = "wasm32-unknown-unknown";
/// Test guests that must reach WASI (to prove the sandbox refuses it) build for WASI p2.
const GUEST_TARGET: &str = "wasm32-wasip2";
const PLUGIN_PROFILE: &str = "plugin";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.iter().skip(1).map(String::as_str).collect::<Vec<_>>();
    let result = match args.first().map(String::as_str) {
        Some("build-plugins") => build_plugins().map(|_| ()),
        Some("demo") => demo(&rest),
        Some("test") => test(&rest),
        Some("lint") => lint(),
        Some("bench") => bench(&rest),
        Some("load") => load(&rest),
        Some("chaos") => chaos(&rest),
        Some("bench-plugins") => bench_plugins(&rest),
        Some("bench-modules") => bench_modules(&rest),
        Some("image") => image::image(&rest),
        _ => {
            eprintln!(
                "usage: cargo xtask <build-plugins|demo|test|lint|bench|bench-plugins|bench-modules|load|chaos|image> [args]"
            );
            eprintln!("  test [--jobs N] [-- ARGS for every test binary]");
            eprintln!(
                "  load --runtimes N [--rollout [--rollout-step STEP]] [--host-arg=--render-cache-mib=0]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A child stopped by a signal has said what it stopped: end as it did, quietly.
        Err(err) if err.downcast_ref::<signals::Stopped>().is_some() => {
            ExitCode::from(err.downcast_ref::<signals::Stopped>().map_or(130, |s| s.0))
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    // `cargo run` sets it at run time; the compile-time value can name another checkout
    // when the target directory is shared (a cached build from a different clone).
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().unwrap().to_path_buf()
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    // `cargo run` gives xtask the package variables of xtask itself. Passed on, they look
    // like a changed environment to build scripts that watch them (ring watches
    // CARGO_MANIFEST_DIR and CARGO_PKG_*), so ring and all that depends on it were rebuilt
    // whenever the shared target directory was last built from another checkout or by hand.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_MANIFEST_LINKS",
            ]
            .contains(&key.as_ref())
        {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd
}

fn run(mut cmd: Command) -> Result<()> {
    eprintln!("+ {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn metadata() -> Result<serde_json::Value> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Packages whose manifest lives under `dir` (relative to the workspace root).
fn packages_under(meta: &serde_json::Value, dir: &str) -> Vec<String> {
    let prefix = root().join(dir);
    let mut names: Vec<String> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| Path::new(p["manifest_path"].as_str().unwrap_or("")).starts_with(&prefix))
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

struct Built {
    target_dir: PathBuf,
    plugin_dir: PathBuf,
    test_plugin_dir: PathBuf,
}

/// Build every plugin crate under `plugins/` (for `wasm32-unknown-unknown`) and every guest
/// under `tests/guests/` (for `wasm32-wasip2`) and copy the components to `<target>/plugins/<name>.wasm` (test guests
/// to `<target>/test-plugins/`).
fn build_plugins() -> Result<Built> {
    let built = build_first_party()?;
    let meta = metadata()?;
    build_components(
        &meta,
        "tests/guests",
        &built.test_plugin_dir,
        "tessera-guest-",
    )?;
    Ok(built)
}

/// The first-party plugins only (what the demo runs; the test guests are for the tests).
fn build_first_party() -> Result<Built> {
    let meta = metadata()?;
    let target_dir = target_dir(&meta)?;
    let plugin_dir = target_dir.join("plugins");
    let test_plugin_dir = target_dir.join("test-plugins");
    build_components(&meta, "plugins", &plugin_dir, "tessera-plugin-")?;
    Ok(Built {
        target_dir,
        plugin_dir,
        test_plugin_dir,
    })
}

fn target_dir(meta: &serde_json::Value) -> Result<PathBuf> {
    Ok(PathBuf::from(
        meta["target_directory"]
            .as_str()
            .context("target_directory")?,
    ))
}

/// Build the packages under `dir` (for [`target_of`] it) and copy each component to
/// `out/<name>.wasm` (`name` without `prefix`). Returns the copies: the directory is shared
/// by every checkout using the target directory, so it may hold other checkouts' plugins.
fn build_components(
    meta: &serde_json::Value,
    dir: &str,
    out: &Path,
    prefix: &str,
) -> Result<Vec<PathBuf>> {
    let packages = packages_under(meta, dir);
    if packages.is_empty() {
        return Ok(Vec::new());
    }
    let target_dir = target_dir(meta)?;
    let target = target_of(dir);
    let mut cmd = cargo();
    cmd.args(["build", "--target", target, "--profile", PLUGIN_PROFILE]);
    for package in &packages {
        cmd.args(["-p", package]);
    }
    run(cmd)?;
    std::fs::create_dir_all(out)?;
    let mut copies = Vec::new();
    for package in &packages {
        let artifact = target_dir
            .join(target)
            .join(PLUGIN_PROFILE)
            .join(format!("{}.wasm", package.replace('-', "_")));
        let name = package.strip_prefix(prefix).unwrap_or(package);
        let dest = out.join(format!("{name}.wasm"));
        std::fs::copy(&artifact, &dest)
            .with_context(|| format!("copy {} → {}", artifact.display(), dest.display()))?;
        copies.push(dest);
    }
    eprintln!("{} components in {}", packages.len(), out.display());
    Ok(copies)
}

/// The Wasm target for the packages under `dir`.
fn target_of(dir: &str) -> &'static str {
    if dir == "plugins" {
        PLUGIN_TARGET
    } else {
        GUEST_TARGET
    }
}

fn with_plugin_env(cmd: &mut Command, built: &Built) {
    cmd.env("TESSERA_PLUGIN_DIR", &built.plugin_dir);
    cmd.env("TESSERA_TEST_PLUGIN_DIR", &built.test_plugin_dir);
}

/// Release builds of the host and the control-plane tools, and the kube-apiserver (for
/// the benchmarks: their figures are of release builds).
fn release_tools() -> Result<(Built, PathBuf)> {
    let kube = Background::kube(false)?;
    let built = build_plugins()?;
    run({
        let mut cmd = cargo();
        cmd.args([
            "build",
            "--release",
            "-p",
            "tessera",
            "-p",
            "tessera-tests",
            "--bins",
        ]);
        cmd
    })?;
    Ok((built, kube.wait()?))
}

fn tool(built: &Built, apiserver: &Path, name: &str) -> Command {
    tool_of(built, apiserver, "release", name)
}

/// `<target>/<profile>/<name>`, with the plugins, the API server and the host it runs.
fn tool_of(built: &Built, apiserver: &Path, profile: &str, name: &str) -> Command {
    let bin = built.target_dir.join(profile);
    let mut cmd = Command::new(bin.join(name));
    cmd.current_dir(root());
    with_plugin_env(&mut cmd, built);
    cmd.env("TESSERA_KUBE_APISERVER", apiserver);
    cmd.env("TESSERA_BIN", bin.join("tessera"));
    cmd
}

/// The demo, built in the test profile (what `./x test` builds too, in a third of a release
/// build's time): the host, the demo and the simulator, while Kubernetes builds beside them
/// (the API server; with `--in-pod` also the node's commands, and the image).
fn demo(args: &[&str]) -> Result<()> {
    let in_pod = args.contains(&"--in-pod");
    let local = !args.iter().any(|a| a.starts_with("--kubeconfig"));
    // apt first: the Kubernetes build below installs its own packages with it.
    let node = if in_pod { node_tools()? } else { Vec::new() };
    let kube = if local {
        Some(Background::kube(in_pod)?)
    } else {
        None
    };
    let built = build_first_party()?;
    run({
        let mut cmd = cargo();
        cmd.args(["build", "-p", "tessera", "--bin", "tessera", "-p"]);
        cmd.args(["tessera-tests", "--bin", "demo", "--bin", "gardener-sim"]);
        cmd
    })?;
    let debug = built.target_dir.join("debug");
    let mut render = Command::new(debug.join("tessera"));
    render.current_dir(root());
    render.args([
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--plugins",
    ]);
    render.arg(&built.plugin_dir);
    run(render)?;
    let apiserver = match kube {
        Some(kube) => kube.wait()?,
        None => PathBuf::new(),
    };
    let mut cmd = tool_of(&built, &apiserver, "debug", "demo");
    if in_pod {
        cmd.envs(node);
        let binary = debug.join("tessera");
        let version = host_version()?;
        let tars = image::test_images(&[image::TestImage {
            binary: &binary,
            version: &version,
            name: "tessera-test-image",
        }])?;
        cmd.env("TESSERA_IMAGE_TAR", &tars[0]);
    }
    cmd.args(args);
    signals::run_forwarding(cmd)
}

/// The host crate's version (what `tessera --version` says unless built with
/// `TESSERA_VERSION`).
fn host_version() -> Result<String> {
    let meta = metadata()?;
    let package = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "tessera")
        .context("no package tessera")?;
    Ok(package["version"].as_str().context("version")?.to_string())
}

fn chaos(args: &[&str]) -> Result<()> {
    let (built, apiserver) = release_tools()?;
    let mut cmd = tool(&built, &apiserver, "chaos");
    cmd.args(args);
    run(cmd)
}

fn load(args: &[&str]) -> Result<()> {
    let (built, apiserver) = release_tools()?;
    let mut cmd = tool(&built, &apiserver, "load");
    // The rollout serves its plugin from Debian's docker-registry.
    if args.contains(&"--rollout") {
        cmd.env(
            "TESSERA_REGISTRY_BIN",
            ensure_tool("tests/registry/ensure-registry.sh")?,
        );
    }
    cmd.args(args);
    run(cmd)
}

/// What the end-to-end tests and `demo --in-pod` need besides Kubernetes and the image,
/// as the variables they read: helm, the registry, the node's files.
fn node_tools() -> Result<Vec<(&'static str, PathBuf)>> {
    Ok(vec![
        ("TESSERA_HELM", ensure_tool("tests/chart/ensure-helm.sh")?),
        (
            "TESSERA_REGISTRY_BIN",
            ensure_tool("tests/registry/ensure-registry.sh")?,
        ),
        (
            "TESSERA_NODE_DIR",
            ensure_tool("tests/node/ensure-node.sh")?,
        ),
    ])
}

/// Every test of the workspace: the tools (Kubernetes in the background), the plugins, a
/// build of the host whose version says `-next` (the install test's upgrade), every test
/// binary once, the two test images, then the suites side by side.
fn test(args: &[&str]) -> Result<()> {
    let args = test_args(args)?;
    let mut env: Vec<(String, PathBuf)> = node_tools()?
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    env.push((
        "TESSERA_PROMETHEUS_DIR".into(),
        ensure_tool("tests/prometheus/ensure-prometheus.sh")?,
    ));
    // apt is done with: the Go build runs beside cargo from here on.
    let kube = Background::kube(true)?;
    let built = build_plugins()?;
    let version = host_version()?;
    let next_version = format!("{version}-next");
    let next = build_next_host(&built, &next_version)?;
    let mut suites = suites::build({
        let mut cmd = cargo();
        cmd.args(["test", "--workspace", "--locked"]);
        cmd
    })?;
    let current = built.target_dir.join("debug").join("tessera");
    let tars = image::test_images(&[
        image::TestImage {
            binary: &current,
            version: &version,
            name: "tessera-test-image",
        },
        image::TestImage {
            binary: &next,
            version: &next_version,
            name: "tessera-test-image-next",
        },
    ])?;
    env.push(("TESSERA_IMAGE_TAR".into(), tars[0].clone()));
    env.push(("TESSERA_NEXT_IMAGE_TAR".into(), tars[1].clone()));
    env.push(("TESSERA_PLUGIN_DIR".into(), built.plugin_dir.clone()));
    env.push((
        "TESSERA_TEST_PLUGIN_DIR".into(),
        built.test_plugin_dir.clone(),
    ));
    env.push(("TESSERA_KUBE_APISERVER".into(), kube.wait()?));
    if args.only.is_empty() {
        suites.push(suites::Suite::doc_tests(&root().join("Cargo.toml")));
    } else {
        suites.retain(|s| {
            args.only
                .iter()
                .any(|t| s.name.ends_with(&format!("::{t}")))
        });
    }
    let durations = built.target_dir.join("test-durations.tsv");
    suites::run_all(suites, args.jobs, &env, &args.rest, &durations)
}

/// What `./x test` was asked for.
struct TestArgs<'a> {
    /// Suites run at once (default 2: CI's machine has two cores, and the long suites
    /// mostly wait on API servers).
    jobs: usize,
    /// `--test NAME`: only these test targets (and no doc tests).
    only: Vec<&'a str>,
    /// For every test binary (after `--`, or any other word): filters, `--nocapture`.
    rest: Vec<&'a str>,
}

fn test_args<'a>(args: &[&'a str]) -> Result<TestArgs<'a>> {
    let mut parsed = TestArgs {
        jobs: 2,
        only: Vec::new(),
        rest: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--jobs" => {
                parsed.jobs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .context("--jobs needs a number")?;
            }
            "--test" => parsed
                .only
                .push(args.next().context("--test needs a name")?),
            "--" => parsed.rest.extend(args.by_ref()),
            // A cargo option (`-p`, `--release`) would reach every test binary and fail it.
            option if option.starts_with('-') => bail!(
                "./x test takes --jobs N and --test NAME; options for the test binaries go after `--` (got {option})"
            ),
            other => parsed.rest.push(other),
        }
    }
    Ok(parsed)
}

/// The test build with `TESSERA_VERSION=<version>`, its host binary copied aside. The
/// test build proper then rebuilds only what reads the variable (the host's binary crate)
/// and what is linked against it; the same command keeps every feature set, so nothing else
/// is built twice.
fn build_next_host(built: &Built, version: &str) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--locked", "--no-run"]);
    cmd.env("TESSERA_VERSION", version);
    run(cmd)?;
    let dir = built.target_dir.join("test-image");
    std::fs::create_dir_all(&dir)?;
    let copy = dir.join("tessera-next-unstripped");
    std::fs::copy(built.target_dir.join("debug").join("tessera"), &copy)
        .context("copy the -next host")?;
    Ok(copy)
}

/// Run a script that installs a tool once per machine and prints its path.
fn ensure_tool(script: &str) -> Result<PathBuf> {
    let script = root().join(script);
    eprintln!("+ {}", script.display());
    let out = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed with {}", script.display(), out.status);
    }
    let path = String::from_utf8(out.stdout)?.trim().to_string();
    Ok(PathBuf::from(path))
}

/// The host's top-level modules from the bottom up (docs/architecture.md#layers): each
/// imports only from the tiers below its own.
const LAYERS: &[&[&str]] = &[
    &[
        "api", "paths", "pattern", "time", "version", "input", "fence", "packed",
    ],
    &["report", "grants", "kubeconfig", "devenv"],
    &["crd"],
    &["oci"],
    &["wasm"],
    &["plugins", "harness"],
    &["gardener", "render", "history"],
    &["metrics"],
    &["modules"],
    &["controllers"],
    &["operator"],
];

fn lint() -> Result<()> {
    let src = root().join("host/src");
    let mut problems = cycles::find(&src, &["modules"])?;
    problems.extend(cycles::layer_violations(&src, LAYERS)?);
    if !problems.is_empty() {
        bail!(
            "host/src imports against its layers (docs/architecture.md#layers; the order is `LAYERS` in xtask/src/main.rs):\n  {}",
            problems.join("\n  ")
        );
    }
    run({
        let mut cmd = cargo();
        cmd.args(["fmt", "--all", "--", "--check"]);
        cmd
    })?;
    run({
        let mut cmd = cargo();
        cmd.args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]);
        cmd
    })?;
    let meta = metadata()?;
    let mut cmd = cargo();
    cmd.args(["clippy", "--target", PLUGIN_TARGET]);
    for package in packages_under(&meta, "plugins") {
        cmd.args(["-p", &package]);
    }
    cmd.args(["--", "-D", "warnings"]);
    run(cmd)
}

/// Registry figures: pull + verify + compile per plugin, host start-up with 20 Plugins.
fn bench_plugins(args: &[&str]) -> Result<()> {
    let (built, apiserver) = release_tools()?;
    let registry = ensure_tool("tests/registry/ensure-registry.sh")?;
    let mut cmd = tool(&built, &apiserver, "plugin-bench");
    cmd.env("TESSERA_REGISTRY_BIN", registry);
    cmd.args(args);
    run(cmd)
}

/// Module figures: a 10-module ModuleSet to Ready; host CPU/memory with N ModuleSets.
fn bench_modules(args: &[&str]) -> Result<()> {
    let (built, apiserver) = release_tools()?;
    let registry = ensure_tool("tests/registry/ensure-registry.sh")?;
    let mut cmd = tool(&built, &apiserver, "module-bench");
    cmd.env("TESSERA_REGISTRY_BIN", registry);
    cmd.args(args);
    run(cmd)
}

fn bench(args: &[&str]) -> Result<()> {
    let built = build_plugins()?;
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "tessera"]);
    cmd.args(args);
    with_plugin_env(&mut cmd, &built);
    run(cmd)
}

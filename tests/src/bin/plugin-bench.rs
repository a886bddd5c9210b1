//! `plugin-bench`: figures for plugins from a registry (Debian's docker-registry on
//! loopback, signatures required):
//! 1. pull + verify + compile of each first-party plugin, cold (empty store, empty compile
//!    cache) and warm (store and compile cache filled, fresh process state);
//! 2. start-up of a release-built host with 20 Plugins already in its store: time from
//!    spawning the process until it logs "plugin catalog ready".
//!
//! Run through `cargo xtask bench-plugins`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use sigstore::crypto::SigningScheme;
use tessera::crd::Plugin;
use tessera::oci::artifact::ArtifactMeta;
use tessera::oci::{
    ContentStore, PluginArtifact, Registry, TrustPolicy, parse_reference, signature,
};
use tessera::plugins::{FIRST_PARTY, Fetcher};
use tessera::wasm::{EngineOptions, PluginKind, WasmRuntime};
use tessera_tests::env::ControlPlane;
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::client_for;
use tessera_tests::registry::{TestRegistry, stamp_variant};

fn runtime(cache: Option<&std::path::Path>) -> Arc<WasmRuntime> {
    Arc::new(
        WasmRuntime::new(EngineOptions {
            cache_dir: cache.map(|p| p.to_path_buf()),
            ..EngineOptions::default()
        })
        .expect("engine"),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let registry_server = TestRegistry::start().map_err(anyhow::Error::msg)?;
    let host = registry_server.host();
    let work = tempfile::tempdir()?;
    let registry = Registry::new(Default::default());
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let public = signer
        .to_sigstore_keypair()
        .and_then(|k| k.public_key_to_pem())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut policy = TrustPolicy::default();
    policy
        .add_key(&format!("{host}/"), &public)
        .map_err(anyhow::Error::msg)?;
    std::fs::write(
        work.path().join("trust.yaml"),
        format!("keys:\n  - prefix: {host}/\n    publicKeyFile: key.pub\n"),
    )?;
    std::fs::write(work.path().join("key.pub"), &public)?;

    // Push and sign every first-party plugin, plus three builds of the stamp test plugin.
    let packer = runtime(None);
    let plugin_dir = tessera_tests::plugin_dir();
    let mut artifacts: Vec<(String, Vec<u8>)> = FIRST_PARTY
        .iter()
        .map(|name| {
            (
                name.to_string(),
                std::fs::read(plugin_dir.join(format!("{name}.wasm"))).expect("plugin"),
            )
        })
        .collect();
    let stamp = std::fs::read(tessera_tests::test_plugin_dir().join("stamp.wasm"))?;
    for i in 1..=3 {
        artifacts.push((
            format!("stamp-{i}"),
            stamp_variant(&stamp, &format!("b{i}")),
        ));
    }
    for (name, bytes) in &artifacts {
        let reference = parse_reference(&format!("{host}/bench/{name}:1.0.0"))?;
        let inspection = packer.inspect(bytes, name)?;
        let new = PluginArtifact::build(
            bytes.clone(),
            &inspection,
            ArtifactMeta {
                name: Some(name.clone()),
                version: Some("1.0.0".into()),
                kind: Some("shoot-extension".into()),
                ..Default::default()
            },
        );
        let digest = registry
            .push_artifact(&reference, &new, &tessera::oci::NoProgress)
            .await?;
        signature::sign(&registry, &reference, &digest, &signer).await?;
    }

    // 1. Pull + verify + compile, cold and warm.
    let store_dir = work.path().join("store");
    let cache_dir = work.path().join("wasm-cache");
    let fetcher = |policy: TrustPolicy| Fetcher {
        registry: Registry::new(Default::default()),
        store: ContentStore::open(&store_dir).expect("store"),
        policy,
        wasm: runtime(Some(&cache_dir)),
    };
    let clone_policy = || {
        let mut p = TrustPolicy::default();
        p.add_key(&format!("{host}/"), &public).expect("key");
        p
    };
    let cold = fetcher(clone_policy());
    println!("pull + verify signature + compile, per first-party plugin (signatures required)");
    println!(
        "{:<22} {:>9} {:>11} {:>11} {:>11}",
        "plugin", "KiB", "cold total", "of it compile", "warm"
    );
    let (mut colds, mut warms, mut compiles) = (Vec::new(), Vec::new(), Vec::new());
    // Warm: a new engine and registry client (as after a restart) over the same store and
    // compile cache.
    let warm_fetcher = fetcher(clone_policy());
    for name in FIRST_PARTY {
        let reference = format!("{host}/bench/{name}:1.0.0");
        let started = Instant::now();
        let digest = cold.resolve(&reference).await?;
        let fetched = cold
            .fetch(&reference, &digest, PluginKind::ShootExtension, true)
            .await?;
        let cold_time = started.elapsed();
        let compile = match &fetched.loaded {
            tessera::wasm::Loaded::Extension(p) => p.load_time,
            tessera::wasm::Loaded::Module(_) => Duration::ZERO,
        };
        let started = Instant::now();
        let digest = warm_fetcher.resolve(&reference).await?;
        warm_fetcher
            .fetch(&reference, &digest, PluginKind::ShootExtension, true)
            .await?;
        let warm_time = started.elapsed();
        let size = std::fs::metadata(plugin_dir.join(format!("{name}.wasm")))?.len();
        println!(
            "{:<22} {:>9} {:>11.1?} {:>11.1?} {:>11.1?}",
            name,
            size / 1024,
            cold_time,
            compile,
            warm_time
        );
        colds.push(cold_time);
        warms.push(warm_time);
        compiles.push(compile);
    }
    println!(
        "median: cold {:.1?} (compile {:.1?}), warm {:.1?}; total cold {:.2?}",
        median(colds.clone()),
        median(compiles),
        median(warms),
        colds.iter().sum::<Duration>()
    );

    // 2. Host start-up with 20 Plugins in the store.
    let sim = std::env::current_exe()?.with_file_name("gardener-sim");
    let cp = ControlPlane::start(&sim, &Script::default()).map_err(anyhow::Error::msg)?;
    let client = client_for(&cp.garden.kubeconfig).await;
    let plugins: Api<Plugin> = Api::all(client);
    for (name, _) in &artifacts {
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "Plugin",
            "metadata": { "name": format!("bench-{name}"), "labels": { "bench": "start-up" } },
            "spec": {
                "kind": "shoot-extension",
                "versions": [{ "version": "1.0.0", "ref": format!("{host}/bench/{name}:1.0.0") }],
                "channels": [{ "name": "regular", "version": "1.0.0" }],
                "verification": { "required": true },
            },
        });
        plugins
            .patch(
                &format!("bench-{name}"),
                &PatchParams::apply("bench").force(),
                &Patch::Apply(&doc),
            )
            .await?;
    }
    let host_store = work.path().join("host-store").display().to_string();
    let host_cache = work.path().join("host-cache").display().to_string();
    let trust = work.path().join("trust.yaml").display().to_string();
    let args = [
        "--no-leader-election",
        "--plugin-selector",
        "bench=start-up",
        "--plugin-store",
        &host_store,
        "--cache-dir",
        &host_cache,
        "--trust-policy",
        &trust,
    ];
    println!(
        "\nhost start-up with {} Plugins (signatures required)",
        artifacts.len()
    );
    for round in 0..4 {
        let started = Instant::now();
        let mut h = cp.host(&format!("bench-{round}"), &args);
        let ready = loop {
            if let Some(line) = h
                .logs()
                .lines()
                .find(|l| l.contains("plugin catalog ready"))
                .map(str::to_string)
            {
                break Some((started.elapsed(), line));
            }
            if started.elapsed() > Duration::from_secs(300) || !h.is_running() {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let (wall, line) =
            ready.ok_or_else(|| anyhow::anyhow!("host never became ready:\n{}", h.logs()))?;
        let logged: serde_json::Value = serde_json::from_str(&line)?;
        println!(
            "{}: process start → catalog ready {:.0?} (plugins resolved in {} ms after the controllers started)",
            if round == 0 {
                "empty store   "
            } else {
                "store filled  "
            },
            wall,
            logged["fields"]["elapsed_ms"]
        );
        h.kill();
    }
    Ok(())
}

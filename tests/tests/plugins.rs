//! Plugins from a real OCI registry (Debian's docker-registry on loopback): the CLI's
//! push/pull/inspect/sign/save/load, and the host's Plugin resources — channels, moved
//! tags, downgrades, shadow versions, signatures, tampering, a registry that goes away.
//! One control plane for the binary; each scenario has its own registry, namespace,
//! Plugin label and host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tessera::crd::{ConditionStatus, Plugin, Runtime, RuntimeState};
use tessera::gardener::shoot_resource;
use tessera::plugins::FIRST_PARTY;
use tessera_tests::env::{ControlPlane, Host, tessera_bin};
use tessera_tests::gardener_sim::Script;
use tessera_tests::probe::{client_for, eventually, http_get, tail};
use tessera_tests::registry::{TestRegistry, stamp_variant};

use tessera_tests::Result;
use tessera_tests::scenario;

const LIMIT: Duration = Duration::from_secs(60);

fn stamp_component() -> Vec<u8> {
    std::fs::read(tessera_tests::test_plugin_dir().join("stamp.wasm")).expect("stamp.wasm")
}

/// Run the `tessera` CLI; stdout on success, stdout+stderr in the error.
fn cli(args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let out = Command::new(tessera_bin())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "tessera {}: {}\n{stdout}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(stdout)
}

/// `tessera plugin push` with the user and password of `TestRegistry::start_with_auth`.
fn push_with_password(file: &str, reference: &str) -> Result<String> {
    let credentials = [
        "--registry-username",
        "tessera",
        "--registry-password",
        "s3cret",
    ];
    let mut args = vec!["plugin", "push", file, reference];
    args.extend(credentials);
    cli(&args, &[])
}

/// `tessera plugin push` of `bytes`; returns the manifest digest.
fn push(dir: &Path, bytes: &[u8], reference: &str, version: &str) -> Result<String> {
    let file = dir.join(format!("push-{}.wasm", reference.replace(['/', ':'], "_")));
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let out = cli(
        &[
            "plugin",
            "push",
            &file.display().to_string(),
            reference,
            "--version",
            version,
        ],
        &[],
    )?;
    Ok(out.trim().to_string())
}

fn keygen(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
    let prefix = dir.join(name);
    cli(
        &[
            "plugin",
            "keygen",
            "--output-prefix",
            &prefix.display().to_string(),
        ],
        &[("COSIGN_PASSWORD", "secret")],
    )?;
    Ok((prefix.with_extension("key"), prefix.with_extension("pub")))
}

fn sign(reference: &str, key: &Path) -> Result {
    cli(
        &[
            "plugin",
            "sign",
            reference,
            "--key",
            &key.display().to_string(),
        ],
        &[("COSIGN_PASSWORD", "secret")],
    )
    .map(|_| ())
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

struct Scenario<'a> {
    cp: &'a ControlPlane,
    client: Client,
    ns: String,
    registry: TestRegistry,
    /// Label selector of the Plugins this scenario's hosts resolve.
    selector: String,
}

impl<'a> Scenario<'a> {
    async fn new(cp: &'a ControlPlane, ns: &str) -> Result<Self> {
        let client = client_for(&cp.garden.kubeconfig).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let _ = namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap(),
            )
            .await;
        Ok(Self {
            cp,
            client,
            ns: ns.to_string(),
            registry: TestRegistry::start()?,
            selector: format!("tessera.dev/test={ns}"),
        })
    }

    fn repo(&self, name: &str) -> String {
        format!("{}/{}/{name}", self.registry.host(), self.ns)
    }

    fn dir(&self) -> &Path {
        self.registry.dir()
    }

    /// A host whose chain ends with the registry step `stamp` from Plugin `plugin`.
    fn host(&self, name: &str, plugin: &str, extra: &[&str]) -> Host {
        self.host_with_step(name, "stamp", plugin, extra)
    }

    /// A host whose chain ends with the registry step `step` from Plugin `plugin`.
    fn host_with_step(&self, name: &str, step: &str, plugin: &str, extra: &[&str]) -> Host {
        let mut chain: Vec<Value> = FIRST_PARTY.iter().map(|p| json!(p)).collect();
        chain.push(json!(step));
        // The operator grants the step what it sets.
        let config = json!({
            "chain": chain,
            "plugins": { step: {
                "source": "registry",
                "plugin": plugin,
                "grants": { "shootPaths": [r#"metadata.annotations["tessera.dev/stamp"]"#] },
            } },
        });
        let config_path = self.dir().join(format!("chain-{name}.yaml"));
        std::fs::write(&config_path, config.to_string()).unwrap();
        let config_path = config_path.display().to_string();
        let store = self.dir().join("store").display().to_string();
        let selector = self.selector.clone();
        let mut args = vec![
            "--namespace",
            &self.ns,
            "--requeue-retry",
            "1s",
            "--requeue-error",
            "1s",
            "--lease-duration",
            "6s",
            "--plugin-resync",
            "1s",
            "--plugin-store",
            &store,
            "--plugin-selector",
            &selector,
            "--config",
            &config_path,
        ];
        args.extend_from_slice(extra);
        self.cp.host(&format!("{}-{name}", self.ns), &args)
    }

    fn plugins(&self) -> Api<Plugin> {
        Api::all(self.client.clone())
    }

    fn runtimes(&self) -> Api<Runtime> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn shoots(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "garden-kyma-dev", &shoot_resource())
    }

    /// Create or replace (apply) Plugin `name` with `spec`, labelled for this scenario.
    async fn apply_plugin(&self, name: &str, spec: Value) -> Result {
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "Plugin",
            "metadata": { "name": name, "labels": { "tessera.dev/test": self.ns } },
            "spec": spec,
        });
        self.plugins()
            .patch(
                name,
                &PatchParams::apply("plugin-test").force(),
                &Patch::Apply(&doc),
            )
            .await
            .map_err(|e| format!("apply Plugin {name}: {e}"))?;
        Ok(())
    }

    async fn plugin_ready(&self, name: &str, host: &Host) -> Result<Plugin> {
        eventually(&format!("Plugin {name} Ready"), LIMIT, || async {
            let p = self.plugins().get(name).await.ok()?;
            let st = p.status.as_ref()?;
            let ready = st.conditions.iter().any(|c| {
                c.type_ == "Ready"
                    && c.status == ConditionStatus::True
                    && c.observed_generation == p.metadata.generation
            });
            (ready && st.channels.iter().all(|c| c.ready)).then_some(p)
        })
        .await
        .map_err(|e| self.explain_plugin(e, name, host))
    }

    async fn plugin_error(&self, name: &str, needle: &str, host: &Host) -> Result<Plugin> {
        eventually(
            &format!("Plugin {name} error {needle:?}"),
            LIMIT,
            || async {
                let p = self.plugins().get(name).await.ok()?;
                let err = p.status.as_ref()?.last_error.clone()?;
                err.contains(needle).then_some(p)
            },
        )
        .await
        .map_err(|e| self.explain_plugin(e, name, host))
    }

    fn explain_plugin(&self, e: String, name: &str, host: &Host) -> String {
        let status = futures::executor::block_on(self.plugins().get(name))
            .ok()
            .and_then(|p| serde_json::to_string_pretty(&p.status).ok());
        format!(
            "{e}\nstatus: {}\nhost log tail:\n{}",
            status.unwrap_or_default(),
            tail(&host.logs(), 30)
        )
    }

    fn manifest(&self, id: &str, shoot: &str) -> Value {
        let text =
            std::fs::read_to_string(tessera_tests::workspace().join("examples/runtime-aws.yaml"))
                .unwrap();
        let mut doc: Value = serde_saphyr::from_str(&text).unwrap();
        doc["metadata"] =
            json!({ "name": id, "namespace": self.ns, "labels": doc["metadata"]["labels"] });
        doc["spec"]["shoot"]["name"] = shoot.into();
        doc
    }

    async fn create_runtime(&self, id: &str, shoot: &str, annotations: Value) -> Result {
        let mut doc = self.manifest(id, shoot);
        doc["metadata"]["annotations"] = annotations;
        let runtime: Runtime = serde_json::from_value(doc).map_err(|e| e.to_string())?;
        self.runtimes()
            .create(&PostParams::default(), &runtime)
            .await
            .map_err(|e| format!("create Runtime: {e}"))?;
        Ok(())
    }

    async fn wait_ready(&self, id: &str, host: &Host) -> Result<Runtime> {
        eventually(&format!("Runtime {id} Ready"), LIMIT, || async {
            let rt = self.runtimes().get(id).await.ok()?;
            (rt.status.as_ref()?.state == Some(RuntimeState::Ready)).then_some(rt)
        })
        .await
        .map_err(|e| self.explain_runtime(e, id, host))
    }

    fn explain_runtime(&self, e: String, id: &str, host: &Host) -> String {
        let status = futures::executor::block_on(self.runtimes().get(id))
            .ok()
            .and_then(|r| serde_json::to_string_pretty(&r.status).ok());
        format!(
            "{e}\nstatus: {}\nhost log tail:\n{}",
            status.unwrap_or_default(),
            tail(&host.logs(), 30)
        )
    }

    /// Wait until Shoot `shoot` carries `tessera.dev/stamp: value`.
    async fn wait_stamp(&self, shoot: &str, value: &str, host: &Host) -> Result<DynamicObject> {
        eventually(&format!("Shoot {shoot} stamp {value}"), LIMIT, || async {
            let s = self.shoots().get(shoot).await.ok()?;
            (s.annotations().get("tessera.dev/stamp").map(String::as_str) == Some(value))
                .then_some(s)
        })
        .await
        .map_err(|e| {
            let now = futures::executor::block_on(self.shoots().get(shoot))
                .ok()
                .and_then(|s| s.annotations().get("tessera.dev/stamp").cloned());
            format!(
                "{e} (now {now:?})\nhost log tail:\n{}",
                tail(&host.logs(), 30)
            )
        })
    }

    async fn events(&self, object: &str, reason: &str) -> Vec<Event> {
        let api: Api<Event> = Api::all(self.client.clone());
        api.list(&ListParams::default().fields(&format!("involvedObject.name={object}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }
}

/// The same bytes pushed again give the same digest (the signature stays attached);
/// `push --sign` pushes and signs in one step; `keygen` refuses an empty password.
fn push_again_and_sign(
    s: &Scenario,
    v1: &[u8],
    reference: &str,
    digest: &str,
    key: &Path,
    public: &Path,
) -> Result {
    let again = push(s.dir(), v1, reference, "1.0.0")?;
    if again != digest {
        return Err(format!(
            "the same bytes pushed twice: {digest} then {again}"
        ));
    }
    let verify = |reference: &str| {
        let key = public.display().to_string();
        cli(&["plugin", "verify", reference, "--key", &key], &[])
    };
    verify(reference).map_err(|e| format!("signature lost by the second push: {e}"))?;
    let signed_ref = format!("{}:signed", s.repo("stamp"));
    let file = s.dir().join("signed.wasm");
    std::fs::write(&file, stamp_variant(v1, "signed")).map_err(|e| e.to_string())?;
    let (file, key) = (file.display().to_string(), key.display().to_string());
    let args = ["plugin", "push", &file, &signed_ref, "--sign", &key];
    cli(&args, &[("COSIGN_PASSWORD", "secret")])?;
    verify(&signed_ref)?;
    let prefix = s.dir().join("nopass").display().to_string();
    let refused = cli(&["plugin", "keygen", "--output-prefix", &prefix], &[])
        .err()
        .ok_or("keygen wrote a key with an empty password")?;
    if !refused.contains("--allow-empty-password") {
        return Err(format!("keygen: {refused}"));
    }
    Ok(())
}

/// CLI round trips against a real registry: push/inspect/pull, an artifact pushed by
/// another OCI client, signatures, a tampered blob, save/load into a second registry,
/// credentials. Each phase is its own function so that a failure names it.
async fn cli_round_trips(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-cli").await?;
    let v1 = stamp_component();
    let reference = format!("{}:1.0.0", s.repo("stamp"));
    let digest = push(s.dir(), &v1, &reference, "1.0.0")?;
    if !digest.starts_with("sha256:") {
        return Err(format!("push printed {digest:?}"));
    }
    cli_inspect_and_pull(&s, &v1, &reference, &digest)?;
    cli_another_client(&s).await?;
    let public = cli_signatures(&s, &v1, &reference, &digest)?;
    cli_tampering(&s, &v1)?;
    cli_air_gap(&s, &reference, &digest, &public)?;
    cli_credentials(&s, &v1)
}

/// `inspect -o json` shows the pushed artifact; `pull` gives back the same bytes.
fn cli_inspect_and_pull(s: &Scenario<'_>, v1: &[u8], reference: &str, digest: &str) -> Result {
    let inspect: Value =
        serde_json::from_str(&cli(&["plugin", "inspect", reference, "-o", "json"], &[])?)
            .map_err(|e| e.to_string())?;
    for (field, want) in [
        ("/digest", json!(digest)),
        ("/componentDigest", json!(sha256(v1))),
        ("/mediaType", json!("application/wasm")),
        (
            "/configMediaType",
            json!("application/vnd.wasm.config.v0+json"),
        ),
        ("/meta/version", json!("1.0.0")),
        ("/meta/kind", json!("shoot-extension")),
        ("/meta/name", json!("stamp")),
        ("/meta/contract", json!("0.1.0")),
    ] {
        if inspect.pointer(field) != Some(&want) {
            return Err(format!("inspect {field}: {inspect}"));
        }
    }
    let out = s.dir().join("pulled.wasm");
    cli(
        &[
            "plugin",
            "pull",
            reference,
            "--dest",
            &out.display().to_string(),
        ],
        &[],
    )?;
    if std::fs::read(&out).map_err(|e| e.to_string())? != *v1 {
        return Err("pulled bytes differ from pushed bytes".into());
    }

    Ok(())
}

/// An artifact pushed by another client (the Wasm OCI layout only, no Tessera annotations).
async fn cli_another_client(s: &Scenario<'_>) -> Result {
    let other = format!("{}:other", s.repo("labels"));
    let labels = std::fs::read(tessera_tests::plugin_dir().join("labels.wasm")).unwrap();
    push_with_oci_client(&other, &labels).await?;
    let out2 = s.dir().join("other.wasm");
    cli(
        &[
            "plugin",
            "pull",
            &other,
            "--dest",
            &out2.display().to_string(),
        ],
        &[],
    )?;
    if std::fs::read(&out2).map_err(|e| e.to_string())? != labels {
        return Err("artifact of another client: bytes differ".into());
    }
    let text = cli(&["plugin", "inspect", &out2.display().to_string()], &[])?;
    if !text.contains("kind:      shoot-extension") {
        return Err(format!(
            "the pulled component does not inspect as a plugin:\n{text}"
        ));
    }

    Ok(())
}

/// Sign and verify with the right and a wrong key; the public key, for the copies.
fn cli_signatures(s: &Scenario<'_>, v1: &[u8], reference: &str, digest: &str) -> Result<PathBuf> {
    let (key, public) = keygen(s.dir(), "cosign")?;
    let (_, other_public) = keygen(s.dir(), "other")?;
    let verify = |key: &Path| {
        cli(
            &[
                "plugin",
                "verify",
                reference,
                "--key",
                &key.display().to_string(),
            ],
            &[],
        )
    };
    if verify(&public).is_ok() {
        return Err("an unsigned plugin verified".into());
    }
    sign(reference, &key)?;
    verify(&public)?;
    let wrong = verify(&other_public)
        .err()
        .ok_or("verified with the wrong key")?;
    if !wrong.contains("no signature verifies") {
        return Err(format!("wrong key: {wrong}"));
    }
    push_again_and_sign(s, v1, reference, digest, &key, &public)?;

    Ok(public)
}

/// The registry serves changed bytes under the old digest: the pull refuses them.
fn cli_tampering(s: &Scenario<'_>, v1: &[u8]) -> Result {
    let tampered_ref = format!("{}:tampered", s.repo("stamp"));
    let variant = stamp_variant(v1, "tamper");
    push(s.dir(), &variant, &tampered_ref, "1.0.1")?;
    let blob = s.registry.blob_path(&sha256(&variant));
    std::fs::write(&blob, stamp_variant(v1, "evil")).map_err(|e| e.to_string())?;
    let refused = cli(
        &["plugin", "pull", &tampered_ref, "--dest", "/dev/null"],
        &[],
    )
    .err()
    .ok_or("a tampered blob was pulled")?;
    if !refused.contains("does not match its digest") {
        return Err(format!("tampered pull: {refused}"));
    }

    Ok(())
}

/// Air gap: save (with the signature), load into another registry, verify there.
fn cli_air_gap(s: &Scenario<'_>, reference: &str, digest: &str, public: &Path) -> Result {
    let layout = s.dir().join("layout");
    let saved = cli(
        &[
            "plugin",
            "save",
            reference,
            "--dir",
            &layout.display().to_string(),
        ],
        &[],
    )?;
    if !saved.contains("(signature)") {
        return Err(format!("save did not take the signature:\n{saved}"));
    }
    let second = TestRegistry::start()?;
    cli(
        &[
            "plugin",
            "load",
            &layout.display().to_string(),
            "--to",
            &second.host(),
        ],
        &[],
    )?;
    let moved = reference.replace(&s.registry.host(), &second.host());
    let inspect2: Value =
        serde_json::from_str(&cli(&["plugin", "inspect", &moved, "-o", "json"], &[])?)
            .map_err(|e| e.to_string())?;
    if inspect2["digest"] != json!(digest) || inspect2["signatures"] != json!(1) {
        return Err(format!("after load: {inspect2}"));
    }
    // The signature names the repository it was made in: at the copy it verifies only
    // where the operator says that repository is the copy's origin.
    let elsewhere = cli(
        &[
            "plugin",
            "verify",
            &moved,
            "--key",
            &public.display().to_string(),
        ],
        &[],
    )
    .err()
    .ok_or("a signature naming another repository verified")?;
    if !elsewhere.contains("names another repository") {
        return Err(format!("verify at the copy: {elsewhere}"));
    }
    let origin = reference
        .rsplit_once(':')
        .map_or(reference, |(r, _)| r)
        .to_string();
    cli(
        &[
            "plugin",
            "verify",
            &moved,
            "--key",
            &public.display().to_string(),
            "--signed-as",
            &origin,
        ],
        &[],
    )?;

    Ok(())
}

/// A registry with basic auth, by flags and from a Docker config file.
fn cli_credentials(s: &Scenario<'_>, v1: &[u8]) -> Result {
    let private = TestRegistry::start_with_auth("tessera", "s3cret")?;
    let private_ref = format!("{}/p-cli/stamp:1.0.0", private.host());
    let file = s.dir().join("stamp.wasm");
    std::fs::write(&file, v1).map_err(|e| e.to_string())?;
    let file = file.display().to_string();
    let anonymous = cli(&["plugin", "push", &file, &private_ref], &[])
        .err()
        .ok_or("an anonymous push to a registry with auth succeeded")?;
    if !anonymous.contains(&private.host()) {
        return Err(format!("anonymous push: {anonymous}"));
    }
    push_with_password(&file, &private_ref)?;
    let docker = s.dir().join("docker");
    std::fs::create_dir_all(&docker).map_err(|e| e.to_string())?;
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "tessera:s3cret");
    std::fs::write(
        docker.join("config.json"),
        json!({ "auths": { private.host(): { "auth": auth } } }).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let out3 = s.dir().join("private.wasm").display().to_string();
    cli(
        &["plugin", "pull", &private_ref, "--dest", &out3],
        &[("DOCKER_CONFIG", &docker.display().to_string())],
    )?;
    if std::fs::read(&out3).map_err(|e| e.to_string())? != *v1 {
        return Err("pull with Docker config credentials: bytes differ".into());
    }
    Ok(())
}

/// Push with oci-client directly: what `wkg` or another tool would write.
async fn push_with_oci_client(reference: &str, component: &[u8]) -> Result {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    use oci_client::manifest::OciImageManifest;
    use oci_client::secrets::RegistryAuth;
    let _ = rustls_provider();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..Default::default()
    });
    let parsed: oci_client::Reference = reference.parse().map_err(|e| format!("{e}"))?;
    let layer = ImageLayer::new(component.to_vec(), "application/wasm".into(), None);
    let config = Config::new(
        br#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#.to_vec(),
        "application/vnd.wasm.config.v0+json".into(),
        None,
    );
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    client
        .push(
            &parsed,
            &[layer],
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await
        .map_err(|e| format!("oci-client push: {e}"))?;
    Ok(())
}

fn rustls_provider() -> bool {
    tessera::oci::Registry::new(Default::default());
    true
}

/// Channels, a moved tag, a channel switch, a refused downgrade, a shadow version: one
/// Plugin's story, each step proving one behaviour on what the ones before left.
async fn channels_reload_shadow(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-chan").await?;
    let v1 = stamp_component();
    let repo = s.repo("stamp");
    push(s.dir(), &v1, &format!("{repo}:1.0.0"), "1.0.0")?;
    let plugin = "p-chan-stamp";
    s.apply_plugin(
        plugin,
        channels(
            &repo,
            &["1.0.0"],
            json!([{"name": "regular", "version": "1.0.0"}]),
        ),
    )
    .await?;
    let host = s.host("a", plugin, &[]);
    let c = Chan {
        s: &s,
        host: &host,
        plugin,
        repo,
        v1,
    };
    a_runtime_runs_the_channels_version(&c).await?;
    a_moved_tag_waits_for_approval(&c).await?;
    a_runtime_switches_channel_by_annotation(&c).await?;
    a_downgrade_is_refused_and_the_version_kept(&c).await?;
    a_shadow_version_is_compared_not_applied(&c).await?;
    // The downgrade, allowed: fast goes back to 1.0.0 (v2).
    s.apply_plugin(plugin, fast_down(&c.repo, true)).await?;
    s.wait_stamp("chan-a", "v2", &host).await?;
    Ok(())
}

/// What the channel steps share.
struct Chan<'a> {
    s: &'a Scenario<'a>,
    host: &'a Host,
    plugin: &'a str,
    repo: String,
    v1: Vec<u8>,
}

/// A Plugin spec with `versions` of the stamp plugin in `repo` and `channels`.
fn channels(repo: &str, versions: &[&str], channels: Value) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "version": v, "ref": format!("{repo}:{v}") }))
        .collect();
    json!({ "kind": "shoot-extension", "versions": versions, "channels": channels })
}

/// fast back to 1.0.0 (`allow`: with allowDowngrade), regular shadowing 1.1.0.
fn fast_down(repo: &str, allow: bool) -> Value {
    channels(
        repo,
        &["1.0.0", "1.1.0"],
        json!([
            { "name": "regular", "version": "1.0.0", "shadow": "1.1.0" },
            { "name": "fast", "version": "1.0.0", "allowDowngrade": allow },
        ]),
    )
}

/// The Plugin pins the version's digest; a Runtime runs it and names it in its status.
async fn a_runtime_runs_the_channels_version(c: &Chan<'_>) -> Result {
    let (s, host, plugin, v1) = (c.s, c.host, c.plugin, &c.v1);
    let p = s.plugin_ready(plugin, host).await?;
    let st = p.status.clone().unwrap();
    if st.versions[0].component_digest.as_deref() != Some(sha256(v1).as_str())
        || st.summary.as_deref() != Some("regular=1.0.0")
    {
        return Err(format!("Plugin status: {st:?}"));
    }
    s.create_runtime("rt-a", "chan-a", json!({})).await?;
    let rt = s.wait_ready("rt-a", host).await?;
    s.wait_stamp("chan-a", "v1", host).await?;
    let stamp = rt
        .status
        .unwrap()
        .plugins
        .into_iter()
        .find(|p| p.name == "stamp");
    match &stamp {
        Some(p)
            if p.version == "1.0.0"
                && p.digest == sha256(v1)
                && p.channel.as_deref() == Some("regular") => {}
        other => return Err(format!("status.plugins stamp: {other:?}")),
    }
    Ok(())
}

/// The tag moves: the new digest waits, pending on the Plugin, while the fleet keeps
/// running the pinned one, until an operator approves exactly that digest.
async fn a_moved_tag_waits_for_approval(c: &Chan<'_>) -> Result {
    let (s, host, plugin, repo) = (c.s, c.host, c.plugin, &c.repo);
    let v1 = &c.v1;
    let v2 = stamp_variant(v1, "v2");
    let moved = push(s.dir(), &v2, &format!("{repo}:1.0.0"), "1.0.0")?;
    eventually("the moved tag held as pending", LIMIT, || async {
        let p = s.plugins().get(plugin).await.ok()?;
        let pending = p.status?.versions.first()?.pending_digest.clone()?;
        (pending == moved && !s.events(plugin, "DigestPending").await.is_empty()).then_some(())
    })
    .await
    .map_err(|e| s.explain_plugin(e, plugin, host))?;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    s.wait_stamp("chan-a", "v1", host).await?;
    // An operator approves exactly that digest: new bytes on regular without a restart.
    let approve = json!({ "metadata": { "annotations": { "approve.tessera.dev/1.0.0": moved } } });
    s.plugins()
        .patch(plugin, &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .map_err(|e| e.to_string())?;
    s.wait_stamp("chan-a", "v2", host).await?;
    eventually("a DigestChanged Event", LIMIT, || async {
        (!s.events(plugin, "DigestChanged").await.is_empty()).then_some(())
    })
    .await
    .map_err(|e| s.explain_plugin(e, plugin, host))?;
    Ok(())
}

/// A fast channel with 1.1.0; the Runtime switches to it by annotation.
async fn a_runtime_switches_channel_by_annotation(c: &Chan<'_>) -> Result {
    let (s, host, plugin, repo) = (c.s, c.host, c.plugin, &c.repo);
    let v1 = &c.v1;
    let v3 = stamp_variant(v1, "v3");
    push(s.dir(), &v3, &format!("{repo}:1.1.0"), "1.1.0")?;
    let versions = json!([
        { "version": "1.0.0", "ref": format!("{repo}:1.0.0") },
        { "version": "1.1.0", "ref": format!("{repo}:1.1.0") },
    ]);
    s.apply_plugin(
        plugin,
        json!({
            "kind": "shoot-extension",
            "versions": versions,
            "channels": [
                { "name": "regular", "version": "1.0.0" },
                { "name": "fast", "version": "1.1.0" },
            ],
        }),
    )
    .await?;
    s.plugin_ready(plugin, host).await?;
    let patch = json!({ "metadata": { "annotations": { "channel.tessera.dev/stamp": "fast" } } });
    s.runtimes()
        .patch("rt-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| e.to_string())?;
    s.wait_stamp("chan-a", "v3", host).await?;
    eventually("status.plugins on fast 1.1.0", LIMIT, || async {
        let rt = s.runtimes().get("rt-a").await.ok()?;
        rt.status?.plugins.iter().find(|p| {
            p.name == "stamp" && p.version == "1.1.0" && p.channel.as_deref() == Some("fast")
        })?;
        Some(())
    })
    .await?;
    Ok(())
}

/// fast goes back to 1.0.0: refused, 1.1.0 kept, a Warning condition and Event.
async fn a_downgrade_is_refused_and_the_version_kept(c: &Chan<'_>) -> Result {
    let (s, host, plugin) = (c.s, c.host, c.plugin);
    s.apply_plugin(plugin, fast_down(&c.repo, false)).await?;
    eventually("PluginVersions DowngradeRefused", LIMIT, || async {
        let rt = s.runtimes().get("rt-a").await.ok()?;
        let c = rt
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "PluginVersions")?;
        (c.status == ConditionStatus::False
            && c.reason == "DowngradeRefused"
            && c.message.contains("1.1.0"))
        .then_some(())
    })
    .await
    .map_err(|e| s.explain_runtime(e, "rt-a", host))?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    s.wait_stamp("chan-a", "v3", host).await?;
    if s.events("rt-a", "DowngradeRefused").await.is_empty() {
        return Err("no DowngradeRefused Event".into());
    }
    Ok(())
}

/// A Runtime on regular (1.0.0 = v2) renders 1.1.0 (v3) for comparison only: status,
/// Event, metric and `tessera shadow` show the difference; nothing of it is applied.
async fn a_shadow_version_is_compared_not_applied(c: &Chan<'_>) -> Result {
    let (s, host) = (c.s, c.host);
    s.create_runtime("rt-b", "chan-b", json!({})).await?;
    s.wait_ready("rt-b", host).await?;
    let rt = eventually("a shadow result on rt-b", LIMIT, || async {
        let rt = s.runtimes().get("rt-b").await.ok()?;
        (!rt.status.as_ref()?.shadow.is_empty()).then_some(rt)
    })
    .await
    .map_err(|e| s.explain_runtime(e, "rt-b", host))?;
    let shadow = &rt.status.as_ref().unwrap().shadow[0];
    if shadow.result != tessera::crd::ShadowOutcome::Differs
        || shadow.version != "1.1.0"
        || shadow.current_version != "1.0.0"
        || !shadow
            .diff
            .iter()
            .any(|l| l.contains("tessera.dev/stamp") && l.contains("v2") && l.contains("v3"))
    {
        return Err(format!("shadow result: {shadow:?}"));
    }
    s.wait_stamp("chan-b", "v2", host).await?;
    eventually("a ShadowDiff Event", LIMIT, || async {
        (!s.events("rt-b", "ShadowDiff").await.is_empty()).then_some(())
    })
    .await?;
    let addr = host
        .metrics_addr(Duration::from_secs(5))
        .ok_or("no metrics address")?;
    let metrics = http_get(&addr, "/metrics").await?;
    let want = r#"tessera_shadow_renders_total{plugin="stamp",result="differs",version="1.1.0"}"#;
    if !metrics.contains(want) {
        return Err(format!("/metrics lacks {want}"));
    }
    let shown = cli(
        &[
            "shadow",
            "rt-b",
            "-n",
            &s.ns,
            "--kubeconfig",
            &s.cp.garden.kubeconfig.display().to_string(),
        ],
        &[],
    )?;
    if !shown.contains("stamp 1.1.0") || !shown.contains("tessera.dev/stamp") {
        return Err(format!("tessera shadow:\n{shown}"));
    }
    Ok(())
}

/// The host's log filter with one line per reconcile (`reconcile started`, in a span naming
/// the object).
const RECONCILE_LOG: &str = "info,kube=warn,tower=warn,hyper=warn,tessera::controllers::kit=debug";

/// Reconciles of Runtime `id` the host has logged so far.
fn reconciles(s: &Scenario<'_>, host: &Host, id: &str) -> usize {
    let object = format!("Runtime/{}/{id}\"", s.ns);
    host.logs()
        .lines()
        .filter(|l| l.contains("reconcile started") && l.contains(&object))
        .count()
}

/// Reconciles of Runtime `id` once they stopped coming (none for 4 s).
async fn settled_reconciles(s: &Scenario<'_>, host: &Host, id: &str) -> Result<usize> {
    let mut last = (reconciles(s, host, id), std::time::Instant::now());
    let started = std::time::Instant::now();
    while last.1.elapsed() < Duration::from_secs(4) {
        if started.elapsed() > LIMIT {
            return Err(format!("Runtime {id} is still being reconciled"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = reconciles(s, host, id);
        if now != last.0 {
            last = (now, std::time::Instant::now());
        }
    }
    Ok(last.0)
}

/// One plugin's channel moves: the Runtime on that channel renders the new version; the
/// Runtime on another channel of the same plugin is not even reconciled.
async fn a_channel_move_wakes_only_its_runtimes(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-wake").await?;
    let v1 = stamp_component();
    let repo = s.repo("stamp");
    push(s.dir(), &v1, &format!("{repo}:1.0.0"), "1.0.0")?;
    push(
        s.dir(),
        &stamp_variant(&v1, "v2"),
        &format!("{repo}:1.1.0"),
        "1.1.0",
    )?;
    let plugin = "p-wake-stamp";
    let spec = |fast: &str| {
        json!({
            "kind": "shoot-extension",
            "versions": [
                { "version": "1.0.0", "ref": format!("{repo}:1.0.0") },
                { "version": "1.1.0", "ref": format!("{repo}:1.1.0") },
            ],
            "channels": [
                { "name": "regular", "version": "1.0.0" },
                { "name": "fast", "version": fast },
            ],
        })
    };
    s.apply_plugin(plugin, spec("1.0.0")).await?;
    let host = s.host("a", plugin, &["--log", RECONCILE_LOG]);
    s.plugin_ready(plugin, &host).await?;
    let fast = json!({ "channel.tessera.dev/stamp": "fast" });
    s.create_runtime("rt-moves", "wake-moves", fast).await?;
    s.create_runtime("rt-stays", "wake-stays", json!({}))
        .await?;
    for (id, shoot) in [("rt-moves", "wake-moves"), ("rt-stays", "wake-stays")] {
        s.wait_ready(id, &host).await?;
        s.wait_stamp(shoot, "v1", &host).await?;
    }
    let before = settled_reconciles(&s, &host, "rt-stays").await?;
    let moves_before = reconciles(&s, &host, "rt-moves");

    s.apply_plugin(plugin, spec("1.1.0")).await?;
    s.wait_stamp("wake-moves", "v2", &host).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = reconciles(&s, &host, "rt-stays");
    if after != before || reconciles(&s, &host, "rt-moves") <= moves_before {
        return Err(format!(
            "rt-stays reconciled {before} then {after} times; host log tail:\n{}",
            tail(&host.logs(), 30)
        ));
    }
    s.wait_stamp("wake-stays", "v1", &host).await?;
    replays_from_the_registry(&s, "rt-moves").await
}

/// Every revision of `id` replays with an empty content store: the registry step's
/// component (each version once) is pulled by the digest recorded, from the reference a
/// Plugin lists for it, and the render reproduces the recorded Shoot hash.
async fn replays_from_the_registry(s: &Scenario<'_>, id: &str) -> Result {
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> =
        Api::namespaced(s.client.clone(), &s.ns);
    let listed = revisions
        .list(&ListParams::default().labels(&format!("tessera.dev/runtime={id}")))
        .await
        .map_err(|e| e.to_string())?;
    let numbers: Vec<String> = listed
        .items
        .iter()
        .filter_map(|r| r.revision.map(|n| n.to_string()))
        .collect();
    let store = s.dir().join("replay-store");
    let mut said = String::new();
    for number in &numbers {
        let out = Command::new(tessera_bin())
            .args(["render", "--revision", number, "--of", id, "-n", &s.ns])
            .arg("--kubeconfig")
            .arg(&s.cp.garden.kubeconfig)
            .arg("--plugins")
            .arg(tessera_tests::plugin_dir())
            .arg("--plugin-store")
            .arg(&store)
            .arg("--config")
            .arg(s.dir().join("chain-a.yaml"))
            .output()
            .map_err(|e| e.to_string())?;
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() || !err.contains("reproduced: sha256:") {
            return Err(format!("replay of revision {number}:\n{err}"));
        }
        said.push_str(&err);
    }
    let pulled = |version: &str| said.matches(&format!("pulled stamp {version} ")).count();
    if numbers.len() < 2 || pulled("1.0.0") != 1 || pulled("1.1.0") != 1 {
        return Err(format!("revisions {numbers:?}; the replays said:\n{said}"));
    }
    Ok(())
}

/// Signatures required: signed runs; unsigned, wrongly signed and tampered are refused
/// on the Plugin and nothing runs; other plugins and Runtimes are unaffected.
async fn signatures_and_tampering(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-sig").await?;
    let v1 = stamp_component();
    let (trust, refs) = signed_variants(&s, &v1)?;
    let spec = |version: &str, reference: &str| {
        json!({
            "kind": "shoot-extension",
            "versions": [{ "version": version, "ref": reference }],
            "channels": [{ "name": "regular", "version": version }],
            "verification": { "required": true },
        })
    };
    for (variant, reference) in ["signed", "unsigned", "wrong", "tampered"]
        .iter()
        .zip(&refs)
    {
        s.apply_plugin(&format!("p-sig-{variant}"), spec("1.0.0", reference))
            .await?;
    }
    let host = s.host("a", "p-sig-signed", &["--trust-policy", &trust]);
    let p = s.plugin_ready("p-sig-signed", &host).await?;
    if p.status.unwrap().versions[0].verified_by.is_none() {
        return Err("signed plugin has no verifiedBy".into());
    }
    s.plugin_error("p-sig-unsigned", "is not signed", &host)
        .await?;
    s.plugin_error("p-sig-wrong", "no signature verifies", &host)
        .await?;
    s.plugin_error("p-sig-tampered", "does not match its digest", &host)
        .await?;
    // Nothing of the refused versions reached the store (verification comes first), and
    // the tampered bytes were never kept.
    let store = s.dir().join("store/blobs/sha256");
    for refused in [
        sha256(&stamp_variant(&v1, "u")),
        sha256(&stamp_variant(&v1, "w")),
        sha256(&stamp_variant(&v1, "evil")),
    ] {
        if store.join(refused.trim_start_matches("sha256:")).exists() {
            return Err(format!("refused component {refused} is in the store"));
        }
    }
    // The signed plugin runs.
    s.create_runtime("rt-signed", "sig-ok", json!({})).await?;
    s.wait_ready("rt-signed", &host).await?;
    s.wait_stamp("sig-ok", "v1", &host).await?;
    unsigned_chain_renders_nothing(cp, &s, &trust).await
}

/// Publish the stamp plugin four ways (signed; unsigned; signed with another key; signed,
/// then its blob replaced in the registry) and write a trust policy with the right key.
/// Returns the policy's path and the four references, in that order.
fn signed_variants(s: &Scenario<'_>, v1: &[u8]) -> Result<(String, [String; 4])> {
    let (key, public) = keygen(s.dir(), "cosign")?;
    let (other_key, _) = keygen(s.dir(), "other")?;
    let policy = s.dir().join("trust.yaml");
    let trust = format!(
        "keys:\n  - prefix: {}/\n    publicKeyFile: {}\n",
        s.registry.host(),
        public.display()
    );
    std::fs::write(&policy, trust).map_err(|e| e.to_string())?;
    let repo = s.repo("stamp");
    let refs = ["signed", "unsigned", "wrong", "tampered"].map(|tag| format!("{repo}:{tag}"));
    push(s.dir(), v1, &refs[0], "1.0.0")?;
    sign(&refs[0], &key)?;
    push(s.dir(), &stamp_variant(v1, "u"), &refs[1], "1.0.0")?;
    push(s.dir(), &stamp_variant(v1, "w"), &refs[2], "1.0.0")?;
    sign(&refs[2], &other_key)?;
    let tampered = stamp_variant(v1, "t");
    push(s.dir(), &tampered, &refs[3], "1.0.0")?;
    sign(&refs[3], &key)?;
    std::fs::write(
        s.registry.blob_path(&sha256(&tampered)),
        stamp_variant(v1, "evil"),
    )
    .map_err(|e| e.to_string())?;
    Ok((policy.display().to_string(), refs))
}

/// A host whose chain uses the unsigned plugin renders nothing, and says why.
async fn unsigned_chain_renders_nothing(
    cp: &ControlPlane,
    s: &Scenario<'_>,
    trust: &str,
) -> Result {
    let mut s2 = Scenario::new(cp, "p-sig-b").await?;
    s2.selector = s.selector.clone();
    let host2 = s2.host("b", "p-sig-unsigned", &["--trust-policy", trust]);
    s2.create_runtime("rt-unsigned", "sig-bad", json!({}))
        .await?;
    eventually("PluginsAvailable False", LIMIT, || async {
        let rt = s2.runtimes().get("rt-unsigned").await.ok()?;
        let c = rt
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "PluginsAvailable")?;
        (c.status == ConditionStatus::False && c.message.contains("p-sig-unsigned")).then_some(())
    })
    .await
    .map_err(|e| s2.explain_runtime(e, "rt-unsigned", &host2))?;
    if s2.shoots().get("sig-bad").await.is_ok() {
        return Err("a Shoot was created with an unverified plugin".into());
    }
    Ok(())
}

/// The registry goes away: cached plugins keep working (also after a host restart), new
/// resolutions report the error and succeed once the registry is back.
async fn registry_down(cp: &ControlPlane) -> Result {
    let mut s = Scenario::new(cp, "p-down").await?;
    let v1 = stamp_component();
    let repo = s.repo("stamp");
    push(s.dir(), &v1, &format!("{repo}:1.0.0"), "1.0.0")?;
    let spec = |tag: &str| {
        json!({
            "kind": "shoot-extension",
            "versions": [{ "version": "1.0.0", "ref": format!("{repo}:{tag}") }],
            "channels": [{ "name": "regular", "version": "1.0.0" }],
        })
    };
    s.apply_plugin("p-down-stamp", spec("1.0.0")).await?;
    // A module reconciler resolves the same way; a component of the wrong world is refused.
    let module = std::fs::read(tessera_tests::test_plugin_dir().join("module-example.wasm"))
        .map_err(|e| e.to_string())?;
    let module_repo = s.repo("module-example");
    push(s.dir(), &module, &format!("{module_repo}:0.1.0"), "0.1.0")?;
    let module_spec = |kind: &str| {
        json!({
            "kind": kind,
            "versions": [{ "version": "0.1.0", "ref": format!("{module_repo}:0.1.0") }],
            "channels": [{ "name": "regular", "version": "0.1.0" }],
        })
    };
    s.apply_plugin("p-down-module", module_spec("module-reconciler"))
        .await?;
    s.apply_plugin("p-down-wrong-kind", module_spec("shoot-extension"))
        .await?;
    let mut host = s.host("a", "p-down-stamp", &[]);
    s.plugin_ready("p-down-stamp", &host).await?;
    let m = s.plugin_ready("p-down-module", &host).await?;
    if m.status.unwrap().channels[0].component_digest.as_deref() != Some(sha256(&module).as_str()) {
        return Err("module reconciler digest".into());
    }
    s.plugin_error(
        "p-down-wrong-kind",
        "expected a shoot-extension plugin",
        &host,
    )
    .await?;
    s.create_runtime("rt-1", "down-1", json!({})).await?;
    s.wait_ready("rt-1", &host).await?;

    s.registry.stop();
    s.create_runtime("rt-2", "down-2", json!({})).await?;
    s.wait_ready("rt-2", &host).await?;
    s.wait_stamp("down-2", "v1", &host).await?;
    s.plugin_error("p-down-stamp", "using the pinned digest", &host)
        .await?;
    // A new Plugin cannot resolve: its status says so.
    s.apply_plugin("p-down-new", spec("2.0.0")).await?;
    s.plugin_error("p-down-new", "p-down/stamp:2.0.0", &host)
        .await?;

    // A restarted host loads the pinned digest from its store, without the registry.
    host.kill();
    let host2 = s.host("b", "p-down-stamp", &[]);
    s.create_runtime("rt-3", "down-3", json!({})).await?;
    s.wait_ready("rt-3", &host2).await?;
    s.wait_stamp("down-3", "v1", &host2).await?;

    // Back up: the new Plugin resolves on its own (retry), once its tag exists.
    s.registry.restart()?;
    push(
        s.dir(),
        &stamp_variant(&v1, "new"),
        &format!("{repo}:2.0.0"),
        "1.0.0",
    )?;
    s.plugin_ready("p-down-new", &host2).await?;
    s.plugin_ready("p-down-stamp", &host2).await?;
    Ok(())
}

/// Keys make signatures required under their prefix, prefixes end at path boundaries,
/// credentials go to their registry only, and components over the size cap are refused.
async fn supply_chain_fails_closed(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-chain").await?;
    let v1 = stamp_component();
    let (key, public) = keygen(s.dir(), "acme")?;
    let acme = format!("{}/p-chain/acme", s.registry.host());
    let policy = s.dir().join("trust.yaml");
    let text = format!(
        "keys:\n  - prefix: {acme}\n    publicKeyFile: {}\n",
        public.display()
    );
    std::fs::write(&policy, text).unwrap();
    let spec = |reference: String, required: bool| {
        json!({
            "kind": "shoot-extension",
            "versions": [{ "version": "1.0.0", "ref": reference }],
            "channels": [{ "name": "regular", "version": "1.0.0" }],
            "verification": { "required": required },
        })
    };
    // Under a prefix with a key, unsigned is refused even when the Plugin asks nothing.
    let unsigned = format!("{acme}/stamp:unsigned");
    push(s.dir(), &stamp_variant(&v1, "u"), &unsigned, "1.0.0")?;
    s.apply_plugin("p-chain-unsigned", spec(unsigned, false))
        .await?;
    // `acme` does not cover `acme-evil`, even signed with acme's key.
    let evil = format!("{}/p-chain/acme-evil/stamp:1.0.0", s.registry.host());
    push(s.dir(), &stamp_variant(&v1, "e"), &evil, "1.0.0")?;
    sign(&evil, &key)?;
    s.apply_plugin("p-chain-evil", spec(evil, true)).await?;
    // Anything signed and under the prefix still passes the size cap only when small.
    let big = format!("{acme}/stamp:big");
    push(s.dir(), &stamp_variant(&v1, "b"), &big, "1.0.0")?;
    sign(&big, &key)?;
    s.apply_plugin("p-chain-big", spec(big, false)).await?;
    // A registry with basic auth; the credentials given by flag are for it alone.
    let private = TestRegistry::start_with_auth("tessera", "s3cret")?;
    let private_ref = format!("{}/p-chain/stamp:1.0.0", private.host());
    let file = s.dir().join("stamp.wasm");
    std::fs::write(&file, &v1).map_err(|e| e.to_string())?;
    push_with_password(&file.display().to_string(), &private_ref)?;
    s.apply_plugin("p-chain-private", spec(private_ref, false))
        .await?;
    let trust = policy.display().to_string();
    let other = "registry.invalid:5000";
    let host = s.host(
        "a",
        "p-chain-unsigned",
        &[
            "--trust-policy",
            &trust,
            "--max-plugin-size",
            "1KiB",
            "--registry-username",
            "tessera",
            "--registry-password",
            "s3cret",
            "--registry-host",
            other,
        ],
    );
    s.plugin_error("p-chain-unsigned", "is not signed", &host)
        .await?;
    s.plugin_error("p-chain-evil", "no public key is configured", &host)
        .await?;
    s.plugin_error("p-chain-big", "more than the 1024 bytes", &host)
        .await?;
    // The flag credentials are for another registry: had they reached this one, which
    // accepts them, the version would have resolved.
    s.plugin_error("p-chain-private", &private.host(), &host)
        .await?;
    // And a host refuses unscoped credentials outright.
    let refused = std::process::Command::new(tessera_tests::env::tessera_bin())
        .args([
            "run",
            "--registry-username",
            "u",
            "--registry-password",
            "p",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    if refused.status.success() || !stderr.contains("--registry-host") {
        return Err(format!("unscoped credentials: {stderr}"));
    }
    Ok(())
}

/// The reason and status of condition `type_` of Runtime `id`.
async fn runtime_condition(
    s: &Scenario<'_>,
    id: &str,
    type_: &str,
) -> Option<(String, ConditionStatus, Option<RuntimeState>)> {
    let rt = s.runtimes().get(id).await.ok()?;
    let st = rt.status?;
    let c = st.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.reason.clone(), c.status, st.state))
}

/// Condition `type_` of Plugin `name`.
async fn plugin_condition(
    s: &Scenario<'_>,
    name: &str,
    type_: &str,
) -> Option<tessera::crd::Condition> {
    let p = s.plugins().get(name).await.ok()?;
    p.status?.conditions.into_iter().find(|c| c.type_ == type_)
}

/// The delays the host chose between retries of `object`, from its debug log.
fn retry_delays(host: &Host, object: &str) -> Vec<f64> {
    host.logs()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["object"] == object)
        .filter_map(|v| v["fields"]["retry_in_s"].as_f64())
        .collect()
}

/// A plugin that times out makes its Runtime wait with a retryable condition, retried at
/// growing intervals — never `Failed` — and the Runtime becomes Ready by itself once the
/// Plugin is fixed. A Plugin whose configuration its plugin refuses says so on the Plugin;
/// its Runtime waits with that reason and recovers when the configuration is fixed.
async fn failures_heal(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "p-heal").await?;
    let hostile = std::fs::read(tessera_tests::test_plugin_dir().join("hostile.wasm"))
        .map_err(|e| format!("hostile.wasm: {e}"))?;
    let repo = s.repo("hostile");
    push(s.dir(), &hostile, &format!("{repo}:1.0.0"), "1.0.0")?;
    let plugin = "p-heal-hostile";
    // The hostile plugin's `mode` picks its behaviour; an unknown mode is refused as
    // `config.mode`.
    let spec = |mode: &str| {
        json!({
            "kind": "shoot-extension",
            "versions": [{ "version": "1.0.0", "ref": format!("{repo}:1.0.0") }],
            "channels": [{ "name": "regular", "version": "1.0.0" }],
            "config": { "mode": mode },
            "limits": { "timeoutMs": 200 },
        })
    };
    s.apply_plugin(plugin, spec("busy-loop")).await?;
    let log = "info,kube=warn,tower=warn,hyper=warn,tessera::controllers::kit=debug";
    let host = s.host_with_step("a", "hostile", plugin, &["--log", log]);
    s.plugin_ready(plugin, &host).await?;
    s.create_runtime("rt-slow", "heal-slow", json!({})).await?;
    let waiting = |reason: &'static str| {
        let s = &s;
        async move {
            let (r, status, state) = runtime_condition(s, "rt-slow", "PluginsAvailable").await?;
            (r == reason && status == ConditionStatus::False).then_some(state)
        }
    };
    eventually("PluginTimedOut", LIMIT, || waiting("PluginTimedOut"))
        .await
        .map_err(|e| s.explain_runtime(e, "rt-slow", &host))?;
    // Four attempts: each waits longer than the one before, and nothing fails.
    let delays = eventually("four retries", LIMIT, || async {
        let d = retry_delays(&host, "Runtime/p-heal/rt-slow");
        (d.len() >= 4).then_some(d)
    })
    .await?;
    println!("failures_heal: retry delays {delays:?} s");
    if delays.windows(2).take(3).any(|w| w[1] <= w[0]) {
        return Err(format!("retry delays should grow: {delays:?}"));
    }
    if s.runtimes()
        .get("rt-slow")
        .await
        .ok()
        .and_then(|r| r.status?.state)
        == Some(RuntimeState::Failed)
    {
        return Err("a timeout failed the Runtime".into());
    }
    // Fixed: the Runtime goes on by itself, nobody edits it.
    s.apply_plugin(plugin, spec("ok")).await?;
    s.wait_ready("rt-slow", &host).await?;
    // A configuration the plugin refuses: the Plugin says so; the Runtime waits.
    s.apply_plugin(plugin, spec("no-such-mode")).await?;
    s.create_runtime("rt-cfg", "heal-cfg", json!({})).await?;
    eventually("ConfigAccepted False", LIMIT, || async {
        let c = plugin_condition(&s, plugin, "ConfigAccepted").await?;
        (c.status == ConditionStatus::False
            && c.reason == "InvalidConfig"
            && c.message.contains("config.mode"))
        .then_some(())
    })
    .await
    .map_err(|e| s.explain_plugin(e, plugin, &host))?;
    let config_waits = || async {
        let (r, status, state) = runtime_condition(&s, "rt-cfg", "PluginsAvailable").await?;
        (r == "PluginConfigInvalid"
            && status == ConditionStatus::False
            && state != Some(RuntimeState::Failed))
        .then_some(())
    };
    eventually("rt-cfg waits for the Plugin", LIMIT, config_waits)
        .await
        .map_err(|e| s.explain_runtime(e, "rt-cfg", &host))?;
    s.apply_plugin(plugin, spec("ok")).await?;
    s.wait_ready("rt-cfg", &host).await?;
    eventually("ConfigAccepted True", LIMIT, || async {
        let c = plugin_condition(&s, plugin, "ConfigAccepted").await?;
        (c.status == ConditionStatus::True).then_some(())
    })
    .await?;
    Ok(())
}

/// Shoots become Ready in about a second: the scenarios wait on plugins, not Gardener.
fn script() -> Script {
    Script {
        create_ms: 1000,
        reconcile_ms: 500,
        delete_ms: 500,
        shoots: BTreeMap::new(),
    }
}

fn main() {
    let sim = std::path::PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    tessera_tests::scenarios::run(
        &sim,
        &script(),
        vec![
            scenario!(cli_round_trips),
            scenario!(channels_reload_shadow),
            scenario!(a_channel_move_wakes_only_its_runtimes),
            scenario!(signatures_and_tampering),
            scenario!(registry_down),
            scenario!(supply_chain_fails_closed),
            scenario!(failures_heal),
        ],
    )
}

//! A fleet rollout for `load --rollout`: one chain step comes from a `Plugin` resource in a
//! local registry (Debian's docker-registry) with two channels, the rest from files; a new
//! digest of that step is released on one channel. Also: reading the host's counters from
//! its /metrics text.

use std::path::PathBuf;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tessera::crd::Plugin;
use tessera::oci::{ArtifactMeta, NoProgress, PluginArtifact, Registry, parse_reference};
use tessera::plugins::FIRST_PARTY;

use crate::registry::TestRegistry;

/// The channel half of the fleet is annotated to use; the others use `regular`.
pub const FAST: &str = "fast";

/// A registry holding versions of one first-party plugin, the chain configuration that
/// takes that step from its `Plugin` resource, and the host's own plugin store.
pub struct RolloutStep {
    registry: TestRegistry,
    /// The chain step (and `Plugin` resource) name, e.g. `maintenance`.
    pub step: String,
    /// The file component, pushed as 1.0.0.
    pub component: Vec<u8>,
    /// Versions pushed so far: (version, registry reference).
    versions: Vec<(String, String)>,
}

/// `sha256:<hex>` of `bytes`: what `status.plugins` records for a component.
pub fn component_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// `component` with a custom section `name` holding `payload` appended: a custom section
/// is valid at the top level of a component, so this is the same code with other bytes.
pub fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0x00);
    leb128(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

impl RolloutStep {
    /// Start a registry and push the file component of first-party plugin `step` as 1.0.0.
    pub async fn start(step: &str) -> anyhow::Result<Self> {
        anyhow::ensure!(
            FIRST_PARTY.contains(&step),
            "{step} is not a first-party shoot extension ({})",
            FIRST_PARTY.join(", ")
        );
        let component = std::fs::read(crate::plugin_dir().join(format!("{step}.wasm")))?;
        let mut this = Self {
            registry: TestRegistry::start().map_err(anyhow::Error::msg)?,
            step: step.to_string(),
            component: component.clone(),
            versions: Vec::new(),
        };
        this.push("1.0.0", &component).await?;
        Ok(this)
    }

    /// Push `bytes` as `version` (tag = version).
    pub async fn push(&mut self, version: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let reference = format!("{}/rollout/{}:{version}", self.registry.host(), self.step);
        let inspection = crate::runtime().inspect(bytes, &self.step)?;
        let artifact = PluginArtifact::build(
            bytes.to_vec(),
            &inspection,
            ArtifactMeta {
                name: Some(self.step.clone()),
                version: Some(version.into()),
                kind: Some("shoot-extension".into()),
                ..Default::default()
            },
        );
        Registry::new(Default::default())
            .push_artifact(&parse_reference(&reference)?, &artifact, &NoProgress)
            .await?;
        self.versions.push((version.to_string(), reference));
        Ok(())
    }

    /// Create or update the `Plugin`: every pushed version, `regular` on 1.0.0 and `fast`
    /// on `fast_version`. The step is granted what the first-party plugin declares.
    pub async fn apply_plugin(&self, client: &Client, fast_version: &str) -> anyhow::Result<()> {
        let requests = tessera::plugins::first_party_requests(&self.step)
            .ok_or_else(|| anyhow::anyhow!("{} declares no requests", self.step))?;
        let versions: Vec<Value> = self
            .versions
            .iter()
            .map(|(version, reference)| json!({ "version": version, "ref": reference }))
            .collect();
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1",
            "kind": "Plugin",
            "metadata": { "name": self.step },
            "spec": {
                "kind": "shoot-extension",
                "versions": versions,
                "channels": [
                    { "name": "regular", "version": "1.0.0" },
                    { "name": FAST, "version": fast_version },
                ],
                "grants": requests.grants,
            },
        });
        Api::<Plugin>::all(client.clone())
            .patch(
                &self.step,
                &PatchParams::apply("load-rollout").force(),
                &Patch::Apply(&doc),
            )
            .await?;
        Ok(())
    }

    /// Host arguments: the chain configuration (every first-party step from files but
    /// this one) and a plugin store of its own.
    pub fn host_args(&self) -> anyhow::Result<Vec<String>> {
        let config = json!({
            "plugins": { &self.step: { "source": "registry" } },
        });
        let path = self.registry.dir().join("chain.yaml");
        std::fs::write(&path, config.to_string())?;
        let store: PathBuf = self.registry.dir().join("store");
        Ok(vec![
            "--config".into(),
            path.display().to_string(),
            "--plugin-store".into(),
            store.display().to_string(),
        ])
    }

    /// The annotation that puts a Runtime's step on the `fast` channel.
    pub fn fast_annotation(&self) -> (String, String) {
        (
            format!("{}{}", tessera::crd::labels::CHANNEL_PREFIX, self.step),
            FAST.to_string(),
        )
    }
}

/// GET /metrics from the host at `addr`; empty when it does not answer.
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    // HTTP/1.0: the answer is never chunked.
    let _ = write!(stream, "GET /metrics HTTP/1.0\r\nhost: x\r\n\r\n");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

/// The sum of the samples of `name` whose labels include every `label="value"` of `with`.
pub fn metric_sum(text: &str, name: &str, with: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = match series.split_once('{') {
                Some((n, labels)) if n == name => labels,
                None if series == name => "",
                _ => return None,
            };
            with.iter()
                .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\"")))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_custom_section_is_appended_with_its_sizes() {
        let out = with_custom_section(b"\0asm\x0d\0\x01\0", "ab", b"xyz");
        assert_eq!(&out[8..], b"\x00\x06\x02abxyz");
    }

    #[test]
    fn metric_sums_match_names_and_labels_exactly() {
        let text = "# HELP x\nsteps_total{result=\"run\"} 3\nsteps_total{result=\"cached\"} 4\nsteps_total_other 9\nwakes 2\n";
        assert_eq!(metric_sum(text, "steps_total", &[]), 7.0);
        assert_eq!(metric_sum(text, "steps_total", &[("result", "run")]), 3.0);
        assert_eq!(metric_sum(text, "wakes", &[]), 2.0);
    }
}

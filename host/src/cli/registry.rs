//! Registry flags shared by `tessera run` and `tessera plugin`, and progress bars.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tessera::oci::{Progress, Registry, RegistryOptions};

#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// Registry (`host[:port]`) to reach over plain HTTP; loopback registries always are.
    /// Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure: Vec<String>,
    /// Registry user name [default: from the Docker config file, else anonymous].
    #[arg(long, env = "TESSERA_REGISTRY_USERNAME")]
    pub registry_username: Option<String>,
    /// Registry password or token.
    #[arg(long, env = "TESSERA_REGISTRY_PASSWORD", hide_env_values = true)]
    pub registry_password: Option<String>,
    /// The registry (`host[:port]`) the user name and password are for; other registries
    /// never see them [default: the registry of the command's reference; `tessera run`
    /// needs it].
    #[arg(long, env = "TESSERA_REGISTRY_HOST", value_name = "HOST")]
    pub registry_host: Option<String>,
    /// Largest plugin component pulled, in bytes, or with KiB/MiB.
    #[arg(long, default_value = "64MiB", value_parser = size)]
    pub max_plugin_size: u64,
}

/// `65536`, `64KiB`, `64MiB`.
fn size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 65536, 64KiB or 64MiB"))?;
    match unit {
        "" | "B" => Ok(n),
        "KiB" => Ok(n << 10),
        "MiB" => Ok(n << 20),
        _ => Err(format!("{text:?}: the unit is B, KiB or MiB")),
    }
}

impl RegistryArgs {
    pub fn registry(&self) -> Registry {
        Registry::new(RegistryOptions {
            insecure: self.insecure.clone(),
            username: self.registry_username.clone(),
            password: self.registry_password.clone(),
            credentials_for: self.registry_host.clone(),
            max_blob_bytes: self.max_plugin_size,
        })
    }

    /// For a long-running host: credentials must name their registry.
    pub fn check_scoped(&self) -> Result<(), String> {
        if self.registry_username.is_some() && self.registry_host.is_none() {
            return Err("--registry-username needs --registry-host: the credentials go to that registry only".into());
        }
        Ok(())
    }
}

/// `$XDG_CACHE_HOME/tessera/plugins` or `~/.cache/tessera/plugins`.
pub fn default_store_dir() -> PathBuf {
    tessera::paths::cache_dir("plugins").unwrap_or_else(|| PathBuf::from("tessera/plugins"))
}

/// A progress bar per transfer on stderr (hidden when stderr is not a terminal).
pub struct Bars {
    bar: std::sync::Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new() -> Self {
        Self {
            bar: std::sync::Mutex::new(None),
        }
    }
}

impl Progress for Bars {
    fn start(&self, what: &str, total: u64) {
        let bar = ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{msg:>24} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        let label: String = what.chars().take(24).collect();
        bar.set_message(label);
        *self.bar.lock().expect("bar") = Some(bar);
    }
    fn advance(&self, n: u64) {
        if let Some(bar) = &*self.bar.lock().expect("bar") {
            bar.inc(n);
        }
    }
    fn finish(&self) {
        if let Some(bar) = self.bar.lock().expect("bar").take() {
            bar.finish();
        }
    }
}

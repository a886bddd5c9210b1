//! What the simulated Gardener does, read from a JSON file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Delays and scripted failures, by Shoot name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Script {
    /// How long a Create stays Processing.
    pub create_ms: u64,
    pub reconcile_ms: u64,
    pub delete_ms: u64,
    pub shoots: BTreeMap<String, ShootScript>,
}

impl Script {
    /// Short delays and no failures: the scenarios that are not about Gardener's timing.
    pub fn quick() -> Self {
        Self {
            create_ms: 500,
            reconcile_ms: 300,
            delete_ms: 300,
            shoots: BTreeMap::new(),
        }
    }
}

/// Failures for one Shoot, consumed in order, one per operation attempt.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ShootScript {
    pub create: Vec<Failure>,
    pub reconcile: Vec<Failure>,
    pub delete: Vec<Failure>,
    /// Admin kubeconfigs of this Shoot name a CA other than the one that signed the runtime
    /// API server's certificate (a cluster a client must refuse to talk to).
    pub foreign_ca: bool,
    /// Gardener's longest admin kubeconfig lifetime for this Shoot, seconds, instead of the
    /// simulator's `--admin-kubeconfig-max-seconds` (Gardener has one setting for all; a
    /// test shares one simulator with others, and proves expiry without waiting 10 minutes).
    pub admin_kubeconfig_max_seconds: Option<i64>,
}

/// One failed attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Gardener error codes, e.g. `ERR_INFRA_QUOTA_EXCEEDED`.
    pub codes: Vec<String>,
    #[serde(default = "default_description")]
    pub description: String,
    /// `Failed` forces Gardener's "will not retry" (its retry window is over); unset, the
    /// codes decide as the gardenlet does (a non-retryable code: `Failed`, else `Error`,
    /// which Gardener retries by itself).
    #[serde(default)]
    pub state: Option<String>,
}

impl Failure {
    /// A failure with `codes`, its state decided by them.
    pub fn of(codes: &[&str]) -> Self {
        Self {
            codes: codes.iter().map(|c| c.to_string()).collect(),
            description: format!("simulated {}", codes.join(", ")),
            state: None,
        }
    }

    /// The same failure with another description.
    pub fn described(mut self, description: String) -> Self {
        self.description = description;
        self
    }
}

fn default_description() -> String {
    "simulated infrastructure error".into()
}

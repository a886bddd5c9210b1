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
#[serde(default)]
pub struct ShootScript {
    pub create: Vec<Failure>,
    pub reconcile: Vec<Failure>,
}

/// One failed attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Gardener error codes, e.g. `ERR_INFRA_QUOTA_EXCEEDED`.
    pub codes: Vec<String>,
    #[serde(default = "default_description")]
    pub description: String,
    /// `Failed` (Gardener gave up) or `Error` (Gardener retries by itself).
    #[serde(default = "default_state")]
    pub state: String,
}

fn default_description() -> String {
    "simulated infrastructure error".into()
}

fn default_state() -> String {
    "Failed".into()
}

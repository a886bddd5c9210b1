//! KIM's seed checks (`internal/controller/runtime/fsm/seed.go`, `runtime_fsm_create_shoot.go`,
//! `runtime_fsm_waiting_shoot_creation.go`): a Runtime with `enforceSeedLocation` is created
//! only where a usable Seed of its provider runs in its region, and a Shoot Gardener cannot
//! schedule for lack of a Seed of its provider fails the Runtime.

use serde_json::Value;

/// KIM `seedCanBeUsed` / `verifySeedReadiness` (Gardener's scheduler `isUsableSeed`): not
/// being deleted, visible, reconciled once, its gardenlet ready, and its backup buckets
/// ready when it has a backup.
pub(crate) fn usable(seed: &Value) -> bool {
    let condition = |type_: &str| {
        seed["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    };
    seed["metadata"]["deletionTimestamp"].is_null()
        && seed["spec"]["settings"]["scheduling"]["visible"] == true
        && !seed["status"]["lastOperation"].is_null()
        && condition("GardenletReady")
        && (seed["spec"]["backup"].is_null() || condition("BackupBucketsReady"))
}

/// KIM `seedForRegionAvailable`: the regions with a usable Seed of `provider`, in the
/// order found, each once.
pub(crate) fn regions_with_seeds(seeds: &[Value], provider: &str) -> Vec<String> {
    let mut regions: Vec<String> = Vec::new();
    for seed in seeds.iter().filter(|s| usable(s)) {
        let region = seed["spec"]["provider"]["region"]
            .as_str()
            .unwrap_or_default();
        if seed["spec"]["provider"]["type"] == provider && !regions.iter().any(|r| r == region) {
            regions.push(region.to_string());
        }
    }
    regions
}

/// Why a Runtime with `enforceSeedLocation` must not be created in `region`, in KIM's words
/// (`None`: a usable Seed runs there).
pub(crate) fn missing_seed(seeds: &[Value], provider: &str, region: &str) -> Option<String> {
    let regions = regions_with_seeds(seeds, provider);
    (!regions.iter().any(|r| r == region)).then(|| {
        format!(
            "Cannot find available seed of provider {provider} for the region {region} (field spec.shoot.region, enforceSeedLocation). The following regions have seeds ready: [{}].",
            regions.join(" ")
        )
    })
}

/// KIM `stateNoMatchingSeeds`: Gardener's scheduler found no Seed of the Shoot's provider
/// (`Failed to schedule Shoot: none out of the N seeds has a matching provider for "p"`).
pub(crate) fn no_matching_seeds(description: &str) -> bool {
    description
        .strip_prefix("Failed to schedule Shoot: none out of the ")
        .and_then(|rest| rest.split_once(" seeds has a matching provider for \""))
        .is_some_and(|(count, _)| count.parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seed(provider: &str, region: &str) -> Value {
        json!({"metadata": {"name": format!("{provider}-{region}")},
            "spec": {"provider": {"type": provider, "region": region},
                "settings": {"scheduling": {"visible": true}}},
            "status": {"lastOperation": {"state": "Succeeded"},
                "conditions": [{"type": "GardenletReady", "status": "True"}]}})
    }

    /// KIM `seed.go` (it has no test; cases from its code): deleting, invisible, never
    /// reconciled, gardenlet not ready, or backup buckets not ready Seeds do not count.
    #[test]
    fn only_usable_seeds_of_the_provider_count() {
        let mut deleting = seed("aws", "eu-west-1");
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut hidden = seed("aws", "eu-west-2");
        hidden["spec"]["settings"]["scheduling"]["visible"] = json!(false);
        let mut new = seed("aws", "eu-west-3");
        new["status"] = json!({"conditions": [{"type": "GardenletReady", "status": "True"}]});
        let mut backup = seed("aws", "us-east-1");
        backup["spec"]["backup"] = json!({"provider": "aws"});
        let seeds = [
            seed("aws", "eu-central-1"),
            seed("aws", "eu-central-1"),
            seed("gcp", "europe-west3"),
            deleting,
            hidden,
            new,
            backup,
        ];
        assert_eq!(regions_with_seeds(&seeds, "aws"), vec!["eu-central-1"]);
        assert_eq!(missing_seed(&seeds, "aws", "eu-central-1"), None);
        let message = missing_seed(&seeds, "aws", "us-east-1").unwrap();
        assert!(message.contains("region us-east-1"), "{message}");
        assert!(message.contains("seeds ready: [eu-central-1]"), "{message}");
    }

    /// KIM `runtime_fsm_waiting_shoot_creation.go` `stateNoMatchingSeeds`, with the text of
    /// Gardener's scheduler (`filterSeedsMatchingProviders`, `reportFailedScheduling`).
    #[test]
    fn gardeners_no_matching_provider_is_recognised() {
        assert!(no_matching_seeds(
            "Failed to schedule Shoot: none out of the 3 seeds has a matching provider for \"aws\""
        ));
        assert!(!no_matching_seeds(
            "Failed to schedule Shoot: none of the 3 seeds is valid for scheduling (not deleting, visible and ready)"
        ));
        assert!(!no_matching_seeds(
            "Shoot cluster has been successfully reconciled."
        ));
    }
}

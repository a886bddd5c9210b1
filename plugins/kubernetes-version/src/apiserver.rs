//! KIM's kube-apiserver and kubelet settings (`pkg/gardener/shoot/extender/`): service
//! account token expiration (`token/tokenExpiration.go`, create only), feature gates
//! (`featuregates.go`) and runtime config (`kubernetesruntimeconfig.go`), configured as
//! KIM's converter configuration's `kubernetes.kubeApiServer` / `kubernetes.kubelet`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::models::{KubeApiServer, Shoot};
use tessera_sdk::util::go_duration;
use tessera_sdk::{Operation, PluginError};

/// KIM's bounds for `maxTokenExpiration` (`lowerBound`, `upperBound`), in hours.
const LOWER_HOURS: u64 = 30 * 24;
const UPPER_HOURS: u64 = 90 * 24;

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeApiServerConfig {
    /// Longest service-account token lifetime, a Go duration (`1200h`); clamped to
    /// 720h–2160h, empty: 720h (KIM's `maxTokenExpiration`).
    #[cfg_attr(test, schemars(regex(pattern = r"^([0-9]+[hms])*$")))]
    pub max_token_expiration: String,
    /// kube-apiserver feature gates (KIM's `featureGates`).
    pub feature_gates: BTreeMap<String, bool>,
    /// kube-apiserver `runtimeConfig` (KIM's `runtimeConfig`).
    pub runtime_config: BTreeMap<String, bool>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletConfig {
    /// kubelet feature gates (KIM's `kubelet.featureGates`).
    pub feature_gates: BTreeMap<String, bool>,
}

/// Set the kube-apiserver and kubelet settings on `shoot`. A patch keeps the token
/// settings the Shoot has (KIM sets them on create only).
pub fn extend(
    shoot: &mut Shoot,
    api: &KubeApiServerConfig,
    kubelet: &KubeletConfig,
    operation: Operation,
    current: Option<&Shoot>,
) -> Result<(), PluginError> {
    let token = match operation {
        Operation::Create => Some(service_account_config(&api.max_token_expiration)?),
        _ => current
            .and_then(|c| c.spec.kubernetes.kube_api_server.as_ref())
            .and_then(|k| k.extra.get("serviceAccountConfig").cloned()),
    };
    let mut settings = Vec::new();
    if let Some(token) = token {
        settings.push(("serviceAccountConfig", token));
    }
    if !api.feature_gates.is_empty() {
        settings.push(("featureGates", json!(api.feature_gates)));
    }
    if !api.runtime_config.is_empty() {
        settings.push(("runtimeConfig", json!(api.runtime_config)));
    }
    if !settings.is_empty() {
        let server = shoot
            .spec
            .kubernetes
            .kube_api_server
            .get_or_insert_with(KubeApiServer::default);
        for (key, value) in settings {
            server.extra.insert(key.into(), value);
        }
    }
    if !kubelet.feature_gates.is_empty() {
        let extra = &mut shoot.spec.kubernetes.extra;
        let entry = extra.entry("kubelet").or_insert_with(|| json!({}));
        entry["featureGates"] = json!(kubelet.feature_gates);
    }
    Ok(())
}

/// KIM's `NewExpirationTimeExtender`: `extendTokenExpiration: false` and the lifetime
/// clamped to its bounds, written as Go writes a `metav1.Duration` (`720h0m0s`).
fn service_account_config(max: &str) -> Result<Value, PluginError> {
    let seconds = match max {
        "" => LOWER_HOURS * 3600,
        text => go_duration::seconds(text).ok_or_else(|| {
            PluginError::invalid_input(
                "plugin configuration kubeApiServer.maxTokenExpiration",
                format!("{text:?} is not a duration like 720h or 1200h30m"),
            )
        })?,
    };
    let clamped = seconds.clamp(LOWER_HOURS * 3600, UPPER_HOURS * 3600);
    Ok(json!({
        "extendTokenExpiration": false,
        "maxTokenExpiration": go_duration::text(clamped),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KIM's `TestNewExpirationTimeExtender` (`token/tokenExpiration_test.go`), case by case.
    #[test]
    fn token_expiration_follows_kims_cases() {
        let max =
            |text: &str| service_account_config(text).map(|v| v["maxTokenExpiration"].clone());
        assert_eq!(max("24h").unwrap(), "720h0m0s", "shorter than 30 days");
        assert_eq!(max("2400h").unwrap(), "2160h0m0s", "longer than 90 days");
        assert_eq!(max("1200h").unwrap(), "1200h0m0s", "between the bounds");
        assert_eq!(max("").unwrap(), "720h0m0s", "not provided");
        assert!(max("30d").is_err(), "a format Go cannot parse");
        assert_eq!(
            service_account_config("").unwrap()["extendTokenExpiration"],
            false
        );
    }
}

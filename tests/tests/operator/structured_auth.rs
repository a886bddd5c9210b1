//! Structured authentication against the real API servers and the faithful Gardener: by
//! default (as KIM, and as Gardener requires from Kubernetes 1.32), a Runtime with OIDC on
//! Kubernetes 1.33 gets a Shoot naming the AuthenticationConfiguration ConfigMap, which the
//! host writes into the project before the Shoot names it (Gardener refuses a Shoot naming a
//! ConfigMap that does not exist) carrying the Runtime's issuer, and deletes with the
//! Runtime.

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use tessera_tests::probe::eventually;

use super::{ControlPlane, LIMIT, Result, RuntimeState, Scenario, gone};

const CONFIG_MAP: &str = "structured-auth-config-sauth";

pub(super) async fn structured_authentication(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-sauth").await;
    let host = s.host("a", &[]);
    let mut doc = s.manifest("rt-sauth", "sauth");
    doc["spec"]["shoot"]["kubernetes"]["kubeAPIServer"]["additionalOidcConfig"] = json!([{
        "clientID": "extra-client",
        "issuerURL": "https://extra.example.com",
        "usernameClaim": "email",
    }]);
    s.create(&doc).await?;
    s.wait_state("rt-sauth", RuntimeState::Ready, &host).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), "garden-kyma-dev");
    let written = config_maps
        .get(CONFIG_MAP)
        .await
        .map_err(|e| e.to_string())?;
    let text = written
        .data
        .and_then(|mut d| d.remove("config.yaml"))
        .unwrap_or_default();
    let parsed: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
    let issuers: Vec<&str> = parsed["jwt"]
        .as_array()
        .map(|j| {
            j.iter()
                .filter_map(|a| a["issuer"]["url"].as_str())
                .collect()
        })
        .unwrap_or_default();
    // The Runtime's own issuer (examples/runtime-aws.yaml), then the additional one.
    if parsed["kind"] != "AuthenticationConfiguration"
        || issuers
            != [
                "https://customer.accounts.ondemand.com",
                "https://extra.example.com",
            ]
    {
        return Err(format!("the AuthenticationConfiguration: {text}"));
    }
    let shoot = s.shoots().get("sauth").await.map_err(|e| e.to_string())?;
    let server = &shoot.data["spec"]["kubernetes"]["kubeAPIServer"];
    let version = &shoot.data["spec"]["kubernetes"]["version"];
    if server["structuredAuthentication"]["configMapName"] != CONFIG_MAP
        || server.get("oidcConfig").is_some()
        || !version.as_str().is_some_and(|v| v.starts_with("1.33."))
    {
        return Err(format!(
            "the Shoot's kubeAPIServer: {server}, version {version}"
        ));
    }
    s.no_refusals("sauth")?;
    without_oidc_warns(&s).await?;
    for (runtime, shoot) in [("rt-sauth", "sauth"), ("rt-sauth-bare", "sauth-bare")] {
        s.runtimes()
            .delete(runtime, &DeleteParams::default())
            .await
            .map_err(|e| e.to_string())?;
        gone(&s, runtime, shoot, &host).await?;
    }
    eventually("the ConfigMap to be deleted", LIMIT, || async {
        config_maps
            .get_opt(CONFIG_MAP)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
}

/// A Runtime without OIDC settings: the oidc plugin's warning that its configuration has
/// no authenticator reaches the operator as a Warning Event on the Runtime.
async fn without_oidc_warns(s: &Scenario<'_>) -> Result {
    let mut doc = s.manifest("rt-sauth-bare", "sauth-bare");
    doc["spec"]["shoot"]["kubernetes"]["kubeAPIServer"]["oidcConfig"] = json!({});
    s.create(&doc).await?;
    let events: Api<Event> = Api::namespaced(s.client.clone(), &s.ns);
    eventually("a PluginWarning Event from oidc", LIMIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("PluginWarning")
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.name.as_deref() == Some("rt-sauth-bare")
                    && e.message.as_deref().is_some_and(|m| {
                        m.starts_with("plugin oidc") && m.contains("no JWT authenticator")
                    })
            })
            .map(drop)
    })
    .await
}

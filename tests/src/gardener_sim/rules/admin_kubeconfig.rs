//! `shoots/adminkubeconfig` (§9): AK1 (expiration), the cap, AK2 (addresses).

use serde_json::Value;

use super::Refusal;
use super::errors::{self, invalid, too_long};
use super::gofmt::json_str;
use super::obj::{list, name, str_at};

const KIND: &str = "AdminKubeconfigRequest.authentication.gardener.cloud";
const KUBE_APISERVER_ADDRESSES: [&str; 4] = [
    "external",
    "internal",
    "wildcard-tls-seed-bound",
    "unmanaged",
];

/// gardener pkg/apis/authentication/v1alpha1/defaults_adminkubeconfigrequest.go (3600 when
/// unset), pkg/api/authentication/validation/validation.go `ValidateKubeconfigRequest` (AK1:
/// at least 600, at most 2^32-1) and storage/kubeconfig.go `Create` (silently lowered to
/// `--shoot-admin-kubeconfig-max-expiration` = `max_seconds`).
pub(crate) fn seconds(request: &Value, max_seconds: i64) -> Result<i64, Refusal> {
    let raw = &request["spec"]["expirationSeconds"];
    let secs = match raw {
        Value::Null => 3600,
        v => v.as_i64().ok_or_else(|| {
            errors::bad_request(&format!(
                "AdminKubeconfigRequest in version \"v1alpha1\" cannot be handled as a AdminKubeconfigRequest: json: cannot unmarshal {} into Go struct field AdminKubeconfigRequestSpec.spec.expirationSeconds of type int64",
                if v.is_string() { "string" } else { "number" }
            ))
        })?,
    };
    let path = "spec.expirationSeconds";
    if secs < 600 {
        let err = invalid(
            path,
            secs.to_string(),
            "may not specify a duration less than 10 minutes",
            "AK1",
        );
        return Err(errors::invalid_refusal(KIND, "", &[err]));
    }
    if secs > i64::from(u32::MAX) {
        return Err(errors::invalid_refusal(
            KIND,
            "",
            &[too_long(path, u64::from(u32::MAX), "AK1")],
        ));
    }
    Ok(if max_seconds > 0 && secs > max_seconds {
        max_seconds
    } else {
        secs
    })
}

/// `https://` and the host (with port) of a URL, as Gardener writes the kubeconfig server.
fn server(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("https://{host}")
}

/// The internal `[]ShootAdvertisedAddress` as apimachinery renders it (no JSON tags).
fn addresses_value(status: &Value) -> String {
    let Some(items) = status["advertisedAddresses"].as_array() else {
        return "null".into();
    };
    let rendered: Vec<String> = items
        .iter()
        .map(|a| {
            let app = a["application"]
                .as_str()
                .map_or("null".to_string(), json_str);
            format!(
                "{{\"Name\":{},\"URL\":{},\"Application\":{app}}}",
                json_str(str_at(a, &["name"])),
                json_str(str_at(a, &["url"]))
            )
        })
        .collect();
    format!("[{}]", rendered.join(","))
}

/// gardener pkg/apiserver/registry/core/shoot/storage/kubeconfig.go `Create` (AK2): the
/// kube-apiserver addresses of `status.advertisedAddresses`, in status order, as (name,
/// `https://<host>`); none → 422.
pub(crate) fn addresses(shoot: &Value) -> Result<Vec<(String, String)>, Refusal> {
    let found: Vec<(String, String)> = list(shoot, &["status", "advertisedAddresses"])
        .iter()
        .filter(|a| KUBE_APISERVER_ADDRESSES.contains(&str_at(a, &["name"])))
        .map(|a| {
            (
                str_at(a, &["name"]).to_string(),
                server(str_at(a, &["url"])),
            )
        })
        .collect();
    if !found.is_empty() {
        return Ok(found);
    }
    let detail =
        "no suitable advertised address for kube-apiserver found in .status.advertisedAddresses";
    let err = invalid(
        "status.status",
        addresses_value(&shoot["status"]),
        detail,
        "AK2",
    );
    Err(errors::invalid_refusal(KIND, name(shoot), &[err]))
}

#[cfg(test)]
mod tests {
    use super::super::{admin_kubeconfig_addresses, admin_kubeconfig_seconds};
    use serde_json::json;

    #[test]
    fn ak1_expiration() {
        let r = admin_kubeconfig_seconds(&json!({"spec": {"expirationSeconds": 599}}), 86400)
            .unwrap_err();
        assert_eq!(r.code, 422);
        assert_eq!(
            r.message,
            "AdminKubeconfigRequest.authentication.gardener.cloud \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        );
        assert_eq!(r.causes[0].field, "spec.expirationSeconds");
        assert_eq!(
            admin_kubeconfig_seconds(&json!({"spec": {}}), 86400),
            Ok(3600)
        );
        assert_eq!(
            admin_kubeconfig_seconds(&json!({"spec": {"expirationSeconds": 600}}), 86400),
            Ok(600)
        );
        assert_eq!(
            admin_kubeconfig_seconds(&json!({"spec": {"expirationSeconds": 100000}}), 86400),
            Ok(86400)
        );
    }

    #[test]
    fn ak2_addresses() {
        let shoot = json!({"metadata": {"name": "s"}, "status": {"advertisedAddresses": [
            {"name": "service-account-issuer", "url": "https://x/issuer"},
            {"name": "external", "url": "https://api.s.example.com"},
            {"name": "internal", "url": "https://api.internal:443/path"}]}});
        assert_eq!(
            admin_kubeconfig_addresses(&shoot),
            Ok(vec![
                ("external".into(), "https://api.s.example.com".into()),
                ("internal".into(), "https://api.internal:443".into()),
            ])
        );
        let r = admin_kubeconfig_addresses(&json!({"metadata": {"name": "s"}})).unwrap_err();
        assert_eq!(
            r.message,
            "AdminKubeconfigRequest.authentication.gardener.cloud \"s\" is invalid: status.status: Invalid value: null: no suitable advertised address for kube-apiserver found in .status.advertisedAddresses"
        );
        let only_issuer = json!({"metadata": {"name": "s"}, "status": {"advertisedAddresses": [{"name": "service-account-issuer", "url": "https://i"}]}});
        let r = admin_kubeconfig_addresses(&only_issuer).unwrap_err();
        assert!(r.message.contains("Invalid value: [{\"Name\":\"service-account-issuer\",\"URL\":\"https://i\",\"Application\":null}]"));
    }
}

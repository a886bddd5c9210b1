//! `spec.networking`: syntax (§3.8), immutability (§3.4.13) and the overlap of the Shoot's
//! own networks (§6.5). An absent `networking` is v1beta1's default `{}`, absent
//! `ipFamilies` is `[IPv4]`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use super::errors::{FieldError, duplicate, forbidden, invalid, not_supported, required};
use super::gofmt::{json_opt_str, json_str, q};
use super::obj::{at, opt_str, workers};
use super::spec::immutable;

const WORKERLESS: &str = "this field should not be set for workerless Shoot clusters";

/// A Go `net.ParseCIDR` result: the address as written and the network address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cidr {
    ip: IpAddr,
    net: IpAddr,
    prefix: u32,
}

impl Cidr {
    /// Go `net.IP.To4() != nil` for the network address (IPv4, or IPv4-mapped IPv6).
    fn is_v4(&self) -> bool {
        match self.net {
            IpAddr::V4(_) => true,
            IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some(),
        }
    }

    /// Go `net.IP.String()` of the network address.
    fn net_string(&self) -> String {
        match self.net {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => v6.to_string(),
            },
            v4 => v4.to_string(),
        }
    }

    /// Whether `ip` lies in this network (Go `IPNet.Contains`, same address family only).
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => mask4(i, self.prefix) == n,
            (IpAddr::V6(n), IpAddr::V6(i)) => mask6(i, self.prefix) == n,
            _ => false,
        }
    }
}

/// The first `prefix` bits of an IPv4 address.
fn mask4(ip: Ipv4Addr, prefix: u32) -> Ipv4Addr {
    let m = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Ipv4Addr::from(u32::from(ip) & m)
}

/// The first `prefix` bits of an IPv6 address.
fn mask6(ip: Ipv6Addr, prefix: u32) -> Ipv6Addr {
    let m = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    Ipv6Addr::from(u128::from(ip) & m)
}

/// Go `net.ParseCIDR`, with its error `invalid CIDR address: <s>`.
fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let err = || format!("invalid CIDR address: {s}");
    let (addr, mask) = s.split_once('/').ok_or_else(err)?;
    let ip: IpAddr = addr.parse().map_err(|_| err())?;
    if mask.is_empty() || !mask.bytes().all(|b| b.is_ascii_digit()) || mask.len() > 4 {
        return Err(err());
    }
    let prefix: u32 = mask.parse().map_err(|_| err())?;
    let net = match ip {
        IpAddr::V4(v4) if prefix <= 32 => IpAddr::V4(mask4(v4, prefix)),
        IpAddr::V6(v6) if prefix <= 128 => IpAddr::V6(mask6(v6, prefix)),
        _ => return Err(err()),
    };
    Ok(Cidr { ip, net, prefix })
}

/// `spec.networking.ipFamilies` after v1beta1 defaulting.
fn ip_families(networking: &Value) -> Vec<String> {
    match networking["ipFamilies"].as_array() {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|f| f.as_str().unwrap_or("").to_string())
            .collect(),
        _ => vec!["IPv4".to_string()],
    }
}

/// apimachinery `ValidateLabelName` of `networking.extensions.gardener.cloud/<type>`: the
/// name part is a qualified-name segment of at most 63 characters.
fn is_label_name(name: &str) -> bool {
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.len() <= 63
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// gardener pkg/api/core/validation/utils.go `ValidateIPFamilies`: known, no duplicates.
fn validate_ip_families(families: &[String]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, family) in families.iter().enumerate() {
        let path = format!("spec.networking.ipFamilies[{i}]");
        if family != "IPv4" && family != "IPv6" {
            errs.push(not_supported(
                &path,
                json_str(family),
                &["IPv4", "IPv6"],
                "NW*",
            ));
        }
        if families[..i].contains(family) {
            errs.push(duplicate(&path, json_str(family), "NW*"));
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateNetworking`: the type (workers) and the
/// nodes/pods/services CIDRs — parseable, of the primary family (single-stack), canonical.
pub(crate) fn validate(shoot: &Value) -> Vec<FieldError> {
    let networking = at(shoot, &["spec", "networking"]);
    let mut errs = network_type(shoot, networking);
    let families = ip_families(networking);
    let family_errs = validate_ip_families(&families);
    if !family_errs.is_empty() {
        errs.extend(family_errs);
        return errs;
    }
    let primary = if families[0] == "IPv6" {
        "IPv6"
    } else {
        "IPv4"
    };
    for key in ["nodes", "pods", "services"] {
        if let Some(cidr) = opt_str(networking, &[key]) {
            let path = format!("spec.networking.{key}");
            errs.extend(validate_cidr(
                cidr,
                &path,
                (families.len() < 2).then_some(primary),
            ));
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateNetworking`: the networking type: required and a label name with workers, forbidden without (with the
/// other worker-only fields).
fn network_type(shoot: &Value, networking: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if workers(shoot).is_empty() {
        for key in ["type", "providerConfig", "pods", "nodes"] {
            if !networking[key].is_null() {
                errs.push(forbidden(
                    &format!("spec.networking.{key}"),
                    WORKERLESS,
                    "NW*",
                ));
            }
        }
        return errs;
    }
    let path = "spec.networking.type";
    match opt_str(networking, &["type"]).unwrap_or("") {
        "" => errs.push(required(path, "networking type must be provided", "NW*")),
        t if !is_label_name(t) => {
            let value = json_opt_str(&networking["type"]);
            errs.push(invalid(
                path,
                value,
                "type must be a valid label name",
                "NW*",
            ));
        }
        _ => {}
    }
    errs
}

/// gardener pkg/utils/validation/cidr: `ValidateParse`, `ValidateIPFamily`,
/// `ValidateCIDRIsCanonical` for one network.
fn validate_cidr(cidr: &str, path: &str, family: Option<&str>) -> Vec<FieldError> {
    let parsed = match parse_cidr(cidr) {
        Ok(c) => c,
        Err(e) => return vec![invalid(path, q(cidr), e, "NW*")],
    };
    let mut errs = Vec::new();
    match family {
        Some("IPv4") if !parsed.is_v4() => {
            errs.push(invalid(
                path,
                q(&parsed.net_string()),
                "must be a valid IPv4 address",
                "NW*",
            ));
        }
        Some("IPv6") if parsed.is_v4() => {
            errs.push(invalid(
                path,
                q(&parsed.net_string()),
                "must be a valid IPv6 address",
                "NW*",
            ));
        }
        _ => {}
    }
    if parsed.ip != parsed.net {
        errs.push(invalid(
            path,
            q(cidr),
            "must be valid canonical CIDR",
            "NW*",
        ));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateNetworkingUpdate`: type immutable, pods
/// and services immutable once set, only IPv4 ↔ dual-stack family changes.
pub(crate) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (n, o) = (
        at(new, &["spec", "networking"]),
        at(old, &["spec", "networking"]),
    );
    let mut errs = Vec::new();
    let value = json_opt_str(&n["type"]);
    errs.extend(immutable(
        &n["type"],
        &o["type"],
        "spec.networking.type",
        value,
        "NW*",
    ));
    for key in ["pods", "services"] {
        if !o[key].is_null() {
            let path = format!("spec.networking.{key}");
            errs.extend(immutable(
                &n[key],
                &o[key],
                &path,
                json_opt_str(&n[key]),
                "NW*",
            ));
        }
    }
    let (new_f, old_f) = (ip_families(n), ip_families(o));
    let v4 = ["IPv4".to_string()];
    let dual = ["IPv4".to_string(), "IPv6".to_string()];
    let allowed = (old_f == v4 && new_f == dual) || (old_f == dual && new_f == v4);
    if !allowed && new_f != old_f {
        let msg = format!(
            "unsupported IP family update: oldIPFamilies=[{}], newIPFamilies=[{}]",
            old_f.join(" "),
            new_f.join(" ")
        );
        errs.push(forbidden("spec.networking.ipFamilies", msg, "NW*"));
    }
    errs
}

/// gardener pkg/utils/validation/cidr/disjoint.go `NetworksIntersect` (an unparsable network
/// "intersects": Gardener's overlap check reports nothing for it).
fn intersect(a: &str, b: &str) -> bool {
    match (parse_cidr(a), parse_cidr(b)) {
        (Ok(x), Ok(y)) => x.contains(y.net) || y.contains(x.net),
        _ => true,
    }
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateShootNetworks` →
/// `ValidateShootNetworkDisjointedness` (IPv4 shoots): pods, services and nodes must not
/// intersect (ShootValidator field errors, 403).
pub(crate) fn overlaps(shoot: &Value) -> Vec<FieldError> {
    let networking = at(shoot, &["spec", "networking"]);
    if !ip_families(networking).iter().any(|f| f == "IPv4") {
        return Vec::new();
    }
    let get = |k: &str| opt_str(networking, &[k]);
    let (nodes, pods, services) = (get("nodes"), get("pods"), get("services"));
    let mut errs = Vec::new();
    let clash = |a: Option<&str>, b: Option<&str>| a.zip(b).is_some_and(|(a, b)| intersect(a, b));
    if let (true, Some(s)) = (clash(pods, services), services) {
        let msg = "shoot pod network intersects with shoot service network";
        errs.push(invalid("spec.networking.services", q(s), msg, "NW*"));
    }
    if let (true, Some(p)) = (clash(pods, nodes), pods) {
        let msg = "shoot pod network intersects with shoot node network";
        errs.push(invalid("spec.networking.pods", q(p), msg, "NW*"));
    }
    if let (true, Some(s)) = (clash(services, nodes), services) {
        let msg = "shoot service network intersects with shoot node network";
        errs.push(invalid("spec.networking.services", q(s), msg, "NW*"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::json;

    #[test]
    fn networking_type_required_with_workers() {
        let r = refused(create(&with(shoot(), "/spec/networking/type", json!(""))));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: spec.networking.type: Required value: networking type must be provided"
        );
        assert_eq!(r.rules, vec!["NW*"]);
    }

    #[test]
    fn cidrs_parse_family_canonical() {
        let errs = super::validate(&with(
            shoot(),
            "/spec/networking/pods",
            json!("10.0.0.0/33"),
        ));
        assert_eq!(
            errs[0].message(),
            "spec.networking.pods: Invalid value: \"10.0.0.0/33\": invalid CIDR address: 10.0.0.0/33"
        );
        let errs = super::validate(&with(
            shoot(),
            "/spec/networking/pods",
            json!("10.0.0.1/16"),
        ));
        assert_eq!(
            errs[0].message(),
            "spec.networking.pods: Invalid value: \"10.0.0.1/16\": must be valid canonical CIDR"
        );
        let errs = super::validate(&with(shoot(), "/spec/networking/pods", json!("fd00::/64")));
        assert_eq!(
            errs[0].message(),
            "spec.networking.pods: Invalid value: \"fd00::\": must be a valid IPv4 address"
        );
        let dual = with(
            shoot(),
            "/spec/networking/ipFamilies",
            json!(["IPv4", "IPv6"]),
        );
        assert!(
            super::validate(&with(dual, "/spec/networking/pods", json!("fd00::/64"))).is_empty()
        );
        assert!(super::validate(&shoot()).is_empty());
    }

    #[test]
    fn immutable_networks() {
        let new = with(shoot(), "/spec/networking/pods", json!("100.128.0.0/11"));
        let r = refused(update(&new, &shoot()));
        assert_eq!(
            r.message,
            "Shoot.core.gardener.cloud \"s\" is invalid: spec.networking.pods: Invalid value: \"100.128.0.0/11\": field is immutable"
        );
        let nodes = with(shoot(), "/spec/networking/nodes", json!("10.251.0.0/16"));
        assert_eq!(update(&nodes, &shoot()), Ok(()));
        let v6 = with(shoot(), "/spec/networking/ipFamilies", json!(["IPv6"]));
        let errs = super::validate_update(&v6, &shoot());
        assert_eq!(
            errs[0].message(),
            "spec.networking.ipFamilies: Forbidden: unsupported IP family update: oldIPFamilies=[IPv4], newIPFamilies=[IPv6]"
        );
        let dual = with(
            shoot(),
            "/spec/networking/ipFamilies",
            json!(["IPv4", "IPv6"]),
        );
        assert!(super::validate_update(&dual, &shoot()).is_empty());
    }

    #[test]
    fn overlapping_networks_are_refused_by_the_validator() {
        let s = with(shoot(), "/spec/networking/services", json!("100.96.0.0/13"));
        let r = refused(create(&s));
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: spec.networking.services: Invalid value: \"100.96.0.0/13\": shoot pod network intersects with shoot service network"
        );
    }
}

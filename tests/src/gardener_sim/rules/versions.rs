//! Versions as Gardener compares them (Masterminds/semver v3.5 behind
//! `pkg/utils/version`), the CloudProfile lifecycle classification, and ShootMutator's
//! Kubernetes-version and machine-image defaulting.

use std::cmp::Ordering;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::{FieldError, invalid};
use super::gofmt::{parse_uint, q};
use super::obj::{list, str_at};

/// A Masterminds `semver.Version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub meta: String,
}

const INVALID: &str = "invalid semantic version";

/// Split `s` into its leading ASCII digits and the rest.
fn digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

/// A dot-separated list of non-empty `[0-9A-Za-z-]+` identifiers.
fn identifiers(s: &str) -> bool {
    s.split('.')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// A numeric version segment (`error parsing version segment: …`).
fn segment(s: &str) -> Result<u64, String> {
    parse_uint(s).map_err(|e| format!("error parsing version segment: {e}"))
}

impl Semver {
    /// Masterminds `NewVersion` (coercing: `1.33` = `1.33.0`, leading `v`, leading zeros).
    pub(crate) fn parse(v: &str) -> Result<Semver, String> {
        let s = v.strip_prefix('v').unwrap_or(v);
        let (major, mut rest) = digits(s);
        if major.is_empty() {
            return Err(INVALID.into());
        }
        let mut parts = [major, "", ""];
        for part in parts.iter_mut().skip(1) {
            let Some(r) = rest.strip_prefix('.') else {
                break;
            };
            let (d, r) = digits(r);
            if d.is_empty() {
                return Err(INVALID.into());
            }
            (*part, rest) = (d, r);
        }
        let (pre, meta) = Self::suffixes(rest)?;
        let num = |p: &str| if p.is_empty() { Ok(0) } else { segment(p) };
        let version = Semver {
            major: num(parts[0])?,
            minor: num(parts[1])?,
            patch: num(parts[2])?,
            pre: pre.into(),
            meta: meta.into(),
        };
        for p in version.pre.split('.').filter(|_| !version.pre.is_empty()) {
            if p.bytes().all(|b| b.is_ascii_digit()) && p.len() > 1 && p.starts_with('0') {
                return Err("version segment starts with 0".into());
            }
        }
        Ok(version)
    }

    /// The `-prerelease` and `+metadata` parts after the numbers.
    fn suffixes(rest: &str) -> Result<(&str, &str), String> {
        let (pre_part, meta) = match rest.split_once('+') {
            Some((p, m)) if identifiers(m) => (p, m),
            Some(_) => return Err(INVALID.into()),
            None => (rest, ""),
        };
        match pre_part.strip_prefix('-') {
            Some(pre) if identifiers(pre) => Ok((pre, meta)),
            None if pre_part.is_empty() => Ok(("", meta)),
            _ => Err(INVALID.into()),
        }
    }

    /// Masterminds `Version.Compare`.
    pub(crate) fn compare(&self, o: &Semver) -> Ordering {
        let base = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if base != Ordering::Equal {
            return base;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => compare_prerelease(&self.pre, &o.pre),
        }
    }

    /// Masterminds `Version.IncMinor`.
    pub(crate) fn inc_minor(&self) -> Semver {
        Semver {
            major: self.major,
            minor: self.minor + 1,
            patch: 0,
            pre: String::new(),
            meta: String::new(),
        }
    }
}

impl std::fmt::Display for Semver {
    /// Masterminds `Version.String`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.meta.is_empty() {
            write!(f, "+{}", self.meta)?;
        }
        Ok(())
    }
}

/// Masterminds `comparePrerelease`: numeric parts below alphanumeric ones.
fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let (xs, ys): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..xs.len().max(ys.len()) {
        let (x, y) = (
            xs.get(i).copied().unwrap_or(""),
            ys.get(i).copied().unwrap_or(""),
        );
        let ord = match (x, y, x.parse::<u64>(), y.parse::<u64>()) {
            (x, y, _, _) if x == y => Ordering::Equal,
            ("", _, _, _) => Ordering::Less,
            (_, "", _, _) => Ordering::Greater,
            (_, _, Ok(m), Ok(n)) => m.cmp(&n),
            (_, _, Ok(_), Err(_)) => Ordering::Less,
            (_, _, Err(_), Ok(_)) => Ordering::Greater,
            (x, y, _, _) => x.cmp(y),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// gardener pkg/utils/version/version.go `Normalize`: every `v` removed, cut at `-`, `+`, `~`.
pub(crate) fn normalize(v: &str) -> String {
    let v = v.replace('v', "");
    match v.find(['-', '+', '~']) {
        Some(i) => v[..i].to_string(),
        None => v,
    }
}

/// A comparison operator of `CompareVersions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Lt,
    Gt,
    Ge,
}

impl Op {
    /// The operator as written in a constraint.
    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A constraint's version: the numbers given (`None`: a dirty, i.e. missing, part).
fn constraint_version(s: &str) -> Option<[Option<u64>; 3]> {
    let mut out = [None; 3];
    for (i, part) in s.split('.').enumerate() {
        if i > 2 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        out[i] = Some(part.parse().ok()?);
    }
    Some(out)
}

/// gardener pkg/utils/version/version.go `CompareVersions(a, op, b)`: Masterminds
/// `NewConstraint(op + " " + Normalize(b)).Check(NewVersion(Normalize(a)))`.
pub(crate) fn compare(a: &str, op: Op, b: &str) -> Result<bool, String> {
    let (a, b) = (normalize(a), normalize(b));
    let Some(con) = constraint_version(&b) else {
        return Err(format!(
            "improper constraint: {}",
            q(&format!("{} {b}", op.as_str()))
        ));
    };
    let v = Semver::parse(&normalize(&a))?;
    let c = Semver {
        major: con[0].unwrap_or(0),
        minor: con[1].unwrap_or(0),
        patch: con[2].unwrap_or(0),
        pre: String::new(),
        meta: String::new(),
    };
    let ord = v.compare(&c);
    Ok(match op {
        Op::Lt => ord == Ordering::Less,
        Op::Ge => ord != Ordering::Less,
        Op::Gt if con[1].is_none() => v.major > c.major,
        Op::Gt if con[2].is_none() => {
            v.major > c.major || (v.major == c.major && v.minor > c.minor)
        }
        Op::Gt => ord == Ordering::Greater,
    })
}

/// gardener pkg/utils/version `ConstraintK8sGreaterEqual1xx.CheckVersion` (`>= major.minor-0`;
/// false if `v` does not parse).
pub(crate) fn at_least(v: &str, major: u64, minor: u64) -> bool {
    Semver::parse(v).is_ok_and(|s| (s.major, s.minor) >= (major, minor))
}

/// gardener pkg/utils/version `ConstraintK8sLess1xx.CheckVersion` (`< major.minor-0`; false
/// if `v` does not parse).
pub(crate) fn below(v: &str, major: u64, minor: u64) -> bool {
    Semver::parse(v).is_ok_and(|s| (s.major, s.minor) < (major, minor))
}

/// A lifecycle stage: its classification and start (None: Go's zero time).
fn stages(version: &Value) -> Vec<(String, Option<Timestamp>)> {
    let time = |v: &Value| v.as_str().and_then(|s| s.parse::<Timestamp>().ok());
    let lifecycle = list(version, &["lifecycle"]);
    let classification = &version["classification"];
    let expiration = &version["expirationDate"];
    if lifecycle.is_empty() && (!classification.is_null() || !expiration.is_null()) {
        let mut out = vec![(
            classification.as_str().unwrap_or("supported").to_string(),
            None,
        )];
        if !expiration.is_null() {
            out.push(("expired".to_string(), time(expiration)));
        }
        return out;
    }
    lifecycle
        .iter()
        .map(|s| {
            (
                str_at(s, &["classification"]).to_string(),
                time(&s["startTime"]),
            )
        })
        .collect()
}

/// gardener pkg/api/core/v1beta1/helper/cloudprofile.go `CurrentLifecycleClassification`:
/// legacy `classification`/`expirationDate` become stages; no stages → `supported`; else the
/// last stage that started before `now` (none yet → `unavailable`).
pub(crate) fn classification(version: &Value, now: Timestamp) -> String {
    let stages = stages(version);
    if stages.is_empty() {
        return "supported".into();
    }
    let mut current = "unavailable".to_string();
    for (class, start) in stages {
        if start.is_none_or(|t| t < now) {
            current = class;
        }
    }
    current
}

/// gardener v1beta1/helper/cloudprofile.go `VersionIsActive`: neither expired nor unavailable.
pub(crate) fn is_active(version: &Value, now: Timestamp) -> bool {
    !matches!(
        classification(version, now).as_str(),
        "expired" | "unavailable"
    )
}

/// The Kubernetes-version defaulting error of ShootMutator.
fn no_suitable(path: &str, input: &str) -> FieldError {
    let detail = format!(
        "couldn't find a suitable version for {input}. Suitable versions have a non-expired expiration date and are no 'preview' versions. 'Preview'-classified versions have to be selected explicitly"
    );
    invalid(path, q(input), detail, "K2")
}

/// The major/minor wanted by a partial version (`""`, `1`, `1.33`), as ShootMutator reads it.
fn wanted(input: &str, path: &str, rule: &'static str) -> Result<[Option<u64>; 2], FieldError> {
    let parts: Vec<&str> = input.split('.').collect();
    let parse = |p: &str| {
        parse_uint(p).map_err(|_| invalid(path, q(p), "must be a semantic version", rule))
    };
    let minor = match parts.len() == 2 && !parts[1].is_empty() {
        true => Some(parse(parts[1])?),
        false => None,
    };
    let major = match parts[0].is_empty() {
        true => None,
        false => Some(parse(parts[0])?),
    };
    Ok([major, minor])
}

/// gardener plugin/pkg/shoot/mutator/admission.go `defaultKubernetesVersion`: a version of
/// three parts stays; `""`, `X`, `X.Y` become the newest *supported* CloudProfile version
/// matching them (`Ok(None)`: unchanged).
pub(crate) fn default_kubernetes_version(
    versions: &[Value],
    input: &str,
    path: &str,
    now: Timestamp,
) -> Result<Option<String>, FieldError> {
    if input.split('.').count() == 3 {
        return Ok(None);
    }
    let [major, minor] = wanted(input, path, "K2")?;
    let mut latest: Option<Semver> = None;
    for v in versions {
        if classification(v, now) != "supported" {
            continue;
        }
        let Ok(sv) = Semver::parse(str_at(v, &["version"])) else {
            continue;
        };
        if major.is_some_and(|m| sv.major != m) || minor.is_some_and(|m| sv.minor != m) {
            continue;
        }
        if latest
            .as_ref()
            .is_none_or(|l| sv.compare(l) == Ordering::Greater)
        {
            latest = Some(sv);
        }
    }
    match latest {
        Some(v) => Ok(Some(v.to_string())),
        None => Err(no_suitable(path, input)),
    }
}

/// What machine-image defaulting needs to know about a worker pool.
pub(crate) struct ImageRequest<'a> {
    pub image: Option<&'a Value>,
    pub arch: &'a str,
    /// The pool's machine type exists in the CloudProfile (then, without machine
    /// capabilities, every image version counts as compatible for the image choice).
    pub machine_type_found: bool,
    pub in_place: bool,
    pub path: &'a str,
}

/// gardener v1beta1/helper `ArchitectureSupportedByImageVersion` (no machine capabilities:
/// `architectures`, defaulted to `[amd64]`).
pub(crate) fn supports_arch(version: &Value, arch: &str) -> bool {
    match version["architectures"].as_array() {
        Some(archs) if !archs.is_empty() => archs.iter().any(|a| a == arch),
        _ => arch == "amd64",
    }
}

/// gardener plugin/pkg/shoot/mutator/admission.go `getDefaultMachineImage` (first half): the
/// CloudProfile image a pool gets.
fn pick_image<'a>(
    images: &'a [Value],
    req: &ImageRequest,
    reference: &str,
) -> Result<&'a Value, FieldError> {
    let name = req.image.map(|i| str_at(i, &["name"])).unwrap_or("");
    if !name.is_empty() {
        return images
            .iter()
            .find(|i| str_at(i, &["name"]) == name)
            .ok_or_else(|| invalid(req.path, q(name), "image is not supported", "MI1"));
    }
    let usable = |i: &&Value| {
        list(i, &["versions"])
            .iter()
            .any(|v| supports_arch(v, req.arch) || req.machine_type_found)
    };
    images.iter().find(usable).ok_or_else(|| {
        let detail = format!(
            "no valid machine image found that supports architecture `{}`",
            req.arch
        );
        invalid(req.path, q(reference), detail, "MI1")
    })
}

/// gardener plugin/pkg/shoot/mutator/admission.go `getDefaultMachineImage`: the image as
/// given if its version is in the profile or has three parts; else the newest non-preview
/// version (non-deprecated preferred; expired not filtered) matching `X`/`X.Y`.
pub(crate) fn default_machine_image(
    images: &[Value],
    req: &ImageRequest,
    now: Timestamp,
) -> Result<Value, FieldError> {
    let reference = match req.image {
        Some(i) => format!("{}@{}", str_at(i, &["name"]), str_at(i, &["version"])),
        None => String::new(),
    };
    if images.is_empty() {
        let detail =
            "the cloud profile does not contain any machine image - cannot create shoot cluster";
        return Err(invalid(req.path, q(&reference), detail, "MI1"));
    }
    let chosen = pick_image(images, req, &reference)?;
    let version = req.image.map(|i| str_at(i, &["version"])).unwrap_or("");
    if let Some(image) = req.image.filter(|i| !str_at(i, &["name"]).is_empty())
        && list(chosen, &["versions"])
            .iter()
            .any(|v| str_at(v, &["version"]) == version)
    {
        return Ok(image.clone());
    }
    if let Some(image) = req.image
        && version
            .strip_prefix('v')
            .unwrap_or(version)
            .split('.')
            .count()
            == 3
    {
        return Ok(image.clone());
    }
    let wanted = image_wanted(version, req.path)?;
    let latest =
        latest_machine_image_version(&candidates(chosen, req, wanted), now).map_err(|e| {
            let detail =
                format!("failed to determine latest machine image from cloud profile: {e}");
            invalid(req.path, q(&reference), detail, "MI1")
        })?;
    let mut image = json!({"name": str_at(chosen, &["name"]), "version": latest});
    if let Some(pc) = req
        .image
        .map(|i| &i["providerConfig"])
        .filter(|p| !p.is_null())
    {
        image["providerConfig"] = pc.clone();
    }
    Ok(image)
}

/// gardener plugin/pkg/shoot/mutator/admission.go `getDefaultMachineImage`: the image's
/// versions of the pool's architecture (in-place pools: with in-place support) matching the
/// wanted major/minor.
fn candidates<'a>(
    chosen: &'a Value,
    req: &ImageRequest,
    wanted: [Option<u64>; 2],
) -> Vec<&'a Value> {
    let [major, minor] = wanted;
    list(chosen, &["versions"])
        .iter()
        .filter(|v| supports_arch(v, req.arch))
        .filter(|v| !req.in_place || v["inPlaceUpdates"]["supported"] == true)
        .filter(|v| {
            Semver::parse(str_at(v, &["version"])).is_ok_and(|s| {
                major.is_none_or(|m| s.major == m) && minor.is_none_or(|m| s.minor == m)
            })
        })
        .collect()
}

/// The major/minor of a partial machine-image version (`parseSemanticVersionPart`).
fn image_wanted(version: &str, path: &str) -> Result<[Option<u64>; 2], FieldError> {
    let parts: Vec<&str> = version
        .strip_prefix('v')
        .unwrap_or(version)
        .split('.')
        .collect();
    let parse = |p: &str| {
        parse_uint(p).map_err(|e| {
            invalid(
                path,
                q(version),
                format!("{p} must be a semantic version: {e}"),
                "MI1",
            )
        })
    };
    let minor = match parts.len() == 2 && !parts[1].is_empty() {
        true => Some(parse(parts[1])?),
        false => None,
    };
    let major = match parts[0].is_empty() {
        true => None,
        false => Some(parse(parts[0])?),
    };
    Ok([major, minor])
}

/// gardener pkg/api/core/helper/cloudprofile.go `DetermineLatestMachineImageVersion(versions,
/// true)`: the newest non-preview version, preferring non-deprecated ones.
fn latest_machine_image_version(versions: &[&Value], now: Timestamp) -> Result<String, String> {
    let mut latest: Option<(Semver, &str)> = None;
    let mut latest_kept: Option<(Semver, &str)> = None;
    for v in versions {
        let raw = str_at(v, &["version"]);
        let sv = Semver::parse(raw)
            .map_err(|e| format!("error while parsing expirable version '{raw}': {e}"))?;
        let class = classification(v, now);
        if class == "preview" {
            continue;
        }
        let newer = |l: &Option<(Semver, &str)>| {
            l.as_ref()
                .is_none_or(|(l, _)| sv.compare(l) == Ordering::Greater)
        };
        if newer(&latest) {
            latest = Some((sv.clone(), raw));
        }
        if class != "deprecated" && newer(&latest_kept) {
            latest_kept = Some((sv, raw));
        }
    }
    match (latest_kept, latest) {
        (Some((_, v)), _) | (None, Some((_, v))) => Ok(v.to_string()),
        (None, None) => Err("unable to determine latest expirable version".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{now, profile};
    use super::*;

    #[test]
    fn lenient_parsing_and_normalize() {
        let v = Semver::parse("1.33").unwrap();
        assert_eq!(v.to_string(), "1.33.0");
        assert_eq!(Semver::parse("v1.33.5").unwrap().to_string(), "1.33.5");
        assert_eq!(Semver::parse("1.33.5-rc.1").unwrap().pre, "rc.1");
        assert_eq!(
            Semver::parse("1.2.3.4"),
            Err("invalid semantic version".to_string())
        );
        assert_eq!(
            Semver::parse(""),
            Err("invalid semantic version".to_string())
        );
        assert_eq!(
            Semver::parse("1.2.3-01"),
            Err("version segment starts with 0".to_string())
        );
        assert_eq!(normalize("v1.33.5-rc.1+build"), "1.33.5");
        let rc = Semver::parse("1.34.0-rc.1").unwrap();
        assert_eq!(
            rc.compare(&Semver::parse("1.34.0").unwrap()),
            Ordering::Less
        );
    }

    #[test]
    fn compare_versions() {
        assert_eq!(compare("1.33", Op::Lt, "1.33.5"), Ok(true));
        assert_eq!(compare("1.34.0", Op::Ge, "1.34.0"), Ok(true));
        assert_eq!(compare("1.34.2", Op::Gt, "1.34"), Ok(false));
        assert_eq!(compare("1.35.0", Op::Gt, "1.34"), Ok(true));
        assert_eq!(
            compare("x", Op::Lt, "1.2.3"),
            Err("invalid semantic version".into())
        );
        assert_eq!(
            compare("1.2.3", Op::Lt, ""),
            Err("improper constraint: \"< \"".into())
        );
        assert!(at_least("1.34.0-rc.1", 1, 34));
        assert!(!at_least("not-a-version", 1, 34));
        assert!(below("1.33.9", 1, 34));
        assert!(!below("not-a-version", 1, 34));
    }

    #[test]
    fn lifecycle_classification() {
        let versions = profile()["spec"]["kubernetes"]["versions"].clone();
        let class = |v: &str| {
            let found = versions
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["version"] == v)
                .unwrap();
            classification(found, now())
        };
        assert_eq!(class("1.34.1"), "supported");
        assert_eq!(class("1.35.0"), "preview");
        assert_eq!(class("1.33.6"), "deprecated");
        assert_eq!(class("1.33.4"), "supported");
        assert_eq!(class("1.32.9"), "expired");
        assert_eq!(class("1.32.8"), "expired");
        assert_eq!(class("1.36.0"), "unavailable");
    }
}

//! The CloudProfile: the Shoot's reference to it (CP4–CP6, `SyncCloudProfileFields`) and
//! ShootValidator's constraints against it (§6.4: K3, R3, P3, machine types and images,
//! CRI, zones). Machine capabilities are not simulated: architectures come from
//! `machineTypes[].architecture` and `machineImages[].versions[].architectures`.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::{self, FieldError, duplicate, invalid, not_supported};
use super::gofmt::{json as go_json, json_str, q};
use super::obj::{at, deleting, k8s_version, list, opt_str, str_at, worker_named, workers};
use super::versions::{Op, Semver, at_least, below, compare, is_active, supports_arch};
use super::{Facts, Operation, Refusal};

/// gardener pkg/utils/gardener/cloudprofile.go `BuildCoreCloudProfileReference`: (kind, name)
/// of `spec.cloudProfile` (kind defaulted to `CloudProfile`), else of `spec.cloudProfileName`.
pub(crate) fn reference(shoot: &Value) -> Option<(String, String)> {
    let cp = at(shoot, &["spec", "cloudProfile"]);
    if !cp.is_null() {
        let kind = match str_at(cp, &["kind"]) {
            "" => "CloudProfile",
            k => k,
        };
        return Some((kind.to_string(), str_at(cp, &["name"]).to_string()));
    }
    match opt_str(shoot, &["spec", "cloudProfileName"]) {
        Some(n) if !n.is_empty() => Some(("CloudProfile".into(), n.into())),
        _ => None,
    }
}

/// gardener pkg/utils/gardener/cloudprofile.go `GetCloudProfileSpec`: the referenced profile's
/// `spec` (`Ok(None)`: no reference; `Err`: the lister's error).
pub(crate) fn spec_of<'f>(shoot: &Value, facts: &'f Facts) -> Result<Option<&'f Value>, String> {
    let Some((kind, name)) = reference(shoot) else {
        return Ok(None);
    };
    match kind.as_str() {
        "CloudProfile" => match &facts.cloud_profile {
            Some(p) if str_at(p, &["metadata", "name"]) == name => Ok(Some(&p["spec"])),
            _ => Err(format!(
                "cloudprofile.core.gardener.cloud {} not found",
                q(&name)
            )),
        },
        "NamespacedCloudProfile" => Err(format!(
            "namespacedcloudprofile.core.gardener.cloud {} not found",
            q(&name)
        )),
        other => Err(format!(
            "could not find referenced cloud profile with kind {}",
            q(other)
        )),
    }
}

/// gardener plugin/pkg/shoot/mutator/admission.go `Admit` (CP4): a new Shoot names either
/// `cloudProfileName` or `cloudProfile` (a plain error: 500).
pub(crate) fn both_references(shoot: &Value) -> Result<(), Refusal> {
    let name = opt_str(shoot, &["spec", "cloudProfileName"]).unwrap_or("");
    if name.is_empty() || at(shoot, &["spec", "cloudProfile"]).is_null() {
        return Ok(());
    }
    let msg = "new shoot can only specify either cloudProfileName or cloudProfile reference";
    Err(errors::plain(msg, vec!["CP4"]))
}

/// gardener plugin/pkg/shoot/{mutator,validator}/admission.go (CP5): the referenced profile
/// must exist (500).
pub(crate) fn missing(err: &str) -> Refusal {
    errors::internal(
        &format!("could not find referenced cloud profile: {err}"),
        vec!["CP5"],
    )
}

/// gardener pkg/utils/gardener/cloudprofile.go `ValidateCloudProfileChanges` (CP6): a changed
/// reference stays in the same hierarchy (only `CloudProfile`→`CloudProfile` is decided
/// here: NamespacedCloudProfiles are not simulated).
pub(crate) fn validate_changes(new: &Value, old: Option<&Value>) -> Result<(), Refusal> {
    let (Some(old_ref), Some(new_ref)) = (old.and_then(reference), reference(new)) else {
        return Ok(());
    };
    let both_plain = old_ref.0 == "CloudProfile" && new_ref.0 == "CloudProfile";
    if old_ref == new_ref || !both_plain || old_ref.1 == new_ref.1 {
        return Ok(());
    }
    let msg = format!(
        "cloud profile reference change is invalid: cannot change from {} to {}. The cloud profile reference must remain within the same hierarchy",
        q(&old_ref.1),
        q(&new_ref.1)
    );
    Err(errors::plain(&msg, vec!["CP6"]))
}

/// gardener pkg/utils/gardener/cloudprofile.go `SyncCloudProfileFields`: from 1.34 only the
/// kind is defaulted (and an unchanged mirrored `cloudProfileName` dropped on update); below,
/// `cloudProfile` is filled from `cloudProfileName` and mirrored back (<1.33 always, 1.33 if
/// set); a non-`CloudProfile` kind clears `cloudProfileName`. Skipped while deleting.
pub(crate) fn sync_fields(new: &mut Value, old: Option<&Value>) {
    if deleting(new) {
        return;
    }
    let version = Semver::parse(k8s_version(new)).ok().map(|v| v.to_string());
    let old_name = old
        .and_then(|o| opt_str(o, &["spec", "cloudProfileName"]))
        .unwrap_or("")
        .to_string();
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec
        .get("cloudProfile")
        .is_some_and(|c| c.is_object() && str_at(c, &["kind"]).is_empty())
    {
        spec["cloudProfile"]["kind"] = json!("CloudProfile");
    }
    let name = spec
        .get("cloudProfileName")
        .and_then(Value::as_str)
        .map(String::from);
    let cp = spec.get("cloudProfile").cloned().unwrap_or(Value::Null);
    if version.as_deref().is_some_and(|v| at_least(v, 1, 34)) {
        let mirrored = name
            .as_deref()
            .is_some_and(|n| n == old_name && n == str_at(&cp, &["name"]));
        if old.is_some() && str_at(&cp, &["kind"]) == "CloudProfile" && mirrored {
            spec.remove("cloudProfileName");
        }
        return;
    }
    if cp.is_null()
        && let Some(n) = &name
    {
        spec.insert(
            "cloudProfile".into(),
            json!({"kind": "CloudProfile", "name": n}),
        );
    }
    let cp = spec.get("cloudProfile").cloned().unwrap_or(Value::Null);
    if cp.is_null() {
        return;
    }
    let (kind, cp_name) = (str_at(&cp, &["kind"]), str_at(&cp, &["name"]));
    let set = name.as_deref().unwrap_or("");
    let mirror =
        version.as_deref().is_none_or(|v| below(v, 1, 33)) || (!set.is_empty() && set != cp_name);
    if kind == "CloudProfile" && mirror {
        spec.insert("cloudProfileName".into(), json!(cp_name));
    }
    if kind != "CloudProfile" {
        spec.remove("cloudProfileName");
    }
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateKubernetesVersionConstraints`
/// (K3): a changed version must be listed (creates and new pools: among the active ones);
/// legacy `preview` versions are suffixed ` (preview)` in the message.
pub(crate) fn version_constraint(
    versions: &[Value],
    new: &str,
    old: &str,
    active_only: bool,
    path: &str,
    now: Timestamp,
) -> Option<FieldError> {
    if new == old {
        return None;
    }
    let mut values = Vec::new();
    for v in versions {
        if active_only && !is_active(v, now) {
            continue;
        }
        let version = str_at(v, &["version"]);
        if version == new {
            return None;
        }
        let preview = v["classification"] == "preview";
        values.push(if preview {
            format!("{version} (preview)")
        } else {
            version.to_string()
        });
    }
    Some(not_supported(path, q(new), &values, "K3"))
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateRegion` (R3): a changed region
/// must be one of the profile's.
pub(crate) fn region(profile: &Value, new: &Value, old: Option<&Value>) -> Option<FieldError> {
    let region = str_at(new, &["spec", "region"]);
    let old_region = old.map(|o| str_at(o, &["spec", "region"])).unwrap_or("");
    if region == old_region {
        return None;
    }
    let names: Vec<&str> = list(profile, &["regions"])
        .iter()
        .map(|r| str_at(r, &["name"]))
        .collect();
    (!names.contains(&region)).then(|| not_supported("spec.region", q(region), &names, "R3"))
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateProviderType` (P3): the provider
/// type is the profile's and the referenced binding's.
pub(crate) fn provider_type(
    profile: &Value,
    shoot: &Value,
    sb: Option<&Value>,
    cb: Option<&Value>,
) -> Option<FieldError> {
    let t = str_at(shoot, &["spec", "provider", "type"]);
    let path = "spec.provider.type";
    let profile_type = str_at(profile, &["type"]);
    if t != profile_type {
        let msg = format!(
            "provider type in shoot must equal provider type of referenced CloudProfile: {}",
            q(profile_type)
        );
        return Some(invalid(path, q(t), msg, "P3"));
    }
    if let Some(sb) = sb {
        let types = opt_str(sb, &["provider", "type"]);
        if !types.is_some_and(|ts| ts.split(',').any(|x| x == t)) {
            let msg = format!(
                "provider type in shoot must match provider type of referenced SecretBinding: {}",
                q(types.unwrap_or(""))
            );
            return Some(invalid(path, q(t), msg, "P3"));
        }
    }
    let cb_type = cb.map(|cb| str_at(cb, &["provider", "type"]));
    if let Some(ct) = cb_type.filter(|ct| *ct != t) {
        let msg = format!(
            "provider type in shoot must match provider type of referenced CredentialsBinding: {}",
            q(ct)
        );
        return Some(invalid(path, q(t), msg, "P3"));
    }
    None
}

/// What the worker checks compare against.
pub(crate) struct Ctx<'a> {
    pub op: Operation,
    pub profile: &'a Value,
    pub shoot: &'a Value,
    pub old: Option<&'a Value>,
    pub now: Timestamp,
}

/// ShootMutator's architecture defaulting, as the validator then sees it: the pool's own,
/// else its machine type's (`amd64` by CloudProfile defaulting), else `amd64`.
pub(crate) fn architecture<'a>(profile: &'a Value, worker: &'a Value) -> &'a str {
    if let Some(a) = opt_str(worker, &["machine", "architecture"]) {
        return a;
    }
    let t = str_at(worker, &["machine", "type"]);
    list(profile, &["machineTypes"])
        .iter()
        .find(|m| str_at(m, &["name"]) == t)
        .and_then(|m| opt_str(m, &["architecture"]))
        .unwrap_or("amd64")
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateProvider` (after the provider
/// type): per pool the machine (architecture, type, image), CRI, the pool's Kubernetes
/// version (K3) and zones. A non-semver control-plane version stops it.
pub(crate) fn provider(ctx: &Ctx) -> Vec<FieldError> {
    let version = k8s_version(ctx.shoot);
    if let Err(e) = Semver::parse(version) {
        let msg = format!("cannot parse the kubernetes version: {e}");
        return vec![invalid("spec.kubernetes.version", q(version), msg, "K3")];
    }
    let mut errs = Vec::new();
    for (i, w) in workers(ctx.shoot).iter().enumerate() {
        let path = format!("spec.provider.workers[{i}]");
        let old = worker_named(ctx.old, str_at(w, &["name"]));
        match machine(ctx, w, old, &path) {
            Some(e) => errs.push(e),
            None => errs.extend(cri(ctx.profile, w, old, &path)),
        }
        if let Some(v) = opt_str(w, &["kubernetes", "version"]) {
            let old_v = old
                .and_then(|o| opt_str(o, &["kubernetes", "version"]))
                .unwrap_or_else(|| ctx.old.map(k8s_version).unwrap_or(""));
            let active_only = ctx.op == Operation::Create || old.is_none();
            let versions = list(ctx.profile, &["kubernetes", "versions"]);
            let p = format!("{path}.kubernetes.version");
            errs.extend(version_constraint(
                versions,
                v,
                old_v,
                active_only,
                &p,
                ctx.now,
            ));
        }
        errs.extend(zones(ctx, w, old, &path));
    }
    errs
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateWorkerMachine`: a known architecture, then the machine type, then the image.
fn machine(ctx: &Ctx, w: &Value, old: Option<&Value>, path: &str) -> Option<FieldError> {
    let arch = architecture(ctx.profile, w);
    if arch != "amd64" && arch != "arm64" {
        return Some(not_supported(
            &format!("{path}.machine.architecture"),
            q(arch),
            &["amd64", "arm64"],
            "WC*",
        ));
    }
    machine_type(ctx, w, old, path).or_else(|| machine_image(ctx, w, old, path))
}

/// gardener plugin/pkg/shoot/validator/admission.go `isUnavailableInAtleastOneZone`: a zone of the pool in the
/// shoot's region lists `name` as unavailable.
fn unavailable(ctx: &Ctx, w: &Value, name: &str) -> bool {
    let region = str_at(ctx.shoot, &["spec", "region"]);
    let zones: Vec<&str> = list(w, &["zones"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    list(ctx.profile, &["regions"])
        .iter()
        .filter(|r| str_at(r, &["name"]) == region)
        .flat_map(|r| list(r, &["zones"]))
        .filter(|z| zones.contains(&str_at(z, &["name"])))
        .any(|z| {
            list(z, &["unavailableMachineTypes"])
                .iter()
                .any(|t| t == name)
        })
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateMachineType`/`validateMachineTypes` (if type or architecture changed): the type
/// exists (NotSupported with the sorted usable, available, matching types), is usable,
/// available in the pool's zones and of the pool's architecture.
fn machine_type(ctx: &Ctx, w: &Value, old: Option<&Value>, path: &str) -> Option<FieldError> {
    let (t, arch) = (
        str_at(w, &["machine", "type"]),
        architecture(ctx.profile, w),
    );
    if let Some(o) = old
        && str_at(o, &["machine", "type"]) == t
        && architecture(ctx.profile, o) == arch
    {
        return None;
    }
    let types = list(ctx.profile, &["machineTypes"]);
    let fits = |m: &Value| opt_str(m, &["architecture"]).unwrap_or("amd64") == arch;
    let usable = |m: &Value| m["usable"] != false;
    let mut supported: Vec<&str> = types
        .iter()
        .filter(|m| fits(m) && usable(m) && !unavailable(ctx, w, str_at(m, &["name"])))
        .map(|m| str_at(m, &["name"]))
        .collect();
    supported.sort_unstable();
    supported.dedup();
    let field = format!("{path}.machine.type");
    let Some(m) = types.iter().find(|m| str_at(m, &["name"]) == t) else {
        return Some(not_supported(&field, q(t), &supported, "WC*"));
    };
    let (is_usable, available, arch_ok) = (usable(m), !unavailable(ctx, w, t), fits(m));
    if is_usable && available && arch_ok {
        return None;
    }
    let mut detail = format!("machine type {} ", q(t));
    if !is_usable {
        detail.push_str("is unusable, ");
    }
    if !available {
        detail.push_str("is unavailable in at least one zone, ");
    }
    if !arch_ok {
        detail.push_str(&format!("does not support CPU architecture {}, ", q(arch)));
    }
    detail.push_str(&format!("supported types are [{}]", supported.join(" ")));
    Some(invalid(&field, q(t), detail, "WC*"))
}

/// The image as the validator's error renders it: the internal type has no JSON tags.
fn image_value(image: &Value) -> String {
    format!(
        "{{\"Name\":{},\"ProviderConfig\":{},\"Version\":{}}}",
        json_str(str_at(image, &["name"])),
        go_json(&image["providerConfig"]),
        json_str(str_at(image, &["version"]))
    )
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateMachineImagesConstraints`: the versions of the pool's image — in the profile,
/// usable (active; on update of a pool also expired ones not below the old version), and of
/// the pool's architecture.
fn image_versions(
    ctx: &Ctx,
    w: &Value,
    old: Option<&Value>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let name = opt_str(w, &["machine", "image", "name"]);
    let arch = architecture(ctx.profile, w);
    let old_version = old
        .map(|o| str_at(o, &["machine", "image", "version"]))
        .unwrap_or("");
    let (mut all, mut active, mut with_arch) = (Vec::new(), Vec::new(), Vec::new());
    for image in list(ctx.profile, &["machineImages"]) {
        let image_name = str_at(image, &["name"]);
        if name.is_some_and(|n| n != image_name) {
            continue;
        }
        for v in list(image, &["versions"]) {
            let version = str_at(v, &["version"]);
            let key = format!("{image_name}:{version}");
            let expired_ok = ctx.op == Operation::Update
                && old.is_some()
                && super::versions::classification(v, ctx.now) == "expired"
                && !compare(version, Op::Lt, old_version).unwrap_or(false);
            if is_active(v, ctx.now) || expired_ok {
                active.push(key.clone());
            }
            if supports_arch(v, arch) {
                with_arch.push(key.clone());
            }
            all.push(key);
        }
    }
    (all, active, with_arch)
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateMachineImage` (if image or architecture changed): `name:version` exists
/// (NotSupported with the sorted usable versions), is active and fits the architecture.
fn machine_image(ctx: &Ctx, w: &Value, old: Option<&Value>, path: &str) -> Option<FieldError> {
    let image = at(w, &["machine", "image"]);
    let arch = architecture(ctx.profile, w);
    if let Some(o) = old
        && at(o, &["machine", "image"]) == image
        && architecture(ctx.profile, o) == arch
    {
        return None;
    }
    let (all, active, with_arch) = image_versions(ctx, w, old);
    let mut valid: Vec<String> = active
        .iter()
        .filter(|k| with_arch.contains(k))
        .cloned()
        .collect();
    valid.sort();
    valid.dedup();
    let version = str_at(image, &["version"]);
    let key = format!("{}:{version}", str_at(image, &["name"]));
    if image.is_null() || version.is_empty() || !all.contains(&key) {
        return Some(not_supported(
            &format!("{path}.machine.image.version"),
            q(version),
            &valid,
            "WC*",
        ));
    }
    let (arch_ok, is_active) = (with_arch.contains(&key), active.contains(&key));
    if arch_ok && is_active {
        return None;
    }
    let mut detail = format!("machine image version '{key}' ");
    if !arch_ok {
        detail.push_str(&format!("does not support CPU architecture {}, ", q(arch)));
    }
    if !is_active {
        detail.push_str("is expired, ");
    }
    detail.push_str(&format!(
        "supported machine image versions are: [{}]",
        valid.join(" ")
    ));
    Some(invalid(
        &format!("{path}.machine.image"),
        image_value(image),
        detail,
        "WC*",
    ))
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateContainerRuntimeInterface` /
/// `validateCRI`: a changed CRI (default `containerd`) or image must be one the image version
/// lists (default `[containerd]`).
fn cri(profile: &Value, w: &Value, old: Option<&Value>, path: &str) -> Option<FieldError> {
    let cri_of = |w: &Value| {
        opt_str(w, &["cri", "name"])
            .unwrap_or("containerd")
            .to_string()
    };
    let image = at(w, &["machine", "image"]);
    if image.is_null()
        || old.is_some_and(|o| cri_of(o) == cri_of(w) && at(o, &["machine", "image"]) == image)
    {
        return None;
    }
    let (name, version) = (str_at(image, &["name"]), str_at(image, &["version"]));
    let v = list(profile, &["machineImages"])
        .iter()
        .filter(|i| str_at(i, &["name"]) == name)
        .flat_map(|i| list(i, &["versions"]))
        .find(|v| str_at(v, &["version"]) == version)?;
    let supported: Vec<&str> = match list(v, &["cri"]) {
        [] => vec!["containerd"],
        cris => cris.iter().map(|c| str_at(c, &["name"])).collect(),
    };
    let wanted = cri_of(w);
    if supported.contains(&wanted.as_str()) {
        return None;
    }
    let detail = format!(
        "machine image '{name}@{version}' does not support CRI '{wanted}', supported values: [{}]",
        supported.join(" ")
    );
    Some(invalid(
        &format!("{path}.cri.name"),
        q(&wanted),
        detail,
        "WC*",
    ))
}

/// gardener plugin/pkg/shoot/validator/admission.go `validateZones`/`validateZone` (if the
/// region or the zones changed): each zone exists in the region, once.
fn zones(ctx: &Ctx, w: &Value, old: Option<&Value>, path: &str) -> Vec<FieldError> {
    let region = str_at(ctx.shoot, &["spec", "region"]);
    let old_region = ctx
        .old
        .map(|o| str_at(o, &["spec", "region"]))
        .unwrap_or("");
    let old_zones = old.map(|o| &o["zones"]).unwrap_or(&Value::Null);
    if region == old_region && same_list(&w["zones"], old_zones) {
        return Vec::new();
    }
    let region_zones: Vec<&str> = list(ctx.profile, &["regions"])
        .iter()
        .find(|r| str_at(r, &["name"]) == region)
        .map(|r| {
            list(r, &["zones"])
                .iter()
                .map(|z| str_at(z, &["name"]))
                .collect()
        })
        .unwrap_or_default();
    let mut errs = Vec::new();
    let zones: Vec<&str> = list(w, &["zones"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (j, zone) in zones.iter().enumerate() {
        let p = format!("{path}.zones[{j}]");
        if !region_zones.contains(zone) {
            let err = match region_zones.is_empty() {
                true => invalid(
                    &p,
                    q(region),
                    "this region does not support availability zones, please do not configure them",
                    "WC*",
                ),
                false => not_supported(&p, q(zone), &region_zones, "WC*"),
            };
            errs.push(err);
        }
        if zones[..j].contains(zone) {
            errs.push(duplicate(&p, q(zone), "WC*"));
        }
    }
    errs
}

/// `reflect.DeepEqual` of two string lists (absent = nil; nil ≠ empty).
fn same_list(a: &Value, b: &Value) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, mutate};
    use serde_json::json;

    fn forbidden(r: &super::super::Refusal) -> &str {
        r.message
            .strip_prefix("shoots.core.gardener.cloud \"s\" is forbidden: ")
            .unwrap_or(&r.message)
    }

    #[test]
    fn k3_version_in_profile() {
        let r = refused(create(&with(
            shoot(),
            "/spec/kubernetes/version",
            json!("1.30.1"),
        )));
        assert_eq!(r.code, 403);
        assert_eq!(
            forbidden(&r),
            "spec.kubernetes.version: Unsupported value: \"1.30.1\": supported values: \"1.35.0 (preview)\", \"1.34.1\", \"1.34.0\", \"1.33.7 (preview)\", \"1.33.6\", \"1.33.5\", \"1.33.4\""
        );
        assert_eq!(r.rules, vec!["K3"]);
        let expired = with(shoot(), "/spec/kubernetes/version", json!("1.32.9"));
        let expired = with(expired, "/spec/credentialsBindingName", json!("cb"));
        assert_eq!(refused(create(&expired)).rules, vec!["K3"]);
        let old = with(shoot(), "/spec/kubernetes/version", json!("1.32.8"));
        let new = with(shoot(), "/spec/kubernetes/version", json!("1.32.9"));
        assert_eq!(update(&new, &old), Ok(()));
        assert_eq!(
            create(&with(shoot(), "/spec/kubernetes/version", json!("1.35.0"))),
            Ok(())
        );
    }

    #[test]
    fn r3_region_in_profile() {
        let s = with(shoot(), "/spec/region", json!("ap-south-1"));
        let s = with(s, "/spec/provider/workers/0/zones", json!([]));
        let r = refused(create(&s));
        assert_eq!(
            forbidden(&r),
            "spec.region: Unsupported value: \"ap-south-1\": supported values: \"eu-west-1\", \"us-east-1\""
        );
        assert_eq!(r.rules, vec!["R3"]);
    }

    #[test]
    fn p3_provider_type_of_profile_and_binding() {
        let r = refused(create(&with(shoot(), "/spec/provider/type", json!("gcp"))));
        assert_eq!(
            forbidden(&r),
            "spec.provider.type: Invalid value: \"gcp\": provider type in shoot must equal provider type of referenced CloudProfile: \"aws\""
        );
        let mut f = facts();
        f.credentials_bindings
            .insert("cb".into(), Some(json!({"provider": {"type": "azure"}})));
        let r = refused(super::super::validate(
            Operation::Create,
            Some(&shoot()),
            None,
            &user(),
            &f,
        ));
        assert_eq!(
            forbidden(&r),
            "spec.provider.type: Invalid value: \"aws\": provider type in shoot must match provider type of referenced CredentialsBinding: \"azure\""
        );
        assert_eq!(r.rules, vec!["P3"]);
    }

    #[test]
    fn machine_type_in_profile() {
        let r = refused(create(&with(
            shoot(),
            "/spec/provider/workers/0/machine/type",
            json!("m9.huge"),
        )));
        assert_eq!(
            forbidden(&r),
            "spec.provider.workers[0].machine.type: Unsupported value: \"m9.huge\": supported values: \"m5.large\", \"m5.xlarge\""
        );
        let s = with(
            shoot(),
            "/spec/provider/workers/0/machine/type",
            json!("t2.old"),
        );
        assert_eq!(
            forbidden(&refused(create(&s))),
            "spec.provider.workers[0].machine.type: Invalid value: \"t2.old\": machine type \"t2.old\" is unusable, supported types are [m5.large m5.xlarge]"
        );
        let s = with(
            shoot(),
            "/spec/provider/workers/0/machine/architecture",
            json!("arm64"),
        );
        let s = with(
            s,
            "/spec/provider/workers/0/machine/type",
            json!("m6g.large"),
        );
        let s = with(
            s,
            "/spec/provider/workers/0/machine/image/version",
            json!("1592.3.0"),
        );
        assert_eq!(create(&s), Ok(()));
    }

    #[test]
    fn machine_image_in_profile() {
        let s = with(
            shoot(),
            "/spec/provider/workers/0/machine/image/version",
            json!("1.0.0"),
        );
        assert_eq!(
            forbidden(&refused(create(&s))),
            "spec.provider.workers[0].machine.image.version: Unsupported value: \"1.0.0\": supported values: \"gardenlinux:1592.2.0\", \"gardenlinux:1592.3.0\", \"gardenlinux:1592.4.0\", \"gardenlinux:1593.0.0\""
        );
        let s = with(
            shoot(),
            "/spec/provider/workers/0/machine/image/version",
            json!("1443.9.0"),
        );
        assert_eq!(
            forbidden(&refused(create(&s))),
            "spec.provider.workers[0].machine.image: Invalid value: {\"Name\":\"gardenlinux\",\"ProviderConfig\":null,\"Version\":\"1443.9.0\"}: machine image version 'gardenlinux:1443.9.0' is expired, supported machine image versions are: [gardenlinux:1592.2.0 gardenlinux:1592.3.0 gardenlinux:1592.4.0 gardenlinux:1593.0.0]"
        );
    }

    #[test]
    fn zones_in_region() {
        let s = with(
            shoot(),
            "/spec/provider/workers/0/zones",
            json!(["eu-west-1z", "eu-west-1a"]),
        );
        assert_eq!(
            forbidden(&refused(create(&s))),
            "spec.provider.workers[0].zones[0]: Unsupported value: \"eu-west-1z\": supported values: \"eu-west-1a\", \"eu-west-1b\", \"eu-west-1c\""
        );
        let s = with(
            shoot(),
            "/spec/provider/workers/0/machine/type",
            json!("m5.xlarge"),
        );
        let s = with(s, "/spec/provider/workers/0/zones", json!(["eu-west-1c"]));
        assert!(forbidden(&refused(create(&s))).contains("is unavailable in at least one zone"));
    }

    #[test]
    fn cp4_cp5_cp6_references() {
        let both = with(shoot(), "/spec/cloudProfileName", json!("aws"));
        let r = refused(mutate(
            Operation::Create,
            &mut both.clone(),
            None,
            &user(),
            &facts(),
        ));
        assert_eq!((r.code, r.reason), (500, ""));
        assert_eq!(
            r.message,
            "new shoot can only specify either cloudProfileName or cloudProfile reference"
        );
        let missing = with(shoot(), "/spec/cloudProfile/name", json!("gcp"));
        let r = refused(mutate(
            Operation::Create,
            &mut missing.clone(),
            None,
            &user(),
            &facts(),
        ));
        assert_eq!(
            r.message,
            "Internal error occurred: could not find referenced cloud profile: cloudprofile.core.gardener.cloud \"gcp\" not found"
        );
        assert_eq!((r.code, r.reason), (500, "InternalError"));
        let old = with(shoot(), "/spec/cloudProfile/name", json!("aws-old"));
        let r = refused(update(&shoot(), &old));
        assert_eq!(
            r.message,
            "cloud profile reference change is invalid: cannot change from \"aws-old\" to \"aws\". The cloud profile reference must remain within the same hierarchy"
        );
    }

    #[test]
    fn sync_cloud_profile_fields() {
        let mut s = with(shoot(), "/spec/kubernetes/version", json!("1.32.8"));
        s["spec"].as_object_mut().unwrap().remove("cloudProfile");
        s["spec"]["cloudProfileName"] = json!("aws");
        super::sync_fields(&mut s, None);
        assert_eq!(
            s["spec"]["cloudProfile"],
            json!({"kind": "CloudProfile", "name": "aws"})
        );
        assert_eq!(s["spec"]["cloudProfileName"], "aws");
        let mut s133 = with(shoot(), "/spec/kubernetes/version", json!("1.33.5"));
        super::sync_fields(&mut s133, None);
        assert!(s133["spec"].get("cloudProfileName").is_none());
        let old = with(shoot(), "/spec/cloudProfileName", json!("aws"));
        let mut new = old.clone();
        super::sync_fields(&mut new, Some(&old));
        assert!(new["spec"].get("cloudProfileName").is_none());
        let mut kindless = with(shoot(), "/spec/cloudProfile", json!({"name": "aws"}));
        super::sync_fields(&mut kindless, None);
        assert_eq!(kindless["spec"]["cloudProfile"]["kind"], "CloudProfile");
    }
}

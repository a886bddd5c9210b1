//! Where a rendered Shoot differs from the live one, in the fields the render sets.
//!
//! Gardener adds defaults a render leaves out, and another manager's fields may sit next to
//! the host's: only what the render says is compared. Used to take over a Shoot without
//! writing it when the render already matches, and by `tessera render --compare-live`
//! (the operator's check before switching a landscape).

use serde_json::Value;

use crate::crd::labels;

/// The host's own bookkeeping on a Shoot. A Shoot made elsewhere (by KIM) lacks it; it is
/// added with the first real change and is never a reason for one.
pub fn bookkeeping() -> Vec<String> {
    vec![
        format!("metadata.labels.{}", labels::RUNTIME),
        format!("metadata.labels.{}", labels::RUNTIME_NAMESPACE),
        format!("metadata.annotations.{}", labels::RUNTIME_GENERATION),
    ]
}

/// One field where the render and the live Shoot disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Dotted path, list-map items by key (`spec.provider.workers[name=cpu-worker-0].maximum`),
    /// other list items by index (`spec.tolerations[0]`).
    pub path: String,
    pub rendered: Value,
    /// `None`: the live Shoot does not have the field.
    pub live: Option<Value>,
}

/// The fields `desired` sets that `live` lacks or holds otherwise, skipping `ignore`
/// (dotted paths). Lists of objects keyed by `name` or `type` (Gardener's list-maps:
/// workers, extensions, resources) are compared item by key, whatever their order, and a
/// live item the render lacks is a difference (the host's apply would remove it). Other
/// lists must have the same length; their items are compared in order (objects field by
/// field, anything else whole). An empty object or `null` in the render
/// asks for nothing, so a missing field matches it.
pub fn differences(desired: &Value, live: &Value, ignore: &[String]) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(desired, Some(live), String::new(), ignore, &mut out);
    out
}

fn walk(
    desired: &Value,
    live: Option<&Value>,
    path: String,
    ignore: &[String],
    out: &mut Vec<Difference>,
) {
    if ignore.contains(&path) {
        return;
    }
    match (desired, live) {
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Object(d), None) if d.is_empty() => {}
        (Value::Object(d), Some(Value::Object(l))) => {
            for (key, value) in d {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(value, l.get(key), child, ignore, out);
            }
        }
        (Value::Array(d), Some(Value::Array(l))) => match list_key(d, l) {
            Some(key) => walk_keyed(d, l, key, &path, ignore, out),
            None if d.len() == l.len() => walk_in_order(d, l, &path, ignore, out),
            None => out.push(difference(path, desired, live)),
        },
        (d, Some(l)) if d == l => {}
        (d, l) => out.push(difference(path, d, l)),
    }
}

fn walk_in_order(
    desired: &[Value],
    live: &[Value],
    path: &str,
    ignore: &[String],
    out: &mut Vec<Difference>,
) {
    for (i, (item, live_item)) in desired.iter().zip(live).enumerate() {
        let child = format!("{path}[{i}]");
        if item.is_object() {
            walk(item, Some(live_item), child, ignore, out);
        } else if item != live_item {
            out.push(difference(child, item, Some(live_item)));
        }
    }
}

/// The key of a list-map: `name` or `type`, when every item of both lists is an object
/// with that key as text and the render names no key twice.
fn list_key(desired: &[Value], live: &[Value]) -> Option<&'static str> {
    ["name", "type"].into_iter().find(|key| {
        let all_keyed = desired
            .iter()
            .chain(live)
            .all(|item| item.get(*key).is_some_and(Value::is_string));
        let mut seen = std::collections::HashSet::new();
        !desired.is_empty() && all_keyed && desired.iter().all(|i| seen.insert(&i[*key]))
    })
}

fn walk_keyed(
    desired: &[Value],
    live: &[Value],
    key: &str,
    path: &str,
    ignore: &[String],
    out: &mut Vec<Difference>,
) {
    let child = |item: &Value| format!("{path}[{key}={}]", item[key].as_str().unwrap_or_default());
    for item in desired {
        let live_item = live.iter().find(|l| l[key] == item[key]);
        walk(item, live_item, child(item), ignore, out);
    }
    for item in live {
        if !desired.iter().any(|d| d[key] == item[key]) && !ignore.contains(&child(item)) {
            out.push(difference(child(item), &Value::Null, Some(item)));
        }
    }
}

fn difference(path: String, rendered: &Value, live: Option<&Value>) -> Difference {
    Difference {
        path,
        rendered: rendered.clone(),
        live: live.cloned(),
    }
}

/// One line per difference, at most `max` (and how many more).
pub fn describe(diffs: &[Difference], max: usize) -> Vec<String> {
    let show = |v: &Value| serde_json::to_string(v).unwrap_or_default();
    let mut lines: Vec<String> = diffs
        .iter()
        .take(max)
        .map(|d| match &d.live {
            Some(live) => format!(
                "{}: live {} → rendered {}",
                d.path,
                show(live),
                show(&d.rendered)
            ),
            None => format!("{}: not live → rendered {}", d.path, show(&d.rendered)),
        })
        .collect();
    if diffs.len() > max {
        lines.push(format!("… and {} more", diffs.len() - max));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_gardener_adds_and_fields_of_others_are_not_differences() {
        let desired = json!({"spec": {"region": "eu-west-1", "provider": {"workers": [
            {"name": "cpu-worker-0", "maximum": 3}]}, "addons": {}}});
        let live = json!({"spec": {"region": "eu-west-1", "purpose": "production",
            "provider": {"workers": [{"name": "cpu-worker-0", "maximum": 3, "cri": {"name": "containerd"}}]}}});
        assert_eq!(differences(&desired, &live, &[]), vec![]);
    }

    #[test]
    fn a_changed_missing_or_reshaped_field_is_named_by_its_path() {
        let desired = json!({"spec": {"provider": {"workers": [{"maximum": 5}]},
            "kubernetes": {"version": "1.33"}, "tolerations": [{"key": "a"}],
            "networking": {"ipFamilies": ["IPv4"]}}});
        let live = json!({"spec": {"provider": {"workers": [{"maximum": 3}]},
            "tolerations": [], "networking": {"ipFamilies": ["IPv6"]}}});
        let mut paths: Vec<String> = differences(&desired, &live, &[])
            .into_iter()
            .map(|d| d.path)
            .collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                "spec.kubernetes",
                "spec.networking.ipFamilies[0]",
                "spec.provider.workers[0].maximum",
                "spec.tolerations"
            ]
        );
    }

    /// Gardener's list-maps are matched by key: another order is no difference, a live
    /// item the render lacks is.
    #[test]
    fn list_maps_are_compared_by_key() {
        let desired = json!({"spec": {"extensions": [
            {"type": "shoot-dns-service"}, {"type": "acl", "disabled": false}]}});
        let live = json!({"spec": {"extensions": [
            {"type": "acl", "disabled": true}, {"type": "shoot-dns-service"},
            {"type": "shoot-nvidia-openshell"}]}});
        let paths: Vec<String> = differences(&desired, &live, &[])
            .into_iter()
            .map(|d| d.path)
            .collect();
        assert_eq!(
            paths,
            [
                "spec.extensions[type=acl].disabled",
                "spec.extensions[type=shoot-nvidia-openshell]"
            ]
        );
        let reordered = json!({"spec": {"extensions": [
            {"type": "acl", "disabled": false}, {"type": "shoot-dns-service"}]}});
        assert_eq!(differences(&desired, &reordered, &[]), vec![]);
    }

    #[test]
    fn bookkeeping_is_skipped_only_when_asked() {
        let desired = json!({"metadata": {"labels": {"tessera.dev/runtime": "r", "account": "a"}}});
        let live = json!({"metadata": {"labels": {"account": "a"}}});
        assert_eq!(differences(&desired, &live, &bookkeeping()), vec![]);
        let diffs = differences(&desired, &live, &[]);
        assert_eq!(diffs.len(), 1);
        assert_eq!(diffs[0].path, "metadata.labels.tessera.dev/runtime");
        assert_eq!(
            describe(&diffs, 5),
            [r#"metadata.labels.tessera.dev/runtime: not live → rendered "r""#]
        );
    }
}

//! A module's configuration: the Plugin's defaults with the set's values merged over, the
//! keys the Plugin locks kept.

use serde_json::Value;

/// The value at dot path `path` of `value`.
fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The module's configuration: the Plugin's defaults with the set's values merged over as
/// an RFC 7386 merge patch (the one JSON merge: `null` removes a default); `Err` names a
/// `locked` key the set tries to replace.
pub(crate) fn merge_config(
    defaults: Option<&Value>,
    config: Option<&Value>,
    locked: &[String],
) -> Result<Value, String> {
    if let (Some(defaults), Some(config)) = (defaults, config)
        && let Some(key) = locked.iter().find(|k| {
            at(defaults, k).is_some() && at(config, k).is_some_and(|v| Some(v) != at(defaults, k))
        })
    {
        return Err(format!(
            "config.{key} is set by the Plugin and locked (lockedConfig): a ModuleSet cannot replace it"
        ));
    }
    let mut out = defaults
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(config) = config {
        tessera_sdk::util::merge_patch(&mut out, config);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_merges_over_plugin_defaults() {
        let defaults = serde_json::json!({"manifest": "x", "values": {"a": 1, "b": 2}});
        let config = serde_json::json!({"values": {"b": 3}});
        let locked = ["manifest".to_string()];
        assert_eq!(
            merge_config(Some(&defaults), Some(&config), &locked),
            Ok(serde_json::json!({"manifest": "x", "values": {"a": 1, "b": 3}}))
        );
        assert_eq!(merge_config(None, None, &[]), Ok(serde_json::json!({})));
        // `null` removes a default (RFC 7386), except a locked one.
        let unset = serde_json::json!({"values": {"a": null}});
        assert_eq!(
            merge_config(Some(&defaults), Some(&unset), &locked),
            Ok(serde_json::json!({"manifest": "x", "values": {"b": 2}}))
        );
        let unlock = serde_json::json!({"manifest": null});
        assert!(merge_config(Some(&defaults), Some(&unlock), &locked).is_err());
        // A locked key the Plugin sets cannot be replaced by the set, nor nested below.
        let replace = serde_json::json!({"manifest": "kind: ClusterRoleBinding"});
        let err = merge_config(Some(&defaults), Some(&replace), &locked).unwrap_err();
        assert!(err.starts_with("config.manifest"), "{err}");
        let nested = ["values.a".to_string()];
        let over = serde_json::json!({"values": {"a": 9}});
        assert!(merge_config(Some(&defaults), Some(&over), &nested).is_err());
        // Without a Plugin value (the CLI), the set provides it.
        assert!(merge_config(None, Some(&replace), &locked).is_ok());
    }
}

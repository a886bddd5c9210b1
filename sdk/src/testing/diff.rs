use similar::TextDiff;

/// Render a JSON value as YAML for humans (stable key order).
pub fn to_yaml(value: &serde_json::Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| format!("{value:#}"))
}

/// A unified diff of two documents rendered as YAML; expected is `-`, actual is `+`.
pub fn yaml_diff(expected: &serde_json::Value, actual: &serde_json::Value) -> String {
    yaml_diff_labelled(expected, actual, ("expected", "actual"))
}

/// A unified diff of two documents rendered as YAML, with the two sides named.
pub fn yaml_diff_labelled(
    before: &serde_json::Value,
    after: &serde_json::Value,
    (from, to): (&str, &str),
) -> String {
    let (before, after) = (to_yaml(before), to_yaml(after));
    TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(from, to)
        .to_string()
}

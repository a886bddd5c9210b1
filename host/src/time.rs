//! Wall-clock helpers; timestamps in status are RFC 3339 strings.

/// Now, RFC 3339 in UTC with second precision (as Kubernetes writes `metav1.Time`).
pub fn now_rfc3339() -> String {
    format_rfc3339(jiff::Timestamp::now())
}

pub fn format_rfc3339(ts: jiff::Timestamp) -> String {
    ts.round(jiff::Unit::Second)
        .unwrap_or(ts)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Parse an RFC 3339 timestamp; `None` when absent or malformed.
pub fn parse_rfc3339(text: Option<&str>) -> Option<jiff::Timestamp> {
    text?.parse().ok()
}

/// A duration like `30s`, `5m`, `12h` or `1h30m`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration like 30s, 5m or 1h: {e}"))?;
    std::time::Duration::try_from(d).map_err(|_| format!("{text:?} must not be negative"))
}

//! `spec.maintenance.timeWindow` (§3.9): Go `time.Parse` with the layout `150405-0700`, and
//! the window's duration between 30 minutes and 6 hours.

use serde_json::Value;

use super::errors::{FieldError, invalid};
use super::gofmt::{duration_string, json_str};
use super::obj::{at, opt_str};

const LAYOUT: &str = "150405-0700";
const SECOND: i64 = 1_000_000_000;

/// Go time package `quote`: non-ASCII and control bytes as `\x..`.
fn time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if (c as u32) < 0x20 || !c.is_ascii() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Go `getnum`: one or (`fixed`: exactly) two leading digits.
fn getnum(s: &str, fixed: bool) -> Option<(i64, &str)> {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    if !digit(0) {
        return None;
    }
    if !digit(1) {
        return (!fixed).then(|| (i64::from(b[0] - b'0'), &s[1..]));
    }
    Some((
        i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'),
        &s[2..],
    ))
}

/// A Go `time.ParseError` message for `value`.
fn parse_error(value: &str, elem: &str, layout_elem: &str) -> String {
    format!(
        "parsing time {} as {}: cannot parse {} as {}",
        time_quote(value),
        time_quote(LAYOUT),
        time_quote(elem),
        time_quote(layout_elem)
    )
}

/// Go `time.Parse("150405-0700", value)`: the UTC second of the day, or Go's error.
fn parse_time(value: &str) -> Result<i64, String> {
    let range = |what: &str| format!("parsing time {}: {what} out of range", time_quote(value));
    let (hour, rest) = getnum(value, false).ok_or_else(|| parse_error(value, value, "15"))?;
    if hour >= 24 {
        return Err(range("hour"));
    }
    let (min, rest2) = getnum(rest, true).ok_or_else(|| parse_error(value, rest, "04"))?;
    if min >= 60 {
        return Err(range("minute"));
    }
    let (sec, mut rest3) = getnum(rest2, true).ok_or_else(|| parse_error(value, rest2, "05"))?;
    if sec >= 60 {
        return Err(range("second"));
    }
    let b = rest3.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'.' | b',') && b[1].is_ascii_digit() {
        let end = rest3[1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest3.len(), |i| i + 1);
        rest3 = &rest3[end..];
    }
    let offset = zone_offset(value, rest3)?;
    let tail = &rest3[5..];
    if !tail.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            time_quote(value),
            time_quote(tail)
        ));
    }
    Ok((hour * 3600 + min * 60 + sec - offset).rem_euclid(86_400))
}

/// Go's `stdNumTZ` (`-0700`): a sign, two-digit hours and minutes; offset in seconds.
fn zone_offset(value: &str, rest: &str) -> Result<i64, String> {
    let bad = || parse_error(value, rest, "-0700");
    if rest.len() < 5 || !rest.is_char_boundary(5) {
        return Err(bad());
    }
    let (hh, _) = getnum(&rest[1..3], true).ok_or_else(bad)?;
    let (mm, _) = getnum(&rest[3..5], true).ok_or_else(bad)?;
    if hh > 24 {
        return Err(format!(
            "parsing time {}: time zone offset hour out of range",
            time_quote(value)
        ));
    }
    if mm > 60 {
        return Err(format!(
            "parsing time {}: time zone offset minute out of range",
            time_quote(value)
        ));
    }
    match rest.as_bytes()[0] {
        b'+' => Ok((hh * 60 + mm) * 60),
        b'-' => Ok(-(hh * 60 + mm) * 60),
        _ => Err(bad()),
    }
}

/// gardener pkg/apis/utils/timewindow `ParseMaintenanceTimeWindow` and `Duration`: the window
/// in nanoseconds (end not after begin: the next day).
fn window(begin: &str, end: &str) -> Result<i64, String> {
    let wrap = |what: &str, e: String| {
        format!(
            "could not parse {what} time: could not parse the value into the maintenanceTime format: {e}"
        )
    };
    let b = parse_time(begin).map_err(|e| wrap("begin", e))?;
    let e = parse_time(end).map_err(|e| wrap("end", e))?;
    let secs = if e <= b { e + 86_400 - b } else { e - b };
    Ok(secs * SECOND)
}

/// gardener pkg/api/core/validation/shoot.go `validateMaintenance`: a parseable time window
/// of 30m..6h. (Unset: v1beta1 defaulting picks a valid random one.)
pub(crate) fn validate(shoot: &Value) -> Vec<FieldError> {
    let tw = at(shoot, &["spec", "maintenance", "timeWindow"]);
    if tw.is_null() {
        return Vec::new();
    }
    let (begin, end) = (
        opt_str(tw, &["begin"]).unwrap_or(""),
        opt_str(tw, &["end"]).unwrap_or(""),
    );
    let path = "spec.maintenance.timeWindow";
    match window(begin, end) {
        Err(e) => {
            let value = format!(
                "{{\"Begin\":{},\"End\":{}}}",
                json_str(begin),
                json_str(end)
            );
            vec![invalid(&format!("{path}.begin/end"), value, e, "MT1")]
        }
        Ok(ns) if ns > 6 * 3600 * SECOND => {
            let msg = format!(
                "time window must not be greater than {}",
                duration_string(6 * 3600 * SECOND)
            );
            vec![invalid(path, ns.to_string(), msg, "MT1")]
        }
        Ok(ns) if ns < 30 * 60 * SECOND => {
            let msg = format!(
                "time window must not be smaller than {}",
                duration_string(30 * 60 * SECOND)
            );
            vec![invalid(path, ns.to_string(), msg, "MT1")]
        }
        Ok(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::json;

    fn tw(begin: &str, end: &str) -> Vec<String> {
        let s = with(
            shoot(),
            "/spec/maintenance/timeWindow",
            json!({"begin": begin, "end": end}),
        );
        super::validate(&s).iter().map(|e| e.message()).collect()
    }

    #[test]
    fn time_window_parses() {
        assert_eq!(
            tw("1500+0000", "230000+0000"),
            vec![
                r#"spec.maintenance.timeWindow.begin/end: Invalid value: {"Begin":"1500+0000","End":"230000+0000"}: could not parse begin time: could not parse the value into the maintenanceTime format: parsing time "1500+0000" as "150405-0700": cannot parse "+0000" as "05""#
            ]
        );
        assert_eq!(
            tw("250000+0000", "230000+0000")[0],
            r#"spec.maintenance.timeWindow.begin/end: Invalid value: {"Begin":"250000+0000","End":"230000+0000"}: could not parse begin time: could not parse the value into the maintenanceTime format: parsing time "250000+0000": hour out of range"#
        );
        assert!(tw("220000+0100", "230000+0100").is_empty());
        let r = refused(create(&with(
            shoot(),
            "/spec/maintenance/timeWindow",
            json!({"begin": "x", "end": "y"}),
        )));
        assert_eq!(r.rules, vec!["MT1"]);
    }

    #[test]
    fn time_window_duration() {
        assert_eq!(
            tw("220000+0000", "050000+0000"),
            vec![
                "spec.maintenance.timeWindow: Invalid value: 25200000000000: time window must not be greater than 6h0m0s"
            ]
        );
        assert_eq!(
            tw("220000+0000", "221000+0000"),
            vec![
                "spec.maintenance.timeWindow: Invalid value: 600000000000: time window must not be smaller than 30m0s"
            ]
        );
        assert!(tw("230000+0000", "010000+0000").is_empty());
        assert_eq!(tw("230000+0000", "230000+0000").len(), 1);
    }
}

//! Text that came from a plugin, made safe before it reaches a log line, a status field, a
//! condition or an Event: control and bidirectional-override characters are escaped (so a
//! `\n` cannot forge a host log line and an ANSI sequence cannot repaint a terminal), and
//! the text is cut to a length every consumer can hold.

use std::borrow::Cow;

/// Longest plugin message (errors, module states) kept, in characters.
pub const MESSAGE_CHARS: usize = 1024;
/// Longest field path a plugin names.
pub const FIELD_CHARS: usize = 256;
/// Longest warning kept, and how many warnings per call.
pub const WARNING_CHARS: usize = 512;
pub const MAX_WARNINGS: usize = 20;
/// Longest plugin name, version and description.
pub const NAME_CHARS: usize = 63;
pub const VERSION_CHARS: usize = 64;
pub const DESCRIPTION_CHARS: usize = 256;

/// Characters that change how text is displayed rather than what it says.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// `text` with control and bidi characters escaped (`\n`, `\u{1b}`).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` escaped and cut to at most `max` characters (an ellipsis marks the cut).
pub fn clamp(text: &str, max: usize) -> String {
    let escaped = escape(text);
    if escaped.chars().count() <= max {
        return escaped.into_owned();
    }
    let mut out: String = escaped.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Warnings clamped one by one, at most [`MAX_WARNINGS`] plus a line saying how many more.
pub fn clamp_warnings(warnings: Vec<String>) -> Vec<String> {
    let total = warnings.len();
    let mut out: Vec<String> = warnings
        .iter()
        .take(MAX_WARNINGS)
        .map(|w| clamp(w, WARNING_CHARS))
        .collect();
    if total > MAX_WARNINGS {
        out.push(format!("… {} more warnings", total - MAX_WARNINGS));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(
            escape("ok\n2026-11-23T00:00:00Z ERROR forged"),
            "ok\\n2026-11-23T00:00:00Z ERROR forged"
        );
        assert_eq!(escape("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(escape("a\u{202E}b"), "a\\u{202e}b");
    }

    #[test]
    fn long_text_is_cut() {
        let cut = clamp(&"é".repeat(2000), 10);
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with('…'));
        assert_eq!(clamp("short", 10), "short");
        let warnings = clamp_warnings((0..25).map(|i| i.to_string()).collect());
        assert_eq!(warnings.len(), MAX_WARNINGS + 1);
        assert_eq!(warnings.last().unwrap(), "… 5 more warnings");
    }
}

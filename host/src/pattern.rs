//! The one wildcard match the host uses: `*` matches any characters (grants' names and
//! paths, allowed API servers and module targets).

/// Whether `text` matches `pattern`, where `*` matches any characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => text.strip_prefix(head).is_some_and(|rest| {
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| glob(tail, &rest[i..]))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("a*", "abc"));
        assert!(glob("*-critical", "availability-critical"));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c", "abd"));
        assert!(glob("*", ""));
        assert!(glob("team-*/kubeconfig-*", "team-a/kubeconfig-rt"));
    }
}

//! Where Tessera keeps files on this machine.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/tessera/<what>`, else `~/.cache/tessera/<what>`; `None` when neither
/// variable is set.
pub fn cache_dir(what: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tessera").join(what))
}

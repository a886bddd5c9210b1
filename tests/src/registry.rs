//! The registry the tests start is the one `tessera dev up` starts
//! ([`tessera::devenv::registry`]); this adds what only the tests need.

pub use tessera::devenv::registry::TestRegistry;

/// A build of the `stamp` test guest that writes `value` (at most 8 bytes) instead of
/// `v1`: same code, different bytes, so a different digest and a different Shoot.
pub fn stamp_variant(component: &[u8], value: &str) -> Vec<u8> {
    assert!(value.len() <= 8);
    let marker = b"STAMP:v1______";
    let at = component
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the stamp guest's marker");
    let mut out = component.to_vec();
    let mut replacement = format!("STAMP:{value}").into_bytes();
    replacement.resize(marker.len(), b'_');
    out[at..at + marker.len()].copy_from_slice(&replacement);
    out
}

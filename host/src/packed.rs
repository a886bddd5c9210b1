//! JSON text kept deflated, for the caches that hold one object per Runtime: the Shoots of
//! the watch (`gardener::shoot_cache`) and the drafts of earlier renders (`plugins::memo`).
//! A Shoot's text deflates to about a third (KIM's golden Shoots: 5,232 bytes to 1,865 at
//! the fast level), and both caches read an entry rarely (a settled Runtime once per
//! resync, a draft on a render that hits), so the bytes saved per Runtime outweigh the
//! microseconds a read or a write spends on it.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A value's JSON text, deflated.
pub(crate) struct Packed(Box<[u8]>);

impl Packed {
    /// Pack `value`; `None` if it does not serialize (a map with non-string keys, a
    /// non-finite float), which no Kubernetes object has.
    pub(crate) fn of<T: Serialize + ?Sized>(value: &T) -> Option<Self> {
        // The text first: serde writes token by token, and each write to the encoder
        // runs the compressor.
        let text = serde_json::to_vec(value).ok()?;
        let mut encoder =
            DeflateEncoder::new(Vec::with_capacity(text.len() / 3), Compression::fast());
        encoder.write_all(&text).ok()?;
        let bytes = encoder.finish().ok()?;
        Some(Self(bytes.into_boxed_slice()))
    }

    /// The value again; `None` if the bytes do not inflate or parse as a `T` (then the
    /// caller asks the source, as for an entry it never had).
    pub(crate) fn unpack<T: DeserializeOwned>(&self) -> Option<T> {
        let mut text = Vec::with_capacity(self.0.len() * 4);
        DeflateDecoder::new(&self.0[..])
            .read_to_end(&mut text)
            .ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Bytes held.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn packs_and_unpacks_a_shoot_smaller_than_its_text() {
        let shoot: Value = serde_saphyr::from_str(include_str!("../../tests/kim/shoot-aws.yaml"))
            .expect("golden Shoot");
        let text = serde_json::to_vec(&shoot).expect("text");
        let packed = Packed::of(&shoot).expect("packs");
        assert!(
            packed.len() * 2 < text.len(),
            "{} bytes packed from {}",
            packed.len(),
            text.len()
        );
        assert_eq!(packed.unpack::<Value>(), Some(shoot));
    }

    #[test]
    fn bytes_that_do_not_inflate_or_parse_unpack_to_none() {
        assert_eq!(Packed(Box::new([1, 2, 3])).unpack::<Value>(), None);
        let packed = Packed::of(&json!({"a": 1})).expect("packs");
        assert_eq!(packed.unpack::<Vec<u8>>(), None);
    }
}

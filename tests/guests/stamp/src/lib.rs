//! `stamp`: a shoot extension for the registry tests. It writes the Shoot annotation
//! `tessera.dev/stamp` with a value kept in a data segment (`STAMP:` + 8 bytes), so a test
//! makes a build that behaves differently by rewriting those bytes in the component.

use std::collections::BTreeMap;

use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

#[used]
static MARKER: [u8; 14] = *b"STAMP:v1______";

pub struct Stamp;

impl ShootExtension for Stamp {
    const NAME: &'static str = "stamp";
    const DESCRIPTION: &'static str = "Writes the annotation tessera.dev/stamp (test plugin)";
    type Config = BTreeMap<String, String>;

    fn extend(input: ExtendInput<Self::Config>) -> Result<ExtendOutput, PluginError> {
        // A volatile read keeps the value in memory, where the tests can rewrite it.
        let bytes: Vec<u8> = (0..8)
            .map(|i| unsafe { std::ptr::read_volatile(&MARKER[6 + i]) })
            .collect();
        let value = String::from_utf8_lossy(&bytes)
            .trim_end_matches('_')
            .to_string();
        let mut shoot = input.draft;
        shoot
            .metadata
            .annotations
            .insert("tessera.dev/stamp".into(), value);
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Stamp);
tessera_sdk::declare_requests!("requests.yaml");

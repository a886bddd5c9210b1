//! A shoot extension that wants the network: it imports `wasi:sockets`, which the host does
//! not offer, so loading it must fail and name the import.

use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

#[cfg(target_family = "wasm")]
#[link(wasm_import_module = "wasi:sockets/instance-network@0.2.0")]
unsafe extern "C" {
    #[link_name = "instance-network"]
    fn instance_network() -> i32;
}

pub struct Net;

impl ShootExtension for Net {
    const NAME: &'static str = "hostile-net";
    const DESCRIPTION: &'static str = "tries to reach the network";
    type Config = serde_json::Value;

    fn extend(input: ExtendInput<serde_json::Value>) -> Result<ExtendOutput, PluginError> {
        #[cfg(target_family = "wasm")]
        std::hint::black_box(unsafe { instance_network() });
        Ok(ExtendOutput::new(input.draft))
    }
}

tessera_sdk::export_shoot_extension!(Net);

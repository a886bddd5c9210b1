//! JSON Schema helpers for the CRDs generated from the Runtime types.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Kubernetes' int-or-string (`maxSurge: 1` or `maxSurge: "10%"`).
pub fn int_or_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true })
}

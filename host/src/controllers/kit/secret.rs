//! The one way the controllers build the Secrets they write (kubeconfigs, token anchors,
//! registry-cache credential copies): typed, `Opaque`, with their labels, annotations and
//! controlling owner.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// A Secret being put together.
#[derive(Debug, Clone)]
pub(crate) struct SecretBuilder(Secret);

impl SecretBuilder {
    /// Secret `namespace/name` (no namespace: the API's own).
    pub(crate) fn named(namespace: Option<String>, name: String) -> Self {
        let mut secret = Self::opaque();
        secret.0.metadata.namespace = namespace;
        secret.0.metadata.name = Some(name);
        secret
    }

    /// A Secret the API server names, from `prefix`.
    pub(crate) fn generated(prefix: String) -> Self {
        let mut secret = Self::opaque();
        secret.0.metadata.generate_name = Some(prefix);
        secret
    }

    fn opaque() -> Self {
        Self(Secret {
            type_: Some("Opaque".into()),
            ..Secret::default()
        })
    }

    pub(crate) fn label(mut self, key: &str, value: impl Into<String>) -> Self {
        let labels = self.0.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(key.to_string(), value.into());
        self
    }

    pub(crate) fn labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(labels);
        self
    }

    pub(crate) fn annotate(mut self, key: &str, value: impl Into<String>) -> Self {
        let annotations = self
            .0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        annotations.insert(key.to_string(), value.into());
        self
    }

    /// Controlled by `owner`: it goes with it, and its owner's watch sees it change.
    pub(crate) fn owned_by(mut self, owner: Option<OwnerReference>) -> Self {
        self.0.metadata.owner_references = owner.map(|o| vec![o]);
        self
    }

    /// `value` under `key`.
    pub(crate) fn data(mut self, key: &str, value: Vec<u8>) -> Self {
        let data = self.0.data.get_or_insert_with(BTreeMap::new);
        data.insert(key.to_string(), ByteString(value));
        self
    }

    /// Every key of `data`.
    pub(crate) fn all_data(mut self, data: Option<BTreeMap<String, ByteString>>) -> Self {
        self.0.data = data;
        self
    }

    /// Never changed after it is made.
    pub(crate) fn immutable(mut self) -> Self {
        self.0.immutable = Some(true);
        self
    }

    pub(crate) fn build(self) -> Secret {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_opaque_with_what_it_was_given() {
        let secret = SecretBuilder::named(Some("ns".into()), "s".into())
            .label("a", "1")
            .annotate("b", "2")
            .data("config", b"x".to_vec())
            .build();
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        assert_eq!(secret.metadata.labels.unwrap()["a"], "1");
        assert_eq!(secret.metadata.annotations.unwrap()["b"], "2");
        assert_eq!(secret.data.unwrap()["config"].0, b"x");
        let json = serde_json::to_value(SecretBuilder::generated("p-".into()).build()).unwrap();
        assert_eq!(
            (json["apiVersion"].as_str(), json["kind"].as_str()),
            (Some("v1"), Some("Secret"))
        );
        assert_eq!(json["metadata"]["generateName"], "p-");
    }
}

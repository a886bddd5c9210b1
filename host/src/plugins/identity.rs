//! The Shoot's identity — name, project namespace, credentials binding, seed — pinned by
//! the host from the Runtime and the installation's configuration. Every chain starts from
//! a draft that carries it; no plugin may change it, and the Gardener client checks it again
//! before every write.

use serde_json::Value;
use tessera_sdk::models::{RuntimeSpec, Shoot};

/// The Gardener project when the configuration names none: Shoots live in
/// `garden-kyma-dev`.
pub const DEFAULT_PROJECT: &str = "kyma-dev";

/// The namespace of Gardener project `project`: `garden-<project>` (the project's
/// `spec.namespace` must say so; Gardener otherwise picks `garden-<project>-<hash>`).
pub fn project_namespace(project: &str) -> String {
    format!("garden-{project}")
}

/// Whether `name` can be a namespace: lower-case letters, digits and `-`, at most 63.
pub fn is_dns_label(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Which credentials the Shoot's cloud account comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// `spec.secretBindingName`.
    Secret(String),
    /// `spec.credentialsBindingName` (Gardener's successor of secret bindings).
    Credentials(String),
    /// The Runtime names neither (the `base` plugin refuses such a Runtime).
    Unset,
}

/// Who a Shoot is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShootIdentity {
    pub name: String,
    pub namespace: String,
    pub binding: Binding,
}

impl ShootIdentity {
    /// The identity of the Shoot of a Runtime with `spec`, in Gardener project `project`.
    pub fn of(spec: &RuntimeSpec, project: &str) -> Self {
        let shoot = &spec.shoot;
        let binding = match (&shoot.credentials_binding_name, &shoot.secret_binding_name) {
            (Some(c), _) => Binding::Credentials(c.clone()),
            (None, Some(s)) => Binding::Secret(s.clone()),
            (None, None) => Binding::Unset,
        };
        Self {
            name: shoot.name.clone(),
            namespace: project_namespace(project),
            binding,
        }
    }

    /// With Gardener's credentials bindings on (KIM's `gardener.enableCredentialBinding`),
    /// a Runtime's `secretBindingName` names the CredentialsBinding of the same name, as
    /// KIM's `ExtendWithCredentialsBinding` sets it; its Shoots with a SecretBinding move
    /// over with their next patch (Gardener allows that move, for the same Secret).
    pub fn with_credentials_binding(mut self, enabled: bool) -> Self {
        if let (true, Binding::Secret(name)) = (enabled, &self.binding) {
            self.binding = Binding::Credentials(name.clone());
        }
        self
    }

    /// The draft every chain starts from: an empty Shoot carrying the identity.
    pub fn draft(&self) -> Value {
        let mut shoot = Shoot::default();
        shoot.metadata.name = Some(self.name.clone());
        shoot.metadata.namespace = Some(self.namespace.clone());
        match &self.binding {
            Binding::Secret(s) => shoot.spec.secret_binding_name = Some(s.clone()),
            Binding::Credentials(c) => shoot.spec.credentials_binding_name = Some(c.clone()),
            Binding::Unset => {}
        }
        serde_json::to_value(shoot).expect("a Shoot serializes")
    }

    fn expected(&self) -> [(&'static str, Option<&str>); 5] {
        let (secret, credentials) = match &self.binding {
            Binding::Secret(s) => (Some(s.as_str()), None),
            Binding::Credentials(c) => (None, Some(c.as_str())),
            Binding::Unset => (None, None),
        };
        [
            ("metadata.name", Some(self.name.as_str())),
            ("metadata.namespace", Some(self.namespace.as_str())),
            ("spec.secretBindingName", secret),
            ("spec.credentialsBindingName", credentials),
            ("spec.seedName", None),
        ]
    }

    /// Where a Shoot the host is about to write is not this Shoot, naming the field; `None`
    /// when it is. A rendered Shoot never names a seed (Gardener's scheduler picks it).
    pub fn mismatch(&self, shoot: &Value) -> Option<String> {
        Self::compare(self.expected().into_iter(), shoot)
    }

    /// Where an existing Shoot is not this Shoot (its seed is Gardener's choice). A Shoot
    /// with the SecretBinding of the name this identity uses as CredentialsBinding is this
    /// Shoot, not yet moved over.
    pub fn mismatch_existing(&self, shoot: &Value) -> Option<String> {
        let moving = match &self.binding {
            Binding::Credentials(name) => {
                shoot["spec"]["secretBindingName"].as_str() == Some(name.as_str())
                    && shoot["spec"]["credentialsBindingName"].is_null()
            }
            _ => false,
        };
        let skipped: &[&str] = if moving {
            &[
                "spec.seedName",
                "spec.secretBindingName",
                "spec.credentialsBindingName",
            ]
        } else {
            &["spec.seedName"]
        };
        Self::compare(
            self.expected()
                .into_iter()
                .filter(|(p, _)| !skipped.contains(p)),
            shoot,
        )
    }

    fn compare<'a>(
        expected: impl Iterator<Item = (&'static str, Option<&'a str>)>,
        shoot: &Value,
    ) -> Option<String> {
        expected.into_iter().find_map(|(path, want)| {
            let (section, field) = path.split_once('.').expect("two segments");
            let found = shoot[section][field].as_str();
            (found != want).then(|| {
                format!(
                    "{path} is {}, but the host pins {}",
                    found.unwrap_or("unset"),
                    want.unwrap_or("unset")
                )
            })
        })
    }
}

impl std::fmt::Display for ShootIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shoot {}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> RuntimeSpec {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/runtime-aws.yaml"
        ))
        .unwrap();
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        serde_json::from_value(doc["spec"].clone()).unwrap()
    }

    #[test]
    fn the_draft_carries_the_identity_and_nothing_else() {
        let id = ShootIdentity::of(&spec(), "kyma");
        let draft = id.draft();
        assert_eq!(draft["metadata"]["namespace"], "garden-kyma");
        assert_eq!(id.mismatch(&draft), None);
        assert!(draft["spec"]["region"].is_null());
        let mut moved = draft.clone();
        moved["metadata"]["namespace"] = json!("garden-other");
        let why = id.mismatch(&moved).unwrap();
        assert!(
            why.starts_with("metadata.namespace is garden-other"),
            "{why}"
        );
        let mut seeded = draft;
        seeded["spec"]["seedName"] = json!("aws-eu1");
        assert!(id.mismatch(&seeded).unwrap().starts_with("spec.seedName"));
    }

    /// KIM's `TestExtendWithCredentialsBinding_CredentialBindingEnabled` and `…Disabled`: enabled, the
    /// secret binding's name becomes the credentials binding and no secret binding is set;
    /// disabled, nothing moves. An existing Shoot on that SecretBinding is the same Shoot,
    /// one on another binding is not.
    #[test]
    fn credentials_binding_takes_the_secret_bindings_name() {
        let spec = spec();
        let secret = spec.shoot.secret_binding_name.clone().unwrap();
        let off = ShootIdentity::of(&spec, "kyma").with_credentials_binding(false);
        assert_eq!(off.binding, Binding::Secret(secret.clone()));
        let on = ShootIdentity::of(&spec, "kyma").with_credentials_binding(true);
        let draft = on.draft();
        assert_eq!(draft["spec"]["credentialsBindingName"], json!(secret));
        assert!(draft["spec"].get("secretBindingName").is_none());
        let existing = off.draft();
        assert_eq!(on.mismatch_existing(&existing), None, "moves over");
        assert!(on.mismatch(&existing).is_some(), "but is never written so");
        let mut other = existing;
        other["spec"]["secretBindingName"] = json!("another");
        assert!(on.mismatch_existing(&other).is_some());
    }
}

//! Labels, annotations and finalizers Tessera puts on the objects it manages.

/// On Shoots, Secrets and RuntimeKubeconfigs: the runtime id they belong to.
pub const RUNTIME: &str = "tessera.dev/runtime";
/// On Shoots: the namespace of their Runtime (Shoots live in Gardener project namespaces).
pub const RUNTIME_NAMESPACE: &str = "tessera.dev/runtime-namespace";
/// On Shoots: the Runtime `metadata.generation` the Shoot was last rendered from.
pub const RUNTIME_GENERATION: &str = "tessera.dev/runtime-generation";
/// The Secret that holds a Runtime's kubeconfig.
pub fn kubeconfig_secret(runtime_id: &str) -> String {
    format!("kubeconfig-{runtime_id}")
}

/// On kubeconfig Secrets, so module controllers can find them.
pub const KUBECONFIG: &str = "tessera.dev/kubeconfig";
/// On objects in runtime clusters that Tessera owns (and may delete).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "tessera";
/// On kubeconfig Secrets: when the kubeconfig was fetched (RFC 3339).
pub const LAST_SYNC: &str = "tessera.dev/last-sync";

/// Runtime annotation: patch the Shoot now even though the generation did not change.
/// Removed after use.
pub const FORCE_PATCH: &str = "tessera.dev/force-patch";
/// Runtime annotation: leave the Shoot alone (no patches) while set to "true".
pub const SUSPEND_PATCH: &str = "tessera.dev/suspend-patch";
/// KIM's Runtime annotations with the same meaning, honoured next to Tessera's so a landscape
/// taken over keeps its runbooks.
pub const KIM_FORCE_PATCH: &str = "operator.kyma-project.io/force-patch-reconciliation";
pub const KIM_SUSPEND_PATCH: &str = "operator.kyma-project.io/suspend-patch-reconciliation";
/// RuntimeKubeconfig annotation: fetch a new kubeconfig now. Removed after use.
pub const FORCE_ROTATION: &str = "tessera.dev/force-rotation";

pub const RUNTIME_FINALIZER: &str = "tessera.dev/runtime";
pub const KUBECONFIG_FINALIZER: &str = "tessera.dev/kubeconfig";
pub const ACCESS_FINALIZER: &str = "tessera.dev/access";
/// The uid of the RuntimeAccess an object (in a runtime cluster, or its kubeconfig Secret)
/// was made for; only objects with it are ever changed or deleted for it.
pub const ACCESS_UID: &str = "tessera.dev/access-uid";
pub const PLUGIN_FINALIZER: &str = "tessera.dev/plugin";
pub const MODULESET_FINALIZER: &str = "tessera.dev/moduleset";
/// Plugin annotation prefix: `approve.tessera.dev/<version>: <digest>` lets a version whose
/// tag moved run that digest.
pub const APPROVE_PREFIX: &str = "approve.tessera.dev/";
/// ModuleSet annotation: apply module versions lower than the installed ones.
pub const MODULES_ALLOW_DOWNGRADE: &str = "modules.tessera.dev/allow-downgrade";

/// Runtime annotation: release channel of every registry plugin of its chain.
pub const CHANNEL: &str = "tessera.dev/channel";
/// Runtime annotation prefix: `channel.tessera.dev/<plugin>: <channel>` for one plugin.
pub const CHANNEL_PREFIX: &str = "channel.tessera.dev/";
/// Runtime annotation: accept lower plugin versions than the ones it was rendered with.
pub const ALLOW_DOWNGRADE: &str = "tessera.dev/allow-downgrade";

/// Whether an annotation map has `key: "true"`.
pub fn is_true(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    key: &str,
) -> bool {
    annotations.and_then(|a| a.get(key)).map(String::as_str) == Some("true")
}

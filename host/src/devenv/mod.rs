//! Local Kubernetes pieces for plugin authors (`tessera dev up`) and for the integration
//! tests, which start the same ones: a real etcd and kube-apiserver 1.20.2 on loopback
//! ([`cluster`]), a node that runs Pods ([`node`]), Debian's `docker-registry`
//! ([`registry`]), the certificate authorities they use ([`certs`]), and what they need
//! installed on the machine, built on first use ([`tools`]).
//!
//! Nothing here is used by `tessera run`; of the host it uses only `paths`.

pub mod certs;
pub mod cluster;
pub mod node;
pub mod registry;
pub mod tools;

//! End-to-end scenarios in the cluster in a box (`ccm_testenv::cluster`): a real kube-apiserver, etcd,
//! kube-scheduler and kube-controller-manager, with kwok simulating the kubelets (docs/control-plane.md).
//!
//! - `bootstrap`: the chicken-and-egg bootstrap as the deployment story tells it, with deploy/ unchanged and the
//!   reference CCM binary running as its pods would; and the negative control without the toleration.
//! - `controllers`: routes from kube-controller-manager's IPAM, the node lifecycle next to
//!   kube-controller-manager's, and load-balancer backends as the cluster changes, with the SDK's CCM in-process
//!   over a fake cloud the test controls.
//!
//! The scenarios take turns (one cluster at a time). They need the binaries of `cargo xtask controlplane build`
//! and the reference CCM example (`cargo xtask test` builds both).

mod bootstrap;
mod controllers;
mod support;

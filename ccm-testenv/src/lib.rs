//! Test support: a real local kube-apiserver and etcd for integration tests.

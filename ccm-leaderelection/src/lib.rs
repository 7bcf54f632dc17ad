//! client-go compatible leader election on coordination.k8s.io/v1 Leases.

//! Provider traits, errors, well-known names and controller runtime primitives for Kubernetes cloud controller managers.

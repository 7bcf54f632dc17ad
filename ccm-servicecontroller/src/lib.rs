//! Kubernetes cloud controller manager: ccm-servicecontroller.

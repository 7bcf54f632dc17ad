//! Kubernetes cloud controller manager: ccm-nodecontroller.

//! Kubernetes cloud controller manager: ccm-routecontroller.

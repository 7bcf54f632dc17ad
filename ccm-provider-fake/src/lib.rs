//! An in-memory cloud implementing every ccm-core provider trait.

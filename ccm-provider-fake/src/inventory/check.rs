//! Validation of an inventory's values (IPs, CIDRs, providerIDs, operation names, labels) while the cloud is
//! built, naming the file and the field path in errors.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use ccm_core::helpers::ProviderId;
use ccm_core::intercept::Operation;
use ccm_core::syntax::{self, LabelKeyError};
use ipnet::IpNet;

use super::*;
use crate::fault::InjectedError;

/// Checks values while building the cloud, naming `file` and the field path in errors.
pub(crate) struct Checker<'a> {
    pub(crate) file: &'a str,
}

impl Checker<'_> {
    pub(super) fn ip(&self, path: String, value: &str) -> Result<IpAddr, InventoryError> {
        value.parse().map_err(|_| InventoryError::InvalidIp {
            file: self.file.to_owned(),
            path,
            value: value.to_owned(),
        })
    }

    pub(super) fn cidr(&self, path: String, value: &str) -> Result<IpNet, InventoryError> {
        let invalid = |reason: String| InventoryError::InvalidCidr {
            file: self.file.to_owned(),
            path: path.clone(),
            value: value.to_owned(),
            reason,
        };
        let net: IpNet = value.parse().map_err(|_| {
            invalid("expected an address and a prefix length, such as 10.244.0.0/16".to_owned())
        })?;
        if net.trunc() != net {
            return Err(invalid(format!(
                "host bits are set; did you mean {}?",
                net.trunc()
            )));
        }
        Ok(net)
    }

    pub(super) fn provider_id(
        &self,
        path: String,
        value: &str,
        provider_name: &str,
    ) -> Result<(), InventoryError> {
        let invalid = |reason: String| InventoryError::InvalidProviderId {
            file: self.file.to_owned(),
            path: path.clone(),
            value: value.to_owned(),
            reason,
        };
        let parsed = ProviderId::parse(value)
            .map_err(|_| invalid(format!("expected {provider_name}://<instance id>")))?;
        if parsed.provider() != provider_name {
            return Err(invalid(format!(
                "it belongs to provider {:?}, not {provider_name:?}; use {provider_name}://{}",
                parsed.provider(),
                parsed.instance()
            )));
        }
        Ok(())
    }

    pub(crate) fn operation(&self, path: String, value: &str) -> Result<Operation, InventoryError> {
        Operation::from_name(value).ok_or_else(|| InventoryError::UnknownOperation {
            file: self.file.to_owned(),
            path,
            value: value.to_owned(),
            known: Operation::names(),
        })
    }

    /// The [`InjectedError`] of a fault of `kind` at field path `base`, checking that `message` and
    /// `retry_after` are given only where they mean something.
    pub(crate) fn injected_error(
        &self,
        base: &str,
        kind: FaultKind,
        message: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Result<InjectedError, InventoryError> {
        let check = self;
        let error = match kind {
            FaultKind::Other => InjectedError::Other(
                message
                    .map(str::to_owned)
                    .unwrap_or_else(|| "injected by the inventory".to_owned()),
            ),
            FaultKind::InstanceNotFound => InjectedError::InstanceNotFound,
            FaultKind::NotImplemented => InjectedError::NotImplemented,
            FaultKind::ImplementedElsewhere => InjectedError::ImplementedElsewhere,
            FaultKind::Retry => match retry_after {
                Some(after) => InjectedError::Retry(after),
                None => {
                    return Err(check.invalid(
                        format!("{base}.retryAfter"),
                        "a retry error needs retryAfter, such as 30s",
                    ));
                }
            },
            FaultKind::Throttled => match retry_after {
                Some(after) => InjectedError::ThrottledFor(after),
                None => InjectedError::Throttled,
            },
            FaultKind::Timeout => InjectedError::Timeout,
        };
        if message.is_some() && kind != FaultKind::Other {
            return Err(check.invalid(
                format!("{base}.message"),
                "only an error of kind other takes a message",
            ));
        }
        if retry_after.is_some() && !matches!(kind, FaultKind::Retry | FaultKind::Throttled) {
            return Err(check.invalid(
                format!("{base}.retryAfter"),
                "only errors of kind retry and throttled take retryAfter",
            ));
        }
        Ok(error)
    }

    pub(crate) fn invalid(&self, path: String, message: impl Into<String>) -> InventoryError {
        InventoryError::Invalid {
            file: self.file.to_owned(),
            path,
            message: message.into(),
        }
    }

    pub(super) fn non_empty(
        &self,
        path: String,
        value: &str,
        what: &str,
    ) -> Result<(), InventoryError> {
        if value.trim().is_empty() {
            return Err(self.invalid(path, format!("{what} must not be empty")));
        }
        Ok(())
    }

    pub(super) fn unique(
        &self,
        seen: &mut HashMap<String, String>,
        path: String,
        what: &'static str,
        value: &str,
    ) -> Result<(), InventoryError> {
        if let Some(first) = seen.get(value) {
            return Err(InventoryError::Duplicate {
                file: self.file.to_owned(),
                path,
                what,
                value: value.to_owned(),
                first: first.clone(),
            });
        }
        seen.insert(value.to_owned(), path);
        Ok(())
    }
}

/// Why `key` is not a valid Kubernetes label key (`[prefix/]name`), if it is not.
pub(super) fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = key.split_once('/').unwrap_or(("", key));
    match syntax::label_key(key).err()? {
        LabelKeyError::Prefix(_) => Some(format!(
            "label key prefix {prefix:?} must be a lower-case DNS subdomain"
        )),
        LabelKeyError::Name(why) => Some(format!("label key name {name:?} {why}")),
    }
}

/// Why `value` is not a valid label value (`""` is valid).
pub(super) fn label_value_problem(value: &str) -> Option<String> {
    syntax::label_value(value).err().map(str::to_owned)
}

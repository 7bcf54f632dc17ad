//! The provider error type and its well-known kinds.
//!
//! Every provider method returns [`CloudError`]. Its variants carry the meanings the Go reference gives to its
//! sentinel errors (`InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`, `DiskNotFound`) and to
//! `api.RetryError`. Unlike Go, where sentinels are compared with `==` and wrapping them breaks detection, the kind
//! of a [`CloudError`] is found by walking the whole [`std::error::Error::source`] chain: see
//! [`CloudError::kind`] and [`find_cloud_error`].

use std::error::Error as StdError;
use std::time::Duration;

/// A boxed error that can cross threads; the source type of [`CloudError::Provider`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// An error returned by a cloud provider.
///
/// Build provider failures with [`CloudError::provider`] or [`CloudError::msg`], and add context with
/// [`CloudError::context`]: the kind of the innermost well-known error stays detectable through any number of
/// layers.
///
/// ```
/// use ccm_core::{CloudError, ErrorKind};
/// use std::time::Duration;
///
/// let err = CloudError::retry("load balancer is being created", Duration::from_secs(15))
///     .context("ensuring load balancer default/web");
/// assert_eq!(err.kind(), ErrorKind::Retry);
/// assert_eq!(err.retry_after(), Some(Duration::from_secs(15)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CloudError {
    /// The instance does not exist in the cloud (Go: `cloudprovider.InstanceNotFound`).
    ///
    /// A stopped instance still exists and must not produce this error.
    #[error("instance not found")]
    InstanceNotFound,
    /// The provider does not implement this operation (Go: `cloudprovider.NotImplemented`).
    #[error("unimplemented")]
    NotImplemented,
    /// Another controller implements this load balancer (Go: `cloudprovider.ImplementedElsewhere`).
    #[error("implemented by alternate to cloud provider")]
    ImplementedElsewhere,
    /// The disk does not exist (Go: `cloudprovider.DiskNotFound`); kept for compatibility.
    #[error("disk is not found")]
    DiskNotFound,
    /// Try the operation again after exactly `after`, without exponential backoff (Go: `api.RetryError`).
    #[error("{message} (retry after {after:?})")]
    Retry {
        /// What is not ready yet.
        message: String,
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// The cloud API refused the request because a quota or rate limit was exceeded.
    #[error("cloud API request throttled: {message}")]
    Throttled {
        /// The cloud's explanation.
        message: String,
        /// How long the cloud asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// The call did not finish in time.
    #[error("cloud provider call {operation} timed out after {after:?}")]
    Timeout {
        /// The operation that timed out (displayed by its stable name, such as
        /// `instance-metadata-by-provider-id`).
        operation: crate::intercept::Operation,
        /// The time limit that was exceeded.
        after: Duration,
    },
    /// Any other provider failure, with what was being done and the underlying error.
    #[error("{context}: {source}")]
    Provider {
        /// What failed, in lower case (for example `describing instance i-123`).
        context: String,
        /// The underlying error; may itself be a [`CloudError`] with a well-known kind.
        #[source]
        source: BoxError,
    },
}

/// A foreign error's message over a duplicated well-known [`CloudError`], so kind detection still works.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Described {
    message: String,
    #[source]
    inner: CloudError,
}

/// The meaning of a [`CloudError`], independent of how deeply it is wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`CloudError::InstanceNotFound`].
    InstanceNotFound,
    /// See [`CloudError::NotImplemented`].
    NotImplemented,
    /// See [`CloudError::ImplementedElsewhere`].
    ImplementedElsewhere,
    /// See [`CloudError::DiskNotFound`].
    DiskNotFound,
    /// See [`CloudError::Retry`].
    Retry,
    /// See [`CloudError::Throttled`].
    Throttled,
    /// See [`CloudError::Timeout`].
    Timeout,
    /// A provider failure with no well-known meaning.
    Other,
}

impl ErrorKind {
    /// A short, bounded label for metrics (`instance_not_found`, `retry`, `other`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InstanceNotFound => "instance_not_found",
            ErrorKind::NotImplemented => "not_implemented",
            ErrorKind::ImplementedElsewhere => "implemented_elsewhere",
            ErrorKind::DiskNotFound => "disk_not_found",
            ErrorKind::Retry => "retry",
            ErrorKind::Throttled => "throttled",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Other => "other",
        }
    }
}

impl CloudError {
    /// A provider failure wrapping any error, with a lower-case description of what failed.
    pub fn provider(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        CloudError::Provider {
            context: context.into(),
            source: source.into(),
        }
    }

    /// A provider failure described by a message alone.
    pub fn msg(message: impl Into<String>) -> Self {
        let message: String = message.into();
        CloudError::Provider {
            context: "cloud provider error".to_owned(),
            source: message.into(),
        }
    }

    /// The retry-after error: requeue after exactly `after`.
    pub fn retry(message: impl Into<String>, after: Duration) -> Self {
        CloudError::Retry {
            message: message.into(),
            after,
        }
    }

    /// Wrap this error with context; its [`kind`](CloudError::kind) is preserved.
    pub fn context(self, context: impl Into<String>) -> Self {
        CloudError::Provider {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// The meaning of this error, looking through every wrapped layer.
    pub fn kind(&self) -> ErrorKind {
        error_kind(self)
    }

    /// The delay of a retry-after (or throttling) error anywhere in the chain.
    pub fn retry_after(&self) -> Option<Duration> {
        let mut current: Option<&(dyn StdError + 'static)> = Some(self);
        while let Some(err) = current {
            if let Some(cloud) = err.downcast_ref::<CloudError>() {
                match cloud {
                    CloudError::Retry { after, .. } => return Some(*after),
                    CloudError::Throttled {
                        retry_after: Some(after),
                        ..
                    } => return Some(*after),
                    _ => {}
                }
            }
            current = err.source();
        }
        None
    }

    /// True if the instance was reported as not found.
    pub fn is_instance_not_found(&self) -> bool {
        self.kind() == ErrorKind::InstanceNotFound
    }

    /// True if the provider does not implement the operation.
    pub fn is_not_implemented(&self) -> bool {
        self.kind() == ErrorKind::NotImplemented
    }

    /// True if another controller implements the load balancer.
    pub fn is_implemented_elsewhere(&self) -> bool {
        self.kind() == ErrorKind::ImplementedElsewhere
    }

    /// A new error with the same message and the same [`kind`](CloudError::kind) (and retry delay), for handing
    /// one failure to several waiters (a `CloudError` is not `Clone` because it may carry any source error).
    pub fn duplicate(&self) -> CloudError {
        match self {
            CloudError::InstanceNotFound => CloudError::InstanceNotFound,
            CloudError::NotImplemented => CloudError::NotImplemented,
            CloudError::ImplementedElsewhere => CloudError::ImplementedElsewhere,
            CloudError::DiskNotFound => CloudError::DiskNotFound,
            CloudError::Retry { message, after } => CloudError::Retry {
                message: message.clone(),
                after: *after,
            },
            CloudError::Throttled {
                message,
                retry_after,
            } => CloudError::Throttled {
                message: message.clone(),
                retry_after: *retry_after,
            },
            CloudError::Timeout { operation, after } => CloudError::Timeout {
                operation: *operation,
                after: *after,
            },
            CloudError::Provider { context, source } => {
                let source: BoxError = if let Some(cloud) = source.downcast_ref::<CloudError>() {
                    Box::new(cloud.duplicate())
                } else {
                    match find_cloud_error(source.as_ref())
                        .filter(|e| e.own_kind() != ErrorKind::Other)
                    {
                        Some(inner) => Box::new(Described {
                            message: source.to_string(),
                            inner: inner.duplicate(),
                        }),
                        None => source.to_string().into(),
                    }
                };
                CloudError::Provider {
                    context: context.clone(),
                    source,
                }
            }
        }
    }

    fn own_kind(&self) -> ErrorKind {
        match self {
            CloudError::InstanceNotFound => ErrorKind::InstanceNotFound,
            CloudError::NotImplemented => ErrorKind::NotImplemented,
            CloudError::ImplementedElsewhere => ErrorKind::ImplementedElsewhere,
            CloudError::DiskNotFound => ErrorKind::DiskNotFound,
            CloudError::Retry { .. } => ErrorKind::Retry,
            CloudError::Throttled { .. } => ErrorKind::Throttled,
            CloudError::Timeout { .. } => ErrorKind::Timeout,
            CloudError::Provider { .. } => ErrorKind::Other,
        }
    }
}

/// The first [`CloudError`] with a well-known kind in the source chain of `err` (including `err` itself), or
/// else the outermost [`CloudError`] in the chain.
///
/// ```
/// use ccm_core::{find_cloud_error, CloudError, ErrorKind};
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("syncing node n1")]
/// struct MyError(#[source] CloudError);
///
/// let err = MyError(CloudError::InstanceNotFound.context("describing instance"));
/// assert_eq!(find_cloud_error(&err).map(|e| e.kind()), Some(ErrorKind::InstanceNotFound));
/// ```
pub fn find_cloud_error<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a CloudError> {
    let mut outermost = None;
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(cloud) = e.downcast_ref::<CloudError>() {
            if cloud.own_kind() != ErrorKind::Other {
                return Some(cloud);
            }
            outermost.get_or_insert(cloud);
        }
        current = e.source();
    }
    outermost
}

/// The [`ErrorKind`] of any error: the kind of the first well-known [`CloudError`] in its chain, or
/// [`ErrorKind::Other`].
pub fn error_kind(err: &(dyn StdError + 'static)) -> ErrorKind {
    find_cloud_error(err)
        .map(CloudError::own_kind)
        .unwrap_or(ErrorKind::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] BoxError);

    #[test]
    fn kinds_survive_deep_wrapping() {
        let cases = [
            (CloudError::InstanceNotFound, ErrorKind::InstanceNotFound),
            (CloudError::NotImplemented, ErrorKind::NotImplemented),
            (
                CloudError::ImplementedElsewhere,
                ErrorKind::ImplementedElsewhere,
            ),
            (CloudError::DiskNotFound, ErrorKind::DiskNotFound),
            (
                CloudError::retry("x", Duration::from_secs(1)),
                ErrorKind::Retry,
            ),
            (
                CloudError::Throttled {
                    message: "q".into(),
                    retry_after: None,
                },
                ErrorKind::Throttled,
            ),
            (
                CloudError::Timeout {
                    operation: crate::intercept::Operation::ListRoutes,
                    after: Duration::from_secs(1),
                },
                ErrorKind::Timeout,
            ),
            (CloudError::msg("boom"), ErrorKind::Other),
        ];
        for (err, kind) in cases {
            let wrapped = err.context("layer one").context("layer two");
            assert_eq!(wrapped.kind(), kind, "{wrapped}");
            let foreign = Outer(Box::new(wrapped));
            assert_eq!(error_kind(&foreign), kind);
        }
    }

    #[test]
    fn retry_after_found_through_foreign_wrapper() {
        let err = Outer(Box::new(
            CloudError::retry("later", Duration::from_secs(42)).context("ensure"),
        ));
        let cloud = find_cloud_error(&err).expect("a cloud error in the chain");
        assert_eq!(cloud.retry_after(), Some(Duration::from_secs(42)));
    }

    #[test]
    fn throttled_with_delay_is_a_retry_after() {
        let err = CloudError::Throttled {
            message: "quota".into(),
            retry_after: Some(Duration::from_millis(20)),
        };
        assert_eq!(err.retry_after(), Some(Duration::from_millis(20)));
    }

    #[test]
    fn messages_are_lower_case_and_match_go() {
        assert_eq!(
            CloudError::InstanceNotFound.to_string(),
            "instance not found"
        );
        assert_eq!(CloudError::NotImplemented.to_string(), "unimplemented");
        assert_eq!(
            CloudError::ImplementedElsewhere.to_string(),
            "implemented by alternate to cloud provider"
        );
        assert_eq!(
            CloudError::InstanceNotFound
                .context("looking up node n1")
                .to_string(),
            "looking up node n1: instance not found"
        );
    }

    #[test]
    fn duplicate_keeps_message_kind_and_delay() {
        let errs = [
            CloudError::InstanceNotFound.context("a").context("b"),
            CloudError::retry("wait", Duration::from_secs(3)).context("ensure"),
            CloudError::Throttled {
                message: "q".into(),
                retry_after: Some(Duration::from_secs(1)),
            },
            CloudError::msg("boom"),
            CloudError::provider("listing", std::io::Error::other("eof")),
        ];
        for err in errs {
            let dup = err.duplicate();
            assert_eq!(dup.to_string(), err.to_string());
            assert_eq!(dup.kind(), err.kind());
            assert_eq!(dup.retry_after(), err.retry_after());
        }
    }

    #[test]
    fn no_cloud_error_means_other() {
        let err = std::io::Error::other("disk full");
        assert_eq!(error_kind(&err), ErrorKind::Other);
        assert!(find_cloud_error(&err).is_none());
    }
}

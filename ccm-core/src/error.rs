//! The provider error type and its well-known kinds.
//!
//! Every provider method returns [`CloudError`]. Its variants carry the meanings the Go reference gives to its
//! sentinel errors (`InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`, `DiskNotFound`) and to
//! `api.RetryError`. Unlike Go, where sentinels are compared with `==` and wrapping them breaks detection, the kind
//! of a [`CloudError`] is found by walking the whole [`std::error::Error::source`] chain: see
//! [`CloudError::kind`] and [`find_cloud_error`].

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A boxed error that can cross threads; what [`CloudError::provider`] and [`ResultExt::cloud_context`] accept.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A shared error that can cross threads; the source type of [`CloudError::Provider`], shared so that
/// [`CloudError`] is [`Clone`] without losing the source's type (kind detection and `downcast_ref` still work on
/// every copy).
pub type SharedError = Arc<dyn StdError + Send + Sync + 'static>;

/// An error returned by a cloud provider.
///
/// Build provider failures with [`CloudError::provider`] (a vendor SDK error with what was being done),
/// [`CloudError::message`] (the cloud's own text, displayed unchanged) or [`CloudError::msg`] (the text after
/// `cloud provider error: `), and add context with [`CloudError::context`] or, on a `Result`, with
/// [`ResultExt::cloud_context`]: the kind of the innermost well-known error stays detectable through any number of
/// layers.
///
/// `CloudError` is [`Clone`]: a copy shares the source error of [`CloudError::Provider`] (behind an [`Arc`]), so it
/// has the same message, kind, retry delay and source chain, and can be handed to several waiters.
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
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CloudError {
    /// The instance does not exist in the cloud (Go: `cloudprovider.InstanceNotFound`).
    ///
    /// A stopped instance still exists and must not produce this error.
    InstanceNotFound,
    /// The provider does not implement this operation (Go: `cloudprovider.NotImplemented`).
    NotImplemented,
    /// Another controller implements this load balancer (Go: `cloudprovider.ImplementedElsewhere`).
    ImplementedElsewhere,
    /// The disk does not exist (Go: `cloudprovider.DiskNotFound`); kept for compatibility.
    DiskNotFound,
    /// Try the operation again after exactly `after`, without exponential backoff (Go: `api.RetryError`).
    Retry {
        /// What is not ready yet.
        message: String,
        /// How long to wait before the next attempt.
        after: Duration,
    },
    /// The cloud API refused the request because a quota or rate limit was exceeded.
    Throttled {
        /// The cloud's explanation.
        message: String,
        /// How long the cloud asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// The call did not finish in time.
    Timeout {
        /// The operation that timed out (displayed by its stable name, such as
        /// `instance-metadata-by-provider-id`).
        operation: crate::intercept::Operation,
        /// The time limit that was exceeded.
        after: Duration,
    },
    /// The call was refused before reaching the cloud: this replica's leadership is not confirmed (see
    /// [`crate::fence`]). Nothing was sent; the caller must not retry until the fence opens again.
    NotLeader {
        /// The refused operation.
        operation: crate::intercept::Operation,
        /// Why the fence is closed.
        reason: crate::fence::FenceClosed,
    },
    /// Any other provider failure, with what was being done and the underlying error.
    ///
    /// Displayed as `<context>: <source>`; the source is also returned by [`StdError::source`].
    Provider {
        /// What failed, in lower case (for example `describing instance i-123`).
        context: String,
        /// The underlying error; may itself be a [`CloudError`] with a well-known kind.
        source: SharedError,
    },
    /// A provider failure described by the cloud's own text alone, displayed unchanged (see
    /// [`CloudError::message`]); its kind is [`ErrorKind::Other`].
    Message {
        /// The cloud's text.
        message: String,
    },
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloudError::InstanceNotFound => f.write_str("instance not found"),
            CloudError::NotImplemented => f.write_str("unimplemented"),
            CloudError::ImplementedElsewhere => {
                f.write_str("implemented by alternate to cloud provider")
            }
            CloudError::DiskNotFound => f.write_str("disk is not found"),
            CloudError::Retry { message, after } => write!(f, "{message} (retry after {after:?})"),
            CloudError::Throttled { message, .. } => {
                write!(f, "cloud API request throttled: {message}")
            }
            CloudError::Timeout { operation, after } => {
                write!(
                    f,
                    "cloud provider call {operation} timed out after {after:?}"
                )
            }
            CloudError::NotLeader { operation, reason } => write!(
                f,
                "leadership not confirmed: refusing to call the cloud ({operation}): {reason}"
            ),
            CloudError::Provider { context, source } => write!(f, "{context}: {source}"),
            CloudError::Message { message } => f.write_str(message),
        }
    }
}

impl StdError for CloudError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            // The error inside the `Arc`, not the `Arc` itself, so `downcast_ref` finds its type.
            CloudError::Provider { source, .. } => Some(&**source),
            CloudError::NotLeader { reason, .. } => Some(reason),
            _ => None,
        }
    }
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
    /// See [`CloudError::NotLeader`].
    NotLeader,
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
            ErrorKind::NotLeader => "not_leader",
            ErrorKind::Other => "other",
        }
    }
}

impl CloudError {
    /// A provider failure wrapping any error, with a lower-case description of what failed.
    pub fn provider(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source: BoxError = source.into();
        CloudError::Provider {
            context: context.into(),
            source: SharedError::from(source),
        }
    }

    /// A provider failure described by the cloud's own text, displayed exactly as given, so Events carry the same
    /// text as Go's (where the provider returns `errors.New(text)`). Its kind is [`ErrorKind::Other`].
    ///
    /// [`CloudError::msg`] differs only in its display, which puts `cloud provider error: ` before the text.
    ///
    /// ```
    /// use ccm_core::{CloudError, ErrorKind};
    ///
    /// let err = CloudError::message("instance i-0123 is terminating");
    /// assert_eq!(err.to_string(), "instance i-0123 is terminating");
    /// assert_eq!(err.kind(), ErrorKind::Other);
    /// assert_eq!(CloudError::msg("boom").to_string(), "cloud provider error: boom");
    /// ```
    pub fn message(text: impl Into<String>) -> Self {
        CloudError::Message {
            message: text.into(),
        }
    }

    /// A provider failure described by a message alone, displayed as `cloud provider error: <message>` (use
    /// [`CloudError::message`] for the text unchanged).
    pub fn msg(message: impl Into<String>) -> Self {
        let message: String = message.into();
        CloudError::provider("cloud provider error", message)
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
            source: Arc::new(self),
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

    /// A copy of this error: the same message, [`kind`](CloudError::kind), retry delay and source chain.
    ///
    /// Equivalent to [`Clone::clone`] (the source of a [`CloudError::Provider`] is shared, not copied); kept for
    /// existing callers.
    pub fn duplicate(&self) -> CloudError {
        self.clone()
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
            CloudError::NotLeader { .. } => ErrorKind::NotLeader,
            CloudError::Provider { .. } | CloudError::Message { .. } => ErrorKind::Other,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T, E> Sealed for Result<T, E> {}
}

/// Context for the error of a `Result`, without `map_err` on every call.
///
/// One method serves both cases, because a [`CloudError`] is itself an error that converts into [`BoxError`]:
/// a foreign error (a vendor SDK's) becomes [`CloudError::provider`]`(context, error)`, and a [`CloudError`]
/// gets [`CloudError::context`] (the same `Provider` layer, so its [`kind`](CloudError::kind) and retry delay are
/// kept). The trait is sealed: it is implemented for every `Result<T, E>` with `E: Into<BoxError>` and nothing else.
///
/// ```
/// use ccm_core::{CloudError, ErrorKind, ResultExt};
///
/// fn describe(id: &str) -> Result<String, std::io::Error> {
///     Err(std::io::Error::other(format!("connection reset while describing {id}")))
/// }
///
/// let err = describe("i-0123").cloud_context("describing instance i-0123").unwrap_err();
/// assert_eq!(err.to_string(), "describing instance i-0123: connection reset while describing i-0123");
/// assert_eq!(err.kind(), ErrorKind::Other);
///
/// let gone: Result<(), CloudError> = Err(CloudError::InstanceNotFound);
/// let err = gone.with_cloud_context(|| format!("node {}", "n1")).unwrap_err();
/// assert_eq!(err.to_string(), "node n1: instance not found");
/// assert_eq!(err.kind(), ErrorKind::InstanceNotFound);
/// ```
pub trait ResultExt<T>: sealed::Sealed {
    /// Wrap the error with a lower-case description of what was being done.
    fn cloud_context(self, context: impl Into<String>) -> Result<T, CloudError>;

    /// Like [`cloud_context`](ResultExt::cloud_context), building the context only on error.
    fn with_cloud_context<C: Into<String>>(
        self,
        context: impl FnOnce() -> C,
    ) -> Result<T, CloudError>;
}

impl<T, E> ResultExt<T> for Result<T, E>
where
    E: Into<BoxError>,
{
    fn cloud_context(self, context: impl Into<String>) -> Result<T, CloudError> {
        self.map_err(|err| CloudError::provider(context, err))
    }

    fn with_cloud_context<C: Into<String>>(
        self,
        context: impl FnOnce() -> C,
    ) -> Result<T, CloudError> {
        self.map_err(|err| CloudError::provider(context(), err))
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
    fn message_is_the_text_unchanged_and_other() {
        let err = CloudError::message("quota exceeded for project p");
        assert_eq!(err.to_string(), "quota exceeded for project p");
        assert_eq!(err.kind(), ErrorKind::Other);
        assert!(err.source().is_none());
        let wrapped = err.context("ensuring load balancer");
        assert_eq!(
            wrapped.to_string(),
            "ensuring load balancer: quota exceeded for project p"
        );
        assert_eq!(wrapped.kind(), ErrorKind::Other);
    }

    #[test]
    fn clone_keeps_the_source_type() {
        let err = CloudError::provider("listing", std::io::Error::other("eof")).context("sync");
        let copy = err.clone();
        assert_eq!(copy.to_string(), err.to_string());
        let io = copy
            .source()
            .and_then(|e| e.source())
            .and_then(|e| e.downcast_ref::<std::io::Error>())
            .expect("the io::Error survives the clone");
        assert_eq!(io.to_string(), "eof");
        let nested = CloudError::retry("wait", Duration::from_secs(2)).context("a");
        let copy = nested.clone();
        assert_eq!(copy.kind(), ErrorKind::Retry);
        assert_eq!(copy.retry_after(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn cloud_context_wraps_foreign_and_cloud_errors() {
        let foreign: Result<(), std::io::Error> = Err(std::io::Error::other("reset"));
        let err = foreign.cloud_context("describing i-1").unwrap_err();
        assert_eq!(err.to_string(), "describing i-1: reset");
        assert!(err.source().is_some_and(|e| e.is::<std::io::Error>()));
        let cloud: Result<(), CloudError> = Err(CloudError::retry("later", Duration::from_secs(5)));
        let err = cloud.cloud_context("ensure").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retry);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(5)));
        assert_eq!(err.to_string(), "ensure: later (retry after 5s)");
        let text: Result<(), &str> = Err("plain text");
        assert_eq!(
            text.with_cloud_context(|| "op").unwrap_err().to_string(),
            "op: plain text"
        );
    }

    #[test]
    fn no_cloud_error_means_other() {
        let err = std::io::Error::other("disk full");
        assert_eq!(error_kind(&err), ErrorKind::Other);
        assert!(find_cloud_error(&err).is_none());
    }
}

//! The provider error type and its well-known kinds.
//!
//! Every provider method returns [`CloudError`]. Its variants carry the meanings the Go reference gives to its
//! sentinel errors (`InstanceNotFound`, `NotImplemented`, `ImplementedElsewhere`, `DiskNotFound`) and to
//! `api.RetryError`. Unlike Go, where sentinels are compared with `==` and wrapping them breaks detection, the kind
//! of a [`CloudError`] is found by walking the whole chain of causes: see [`CloudError::kind`],
//! [`find_cloud_error`] and [`causes`].
//!
//! Each error is printed once in a chain. A [`CloudError`]'s `Display` is its complete text (context, then each
//! cause once, as Go's `%w` wrapping prints it, so Events and logs match Go's), and therefore it reports no
//! [`std::error::Error::source`]: a chain printer (`anyhow`'s `{:#}`, a `tracing` error field, the doctor) never
//! repeats a cause's text. The wrapped error stays reachable for code: [`CloudError::inner`] for `downcast_ref`,
//! and [`causes`] to walk through every layer, including those inside a [`CloudError`].

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A boxed error that can cross threads; what [`CloudError::provider`] and [`ResultExt::cloud_context`] accept.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A shared error that can cross threads: the source of [`CloudError::Provider`], shared so that [`CloudError`]
/// is [`Clone`] without losing the source's type (kind detection and `downcast_ref` work on every copy).
pub type SharedError = Arc<dyn StdError + Send + Sync + 'static>;

/// An error returned by a cloud provider.
///
/// Build provider failures with [`CloudError::provider`] (a vendor SDK error with what was being done) or
/// [`CloudError::message`] (the cloud's own text, displayed unchanged), and add context with
/// [`CloudError::context`] or [`ResultExt::cloud_context`]: the innermost well-known kind stays detectable through
/// any number of layers.
///
/// A clone shares the source of [`CloudError::Provider`] (behind an [`Arc`]): same message, kind, retry delay and
/// causes, so it can be handed to several waiters. Its `Display` and `source` are described in the
/// [module docs](crate::error).
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
        /// Why the fence is closed (part of the display).
        reason: crate::fence::FenceClosed,
    },
    /// Any other provider failure, with what was being done and the underlying error.
    ///
    /// Displayed as `<context>: <source>: <its cause>...`, each text once (a cause whose text the previous one
    /// contains is skipped); the source is reached through [`CloudError::inner`] and [`causes`].
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
            CloudError::Timeout { operation, after } => write!(
                f,
                "cloud provider call {operation} timed out after {after:?}"
            ),
            CloudError::NotLeader { operation, reason } => write!(
                f,
                "leadership not confirmed: refusing to call the cloud ({operation}): {reason}"
            ),
            CloudError::Provider { context, source } => {
                f.write_str(context)?;
                let mut separator = if context.is_empty() { "" } else { ": " };
                let mut last = String::new();
                for cause in causes(&**source) {
                    let text = cause.to_string();
                    if text.is_empty() || last.contains(&text) {
                        continue;
                    }
                    write!(f, "{separator}{text}")?;
                    separator = ": ";
                    last = text;
                }
                Ok(())
            }
            CloudError::Message { message } => f.write_str(message),
        }
    }
}

/// No `source()`: the display already holds every cause's text (see the [module docs](crate::error)).
impl StdError for CloudError {}

/// Every error in the chain of `err`, starting with `err` itself: each [`StdError::source`], and, for a
/// [`CloudError`], the error it wraps ([`CloudError::inner`], or the fence's reason of
/// [`CloudError::NotLeader`]).
///
/// ```
/// use ccm_core::error::causes;
/// use ccm_core::{CloudError, ResultExt};
///
/// let sdk: Result<(), std::io::Error> = Err(std::io::Error::other("connection reset"));
/// let err = sdk.cloud_context("describing i-1").unwrap_err().context("syncing node n1");
/// let texts: Vec<String> = causes(&err).map(|e| e.to_string()).collect();
/// assert_eq!(texts[0], "syncing node n1: describing i-1: connection reset");
/// assert_eq!(texts.last().map(String::as_str), Some("connection reset"));
/// assert!(causes(&err).any(|e| e.is::<std::io::Error>()));
/// ```
pub fn causes<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> + Clone {
    std::iter::successors(Some(err), |&current| {
        match current.downcast_ref::<CloudError>() {
            Some(CloudError::Provider { source, .. }) => Some(&**source),
            Some(CloudError::NotLeader { reason, .. }) => Some(reason),
            _ => current.source(),
        }
    })
}

/// `err` and its causes on one line, joined with `: `, each text once: a cause whose text the line already
/// contains (an error that includes its source in its own message, as Go-worded controller errors do for their
/// Events) is skipped. THE way to print an error chain in the SDK (exit messages, the doctor's details).
///
/// ```
/// use ccm_core::error::report;
/// use ccm_core::{CloudError, ResultExt};
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("failed to ensure load balancer: {0}")]
/// struct Ensure(#[source] CloudError);
///
/// let sdk: Result<(), std::io::Error> = Err(std::io::Error::other("quota exceeded"));
/// let err = Ensure(sdk.cloud_context("creating lb-1").unwrap_err());
/// assert_eq!(report(&err), "failed to ensure load balancer: creating lb-1: quota exceeded");
/// ```
pub fn report(err: &(dyn StdError + 'static)) -> String {
    let mut line = String::new();
    for cause in causes(err) {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The meaning of a [`CloudError`], independent of how deeply it is wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
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
        self.into()
    }
}

impl CloudError {
    /// A provider failure wrapping any error, with a lower-case description of what failed.
    pub fn provider(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        CloudError::Provider {
            context: context.into(),
            source: SharedError::from(source.into() as BoxError),
        }
    }

    /// A provider failure described by the cloud's own text, displayed exactly as given, so Events carry the same
    /// text as Go's (where the provider returns `errors.New(text)`). Its kind is [`ErrorKind::Other`].
    ///
    /// ```
    /// use ccm_core::{CloudError, ErrorKind};
    ///
    /// let err = CloudError::message("instance i-0123 is terminating");
    /// assert_eq!(err.to_string(), "instance i-0123 is terminating");
    /// assert_eq!(err.kind(), ErrorKind::Other);
    /// ```
    pub fn message(text: impl Into<String>) -> Self {
        CloudError::Message {
            message: text.into(),
        }
    }

    /// The error this one wraps: the source of a [`CloudError::Provider`] (a vendor SDK's error, or another
    /// [`CloudError`]), for `downcast_ref`; `None` for every other variant.
    ///
    /// ```
    /// use ccm_core::{CloudError, ResultExt};
    ///
    /// let err = Err::<(), _>(std::io::Error::other("eof")).cloud_context("listing instances").unwrap_err();
    /// let io = err.inner().and_then(|e| e.downcast_ref::<std::io::Error>()).expect("the SDK error is kept");
    /// assert_eq!(io.to_string(), "eof");
    /// assert!(CloudError::InstanceNotFound.inner().is_none());
    /// ```
    pub fn inner(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match self {
            // The error inside the `Arc`, not the `Arc` itself, so `downcast_ref` finds its type.
            CloudError::Provider { source, .. } => Some(&**source),
            _ => None,
        }
    }

    /// The provider's own client gave up waiting for the cloud (its request or attempt timeout fired): a
    /// [`CloudError::Provider`] with source [`ClientTimeout`], of kind [`ErrorKind::Timeout`] like
    /// [`CloudError::Timeout`] (the budget reads it as congestion, the metrics as a timeout), but needing no
    /// [`Operation`](crate::intercept::Operation), so one error-translation function can use it for every call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ccm_core::{CloudError, ErrorKind};
    ///
    /// let err = CloudError::timed_out("describing instances", Some(Duration::from_secs(30)));
    /// assert_eq!(err.kind(), ErrorKind::Timeout);
    /// assert_eq!(err.to_string(), "describing instances: the cloud did not answer within 30s");
    /// assert_eq!(CloudError::timed_out("x", None).to_string(), "x: the cloud did not answer in time");
    /// ```
    pub fn timed_out(context: impl Into<String>, after: Option<Duration>) -> Self {
        CloudError::provider(context, ClientTimeout { after })
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
        causes(self).find_map(|err| match err.downcast_ref::<CloudError>()? {
            CloudError::Retry { after, .. } => Some(*after),
            CloudError::Throttled {
                retry_after: Some(after),
                ..
            } => Some(*after),
            _ => None,
        })
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
/// One method serves both cases, as a [`CloudError`] converts into [`BoxError`] too: a foreign error (a vendor
/// SDK's) becomes [`CloudError::provider`]`(context, error)`, a [`CloudError`] gets the same `Provider` layer
/// as [`CloudError::context`] gives (its [`kind`](CloudError::kind) and retry delay kept). Sealed: implemented
/// for every `Result<T, E>` with `E: Into<BoxError>` and nothing else.
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
    for cloud in causes(err).filter_map(|e| e.downcast_ref::<CloudError>()) {
        if cloud.own_kind() != ErrorKind::Other {
            return Some(cloud);
        }
        outermost.get_or_insert(cloud);
    }
    outermost
}

/// The [`ErrorKind`] of any error: the kind of the first well-known [`CloudError`] (or [`ClientTimeout`], a
/// timeout) in its chain, or [`ErrorKind::Other`].
pub fn error_kind(err: &(dyn StdError + 'static)) -> ErrorKind {
    causes(err)
        .find_map(|e| {
            if e.is::<ClientTimeout>() {
                return Some(ErrorKind::Timeout);
            }
            let kind = e.downcast_ref::<CloudError>()?.own_kind();
            (kind != ErrorKind::Other).then_some(kind)
        })
        .unwrap_or(ErrorKind::Other)
}

/// A provider's own client gave up waiting for the cloud; see [`CloudError::timed_out`]. Its
/// [`ErrorKind`] is [`ErrorKind::Timeout`] wherever it is in an error's chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the cloud did not answer {}", match after { Some(after) => format!("within {after:?}"), None => "in time".to_owned() })]
pub struct ClientTimeout {
    /// The client's time limit, when the provider knows it.
    pub after: Option<Duration>,
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
            (CloudError::message("boom"), ErrorKind::Other),
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
            CloudError::message("boom"),
            CloudError::provider("listing", std::io::Error::other("eof")),
        ];
        for err in errs {
            let dup = err.clone();
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
            .inner()
            .and_then(|e| e.downcast_ref::<CloudError>())
            .and_then(CloudError::inner)
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
        assert!(err.inner().is_some_and(|e| e.is::<std::io::Error>()));
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

    /// A foreign error that prints its source in its own text and also returns it (thiserror's `{0}` with
    /// `#[source]`), the case a chain printer would repeat.
    #[derive(Debug, thiserror::Error)]
    #[error("sdk request failed: {0}")]
    struct Both(#[source] std::io::Error);

    /// A foreign error in the idiomatic style: its text does not include its source.
    #[derive(Debug, thiserror::Error)]
    #[error("sdk call failed")]
    struct Idiomatic(#[source] std::io::Error);

    /// One example of every variant, bare.
    fn every_variant() -> Vec<CloudError> {
        vec![
            CloudError::InstanceNotFound,
            CloudError::NotImplemented,
            CloudError::ImplementedElsewhere,
            CloudError::DiskNotFound,
            CloudError::retry("lb is being built", Duration::from_secs(3)),
            CloudError::Throttled {
                message: "quota".into(),
                retry_after: Some(Duration::from_secs(1)),
            },
            CloudError::Timeout {
                operation: crate::intercept::Operation::ListRoutes,
                after: Duration::from_secs(1),
            },
            CloudError::NotLeader {
                operation: crate::intercept::Operation::ListRoutes,
                reason: crate::fence::FenceClosed::Revoked,
            },
            CloudError::provider("describing i-1", std::io::Error::other("connection reset")),
            CloudError::provider("describing i-2", Both(std::io::Error::other("tls eof"))),
            CloudError::provider(
                "describing i-3",
                Idiomatic(std::io::Error::other("dns timeout")),
            ),
            CloudError::message("instance i-4 is terminating"),
        ]
    }

    /// The texts a chain printer shows for `err`: its display, then each `source()`'s display.
    fn printed_chain(err: &(dyn StdError + 'static)) -> Vec<String> {
        let mut texts = Vec::new();
        let mut current = Some(err);
        while let Some(e) = current {
            texts.push(e.to_string());
            current = e.source();
        }
        texts
    }

    /// No text is printed twice: no link of the printed chain contains a later link's text, and the display of a
    /// `CloudError` contains each cause's own text once.
    fn assert_printed_once(err: &(dyn StdError + 'static)) {
        let chain = printed_chain(err);
        for (i, outer) in chain.iter().enumerate() {
            for inner in &chain[i + 1..] {
                assert!(
                    !outer.contains(inner.as_str()),
                    "{inner:?} is printed twice in the chain {chain:?}"
                );
            }
        }
        let full = chain.join(": ");
        for leaf in [
            "connection reset",
            "tls eof",
            "dns timeout",
            "instance not found",
            "lb is being built",
            "leadership",
        ] {
            assert!(
                full.matches(leaf).count() <= 1,
                "{leaf:?} is printed more than once in {full:?}"
            );
        }
    }

    #[test]
    fn every_error_is_printed_once_in_a_chain() {
        for err in every_variant() {
            let kind = err.kind();
            assert_printed_once(&err);
            let wrapped = err.clone().context("layer one").context("layer two");
            assert_printed_once(&wrapped);
            assert_eq!(wrapped.kind(), kind);
            let via_result: Result<(), CloudError> = Err(err.clone());
            let contexted = via_result.cloud_context("ensuring").unwrap_err();
            assert_printed_once(&contexted);
            let foreign = Outer(Box::new(wrapped.clone()));
            assert_printed_once(&foreign);
            assert_eq!(error_kind(&foreign), kind);
            // Nothing is lost: the complete display names the innermost cause of the original error.
            let innermost = causes(&err)
                .last()
                .expect("at least the error itself")
                .to_string();
            assert!(
                wrapped.to_string().ends_with(&innermost),
                "{wrapped} does not end with {innermost}"
            );
        }
    }

    #[test]
    fn display_names_each_cause_of_a_foreign_chain() {
        let both = CloudError::provider("describing i-2", Both(std::io::Error::other("tls eof")));
        assert_eq!(
            both.to_string(),
            "describing i-2: sdk request failed: tls eof"
        );
        let idiomatic = CloudError::provider(
            "describing i-3",
            Idiomatic(std::io::Error::other("dns timeout")),
        );
        assert_eq!(
            idiomatic.to_string(),
            "describing i-3: sdk call failed: dns timeout"
        );
        let texts: Vec<String> = causes(&idiomatic.context("sync"))
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            texts,
            [
                "sync: describing i-3: sdk call failed: dns timeout",
                "describing i-3: sdk call failed: dns timeout",
                "sdk call failed",
                "dns timeout"
            ]
        );
        let empty_context = CloudError::provider("", std::io::Error::other("eof"));
        assert_eq!(empty_context.to_string(), "eof");
    }

    #[test]
    fn no_cloud_error_means_other() {
        let err = std::io::Error::other("disk full");
        assert_eq!(error_kind(&err), ErrorKind::Other);
        assert!(find_cloud_error(&err).is_none());
    }
}

//! The one place AWS errors become [`CloudError`]s.
//!
//! Every AWS call of the provider goes through [`translate`]: the AWS error code decides the kind the controllers
//! act on, and the code, message and request ID stay in the text (so a Warning Event names the code AWS gave).
//!
//! | AWS answer | kind | why |
//! |---|---|---|
//! | `RequestLimitExceeded`, `Throttling`, `ThrottlingException`, `TooManyRequestsException`, `RequestThrottled`, `SlowDown` | `Throttled`, retry after [`THROTTLE_RETRY_AFTER`] | the SDK's budget backs off the whole API family |
//! | `InvalidInstanceID.NotFound` | `InstanceNotFound` | the instance is gone |
//! | `DependencyViolation`, `ResourceInUse`, `IncorrectState`, `IncorrectInstanceState` | `Retry` after [`DEPENDENCY_RETRY_AFTER`] | eventual consistency: a resource being detached or deleted |
//! | `AuthFailure`, `InvalidClientTokenId`, `UnrecognizedClientException`, `SignatureDoesNotMatch`, `UnauthorizedOperation`, `AccessDenied` | `Other`, text says the credentials or permissions were refused | no retry helps |
//! | no answer within the SDK's attempt timeout (`--aws-request-timeout-seconds`) | `Timeout` ([`CloudError::timed_out`]) | the cloud-call budget reads it as congestion and slows down; the controllers' backoff retries |
//! | anything else, transport errors | `Other` | the controllers' backoff retries |
//!
//! **Who retries.** The AWS SDK's own retries are turned off ([`crate::config::loader`] sets
//! `RetryConfig::disabled()`): each provider call is one request per AWS operation, and the CCM's work queues,
//! with the cloud-call budget's throttling backoff, are the one retry loop. Two loops would multiply (3 SDK
//! attempts × the controllers' retries) exactly when AWS throttles.

use std::time::Duration;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::result::SdkError;
use ccm_core::CloudError;

/// How long a throttled call waits before it is tried again (AWS sends no retry-after of its own).
pub const THROTTLE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long a call refused for a dependency (a resource still in use) waits before it is tried again.
pub const DEPENDENCY_RETRY_AFTER: Duration = Duration::from_secs(5);

/// AWS's throttling codes (EC2 and ELBv2 answer the first two).
pub const THROTTLING_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
];

/// Codes of a resource still in use or in transition: retried after [`DEPENDENCY_RETRY_AFTER`].
pub const DEPENDENCY_CODES: &[&str] = &[
    "DependencyViolation",
    "ResourceInUse",
    "IncorrectState",
    "IncorrectInstanceState",
];

/// Codes of refused credentials or permissions.
pub const AUTH_CODES: &[&str] = &[
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "MissingAuthenticationToken",
];

/// The code of a gone instance.
pub const INSTANCE_NOT_FOUND: &str = "InvalidInstanceID.NotFound";

/// An error AWS answered: its code, message and request ID (the text Events and logs show).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AWS error {code}: {message}{}", request_id.as_deref().map(|id| format!(" (request ID {id})")).unwrap_or_default())]
pub struct AwsApiError {
    /// The AWS error code (`RequestLimitExceeded`, `LoadBalancerNotFound`, ...).
    pub code: String,
    /// AWS's message.
    pub message: String,
    /// AWS's request ID, when the answer had one.
    pub request_id: Option<String>,
}

/// What an AWS call's error is, before it becomes a [`CloudError`]: an answer of AWS with a code, or a failure
/// to get one (transport, timeout, construction).
#[derive(Debug)]
pub enum AwsFailure {
    /// AWS answered with an error code.
    Api(AwsApiError),
    /// No answer: the text of the SDK's error chain.
    Transport(String),
    /// No answer within the SDK's timeout: the text of the SDK's error chain.
    Timeout(String),
}

impl AwsFailure {
    /// Classify an SDK error.
    pub fn from_sdk<E, R>(err: &SdkError<E, R>) -> AwsFailure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        match err {
            SdkError::ServiceError(service) => {
                let meta = service.err().meta();
                match meta.code() {
                    Some(code) => AwsFailure::Api(AwsApiError {
                        code: code.to_owned(),
                        message: meta.message().unwrap_or_default().to_owned(),
                        request_id: meta.extra("aws_request_id").map(str::to_owned),
                    }),
                    None => AwsFailure::Transport(chain_text(err)),
                }
            }
            SdkError::TimeoutError(_) => AwsFailure::Timeout(chain_text(err)),
            _ => AwsFailure::Transport(chain_text(err)),
        }
    }

    /// The AWS error code, if AWS answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsFailure::Api(api) => Some(&api.code),
            AwsFailure::Transport(_) | AwsFailure::Timeout(_) => None,
        }
    }
}

/// The whole error chain on one line (the SDK's top-level `Display` is only "service error" or
/// "dispatch failure").
fn chain_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// The kind-carrying [`CloudError`] for a failure of `action` (lower case, what was being done:
/// `describing instances`).
pub fn to_cloud_error(action: &str, failure: AwsFailure) -> CloudError {
    match failure {
        AwsFailure::Api(api) => {
            let code = api.code.as_str();
            if THROTTLING_CODES.contains(&code) {
                CloudError::Throttled {
                    message: format!("{action}: {api}"),
                    retry_after: Some(THROTTLE_RETRY_AFTER),
                }
            } else if code == INSTANCE_NOT_FOUND {
                CloudError::InstanceNotFound.context(format!("{action}: {api}"))
            } else if DEPENDENCY_CODES.contains(&code) {
                CloudError::retry(format!("{action}: {api}"), DEPENDENCY_RETRY_AFTER)
            } else if AUTH_CODES.contains(&code) {
                CloudError::provider(
                    format!(
                        "{action}: AWS refused the credentials or their permissions (check AWS_ACCESS_KEY_ID, \
                         AWS_SECRET_ACCESS_KEY, the profile or role and its IAM policy)"
                    ),
                    api,
                )
            } else {
                CloudError::provider(action.to_owned(), api)
            }
        }
        AwsFailure::Transport(text) => CloudError::message(format!(
            "{action}: no answer from AWS: {text} (check AWS_ENDPOINT_URL and the network)"
        )),
        AwsFailure::Timeout(text) => CloudError::timed_out(
            format!("{action}: AWS did not answer before the request timeout ({text})"),
            None,
        ),
    }
}

/// Translate an SDK error of `action` into a [`CloudError`] (see the [module docs](self)).
pub fn translate<E, R>(action: &str, err: SdkError<E, R>) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    to_cloud_error(action, AwsFailure::from_sdk(&err))
}

/// The code of an SDK error, if AWS answered one (to test for `LoadBalancerNotFound` and the like before
/// translating).
pub fn code_of<E, R>(err: &SdkError<E, R>) -> Option<String>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    AwsFailure::from_sdk(err).code().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::ErrorKind;

    fn api(code: &str) -> AwsFailure {
        AwsFailure::Api(AwsApiError {
            code: code.to_owned(),
            message: "m".to_owned(),
            request_id: Some("r-1".to_owned()),
        })
    }

    #[test]
    fn codes_map_to_kinds() {
        for code in THROTTLING_CODES {
            let err = to_cloud_error("listing", api(code));
            assert_eq!(err.kind(), ErrorKind::Throttled, "{code}");
            assert_eq!(err.retry_after(), Some(THROTTLE_RETRY_AFTER));
        }
        assert_eq!(
            to_cloud_error("describing", api(INSTANCE_NOT_FOUND)).kind(),
            ErrorKind::InstanceNotFound
        );
        for code in DEPENDENCY_CODES {
            let err = to_cloud_error("deleting", api(code));
            assert_eq!(err.kind(), ErrorKind::Retry, "{code}");
            assert_eq!(err.retry_after(), Some(DEPENDENCY_RETRY_AFTER));
        }
        for code in ["AuthFailure", "InternalError", "ValidationError"] {
            assert_eq!(to_cloud_error("x", api(code)).kind(), ErrorKind::Other);
        }
        assert_eq!(
            to_cloud_error("x", AwsFailure::Transport("connection refused".into())).kind(),
            ErrorKind::Other
        );
    }

    #[test]
    fn the_text_keeps_the_code_and_the_request_id() {
        let text =
            to_cloud_error("creating load balancer a1", api("TooManyLoadBalancers")).to_string();
        assert_eq!(
            text,
            "creating load balancer a1: AWS error TooManyLoadBalancers: m (request ID r-1)"
        );
        let text = to_cloud_error("describing", api("AuthFailure")).to_string();
        assert!(
            text.contains("AuthFailure") && text.contains("credentials"),
            "{text}"
        );
        let text =
            to_cloud_error("describing", AwsFailure::Transport("refused".into())).to_string();
        assert!(text.contains("AWS_ENDPOINT_URL"), "{text}");
    }
}

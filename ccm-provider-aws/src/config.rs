//! Configuration: the standard AWS chain for everything AWS (region, credentials, endpoints), the vendor flags
//! for what is the CCM's own (the cluster ID, bulk lookups), and the start-up check that fails fast.
//!
//! The AWS side is `aws_config::defaults`: `AWS_REGION` / `AWS_DEFAULT_REGION` or the profile's region, the
//! credential chain (environment, profile, web identity, container and instance roles), and the endpoint
//! variables `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_EC2` and `AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2`. The
//! provider adds no endpoint plumbing of its own. It sets three things on that configuration: the HTTPS client
//! (rustls on ring, kube's crypto provider), retries off (see [`crate::errors`]) and per-attempt timeouts.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::Intercept;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use crate::errors::{AwsFailure, to_cloud_error};

/// The flags of the AWS CCM, listed in `--help` under "AWS", each with an environment variable.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "AWS")]
pub struct AwsArgs {
    /// The cluster ID: resources tagged `kubernetes.io/cluster/<id>` (`owned` or `shared`) belong to this
    /// cluster. Default: `--cluster-name`.
    #[arg(long = "aws-cluster-id", env = "AWS_CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// Look up many instances with one `DescribeInstances` call (the node controllers' bulk calls).
    #[arg(
        long = "aws-bulk-lookups",
        env = "AWS_BULK_LOOKUPS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub bulk_lookups: bool,
    /// The time limit of one AWS request attempt (a Go duration is not needed: whole seconds).
    #[arg(
        long = "aws-request-timeout-seconds",
        env = "AWS_REQUEST_TIMEOUT_SECONDS",
        default_value_t = 30
    )]
    pub request_timeout_seconds: u64,
}

impl Default for AwsArgs {
    fn default() -> Self {
        AwsArgs {
            cluster_id: None,
            bulk_lookups: true,
            request_timeout_seconds: 30,
        }
    }
}

/// Why the provider cannot start: each says what to set or check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// No region in the AWS configuration.
    #[error(
        "no AWS region is configured: set AWS_REGION (or the region of the AWS profile in use)"
    )]
    NoRegion,
    /// The cluster ID is empty.
    #[error("the AWS cluster ID is empty: set --aws-cluster-id (or --cluster-name)")]
    NoClusterId,
    /// The check call failed.
    #[error("cannot use the AWS {service} API: {source}")]
    Check {
        /// `EC2` or `ELBv2`.
        service: &'static str,
        /// The translated error.
        #[source]
        source: ccm_core::CloudError,
    },
}

/// The SDK clients the provider uses.
#[derive(Debug, Clone)]
pub struct AwsClients {
    /// EC2: instances, subnets, route tables.
    pub ec2: aws_sdk_ec2::Client,
    /// ELBv2: network load balancers, listeners, target groups.
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
}

/// The loader of the standard AWS chain with what the provider sets: its HTTPS client (rustls on ring), no SDK
/// retries (see [`crate::errors`]) and per-attempt timeouts. Tests add an endpoint, a region and credentials.
pub fn loader(request_timeout: Duration) -> aws_config::ConfigLoader {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_attempt_timeout(request_timeout)
                .build(),
        )
}

/// The shared AWS configuration from the standard chain ([`loader`]).
///
/// # Errors
/// [`StartupError::NoRegion`] when the chain has no region.
pub async fn load_sdk_config(
    request_timeout: Duration,
) -> Result<aws_config::SdkConfig, StartupError> {
    let config = loader(request_timeout).load().await;
    if config.region().is_none() {
        return Err(StartupError::NoRegion);
    }
    Ok(config)
}

/// Clients over `config`, each with `interceptors` (none in production; tests answer with AWS error documents
/// through one).
pub fn clients(config: &aws_config::SdkConfig, interceptors: &[SharedInterceptor]) -> AwsClients {
    let mut ec2 = aws_sdk_ec2::config::Builder::from(config);
    let mut elbv2 = aws_sdk_elasticloadbalancingv2::config::Builder::from(config);
    for interceptor in interceptors {
        ec2 = ec2.interceptor(interceptor.clone());
        elbv2 = elbv2.interceptor(interceptor.clone());
    }
    AwsClients {
        ec2: aws_sdk_ec2::Client::from_conf(ec2.build()),
        elbv2: aws_sdk_elasticloadbalancingv2::Client::from_conf(elbv2.build()),
    }
}

/// An interceptor shared by both clients.
pub type SharedInterceptor = aws_smithy_runtime_api::client::interceptors::SharedInterceptor;

/// Share an interceptor between the EC2 and ELBv2 clients.
pub fn share_interceptor(interceptor: impl Intercept + 'static) -> SharedInterceptor {
    SharedInterceptor::new(interceptor)
}

/// The start-up check: one cheap read of each API, so an unreachable endpoint, refused credentials or a missing
/// region stop the CCM at start with what to fix, instead of failing every reconcile later.
///
/// # Errors
/// [`StartupError::Check`] naming the API and AWS's answer.
pub async fn check(clients: &AwsClients) -> Result<(), StartupError> {
    clients
        .ec2
        .describe_availability_zones()
        .send()
        .await
        .map_err(|err| StartupError::Check {
            service: "EC2",
            source: to_cloud_error("describing availability zones", AwsFailure::from_sdk(&err)),
        })?;
    clients
        .elbv2
        .describe_load_balancers()
        .page_size(1)
        .send()
        .await
        .map_err(|err| StartupError::Check {
            service: "ELBv2",
            source: to_cloud_error("describing load balancers", AwsFailure::from_sdk(&err)),
        })?;
    Ok(())
}

//! `aws-ccm`: the cloud controller manager of the AWS-style provider, run by the SDK's runtime with the standard
//! controllers (node, node lifecycle, service, route) and the AWS flags (`--aws-cluster-id`, ...).
//!
//! ```text
//! AWS_REGION=us-east-1 AWS_ENDPOINT_URL=http://127.0.0.1:5000 \
//!     aws-ccm --kubeconfig=$KUBECONFIG --cluster-name=demo --aws-cluster-id=demo
//! ```
//!
//! A missing region, an unreachable endpoint or refused credentials stop it at start with what to fix and a
//! non-zero exit (the provider factory's check).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let registry = ccm_core::ProviderRegistry::new();
    if let Err(err) = registry.register(ccm_provider_aws::PROVIDER, ccm_provider_aws::factory) {
        eprintln!("aws-ccm: cannot register the aws provider: {err}");
        return ExitCode::FAILURE;
    }
    ccm_app::CloudControllerManager::builder(registry)
        .with_default_controllers()
        .with_default_provider(ccm_provider_aws::PROVIDER)
        .with_vendor_args::<ccm_provider_aws::AwsArgs>()
        .with_command_name("aws-ccm")
        .run_from_args()
        .await
}

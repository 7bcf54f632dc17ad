//! Registering the fake cloud as a provider: [`FakeCloud::register`] (the factory builds the cloud from the
//! `--cloud-config` inventory) and [`FakeCloud::register_shared`] (a pre-built cloud shared with a test).

use std::sync::Arc;

use ccm_core::{ProviderRegistry, ProviderSettings, RegistryError};

use crate::PROVIDER_NAME;
use crate::cloud::FakeCloud;

impl FakeCloud {
    /// Register the `fake` provider: its factory reads the `--cloud-config` contents as an inventory
    /// (see [`crate::Inventory`]); without a config file the cloud is empty.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use ccm_core::{ProviderRegistry, ProviderSettings};
    /// use ccm_provider_fake::FakeCloud;
    ///
    /// # let client = kube::Client::new(
    /// #     tower::service_fn(|_: http::Request<kube::client::Body>| async {
    /// #         Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("offline"))
    /// #     }),
    /// #     "default",
    /// # );
    /// let registry = ProviderRegistry::new();
    /// FakeCloud::register(&registry).unwrap();
    /// let settings = ProviderSettings::new(client).with_cloud_config(b"instances:\n  - name: a\n".to_vec());
    /// let cloud = registry.init_cloud_provider("fake", settings).await.unwrap().unwrap();
    /// assert_eq!(cloud.provider_name(), "fake");
    /// # }
    /// ```
    pub fn register(registry: &ProviderRegistry) -> Result<(), RegistryError> {
        registry.register(PROVIDER_NAME, |settings: ProviderSettings| async move {
            let cloud = FakeCloud::from_settings(&settings)?;
            tracing::info!(provider = %cloud.name(), instances = cloud.lock().instances.len(), "fake cloud created");
            Ok(Arc::new(cloud) as Arc<dyn ccm_core::CloudProvider>)
        })
    }

    /// The cloud of a factory's `settings`: the `--cloud-config` contents as an inventory, or an empty cloud
    /// without one.
    ///
    /// # Errors
    ///
    /// [`crate::InventoryError`] if the inventory is invalid, or an error if it is not text.
    pub fn from_settings(settings: &ProviderSettings) -> Result<FakeCloud, ccm_core::BoxError> {
        Ok(match settings.cloud_config_str()? {
            None => FakeCloud::new(),
            Some(text) => FakeCloud::from_inventory_str(text, "--cloud-config")?,
        })
    }

    /// Register this very cloud under `name`: every provider the registry creates is a clone sharing this
    /// state, so a test can drive a whole CCM built from the registry and still change and inspect the cloud.
    /// The factory refuses a `--cloud-config` (the cloud is already built).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use ccm_core::{ProviderRegistry, ProviderSettings};
    /// use ccm_provider_fake::{FakeCloud, FakeInstance};
    ///
    /// # let client = kube::Client::new(
    /// #     tower::service_fn(|_: http::Request<kube::client::Body>| async {
    /// #         Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("offline"))
    /// #     }),
    /// #     "default",
    /// # );
    /// let cloud = FakeCloud::new();
    /// let registry = ProviderRegistry::new();
    /// cloud.register_shared(&registry, "fake").unwrap();
    /// let provider = registry.init_cloud_provider("fake", ProviderSettings::new(client)).await.unwrap().unwrap();
    /// cloud.add_instance(FakeInstance::new("node-a")); // seen by `provider` too
    /// # }
    /// ```
    pub fn register_shared(
        &self,
        registry: &ProviderRegistry,
        name: &str,
    ) -> Result<(), RegistryError> {
        let cloud = self.clone();
        registry.register(name, move |settings: ProviderSettings| {
            let cloud = cloud.clone();
            async move {
                if settings.cloud_config.is_some() {
                    return Err(
                        "this fake cloud was registered pre-built and takes no --cloud-config; \
                                remove the flag or register with FakeCloud::register"
                            .into(),
                    );
                }
                Ok(Arc::new(cloud) as Arc<dyn ccm_core::CloudProvider>)
            }
        })
    }
}

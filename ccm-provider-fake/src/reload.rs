//! Reloading the inventory without a restart, and defaults for every inventory instance.
//!
//! [`FakeCloud::reload_inventory`] (what the provider's reload hook calls with the changed `--cloud-config`)
//! checks the new inventory as strictly as at start and, if it is valid, replaces the instances and the local
//! zone; load balancers, routes, faults and the call log stay. An invalid inventory is rejected with the same
//! error as at start and nothing changes.
//!
//! [`InstanceDefaults`] (the reference CCM sets them from its vendor flags and config section) fill in every
//! instance of the inventory, at start and after each reload.
//!
//! ```
//! use ccm_provider_fake::{FakeCloud, InstanceDefaults};
//!
//! let cloud = FakeCloud::from_inventory_str("instances:\n  - name: a\n", "inventory.yaml").unwrap();
//! cloud.set_instance_defaults(InstanceDefaults {
//!     instance_type: Some("fake.medium".into()),
//!     labels: [("team".to_owned(), "infra".to_owned())].into(),
//! });
//! assert_eq!(cloud.instance("a").unwrap().instance_type, "fake.medium");
//!
//! cloud.reload_inventory("instances:\n  - name: a\n  - name: b\n", "inventory.yaml").unwrap();
//! assert_eq!(cloud.instance("b").unwrap().labels["team"], "infra");
//! assert!(cloud.reload_inventory("instances:\n  - name: \"\"\n", "inventory.yaml").is_err());
//! assert_eq!(cloud.instances().len(), 2, "a rejected inventory changes nothing");
//! ```

use std::collections::BTreeMap;

use crate::cloud::FakeCloud;
use crate::instance::FakeInstance;
use crate::inventory::InventoryError;

/// What every inventory instance gets unless the inventory says otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceDefaults {
    /// The instance type of instances whose inventory entry names none.
    pub instance_type: Option<String>,
    /// Labels added to every instance's metadata (an inventory label with the same key wins).
    pub labels: BTreeMap<String, String>,
}

impl InstanceDefaults {
    /// `instance` with the defaults filled in.
    pub fn apply(&self, mut instance: FakeInstance) -> FakeInstance {
        if instance.instance_type.is_empty()
            && let Some(instance_type) = &self.instance_type
        {
            instance.instance_type = instance_type.clone();
        }
        for (key, value) in &self.labels {
            instance
                .labels
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        instance
    }
}

impl FakeCloud {
    /// Fill in `defaults` on every instance now and after every [`reload_inventory`](Self::reload_inventory).
    pub fn set_instance_defaults(&self, defaults: InstanceDefaults) {
        let mut st = self.lock();
        let instances = std::mem::take(&mut st.instances);
        st.instances = instances
            .into_iter()
            .map(|(name, instance)| (name, defaults.apply(instance)))
            .collect();
        st.instance_defaults = defaults;
    }

    /// Replace the instances and the local zone with those of the inventory YAML `yaml`; `origin` prefixes every
    /// error.
    ///
    /// # Errors
    ///
    /// [`InventoryError`] if the inventory is invalid, or names another provider (a providerID prefix cannot
    /// change while Nodes carry it); nothing changes then.
    pub fn reload_inventory(&self, yaml: &str, origin: &str) -> Result<(), InventoryError> {
        let fresh = FakeCloud::from_inventory_str(yaml, origin)?;
        let mut new = fresh.lock();
        let mut st = self.lock();
        if new.provider_name != st.provider_name {
            return Err(InventoryError::Invalid {
                file: origin.to_owned(),
                path: "providerName".to_owned(),
                message: format!(
                    "the provider name cannot change from {:?} to {:?} without a restart",
                    st.provider_name, new.provider_name
                ),
            });
        }
        let defaults = st.instance_defaults.clone();
        st.instances = std::mem::take(&mut new.instances)
            .into_iter()
            .map(|(name, instance)| (name, defaults.apply(instance)))
            .collect();
        st.local_zone = new.local_zone.take();
        tracing::info!(provider = %st.provider_name, instances = st.instances.len(), "fake cloud inventory reloaded");
        Ok(())
    }
}

//! docs/runtime.md documents every flag the runtime accepts.

use ccm_app::CloudControllerManager;

#[test]
fn every_flag_is_in_the_runtime_documentation() {
    let docs = include_str!("../../docs/runtime.md");
    let command = CloudControllerManager::builder(ccm_core::ProviderRegistry::new())
        .with_default_controllers()
        .command();
    let mut missing = Vec::new();
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            // as a table cell or in a list of flags: `--name`
            if !docs.contains(&format!("`--{long}`")) {
                missing.push(long.to_owned());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags missing from docs/runtime.md: {missing:?}"
    );
}

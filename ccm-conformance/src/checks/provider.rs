//! Clauses about the provider as a whole.

use ccm_core::helpers::ProviderId;
use ccm_core::intercept::Capability;

use crate::context::{Check, Ctx, fail};
use crate::validate;

/// [`Clause::ProviderNameIsValid`](crate::Clause::ProviderNameIsValid).
pub(crate) async fn name_is_valid(ctx: &Ctx) -> Check {
    let name = ctx.provider.provider_name();
    if let Err(why) = validate::provider_scheme(name) {
        return fail(format!(
            "provider_name() is {name:?}, which cannot be the scheme of <provider>://<id> providerIDs: {why}"
        ));
    }
    let f = &ctx.fixture;
    let named = [
        ("running", f.running.as_ref()),
        ("stopped", f.stopped.as_ref()),
        ("unknown", f.unknown.as_ref()),
        ("route target", f.route_target.as_ref()),
    ]
    .into_iter()
    .filter_map(|(role, i)| i.map(|i| (role, i)))
    .chain(f.backend_nodes.iter().map(|i| ("backend", i)));
    for (role, instance) in named {
        let Some(provider_id) = &instance.provider_id else {
            continue;
        };
        match ProviderId::parse(provider_id) {
            Err(_) => {
                return fail(format!(
                    "the fixture's {role} instance {} has providerID {provider_id:?}, which is not of the form <provider>://<id>",
                    instance.node_name
                ));
            }
            Ok(id) if id.provider() != name => {
                return fail(format!(
                    "the fixture's {role} instance {} has providerID {provider_id:?} with scheme {:?}, but provider_name() is {name:?}; the node controller builds V1 providerIDs as <provider_name>://<instance id>",
                    instance.node_name,
                    id.provider()
                ));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// [`Clause::ProviderCapabilitiesAreStable`](crate::Clause::ProviderCapabilitiesAreStable).
pub(crate) async fn capabilities_are_stable(ctx: &Ctx) -> Check {
    for capability in Capability::ALL {
        let answers: Vec<bool> = (0..3)
            .map(|_| capability.supported_by(&ctx.provider))
            .collect();
        if answers.iter().any(|a| *a != answers[0]) {
            let shown: Vec<&str> = answers
                .iter()
                .map(|a| if *a { "Some" } else { "None" })
                .collect();
            return fail(format!(
                "the {} accessor answered {} on three calls in a row; controllers decide once whether a capability exists",
                capability.as_str(),
                shown.join(", ")
            ));
        }
    }
    Ok(())
}

/// [`Clause::ProviderCapabilitiesMatchDeclaration`](crate::Clause::ProviderCapabilitiesMatchDeclaration).
pub(crate) async fn capabilities_match_declaration(ctx: &Ctx) -> Check {
    let mut problems = Vec::new();
    for capability in Capability::ALL {
        let present = capability.supported_by(&ctx.provider);
        let accessor = format!("CloudProvider::{}()", capability.as_str().replace('-', "_"));
        if present && ctx.fixture.absent_capabilities.contains(&capability) {
            problems.push(format!(
                "{} is declared absent (ConformanceFixture::without) but {accessor} returns Some",
                capability.as_str()
            ));
        }
        if !present && ctx.fixture.expected_capabilities.contains(&capability) {
            problems.push(format!(
                "{} is expected (ConformanceFixture::expect_capability) but {accessor} returns None",
                capability.as_str()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        fail(format!(
            "the provider's capabilities differ from the fixture's declaration: {}",
            problems.join("; ")
        ))
    }
}

//! The provider's listing of its load balancers, read page by page for the takeover ([`crate::takeover`]).

use std::collections::HashSet;

use ccm_core::listing::ObservedLoadBalancer;
use ccm_core::{CloudError, LoadBalancer};

/// More pages than any cloud returns for one cluster: a provider whose tokens never end is cut off here.
const MAX_PAGES: usize = 100_000;

/// Why the listing could not be used (the controller then ensures every Service, as Go does).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListingError {
    #[error("listing load balancers failed: {0}")]
    Cloud(#[from] CloudError),
    #[error(
        "the provider returned page token {0:?} twice; it must return a new token or none on the last page"
    )]
    RepeatedToken(String),
    #[error("the provider returned more than {MAX_PAGES} pages; it must end the listing")]
    TooManyPages,
}

/// Hand every page the provider lists for `cluster` to `on_page`, in order; returns how many pages there were.
pub(crate) async fn list_pages(
    balancer: &dyn LoadBalancer,
    cluster: &str,
    mut on_page: impl FnMut(Vec<ObservedLoadBalancer>),
) -> Result<usize, ListingError> {
    let mut seen_tokens = HashSet::new();
    let mut token = None;
    for pages in 1..=MAX_PAGES {
        let page = balancer.list_load_balancers(cluster, token.take()).await?;
        on_page(page.items);
        match page.next_page {
            None => return Ok(pages),
            Some(next) if !seen_tokens.insert(next.clone()) => {
                return Err(ListingError::RepeatedToken(next));
            }
            Some(next) => token = Some(next),
        }
    }
    Err(ListingError::TooManyPages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_core::listing::LoadBalancerPage;
    use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

    /// A provider whose pages come from a list, with an optional broken token.
    struct Pages(Vec<LoadBalancerPage>);

    #[async_trait::async_trait]
    impl LoadBalancer for Pages {
        async fn get_load_balancer(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<Option<LoadBalancerStatus>, CloudError> {
            unreachable!("the listing only lists")
        }
        async fn ensure_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<LoadBalancerStatus, CloudError> {
            unreachable!("the listing only lists")
        }
        async fn update_load_balancer(
            &self,
            _: &str,
            _: &Service,
            _: &[Node],
        ) -> Result<(), CloudError> {
            unreachable!("the listing only lists")
        }
        async fn ensure_load_balancer_deleted(
            &self,
            _: &str,
            _: &Service,
        ) -> Result<(), CloudError> {
            unreachable!("the listing only lists")
        }
        fn supports_listing(&self) -> bool {
            true
        }
        async fn list_load_balancers(
            &self,
            _: &str,
            token: Option<String>,
        ) -> Result<LoadBalancerPage, CloudError> {
            let index: usize = token.map_or(0, |t| t.parse().unwrap());
            self.0.get(index).cloned().ok_or(CloudError::NotImplemented)
        }
    }

    fn item(name: &str) -> ObservedLoadBalancer {
        ObservedLoadBalancer::new(name, LoadBalancerStatus::default())
    }

    #[tokio::test]
    async fn every_page_is_read_and_a_repeated_token_is_an_error() {
        let pages = Pages(vec![
            LoadBalancerPage::new(vec![item("a"), item("b")], Some("1".into())),
            LoadBalancerPage::new(vec![], Some("2".into())),
            LoadBalancerPage::new(vec![item("c")], None),
        ]);
        let mut names = Vec::new();
        let count = list_pages(&pages, "k", |items| {
            names.extend(items.into_iter().map(|lb| lb.name));
        })
        .await
        .unwrap();
        assert_eq!(count, 3);
        assert_eq!(names, ["a", "b", "c"]);

        let looping = Pages(vec![
            LoadBalancerPage::new(vec![item("a")], Some("1".into())),
            LoadBalancerPage::new(vec![item("b")], Some("1".into())),
        ]);
        let err = list_pages(&looping, "k", drop).await.unwrap_err();
        assert!(matches!(err, ListingError::RepeatedToken(t) if t == "1"));

        let failing = Pages(vec![LoadBalancerPage::new(vec![], Some("7".into()))]);
        assert!(matches!(
            list_pages(&failing, "k", drop).await.unwrap_err(),
            ListingError::Cloud(_)
        ));
    }
}

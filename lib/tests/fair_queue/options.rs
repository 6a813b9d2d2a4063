//! Bad input names the option: what a fair acquisition does not offer is refused by name.

use super::fair;
use ddb_lock::{AcquireOptions, Error, InvalidInput, Mode};
use ddb_lock_test_kit::{lock_client, raw_item, unique};

#[tokio::test]
async fn options_a_fair_acquisition_does_not_offer_are_refused_by_name() {
    let client = lock_client().await;
    let resource = unique("fair");
    let refused = |opts: AcquireOptions| {
        let (client, resource) = (client.clone(), resource.clone());
        async move { client.acquire(&resource, &opts).await.unwrap_err() }
    };
    let err = refused(fair("a").mode(Mode::Shared)).await;
    assert!(matches!(
        err,
        Error::InvalidInput(InvalidInput::NotForMode { field: "fair", .. })
    ));
    for (opts, field) in [
        (fair("a").idempotent(true), "idempotent"),
        (fair("a").data(b"x".to_vec()), "data"),
        (fair("a").only_if_exists(true), "only_if_exists"),
    ] {
        let err = refused(opts).await;
        assert!(
            matches!(err, Error::InvalidInput(InvalidInput::NotForFair { field: f }) if f == field),
            "{field}: {err:?}"
        );
    }
    assert_eq!(raw_item(&resource).await, None);
}

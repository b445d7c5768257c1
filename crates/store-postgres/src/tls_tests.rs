//! TLS through rustls against the test cluster's certificate: verified with its CA and
//! encrypted, refused without it, plain when the URL does not ask.

use antler_store::Store;
use antler_test_support::postgres::{fresh_database, test_ca};

use crate::{PgOptions, PgStore};

/// Whether the store's own connection is encrypted, as the server sees it.
fn uses_tls(store: &PgStore) -> bool {
    let pool = store.pool.clone();
    store
        .bridge
        .run(async move {
            let client = pool.get().await.map_err(crate::PgError::pool)?;
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .map_err(|e| crate::PgError::query(&e))?;
            row.try_get(0).map_err(|e| crate::PgError::query(&e))
        })
        .unwrap()
}

fn with_query(url: &str, query: &str) -> String {
    let mut url = url::Url::parse(url).unwrap();
    url.set_host(Some("localhost")).unwrap();
    url.set_query(Some(query));
    url.to_string()
}

#[test]
fn tls_is_used_and_verified_when_the_url_asks() {
    let Some(database) = fresh_database() else {
        return;
    };
    let Some(ca) = test_ca() else {
        return;
    };
    let verified = PgOptions {
        url: with_query(
            &database.url,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        pool_size: 1,
    };
    let store = PgStore::open(&verified).unwrap();
    store.put("t", b"k", b"over tls").unwrap();
    assert_eq!(
        store.get("t", b"k").unwrap().as_deref(),
        Some(&b"over tls"[..])
    );
    assert!(uses_tls(&store), "the session is encrypted");

    // `require` verifies too: a server whose CA nobody trusts is refused.
    let unverified = PgOptions {
        url: with_query(&database.url, "sslmode=require"),
        pool_size: 1,
    };
    let Err(err) = PgStore::open(&unverified) else {
        panic!("a certificate from an unknown CA must be refused");
    };
    let message = err.to_string();
    assert!(
        message.contains("could not reach PostgreSQL") && message.contains("certificate"),
        "{message}"
    );

    let plain = PgOptions {
        url: database.url.clone(),
        pool_size: 1,
    };
    let store = PgStore::open(&plain).unwrap();
    assert!(!uses_tls(&store), "no sslmode: plain");
}

//! PostgreSQL for tests: a fresh database per test on the cluster `ANTLER_TEST_DATABASE_URL`
//! points at (`scripts/postgres-test-cluster.sh start` makes a throwaway one), dropped when the
//! test ends. Without the variable a test skips, saying why, unless
//! `ANTLER_REQUIRE_POSTGRES=1` (CI), where it fails.
//!
//! Usable from plain and async tests alike: the admin statements run on a thread of their own
//! with its own runtime.

use std::sync::atomic::{AtomicU64, Ordering};

/// The admin URL of the test cluster (a role that may `CREATE DATABASE`).
pub const URL_VAR: &str = "ANTLER_TEST_DATABASE_URL";
/// Set to `1` where PostgreSQL must be there (CI): a test that would skip fails instead.
pub const REQUIRE_VAR: &str = "ANTLER_REQUIRE_POSTGRES";

/// The CA that signed the test cluster's TLS certificate (for localhost and 127.0.0.1), set by
/// `scripts/postgres-test-cluster.sh` when openssl was there.
pub const CA_VAR: &str = "ANTLER_TEST_POSTGRES_CA";

/// A database of one test, dropped (connections and all) when this is.
#[derive(Debug)]
pub struct TestDatabase {
    /// The URL of the fresh database, for the code under test.
    pub url: String,
    admin_url: String,
    name: String,
}

/// The test cluster's admin URL; `None` (after printing why the test skips) without one,
/// a panic when [`REQUIRE_VAR`] asks for PostgreSQL.
// A skipped test says why on stdout, which the test runner shows with the test's output.
#[allow(clippy::print_stdout)]
pub fn admin_url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") => panic!(
            "{URL_VAR} is not set but {REQUIRE_VAR}=1: start a test cluster with \
             `eval \"$(scripts/postgres-test-cluster.sh start)\"`"
        ),
        _ => {
            println!(
                "skipped: {URL_VAR} is not set (eval \"$(scripts/postgres-test-cluster.sh start)\" \
                 runs a throwaway PostgreSQL)"
            );
            None
        }
    }
}

/// The test cluster's CA certificate (a PEM file); `None` (after saying why) when the cluster
/// has no TLS, a panic when [`REQUIRE_VAR`] asks for PostgreSQL.
#[allow(clippy::print_stdout)]
pub fn test_ca() -> Option<String> {
    match std::env::var(CA_VAR) {
        Ok(path) if !path.trim().is_empty() => Some(path),
        _ if std::env::var(REQUIRE_VAR).as_deref() == Ok("1") => panic!(
            "{CA_VAR} is not set but {REQUIRE_VAR}=1: start the test cluster with \
             scripts/postgres-test-cluster.sh where openssl is installed"
        ),
        _ => {
            println!("skipped: {CA_VAR} is not set (the test cluster has no TLS without openssl)");
            None
        }
    }
}

/// A new empty database on the test cluster, or `None` (the test skips) without one.
pub fn fresh_database() -> Option<TestDatabase> {
    let admin_url = admin_url()?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!(
        "antler_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    admin(&admin_url, format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("could not create a test database on {URL_VAR}: {e}"));
    let mut url =
        url::Url::parse(&admin_url).unwrap_or_else(|e| panic!("{URL_VAR} is not a URL: {e}"));
    url.set_path(&format!("/{name}"));
    Some(TestDatabase {
        url: url.to_string(),
        admin_url,
        name,
    })
}

impl TestDatabase {
    /// Runs SQL statements on this database (to set up or inspect what the test needs).
    pub fn execute(&self, sql: &str) -> Result<(), String> {
        admin(&self.url, sql.to_string())
    }

    /// The first column of every row `sql` returns, as text (`::text` casts in the query).
    pub fn query_strings(&self, sql: &str) -> Result<Vec<String>, String> {
        let (url, sql) = (self.url.clone(), sql.to_string());
        on_own_runtime(move || async move {
            let client = connect(&url).await?;
            let rows = client
                .query(sql.as_str(), &[])
                .await
                .map_err(|e| e.to_string())?;
            rows.iter()
                .map(|row| {
                    row.try_get::<_, Option<String>>(0)
                        .map(Option::unwrap_or_default)
                        .map_err(|e| e.to_string())
                })
                .collect()
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Err(e) = admin(
            &self.admin_url,
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        ) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

fn admin(url: &str, sql: String) -> Result<(), String> {
    let url = url.to_string();
    on_own_runtime(move || async move {
        let client = connect(&url).await?;
        client
            .batch_execute(&sql)
            .await
            .map_err(|e| format!("{sql}: {e}"))
    })
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("could not connect to {url}: {e}"))?;
    // The connection lives on the thread's runtime, which ends with the statement.
    tokio::spawn(connection);
    Ok(client)
}

fn on_own_runtime<F, Fut, T>(work: F) -> Result<T, String>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>>,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(work())
    })
    .join()
    .unwrap_or_else(|_| Err("the database thread panicked".into()))
}

//! The PostgreSQL backend of [`Store`]: several daemons on one database.
//!
//! One table holds every tree (`kv(tree, key, value)`, primary key `(tree, key)`; see
//! docs/storage.md); [`schema`] migrates it at open. Reads are single statements; a batch is
//! one statement (deletes and upserts of its last op per key); a conditional batch is one
//! transaction that takes an advisory lock on the expected key, reads it, compares the bytes
//! here and writes or rolls back. Prepared statements are cached per connection. The trait is
//! synchronous: [`bridge`] says how a call waits for its query without stalling the caller's
//! runtime.

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod bridge;
mod connect;
mod schema;
mod sql;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use antler_store::{BatchOp, Expect, KeyValues, Store, StoreError};
use deadpool_postgres::Pool;
use tokio_postgres::error::SqlState;

pub use connect::{PgOptions, redacted};
pub use schema::LATEST_VERSION;

use crate::bridge::Bridge;
use crate::sql::Folded;

/// A deadlock or serialization failure is retried this many times (nothing was written).
const MAX_ATTEMPTS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "store.postgres.url is not a usable PostgreSQL URL: {detail}; write it as \
         postgres://user:password@host:5432/database"
    )]
    Url { detail: String },
    #[error(
        "could not reach PostgreSQL at {target}: {detail}; check store.postgres.url and that the \
         server is running and accepts this user"
    )]
    Connect { target: String, detail: String },
    #[error(
        "the database's schema is version {found}, newer than version {known} that this antler \
         knows; upgrade antler to the release that migrated it, or point store.postgres.url at \
         another database"
    )]
    NewerSchema { found: i32, known: i32 },
    #[error(
        "migrating the database to schema version {version} failed: {detail}; nothing of it was \
         applied, fix the cause and start again"
    )]
    Migrate { version: i32, detail: String },
    #[error("a PostgreSQL query failed: {detail}; check that the database is reachable")]
    Query { detail: String },
    #[error("TLS to PostgreSQL: {detail}")]
    Tls { detail: String },
    #[error("the PostgreSQL client's runtime failed: {0}")]
    Runtime(String),
}

impl PgError {
    fn query(error: &tokio_postgres::Error) -> Self {
        Self::Query {
            detail: error
                .as_db_error()
                .map_or_else(|| error.to_string(), ToString::to_string),
        }
    }

    fn pool(error: deadpool_postgres::PoolError) -> Self {
        Self::Query {
            detail: error_chain(&error),
        }
    }

    /// A transient conflict between transactions: the whole call can run again.
    fn is_retryable(error: &tokio_postgres::Error) -> bool {
        matches!(
            error.code(),
            Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
        )
    }
}

/// An error with its causes (a TLS handshake's says why the certificate was refused).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> Self {
        StoreError::Backend(error.to_string())
    }
}

/// Rows and bytes (keys and values) written, counted since open: the write work per turn the
/// store benchmark reports.
#[derive(Debug, Default)]
pub struct WriteCounters {
    rows: AtomicU64,
    bytes: AtomicU64,
    statements: AtomicU64,
}

impl WriteCounters {
    fn add(&self, rows: usize, bytes: usize) {
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.statements.fetch_add(1, Ordering::Relaxed);
    }

    /// (rows, bytes, write statements) so far.
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.rows.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.statements.load(Ordering::Relaxed),
        )
    }
}

/// Rows of `kv` inserted, updated or deleted, and WAL bytes written, since the server started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatabaseActivity {
    pub rows_written: u64,
    pub wal_bytes: u64,
}

pub struct PgStore {
    pool: Pool,
    written: Arc<WriteCounters>,
    /// Declared last: dropped after the pool whose connections live on it.
    bridge: Bridge,
}

impl PgStore {
    /// Connects, migrates the schema to [`LATEST_VERSION`] and returns the store; refuses a
    /// database whose schema is newer.
    pub fn open(options: &PgOptions) -> Result<Self, PgError> {
        Self::open_at(options, LATEST_VERSION)
    }

    /// Like [`open`](Self::open), migrating only up to `version`: what an older release left
    /// (the migration tests).
    #[doc(hidden)]
    pub fn open_at(options: &PgOptions, version: i32) -> Result<Self, PgError> {
        let bridge = Bridge::new()?;
        // The pool spawns its connections on the runtime it is used from: build it there.
        let pool = connect::pool(options)?;
        let target = redacted(&options.url);
        let migrating = pool.clone();
        bridge.run(async move {
            let mut client = migrating.get().await.map_err(|e| PgError::Connect {
                target,
                detail: error_chain(&e),
            })?;
            schema::migrate(&mut client, version.min(LATEST_VERSION)).await
        })?;
        Ok(Self {
            pool,
            written: Arc::default(),
            bridge,
        })
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i32, PgError> {
        let pool = self.pool.clone();
        self.bridge.run(async move {
            let client = pool.get().await.map_err(PgError::pool)?;
            schema::current_version(&**client).await
        })
    }

    /// What the whole database has done to the `kv` table and its WAL so far, by every client:
    /// what `antler bench store` reads before and after its turns. PostgreSQL's table counters
    /// lag: a server process reports them when idle, within about ten seconds.
    pub fn activity(&self) -> Result<DatabaseActivity, PgError> {
        let pool = self.pool.clone();
        self.bridge.run(async move {
            let client = pool.get().await.map_err(PgError::pool)?;
            let row = client
                .query_one(
                    "SELECT \
                         (SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint \
                          FROM pg_stat_user_tables WHERE relname = 'kv'), \
                         pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint",
                    &[],
                )
                .await
                .map_err(|e| PgError::query(&e))?;
            let field = |index| row.try_get::<_, i64>(index).map_err(|e| PgError::query(&e));
            Ok(DatabaseActivity {
                rows_written: u64::try_from(field(0)?).unwrap_or(0),
                wal_bytes: u64::try_from(field(1)?).unwrap_or(0),
            })
        })
    }

    /// What this store has written since it was opened.
    pub fn written(&self) -> &WriteCounters {
        &self.written
    }

    /// Runs `query` with a pooled connection on the store's runtime and waits for it.
    fn with_client<T, F, Fut>(&self, query: F) -> Result<T, StoreError>
    where
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, tokio_postgres::Error>> + Send,
        T: Send + 'static,
    {
        let pool = self.pool.clone();
        Ok(self.bridge.run(async move {
            let client = pool.get().await.map_err(PgError::pool)?;
            query(client).await.map_err(|e| PgError::query(&e))
        })?)
    }

    /// Rows of `(key, value)` from one of the scan statements.
    fn scan(&self, statement: &'static str, params: ScanParams) -> Result<KeyValues, StoreError> {
        self.with_client(move |client| async move {
            let prepared = client.prepare_cached(statement).await?;
            let rows = match &params {
                ScanParams::Range(tree, from, to) => {
                    client.query(&prepared, &[tree, from, to]).await?
                }
                ScanParams::From(tree, from) => client.query(&prepared, &[tree, from]).await?,
                ScanParams::After(tree, after, limit) => {
                    client.query(&prepared, &[tree, after, limit]).await?
                }
                ScanParams::First(tree, limit) => client.query(&prepared, &[tree, limit]).await?,
            };
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect()
        })
    }

    /// A batch, applied if `expect` holds (always without one); retried on a deadlock.
    fn write(&self, expect: Option<&Expect>, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        let folded = Arc::new(Folded::new(ops));
        let expect = expect.map(|e| Arc::new(e.clone()));
        let (rows, bytes) = folded.size();
        let pool = self.pool.clone();
        let applied = self.bridge.run(async move {
            let mut attempt = 1;
            loop {
                let mut client = pool.get().await.map_err(PgError::pool)?;
                match write_once(&mut client, expect.as_deref(), &folded).await {
                    Err(e) if PgError::is_retryable(&e) && attempt < MAX_ATTEMPTS => {
                        attempt += 1;
                    }
                    done => return done.map_err(|e| PgError::query(&e)),
                }
            }
        })?;
        if applied && rows > 0 {
            self.written.add(rows, bytes);
        }
        Ok(applied)
    }
}

enum ScanParams {
    Range(String, Vec<u8>, Vec<u8>),
    From(String, Vec<u8>),
    After(String, Vec<u8>, i64),
    First(String, i64),
}

async fn write_once(
    client: &mut deadpool_postgres::Object,
    expect: Option<&Expect>,
    folded: &Folded,
) -> Result<bool, tokio_postgres::Error> {
    let Some(expect) = expect else {
        if !folded.is_empty() {
            let write = client.prepare_cached(sql::WRITE).await?;
            client.execute(&write, &write_params(folded)).await?;
        }
        return Ok(true);
    };
    let write_if = client.prepare_cached(sql::WRITE_IF).await?;
    let [puts_tree, puts_key, puts_value, deletes_tree, deletes_key] = write_params(folded);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        puts_tree,
        puts_key,
        puts_value,
        deletes_tree,
        deletes_key,
        &expect.tree,
        &expect.key,
        &expect.value,
    ];
    // One round trip: the three requests are pipelined (tokio-postgres sends them in the order
    // they are first polled, before any answer). A failure in the first two leaves the
    // transaction aborted, and the COMMIT then rolls it back.
    let begin = sql::begin_locked(sql::lock_id(expect.tree, &expect.key));
    let (begun, applied, committed) = tokio::join!(
        client.batch_execute(&begin),
        client.query_one(&write_if, &params),
        client.batch_execute("COMMIT"),
    );
    begun?;
    let applied: bool = applied?.try_get(0)?;
    committed?;
    Ok(applied)
}

fn write_params(folded: &Folded) -> [&(dyn tokio_postgres::types::ToSql + Sync); 5] {
    [
        &folded.put_trees,
        &folded.put_keys,
        &folded.put_values,
        &folded.delete_trees,
        &folded.delete_keys,
    ]
}

fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl Store for PgStore {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (tree, key) = (tree.to_string(), key.to_vec());
        self.with_client(move |client| async move {
            let get = client.prepare_cached(sql::GET).await?;
            client
                .query_opt(&get, &[&tree, &key])
                .await?
                .map(|row| row.try_get(0))
                .transpose()
        })
    }

    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let bytes = key.len() + value.len();
        let (tree, key, value) = (tree.to_string(), key.to_vec(), value.to_vec());
        self.with_client(move |client| async move {
            let put = client.prepare_cached(sql::PUT).await?;
            client.execute(&put, &[&tree, &key, &value]).await
        })?;
        self.written.add(1, bytes);
        Ok(())
    }

    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
        let bytes = key.len();
        let (tree, key) = (tree.to_string(), key.to_vec());
        let deleted = self.with_client(move |client| async move {
            let delete = client.prepare_cached(sql::DELETE).await?;
            client.execute(&delete, &[&tree, &key]).await
        })?;
        if deleted > 0 {
            self.written.add(1, bytes);
        }
        Ok(())
    }

    fn scan_prefix(&self, tree: &str, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        let tree = tree.to_string();
        match sql::successor(prefix) {
            Some(end) => self.scan(
                sql::SCAN_RANGE,
                ScanParams::Range(tree, prefix.to_vec(), end),
            ),
            None => self.scan(sql::SCAN_FROM, ScanParams::From(tree, prefix.to_vec())),
        }
    }

    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
        self.write(None, ops).map(|_| ())
    }

    fn apply_batch_if(&self, expect: &Expect, ops: Vec<BatchOp>) -> Result<bool, StoreError> {
        self.write(Some(expect), ops)
    }

    /// A committed transaction is durable: nothing to do.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn trees(&self) -> Result<Vec<String>, StoreError> {
        self.with_client(|client| async move {
            let trees = client.prepare_cached(sql::TREES).await?;
            client
                .query(&trees, &[])
                .await?
                .iter()
                .map(|row| row.try_get(0))
                .collect()
        })
    }

    fn scan_page(
        &self,
        tree: &str,
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<KeyValues, StoreError> {
        let tree = tree.to_string();
        match after {
            Some(after) => self.scan(
                sql::PAGE_AFTER,
                ScanParams::After(tree, after.to_vec(), limit(count)),
            ),
            None => self.scan(sql::PAGE_FIRST, ScanParams::First(tree, limit(count))),
        }
    }

    fn is_shared(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;

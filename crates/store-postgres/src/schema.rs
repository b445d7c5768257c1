//! Versioned schema migrations, applied at open in one transaction under an advisory lock (two
//! daemons starting together migrate once). `schema_version` records each version applied; a
//! database whose schema is newer than this binary knows is refused, naming both versions.

use tokio_postgres::GenericClient;

use crate::PgError;

/// The schema this binary writes and reads.
pub const LATEST_VERSION: i32 = 2;

/// Serialises migrations across processes (any constant both sides agree on: "antlerv").
const MIGRATION_LOCK: i64 = 0x616e_746c_6572_7600;

/// Each version's statements, in order; a version is never edited once released, only added.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE kv (
             tree text NOT NULL,
             key bytea NOT NULL,
             value bytea NOT NULL,
             PRIMARY KEY (tree, key)
         )",
    ),
    // Tree names compared bytewise (collation "C"): every lookup of the primary key compares
    // the tree first, and a locale's comparison costs more and orders trees unlike sled.
    // Fill factor 90: heads and thread records are rewritten on every step; room left on their
    // page lets PostgreSQL update them in place (HOT) instead of writing a new index entry.
    (
        2,
        "ALTER TABLE kv ALTER COLUMN tree TYPE text COLLATE \"C\";
         ALTER TABLE kv SET (fillfactor = 90)",
    ),
];

/// Brings the database to `target` (at most [`LATEST_VERSION`]); returns the version it had.
pub(crate) async fn migrate(
    client: &mut deadpool_postgres::Client,
    target: i32,
) -> Result<i32, PgError> {
    let query = |e: tokio_postgres::Error| PgError::query(&e);
    let transaction = client.transaction().await.map_err(query)?;
    transaction
        .batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
             CREATE TABLE IF NOT EXISTS schema_version (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )"
        ))
        .await
        .map_err(query)?;
    let found = current_version(&*transaction).await?;
    if found > LATEST_VERSION {
        return Err(PgError::NewerSchema {
            found,
            known: LATEST_VERSION,
        });
    }
    for &(version, statements) in MIGRATIONS {
        if version <= found || version > target {
            continue;
        }
        let failed = |e: tokio_postgres::Error| PgError::Migrate {
            version,
            detail: e
                .as_db_error()
                .map_or_else(|| e.to_string(), |db| db.to_string()),
        };
        transaction
            .batch_execute(statements)
            .await
            .map_err(failed)?;
        transaction
            .execute(
                "INSERT INTO schema_version (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(failed)?;
    }
    transaction.commit().await.map_err(query)?;
    if found < target {
        tracing::info!(from = found, to = target, "Migrated the database schema");
    }
    Ok(found)
}

/// The highest version applied (0: an empty database).
pub(crate) async fn current_version(client: &impl GenericClient) -> Result<i32, PgError> {
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])
        .await
        .map_err(|e| PgError::query(&e))?;
    row.try_get(0).map_err(|e| PgError::query(&e))
}

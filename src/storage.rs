//! Opens the store the configuration names: sled in `{data_dir}/store`, or the PostgreSQL
//! database of `store.postgres` (then no sled is opened at all). Every command and the daemon
//! open it here, so each works on either backend.

use std::sync::Arc;

use antler_store::{STORE_DIR, SledStore, StoreError, StoreRef};
use antler_store_postgres::{PgOptions, PgStore};

use crate::config::{AppConfig, StoreBackend};

/// The store of `config` (created empty if new; a PostgreSQL schema migrated first).
pub fn open_store(config: &AppConfig) -> Result<StoreRef, StoreError> {
    match config.store.backend {
        StoreBackend::Sled => Ok(Arc::new(SledStore::open_with_cache(
            config.data_dir().join(STORE_DIR),
            config.store.cache_capacity_mb,
        )?)),
        StoreBackend::Postgres => {
            let options = postgres_options(config)?;
            Ok(Arc::new(PgStore::open(&options)?))
        }
    }
}

/// `store.postgres` as the backend takes it. Validation requires the URL with this backend;
/// the check here covers a config built in code.
pub fn postgres_options(config: &AppConfig) -> Result<PgOptions, StoreError> {
    let url = config
        .store
        .postgres
        .url
        .as_ref()
        .map(|url| url.expose().to_string())
        .filter(|url| !url.is_empty())
        .ok_or_else(|| {
            StoreError::Backend(
                "store.backend is postgres but store.postgres.url is not set; set it to \
                 postgres://user:password@host:5432/database (best as $ANTLER_DATABASE_URL)"
                    .into(),
            )
        })?;
    Ok(PgOptions {
        url,
        pool_size: config.store.postgres.pool_size,
    })
}

/// The backend's name, as `antler store` and `/readyz` say it.
pub fn backend_name(config: &AppConfig) -> &'static str {
    match config.store.backend {
        StoreBackend::Sled => "sled",
        StoreBackend::Postgres => "postgres",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_is_opened_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let config = AppConfig {
            data_dir: Some(dir.path().to_path_buf()),
            ..AppConfig::default()
        };
        let store = open_store(&config).unwrap();
        store.put("t", b"k", b"v").unwrap();
        assert!(dir.path().join(STORE_DIR).is_dir());
        assert_eq!(backend_name(&config), "sled");
    }

    #[test]
    fn postgres_without_a_url_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = AppConfig {
            data_dir: Some(dir.path().to_path_buf()),
            ..AppConfig::default()
        };
        config.store.backend = StoreBackend::Postgres;
        let Err(err) = open_store(&config) else {
            panic!("no URL, no store");
        };
        assert!(err.to_string().contains("store.postgres.url"), "{err}");
        assert!(!dir.path().join(STORE_DIR).exists(), "no sled is opened");
    }
}

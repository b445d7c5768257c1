//! From `store.postgres.url` to a connection pool: the URL's TLS wish, rustls when it asks for
//! TLS, plain TCP or a Unix socket otherwise, and a bounded pool with timeouts.
//!
//! `sslmode=require`, `verify-ca` and `verify-full` connect through rustls and verify the
//! server's certificate and name against the system's roots, Mozilla's (webpki-roots) and the
//! PEM file `sslrootcert` names, if any: a certificate is always checked, since an unverified
//! TLS link protects nothing against the attacker TLS is there for. `disable`, `prefer` or no
//! `sslmode` connect without TLS (a database on the same host or a private network).

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;

use crate::PgError;

/// How long opening one connection may take before the call that needed it fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call waits for a free connection of the pool.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// What [`connect`] needs: the URL (a secret: it may hold the password) and the pool's size.
#[derive(Clone)]
pub struct PgOptions {
    pub url: String,
    pub pool_size: usize,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &redacted(&self.url))
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

/// The URL without its password, for messages and logs.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.set_query(None);
            parsed.to_string()
        }
        Err(_) => "(an unparsable URL)".into(),
    }
}

/// Whether the URL asks for TLS, and the extra roots it names.
#[derive(Debug, PartialEq)]
struct Tls {
    enabled: bool,
    root_cert: Option<String>,
}

/// Splits the options tokio-postgres does not parse itself (`sslmode`'s verifying modes,
/// `sslrootcert`) off the URL.
fn split_tls(url: &str) -> Result<(String, Tls), PgError> {
    let mut parsed = url::Url::parse(url).map_err(|e| PgError::Url {
        detail: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "postgres" | "postgresql") {
        return Err(PgError::Url {
            detail: format!("the scheme is {:?}, not postgres://", parsed.scheme()),
        });
    }
    let mut tls = Tls {
        enabled: false,
        root_cert: None,
    };
    let mut kept = Vec::new();
    for (key, value) in parsed.query_pairs() {
        match key.as_ref() {
            "sslmode" => match value.as_ref() {
                "disable" | "allow" | "prefer" => tls.enabled = false,
                "require" | "verify-ca" | "verify-full" => tls.enabled = true,
                other => {
                    return Err(PgError::Url {
                        detail: format!(
                            "sslmode={other} is not one of disable, prefer, require, verify-ca, \
                             verify-full"
                        ),
                    });
                }
            },
            "sslrootcert" => tls.root_cert = Some(value.into_owned()),
            _ => kept.push((key.into_owned(), value.into_owned())),
        }
    }
    kept.push((
        "sslmode".into(),
        if tls.enabled { "require" } else { "disable" }.into(),
    ));
    parsed.query_pairs_mut().clear().extend_pairs(kept);
    Ok((parsed.to_string(), tls))
}

/// A pool of at most `pool_size` connections to the URL's database. Connects lazily: the
/// first query (the schema check at open) reports an unreachable server.
pub(crate) fn pool(options: &PgOptions) -> Result<Pool, PgError> {
    let (url, tls) = split_tls(&options.url)?;
    let mut config = tokio_postgres::Config::from_str(&url).map_err(|e| PgError::Url {
        detail: e.to_string(),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("antler");
    }
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = if tls.enabled {
        config.ssl_mode(SslMode::Require);
        let connector = tokio_postgres_rustls::MakeRustlsConnect::new(client_config(&tls)?);
        Manager::from_config(config, connector, manager_config)
    } else {
        Manager::from_config(config, tokio_postgres::NoTls, manager_config)
    };
    Pool::builder(manager)
        .max_size(options.pool_size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|e| PgError::Url {
            detail: e.to_string(),
        })
}

fn client_config(tls: &Tls) -> Result<rustls::ClientConfig, PgError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // Unreadable system certificates are skipped: Mozilla's roots and `sslrootcert` remain.
    let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = &tls.root_cert {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let tls_error = |detail: String| PgError::Tls {
            detail: format!("sslrootcert={path}: {detail}"),
        };
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| tls_error(e.to_string()))? {
            let cert = cert.map_err(|e| tls_error(e.to_string()))?;
            roots.add(cert).map_err(|e| tls_error(e.to_string()))?;
        }
    }
    // The provider is named, not taken from the process default, so a process with two
    // providers compiled in (ring, aws-lc) never panics choosing.
    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| PgError::Tls {
        detail: e.to_string(),
    })
    .map(|builder| builder.with_root_certificates(roots).with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_follows_the_urls_sslmode() {
        let (url, tls) = split_tls("postgres://u:p@db:5432/antler").unwrap();
        assert_eq!(url, "postgres://u:p@db:5432/antler?sslmode=disable");
        assert!(!tls.enabled);
        for mode in ["require", "verify-ca", "verify-full"] {
            let (url, tls) = split_tls(&format!(
                "postgresql://db/antler?sslmode={mode}&sslrootcert=/ca.pem&application_name=x"
            ))
            .unwrap();
            assert_eq!(
                url,
                "postgresql://db/antler?application_name=x&sslmode=require"
            );
            assert_eq!(
                tls,
                Tls {
                    enabled: true,
                    root_cert: Some("/ca.pem".into())
                }
            );
        }
        assert!(
            !split_tls("postgres://db/a?sslmode=prefer")
                .unwrap()
                .1
                .enabled
        );
    }

    #[test]
    fn a_bad_url_is_a_clear_error() {
        for (url, says) in [
            ("mysql://db/antler", "not postgres://"),
            ("postgres://db/a?sslmode=always", "sslmode=always"),
            ("not a url", "relative URL"),
        ] {
            let err = split_tls(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(err.contains("store.postgres.url"), "{err}");
        }
    }

    #[test]
    fn the_password_never_shows() {
        let options = PgOptions {
            url: "postgres://antler:s3cret@db:5432/antler?password=s3cret".into(),
            pool_size: 8,
        };
        let shown = format!("{options:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("db:5432"), "{shown}");
    }

    #[test]
    fn a_tls_pool_is_built_with_the_ring_provider() {
        let options = PgOptions {
            url: "postgres://db.example/antler?sslmode=verify-full".into(),
            pool_size: 2,
        };
        let pool = pool(&options).unwrap();
        assert_eq!(pool.status().max_size, 2);
        let missing = PgOptions {
            url: "postgres://db/antler?sslmode=require&sslrootcert=/nonexistent/ca.pem".into(),
            pool_size: 2,
        };
        let err = pool_error(&missing);
        assert!(err.contains("sslrootcert=/nonexistent/ca.pem"), "{err}");
    }

    fn pool_error(options: &PgOptions) -> String {
        match pool(options) {
            Ok(_) => panic!("the pool must not be built"),
            Err(e) => e.to_string(),
        }
    }
}

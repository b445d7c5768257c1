//! Authorization-code tokens on disk: one JSON file per server under the token directory
//! (`<data dir>/mcp-oauth/<server>.json`, mode 0600 in a 0700 directory, written atomically),
//! so the daemon uses and refreshes what `antler mcp login` obtained, and a rotated refresh
//! token survives a restart. The contents are never logged: they are bearer credentials.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::mcp::oauth::OAuthError;

/// What is kept for one server.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct StoredTokens {
    pub access_token: Option<String>,
    pub refresh_token: Option<String>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    pub scope: Option<String>,
    pub token_endpoint: Option<String>,
    pub resource: Option<String>,
    /// The client as registered (dynamic registration) or configured.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub token_endpoint_auth_method: Option<String>,
}

impl std::fmt::Debug for StoredTokens {
    /// Redacts the credentials: a `{:?}` in a log line must not leak them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |v: &Option<String>| v.as_ref().map(|_| "[redacted]");
        f.debug_struct("StoredTokens")
            .field("access_token", &redacted(&self.access_token))
            .field("refresh_token", &redacted(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("token_endpoint", &self.token_endpoint)
            .field("resource", &self.resource)
            .field("client_id", &self.client_id)
            .field("client_secret", &redacted(&self.client_secret))
            .field(
                "token_endpoint_auth_method",
                &self.token_endpoint_auth_method,
            )
            .finish()
    }
}

/// The current time in Unix seconds (0 before 1970, which no clock here reports).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Why the tokens could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenStoreError {
    #[error("cannot {action} {path}: {source}; check the data dir's permissions")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a valid token file ({detail}); delete it and run `antler mcp login` again"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "{0:?} cannot name a token file: a server name is 1-64 characters of A-Z, a-z, 0-9, '_' or '-'"
    )]
    BadName(String),
}

/// The token directory.
#[derive(Clone, Debug)]
pub(crate) struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn path(&self, server: &str) -> PathBuf {
        self.dir.join(format!("{server}.json"))
    }

    /// The server's tokens; `Ok(None)` when it was never authorized.
    #[allow(dead_code)] // read by the token source of authorization-code servers
    pub(crate) fn load(&self, server: &str) -> Result<Option<StoredTokens>, OAuthError> {
        let path = self.checked_path(server)?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(io("read", &path, source)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| TokenStoreError::Corrupt {
                path,
                detail: e.to_string(),
            })
            .map_err(OAuthError::from)
    }

    /// Writes the server's tokens: a temporary file (0600) in the same directory, synced, then
    /// renamed over the old one, so a crash leaves either the old tokens or the new, never half.
    pub(crate) fn save(&self, server: &str, tokens: &StoredTokens) -> Result<(), OAuthError> {
        let path = self.checked_path(server)?;
        self.create_dir()?;
        let json = serde_json::to_vec_pretty(tokens).map_err(|e| TokenStoreError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let temp = self.dir.join(format!(
            ".{server}.json.{}.{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let written = write_private(&temp, &json).and_then(|()| std::fs::rename(&temp, &path));
        if let Err(source) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io("write", &path, source));
        }
        // The rename is durable once the directory entry is; a failure here loses nothing.
        if let Ok(dir) = std::fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// Forgets the server's tokens; `Ok(false)` when there were none.
    #[allow(dead_code)] // for the token source, when the server revoked them
    pub(crate) fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        let path = self.checked_path(server)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(io("remove", &path, source)),
        }
    }

    /// The file of `server`, refusing names that would leave the directory.
    fn checked_path(&self, server: &str) -> Result<PathBuf, OAuthError> {
        let valid = !server.is_empty()
            && server.len() <= 64
            && server
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(TokenStoreError::BadName(server.to_string()).into());
        }
        Ok(self.path(server))
    }

    /// The directory, private to this user (0700), made when missing.
    fn create_dir(&self) -> Result<(), OAuthError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&self.dir)
            .map_err(|source| io("create", &self.dir, source))?;
        #[cfg(unix)]
        {
            // An existing directory keeps its mode through `create`; tighten it.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|source| io("restrict", &self.dir, source))?;
        }
        Ok(())
    }
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> OAuthError {
    TokenStoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
    .into()
}

/// Creates `path` readable by this user only and writes `bytes`, synced.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tokens() -> StoredTokens {
        StoredTokens {
            access_token: Some("access-1".into()),
            refresh_token: Some("refresh-1".into()),
            expires_at: Some(1_900_000_000),
            scope: Some("mcp:read offline_access".into()),
            token_endpoint: Some("http://127.0.0.1:1/token".into()),
            resource: Some("http://127.0.0.1:2/mcp".into()),
            client_id: Some("client-1".into()),
            client_secret: None,
            token_endpoint_auth_method: Some("none".into()),
        }
    }

    #[test]
    fn saved_tokens_load_back_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("mcp-oauth"));
        assert_eq!(store.load("docs").unwrap(), None);
        store.save("docs", &tokens()).unwrap();
        assert_eq!(store.load("docs").unwrap(), Some(tokens()));
        let mut rotated = tokens();
        rotated.refresh_token = Some("refresh-2".into());
        store.save("docs", &rotated).unwrap();
        assert_eq!(store.load("docs").unwrap(), Some(rotated));
        assert!(store.remove("docs").unwrap());
        assert!(!store.remove("docs").unwrap());
        assert_eq!(store.load("docs").unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_is_0700_the_file_0600_and_no_temporary_file_remains() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token_dir = dir.path().join("mcp-oauth");
        std::fs::create_dir(&token_dir).unwrap();
        std::fs::set_permissions(&token_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = TokenStore::new(token_dir.clone());
        store.save("docs", &tokens()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&token_dir), 0o700);
        assert_eq!(mode(&store.path("docs")), 0o600);
        let names: Vec<String> = std::fs::read_dir(&token_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["docs.json".to_string()]);
    }

    #[test]
    fn names_that_would_leave_the_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().to_path_buf());
        for name in ["../x", "a/b", "", ".hidden"] {
            let error = store.save(name, &tokens()).unwrap_err().to_string();
            assert!(
                error.contains("cannot name a token file"),
                "{name}: {error}"
            );
        }
    }

    #[test]
    fn a_corrupt_file_says_to_log_in_again_and_debug_redacts_the_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().to_path_buf());
        std::fs::write(store.path("docs"), b"{not json").unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("antler mcp login"), "{error}");
        let debug = format!("{:?}", tokens());
        assert!(
            !debug.contains("access-1") && !debug.contains("refresh-1"),
            "{debug}"
        );
        assert!(debug.contains("client-1"), "{debug}");
    }
}

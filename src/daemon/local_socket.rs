//! The daemon's Unix socket in the data dir: the local operator's way in.
//!
//! The daemon serves its HTTP API on `{data_dir}/antler.sock` as well as on `gateway.listen`,
//! so `antler chat`, `agents` and `status` work next to a running daemon (which holds the
//! store's lock). The socket is mode 0600: whoever can open it can read the data dir anyway, so
//! its requests are trusted as the local operator, with no token; they act as the user named in
//! the [`USER_HEADER`](crate::http::peer::USER_HEADER) header, else as [`LOCAL_OPERATOR`].
//! Requests over TCP never get this trust: the header is ignored there.
//!
//! Several daemons sharing one store (PostgreSQL) may share one data dir too (a shared
//! volume); each then binds `{data_dir}/instances/{instance id}.sock` instead, so none takes
//! another's socket away.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use crate::lead_agent::access::LOCAL_OPERATOR;

/// The socket's file name in the data dir.
pub const SOCKET_FILE: &str = "antler.sock";

/// Where the daemons sharing a data dir (several instances on one store) keep their sockets,
/// one per instance: `{data_dir}/instances/{instance id}.sock`.
pub const INSTANCES_DIR: &str = "instances";

/// Where the daemon of `data_dir` listens locally.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SOCKET_FILE)
}

/// Where instance `instance` of a cluster sharing `data_dir` listens locally.
pub fn instance_socket_path(data_dir: &Path, instance: &str) -> PathBuf {
    data_dir
        .join(INSTANCES_DIR)
        .join(format!("{instance}.sock"))
}

/// The instance sockets in `data_dir`, for the CLI to try: on a shared volume the other hosts'
/// sockets are there too, but only a daemon on this host answers.
pub fn instance_sockets(data_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data_dir.join(INSTANCES_DIR)) else {
        return Vec::new();
    };
    let mut sockets: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_socket()))
        .map(|entry| entry.path())
        .collect();
    sockets.sort();
    sockets
}

#[derive(Debug, thiserror::Error)]
pub enum LocalSocketError {
    #[error(
        "{path} exists and is not a socket; move it away so the daemon can create its socket there"
    )]
    NotASocket { path: String },
    #[error("could not {action} {path}: {source}; check that the data directory is writable")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The socket file of a running daemon; dropping it removes the file (a clean stop leaves none
/// behind), unless another process has replaced it since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    inode: u64,
}

impl SocketFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode);
        if ours && let Err(error) = std::fs::remove_file(&self.path) {
            tracing::warn!(%error, path = %self.path.display(), "Could not remove the local socket");
        }
    }
}

/// Binds the socket of `data_dir` with mode 0600, replacing a stale one a crash left behind.
///
/// Call it only while holding the store's lock: the lock proves no other daemon serves this
/// data dir, so an existing socket file is stale. The socket is bound inside a fresh private
/// (0700) directory, made 0600 and then renamed into place, so it is never reachable with
/// looser permissions, whatever the umask.
pub fn bind(data_dir: &Path) -> Result<(tokio::net::UnixListener, SocketFile), LocalSocketError> {
    bind_at(socket_path(data_dir), std::process::id().to_string())
}

/// Binds instance `instance`'s socket in a data dir several daemons share. Call it only while
/// holding the instance's lease: no other live daemon has this name, so an existing socket of
/// that name is stale.
pub fn bind_instance(
    data_dir: &Path,
    instance: &str,
) -> Result<(tokio::net::UnixListener, SocketFile), LocalSocketError> {
    let path = instance_socket_path(data_dir, instance);
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)
            .map_err(|source| LocalSocketError::Io {
                action: "create",
                path: dir.display().to_string(),
                source,
            })?;
    }
    // Named by the instance, not the pid: two containers on one volume may share a pid.
    bind_at(path, instance.to_string())
}

fn bind_at(
    path: PathBuf,
    tag: String,
) -> Result<(tokio::net::UnixListener, SocketFile), LocalSocketError> {
    remove_stale(&path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let private = dir.join(format!(".sock-{tag}"));
    let io = |action, at: &Path| {
        let at = at.display().to_string();
        move |source| LocalSocketError::Io {
            action,
            path: at,
            source,
        }
    };
    // A leftover from a crash of a process that had our pid.
    let _ = std::fs::remove_dir_all(&private);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .map_err(io("create", &private))?;
    }
    let result = (|| {
        let staging = private.join("s");
        let listener = tokio::net::UnixListener::bind(&staging).map_err(io("bind", &staging))?;
        std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
            .map_err(io("restrict", &staging))?;
        std::fs::rename(&staging, &path).map_err(io("move into place", &path))?;
        let inode = std::fs::symlink_metadata(&path)
            .map_err(io("inspect", &path))?
            .ino();
        Ok((listener, SocketFile { path, inode }))
    })();
    let _ = std::fs::remove_dir_all(&private);
    result
}

fn remove_stale(path: &Path) -> Result<(), LocalSocketError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            tracing::info!(path = %path.display(), "Removing the stale local socket of an earlier run");
            std::fs::remove_file(path).map_err(|source| LocalSocketError::Io {
                action: "remove the stale socket",
                path: path.display().to_string(),
                source,
            })
        }
        Ok(_) => Err(LocalSocketError::NotASocket {
            path: path.display().to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(LocalSocketError::Io {
            action: "inspect",
            path: path.display().to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_owner_only_replaces_a_stale_socket_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let (first, file) = bind(dir.path()).unwrap();
        let path = socket_path(dir.path());
        assert_eq!(file.path(), path);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // A crash: the listener is gone, the file stays.
        drop(first);
        std::mem::forget(file);
        assert!(tokio::net::UnixStream::connect(&path).await.is_err());

        let (listener, file) = bind(dir.path()).unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        tokio::net::UnixStream::connect(&path).await.unwrap();
        accept.await.unwrap().unwrap();
        // Only the socket is left in the data dir: the private staging directory is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(SOCKET_FILE)]);
        drop(file);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn instances_sharing_a_data_dir_get_a_socket_each() {
        let dir = tempfile::tempdir().unwrap();
        let (_a, a) = bind_instance(dir.path(), "web-1").unwrap();
        let (_b, b) = bind_instance(dir.path(), "web-2").unwrap();
        assert_eq!(a.path(), instance_socket_path(dir.path(), "web-1"));
        assert_ne!(a.path(), b.path());
        assert_eq!(
            instance_sockets(dir.path()),
            [a.path().to_path_buf(), b.path().to_path_buf()]
        );
        let meta = std::fs::symlink_metadata(dir.path().join(INSTANCES_DIR)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert!(
            !socket_path(dir.path()).exists(),
            "the single daemon's name stays free"
        );
        drop(a);
        assert_eq!(instance_sockets(dir.path()), [b.path().to_path_buf()]);
    }

    #[test]
    fn refuses_to_replace_something_that_is_not_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(socket_path(dir.path()), "keep me").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = runtime.block_on(async { bind(dir.path()).unwrap_err() });
        assert!(matches!(err, LocalSocketError::NotASocket { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(socket_path(dir.path())).unwrap(),
            "keep me"
        );
    }
}

//! The file half of a sandbox whose directories live on this host: every provider that
//! bind-mounts the thread's dirs (host, bwrap, docker) serves file tools from here, off the
//! async runtime.

use crate::sandbox::quota::ThreadQuota;
use crate::sandbox::{GrepMatch, GrepOptions, PathMapper, SandboxError, fs};

/// File operations on the host directories behind a [`PathMapper`], writes behind the thread's
/// disk quota.
#[derive(Clone)]
pub(crate) struct HostFiles {
    mapper: PathMapper,
    quota: ThreadQuota,
}

impl HostFiles {
    pub(crate) fn new(mapper: PathMapper, quota: ThreadQuota) -> Self {
        Self { mapper, quota }
    }

    pub(crate) fn mapper(&self) -> &PathMapper {
        &self.mapper
    }

    pub(crate) fn quota(&self) -> &ThreadQuota {
        &self.quota
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&PathMapper) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        let mapper = self.mapper.clone();
        tokio::task::spawn_blocking(move || work(&mapper))
            .await
            .map_err(|e| SandboxError::Unavailable(format!("file operation panicked: {e}")))?
    }

    pub(crate) async fn read_file(
        &self,
        path: &str,
        start_line: Option<usize>,
        end_line: Option<usize>,
    ) -> Result<String, SandboxError> {
        let path = path.to_string();
        self.blocking(move |m| fs::read_text(m, &path, start_line, end_line))
            .await
    }

    pub(crate) async fn download_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let path = path.to_string();
        self.blocking(move |m| fs::read_bytes(m, &path)).await
    }

    pub(crate) async fn write_file(
        &self,
        path: &str,
        content: &str,
        append: bool,
    ) -> Result<(), SandboxError> {
        let (path, content, quota) = (path.to_string(), content.to_string(), self.quota.clone());
        self.blocking(move |m| fs::write_bytes(m, Some(&quota), &path, content.as_bytes(), append))
            .await
    }

    pub(crate) async fn update_file(&self, path: &str, content: &[u8]) -> Result<(), SandboxError> {
        let (path, content, quota) = (path.to_string(), content.to_vec(), self.quota.clone());
        self.blocking(move |m| fs::write_bytes(m, Some(&quota), &path, &content, false))
            .await
    }

    pub(crate) async fn list_dir(
        &self,
        path: &str,
        max_depth: usize,
    ) -> Result<Vec<String>, SandboxError> {
        let path = path.to_string();
        self.blocking(move |m| fs::list_dir(m, &path, max_depth))
            .await
    }

    pub(crate) async fn glob(
        &self,
        path: &str,
        pattern: &str,
        include_dirs: bool,
        max_results: usize,
    ) -> Result<(Vec<String>, bool), SandboxError> {
        let (path, pattern) = (path.to_string(), pattern.to_string());
        self.blocking(move |m| fs::glob(m, &path, &pattern, include_dirs, max_results))
            .await
    }

    pub(crate) async fn grep(
        &self,
        path: &str,
        pattern: &str,
        options: &GrepOptions,
    ) -> Result<(Vec<GrepMatch>, bool), SandboxError> {
        let (path, pattern, options) = (path.to_string(), pattern.to_string(), options.clone());
        self.blocking(move |m| fs::grep(m, &path, &pattern, &options))
            .await
    }
}

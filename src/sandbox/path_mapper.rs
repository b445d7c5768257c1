//! Virtual ↔ host path mapping: longest prefix at segment boundaries, both ways.
//!
//! Arguments and commands are mapped to host paths; everything shown to the model is mapped
//! back. Resolution rejects `..` segments, `file://` URLs, paths outside the virtual roots and
//! symlinks that lead out of every mount.

use std::path::{Component, Path, PathBuf};

use crate::config::SandboxMountConfig;
use crate::paths::{
    ThreadPaths, VIRTUAL_OUTPUTS, VIRTUAL_ROOT, VIRTUAL_UPLOADS, VIRTUAL_WORKSPACE,
};
use crate::sandbox::SandboxError;

/// Where skills appear (read-only).
pub const VIRTUAL_SKILLS: &str = "/mnt/skills";

/// Absolute prefixes a host-shell command may name besides the virtual roots: program
/// directories and devices only, so `cat /etc/shadow` or `ls /home` is refused.
const SYSTEM_PREFIXES: &[&str] = &[
    "/bin/",
    "/sbin/",
    "/usr/bin/",
    "/usr/sbin/",
    "/usr/local/bin/",
    "/dev/",
];

/// One virtual directory and the host directory behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountPoint {
    pub virtual_path: String,
    pub host_path: PathBuf,
    pub read_only: bool,
}

/// A virtual path resolved to its host location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Normalised virtual path (no `.`, no trailing `/`).
    pub virtual_path: String,
    pub host_path: PathBuf,
    pub read_only: bool,
}

/// The mount table of one thread's sandbox.
#[derive(Clone, Debug)]
pub struct PathMapper {
    /// Longest virtual path first.
    mounts: Vec<MountPoint>,
    /// (host text, virtual text) pairs for output rewriting, longest host text first; includes
    /// canonical forms so `/tmp` → `/private/tmp`-style aliases are caught too.
    reverse: Vec<(String, String)>,
    /// Canonical host roots taken when the mapper was built, so a mount root later swapped for
    /// a symlink cannot widen what counts as inside.
    canonical_roots: Vec<(PathBuf, bool)>,
}

impl PathMapper {
    /// The standard table: the thread's dirs, `/mnt/skills` (when present) and extra mounts.
    pub fn for_thread(
        paths: &ThreadPaths,
        skills_dir: Option<&Path>,
        extra: &[SandboxMountConfig],
    ) -> Self {
        let mut mounts = vec![
            mount(VIRTUAL_ROOT, paths.user_data(), false),
            mount(VIRTUAL_WORKSPACE, &paths.workspace(), false),
            mount(VIRTUAL_UPLOADS, &paths.uploads(), false),
            mount(VIRTUAL_OUTPUTS, &paths.outputs(), false),
        ];
        if let Some(skills) = skills_dir.filter(|dir| dir.is_dir()) {
            mounts.push(mount(VIRTUAL_SKILLS, skills, true));
        }
        for extra_mount in extra {
            let virtual_path = normalise_virtual(&extra_mount.container_path);
            mounts.push(mount(
                &virtual_path,
                &extra_mount.host_path,
                extra_mount.read_only,
            ));
        }
        Self::new(mounts)
    }

    /// The standard table with `skills` (mounts under `/mnt/skills`) instead of one mount of
    /// the whole skills directory.
    pub fn with_skills(
        paths: &ThreadPaths,
        skills: Vec<MountPoint>,
        extra: &[SandboxMountConfig],
    ) -> Self {
        let mut mapper = Self::for_thread(paths, None, extra);
        let mut mounts = std::mem::take(&mut mapper.mounts);
        mounts.extend(skills);
        Self::new(mounts)
    }

    pub fn new(mut mounts: Vec<MountPoint>) -> Self {
        for m in &mut mounts {
            m.host_path = std::path::absolute(&m.host_path).unwrap_or_else(|_| m.host_path.clone());
        }
        mounts.sort_by_key(|m| std::cmp::Reverse(m.virtual_path.len()));
        let mut reverse = Vec::new();
        for m in &mounts {
            let host = m.host_path.to_string_lossy().into_owned();
            reverse.push((host, m.virtual_path.clone()));
            if let Ok(canonical) = m.host_path.canonicalize() {
                let canonical = canonical.to_string_lossy().into_owned();
                if !reverse.iter().any(|(h, _)| *h == canonical) {
                    reverse.push((canonical, m.virtual_path.clone()));
                }
            }
        }
        reverse.sort_by_key(|(host, _)| std::cmp::Reverse(host.len()));
        let canonical_roots = mounts
            .iter()
            .map(|m| {
                let root = m
                    .host_path
                    .canonicalize()
                    .unwrap_or_else(|_| m.host_path.clone());
                (root, m.read_only)
            })
            .collect();
        Self {
            mounts,
            reverse,
            canonical_roots,
        }
    }

    pub fn mounts(&self) -> &[MountPoint] {
        &self.mounts
    }

    /// Maps a virtual path (relative paths are taken from the workspace) to its host location,
    /// refusing anything that could leave the mounts.
    pub fn resolve(&self, path: &str) -> Result<ResolvedPath, SandboxError> {
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return Err(SandboxError::PathRejected(
                "empty path; give an absolute path under /mnt/user-data".into(),
            ));
        }
        if trimmed.to_ascii_lowercase().starts_with("file:") {
            return Err(SandboxError::PathRejected(format!(
                "file:// URLs are not allowed ({trimmed}); give a plain path under /mnt/user-data"
            )));
        }
        if trimmed.split('/').any(|segment| segment == "..") {
            return Err(SandboxError::PathRejected(format!(
                "path {trimmed} contains '..'; give an absolute path under /mnt/user-data"
            )));
        }
        let absolute = if trimmed.starts_with('/') {
            trimmed.to_string()
        } else {
            format!("{VIRTUAL_WORKSPACE}/{trimmed}")
        };
        let virtual_path = normalise_virtual(&absolute);
        let Some(m) = self.mount_for(&virtual_path) else {
            return Err(SandboxError::PathRejected(format!(
                "path {virtual_path} is outside the sandbox; use a path under {}",
                self.roots_hint()
            )));
        };
        let rest = virtual_path[m.virtual_path.len()..].trim_start_matches('/');
        let host_path = if rest.is_empty() {
            m.host_path.clone()
        } else {
            m.host_path.join(rest)
        };
        let read_only =
            self.check_containment(&host_path, &m.host_path, &virtual_path, m.read_only)?;
        Ok(ResolvedPath {
            virtual_path,
            host_path,
            read_only,
        })
    }

    /// The virtual path of a host path inside a mount, if any.
    pub fn to_virtual(&self, host: &Path) -> Option<String> {
        let host = host.to_string_lossy();
        self.reverse
            .iter()
            .find_map(|(host_prefix, virtual_prefix)| {
                let rest = host.strip_prefix(host_prefix.as_str())?;
                if rest.is_empty() {
                    Some(virtual_prefix.clone())
                } else if rest.starts_with('/') {
                    Some(format!("{virtual_prefix}{rest}"))
                } else {
                    None
                }
            })
    }

    /// Rewrites every host mount path in `text` to its virtual form.
    pub fn unmap_text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (host, virtual_path) in &self.reverse {
            if host.len() > 1 && text.contains(host.as_str()) {
                text = replace_at_boundaries(&text, host, virtual_path, |_| true);
            }
        }
        text
    }

    /// For host execution: rejects `file://`, `..` and absolute paths outside the virtual roots
    /// and system prefixes, then rewrites virtual paths to host paths (best effort).
    pub fn map_command(&self, command: &str) -> Result<String, SandboxError> {
        if command.to_ascii_lowercase().contains("file://") {
            return Err(SandboxError::PathRejected(
                "file:// URLs are not allowed in commands; use plain paths under /mnt/user-data"
                    .into(),
            ));
        }
        for token in command.split(|c: char| c.is_whitespace() || "'\"`;|&<>()=:,".contains(c)) {
            if token.contains('/') && token.split('/').any(|segment| segment == "..") {
                return Err(SandboxError::PathRejected(format!(
                    "'..' is not allowed in paths ({token}); use absolute paths under /mnt/user-data"
                )));
            }
            if token.starts_with('/') && !self.is_allowed_absolute(token) {
                return Err(SandboxError::PathRejected(format!(
                    "path {token} is outside the sandbox; use a path under {}",
                    self.roots_hint()
                )));
            }
        }
        let mut mapped = command.to_string();
        for m in &self.mounts {
            let host = m.host_path.to_string_lossy();
            mapped = replace_at_boundaries(&mapped, &m.virtual_path, &host, |before| {
                before.is_none_or(|c| !is_path_char(c))
            });
        }
        Ok(mapped)
    }

    fn is_allowed_absolute(&self, token: &str) -> bool {
        let normalised = normalise_virtual(token);
        self.mount_for(&normalised).is_some()
            || token == "/"
            || SYSTEM_PREFIXES
                .iter()
                .any(|p| token.starts_with(p) || token == p.trim_end_matches('/'))
    }

    fn mount_for(&self, virtual_path: &str) -> Option<&MountPoint> {
        self.mounts
            .iter()
            .find(|m| is_under(virtual_path, &m.virtual_path))
    }

    fn roots_hint(&self) -> String {
        let mut roots: Vec<&str> = self
            .mounts
            .iter()
            .map(|m| m.virtual_path.as_str())
            .filter(|v| *v != VIRTUAL_ROOT)
            .collect();
        roots.sort_unstable();
        roots.join(", ")
    }

    /// Canonicalises the deepest existing ancestor below the mount root and checks it stays
    /// inside some mount; returns whether the mount that really holds it is read-only.
    fn check_containment(
        &self,
        host_path: &Path,
        mount_root: &Path,
        virtual_path: &str,
        default_read_only: bool,
    ) -> Result<bool, SandboxError> {
        let mut existing = host_path.to_path_buf();
        let canonical = loop {
            if !existing.starts_with(mount_root) {
                // Not even the mount root exists yet: there is no link to follow.
                return Ok(default_read_only);
            }
            match existing.canonicalize() {
                Ok(canonical) => break canonical,
                Err(_) => {
                    if !existing.pop() {
                        return Ok(default_read_only);
                    }
                }
            }
        };
        let holder = self
            .canonical_roots
            .iter()
            .filter(|(root, _)| canonical.starts_with(root))
            .map(|(root, read_only)| (root.as_os_str().len(), *read_only))
            .max_by_key(|(len, _)| *len);
        match holder {
            Some((_, read_only)) => Ok(read_only || default_read_only),
            None => Err(SandboxError::PathRejected(format!(
                "path {virtual_path} leads outside the sandbox through a symbolic link; use a path under {}",
                self.roots_hint()
            ))),
        }
    }
}

fn mount(virtual_path: &str, host: &Path, read_only: bool) -> MountPoint {
    MountPoint {
        virtual_path: virtual_path.to_string(),
        host_path: host.to_path_buf(),
        read_only,
    }
}

/// `/a//b/./c/` → `/a/b/c`.
fn normalise_virtual(path: &str) -> String {
    let mut out = String::new();
    for component in Path::new(path).components() {
        if let Component::Normal(segment) = component {
            out.push('/');
            out.push_str(&segment.to_string_lossy());
        }
    }
    if out.is_empty() { "/".to_string() } else { out }
}

fn is_under(path: &str, root: &str) -> bool {
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || "_-./~".contains(c)
}

/// Replaces `from` with `to` where the match ends at a segment boundary (end, `/` or a
/// character that cannot continue a file name) and `start_ok` accepts the preceding character.
fn replace_at_boundaries(
    text: &str,
    from: &str,
    to: &str,
    start_ok: impl Fn(Option<char>) -> bool,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(pos) = rest.find(from) {
        let prev = rest[..pos].chars().next_back().or(before);
        let after = rest[pos + from.len()..].chars().next();
        let ends_ok = after.is_none_or(|c| c == '/' || !is_path_char(c) || c == '.');
        out.push_str(&rest[..pos]);
        if ends_ok && start_ok(prev) {
            out.push_str(to);
        } else {
            out.push_str(from);
        }
        before = from.chars().next_back();
        rest = &rest[pos + from.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapper() -> PathMapper {
        PathMapper::new(vec![
            mount("/mnt/user-data", Path::new("/data/u/t/user-data"), false),
            mount(
                "/mnt/user-data/workspace",
                Path::new("/data/u/t/user-data/workspace"),
                false,
            ),
            mount(
                "/mnt/user-data/outputs",
                Path::new("/data/u/t/user-data/outputs"),
                false,
            ),
            mount("/mnt/skills", Path::new("/srv/skills/public"), true),
            mount("/mnt/ref", Path::new("/srv/reference"), true),
        ])
    }

    #[test]
    fn resolves_virtual_paths_to_host_paths() {
        let m = mapper();
        let cases = [
            (
                "/mnt/user-data/workspace/a.txt",
                "/data/u/t/user-data/workspace/a.txt",
                false,
            ),
            (
                "/mnt/user-data/workspace",
                "/data/u/t/user-data/workspace",
                false,
            ),
            (
                "/mnt/user-data/outputs//x/./y.md",
                "/data/u/t/user-data/outputs/x/y.md",
                false,
            ),
            (
                "/mnt/user-data/uploads/f",
                "/data/u/t/user-data/uploads/f",
                false,
            ),
            (
                "/mnt/skills/pdf/SKILL.md",
                "/srv/skills/public/pdf/SKILL.md",
                true,
            ),
            ("/mnt/ref", "/srv/reference", true),
            (
                "notes/a.md",
                "/data/u/t/user-data/workspace/notes/a.md",
                false,
            ),
        ];
        for (virtual_path, host, read_only) in cases {
            let resolved = m.resolve(virtual_path).unwrap();
            assert_eq!(resolved.host_path, PathBuf::from(host), "{virtual_path}");
            assert_eq!(resolved.read_only, read_only, "{virtual_path}");
        }
    }

    #[test]
    fn rejects_paths_that_could_escape() {
        let m = mapper();
        let cases = [
            ("/mnt/user-data/workspace/../../etc/passwd", "contains '..'"),
            ("../x", "contains '..'"),
            ("file:///etc/passwd", "file:// URLs are not allowed"),
            ("/etc/passwd", "outside the sandbox"),
            ("/mnt/user-database/x", "outside the sandbox"),
            ("/mnt/skillsX", "outside the sandbox"),
            ("", "empty path"),
        ];
        for (path, expected) in cases {
            let err = m.resolve(path).unwrap_err().to_string();
            assert!(err.contains(expected), "{path}: {err}");
            assert!(!err.contains("/data/"), "{path} leaked a host path: {err}");
        }
    }

    #[test]
    fn maps_host_paths_back_to_virtual_ones() {
        let m = mapper();
        let cases = [
            (
                "/data/u/t/user-data/workspace/a.txt",
                Some("/mnt/user-data/workspace/a.txt"),
            ),
            (
                "/data/u/t/user-data/outputs",
                Some("/mnt/user-data/outputs"),
            ),
            (
                "/data/u/t/user-data/uploads/x",
                Some("/mnt/user-data/uploads/x"),
            ),
            ("/srv/skills/public/a", Some("/mnt/skills/a")),
            ("/data/u/t/user-data-old/x", None),
            ("/etc/passwd", None),
        ];
        for (host, expected) in cases {
            assert_eq!(m.to_virtual(Path::new(host)).as_deref(), expected, "{host}");
        }
        let text = "error: /data/u/t/user-data/workspace/a.txt: not found; see /srv/reference\n\
                    keep /data/u/t/user-data/workspace2 and /srv/skills/publicity";
        assert_eq!(
            m.unmap_text(text),
            "error: /mnt/user-data/workspace/a.txt: not found; see /mnt/ref\n\
             keep /mnt/user-data/workspace2 and /srv/skills/publicity"
        );
    }

    #[test]
    fn maps_commands_and_rejects_outside_paths() {
        let m = mapper();
        assert_eq!(
            m.map_command("cat /mnt/user-data/workspace/a.txt > /mnt/user-data/outputs/b")
                .unwrap(),
            "cat /data/u/t/user-data/workspace/a.txt > /data/u/t/user-data/outputs/b"
        );
        assert_eq!(
            m.map_command("ls /usr/bin /dev/null").unwrap(),
            "ls /usr/bin /dev/null"
        );
        for bad in [
            "cat /root/.ssh/id_rsa",
            "cat /etc/shadow",
            "ls /home",
            "cat /mnt/user-data/workspace/../../x",
            "curl file:///etc/passwd",
            "cd ../..",
        ] {
            assert!(m.map_command(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symlinks_out_of_the_mounts_are_rejected() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = ThreadPaths::new(tmp.path(), "u", "t").unwrap();
        paths.ensure_dirs().unwrap();
        let secret_dir = tmp.path().join("secret");
        std::fs::create_dir_all(&secret_dir).unwrap();
        std::fs::write(secret_dir.join("key"), "k").unwrap();
        std::os::unix::fs::symlink(&secret_dir, paths.workspace().join("link")).unwrap();
        std::os::unix::fs::symlink(paths.outputs(), paths.workspace().join("out")).unwrap();
        let m = PathMapper::for_thread(&paths, None, &[]);
        let err = m.resolve("/mnt/user-data/workspace/link/key").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(m.resolve("/mnt/user-data/workspace/link/new.txt").is_err());
        assert!(m.resolve("/mnt/user-data/workspace/out/x.txt").is_ok());
    }
}

//! The public skills shipped inside the binary, installed into `{data_dir}/skills/public`.
//!
//! Without them a daemon started outside a checkout had no skills at all (the bootstrap
//! conversation ran without its interview guide). At start the shipped version of each skill is
//! written where it is missing, and replaces an earlier shipped version the operator left as it
//! was. A manifest (`.shipped.json`) records the content hash of what was installed, so an
//! edited copy is recognised and kept (with a warning), and skills the operator added beside
//! them are never touched. Custom skills live elsewhere (`users/{user}/skills/custom`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::AppConfig;
use crate::skills::scan::skills_dir;

/// Every shipped file: path relative to `skills/public`, content, whether it is executable.
static FILES: &[(&str, &[u8], bool)] = include!(concat!(env!("OUT_DIR"), "/bundled_skills.rs"));

/// The manifest of installed versions, a hidden file the skills scan skips.
const MANIFEST: &str = ".shipped.json";

/// Where the shipped skills are installed in `data_dir`.
pub fn install_dir(data_dir: &Path) -> PathBuf {
    crate::config::shipped_skills_dir(data_dir)
}

/// The names of the shipped skills, sorted.
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<&str> = FILES.iter().map(|(path, _, _)| skill_of(path)).collect();
    names.dedup();
    names
}

/// What [`install`] did, by skill name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct InstallReport {
    pub installed: Vec<String>,
    pub updated: Vec<String>,
    /// Shipped skills whose installed copy was edited: kept as the operator left it.
    pub kept_edited: Vec<String>,
    /// Skills an earlier version shipped and this one does not, removed (unedited ones only).
    pub removed: Vec<String>,
}

/// Installs the shipped skills when `config`'s skills directory is the data dir's copy (an
/// operator's `sandbox.skills_path`, or `skills/public` beside the config file, wins and is
/// left alone). Problems are logged: the daemon runs on without skills rather than not at all.
pub fn install_for(config: &AppConfig) {
    let dir = install_dir(&config.data_dir());
    if skills_dir(config) != dir {
        return;
    }
    match install(&dir) {
        Ok(report) => log_report(&dir, &report),
        Err(error) => tracing::warn!(
            %error,
            dir = %dir.display(),
            "Could not install the shipped skills; check that the data directory is writable"
        ),
    }
}

/// Installs or refreshes the shipped skills in `dir` (see the module's doc).
pub fn install(dir: &Path) -> std::io::Result<InstallReport> {
    std::fs::create_dir_all(dir)?;
    let mut manifest = read_manifest(dir);
    let mut report = InstallReport::default();
    let shipped = shipped_hashes();
    for (name, hash) in &shipped {
        let target = dir.join(name);
        if !target.exists() {
            write_skill(dir, name)?;
            report.installed.push(name.to_string());
        } else {
            let current = hash_dir(&target)?;
            if &current == hash {
                // Already this version (an install by hand, or a manifest lost).
            } else if manifest.get(*name) == Some(&current) {
                write_skill(dir, name)?;
                report.updated.push(name.to_string());
            } else {
                report.kept_edited.push(name.to_string());
                continue;
            }
        }
        manifest.insert(name.to_string(), hash.clone());
    }
    let retired: Vec<String> = manifest
        .keys()
        .filter(|name| !shipped.contains_key(name.as_str()))
        .cloned()
        .collect();
    for name in retired {
        let target = dir.join(&name);
        let recorded = manifest.remove(&name);
        if target.is_dir() && hash_dir(&target).ok() == recorded {
            std::fs::remove_dir_all(&target)?;
            report.removed.push(name);
        }
    }
    write_manifest(dir, &manifest)?;
    Ok(report)
}

fn log_report(dir: &Path, report: &InstallReport) {
    let dir = dir.display();
    if !report.installed.is_empty() {
        tracing::info!(%dir, skills = ?report.installed, "Installed the public skills shipped with antler");
    }
    if !report.updated.is_empty() {
        tracing::info!(%dir, skills = ?report.updated, "Updated the shipped public skills to this version");
    }
    if !report.removed.is_empty() {
        tracing::info!(%dir, skills = ?report.removed, "Removed public skills this version no longer ships");
    }
    for name in &report.kept_edited {
        tracing::warn!(
            %dir,
            skill = %name,
            "This shipped skill was edited here, so this version's copy was not installed; \
             delete its directory to get the shipped one at the next start"
        );
    }
}

fn skill_of(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

fn files_of(name: &str) -> impl Iterator<Item = (&'static str, &'static [u8], bool)> + '_ {
    FILES
        .iter()
        .copied()
        .filter_map(move |(path, bytes, executable)| {
            let rest = path.strip_prefix(name)?.strip_prefix('/')?;
            Some((rest, bytes, executable))
        })
}

/// Each shipped skill's content hash, as [`hash_dir`] computes it on an installed copy.
fn shipped_hashes() -> BTreeMap<&'static str, String> {
    names()
        .into_iter()
        .map(|name| {
            let files: Vec<(String, &[u8])> = files_of(name)
                .map(|(path, bytes, _)| (path.to_string(), bytes))
                .collect();
            (name, hash_files(&files))
        })
        .collect()
}

/// Writes the shipped copy of `name` beside its place, then swaps it in.
fn write_skill(dir: &Path, name: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let staging = dir.join(format!(".{name}.new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    for (path, bytes, executable) in files_of(name) {
        let file = staging.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, bytes)?;
        let mode = if executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
    }
    let target = dir.join(name);
    let old = dir.join(format!(".{name}.old-{}", std::process::id()));
    if target.exists() {
        std::fs::rename(&target, &old)?;
    }
    std::fs::rename(&staging, &target)?;
    if old.exists() {
        std::fs::remove_dir_all(&old)?;
    }
    Ok(())
}

/// SHA-256 over every regular file under `dir`: relative path, length and bytes, by path.
fn hash_dir(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry.map_err(std::io::Error::other)?;
        if entry.file_type().is_file() {
            let relative = entry.path().strip_prefix(dir).unwrap_or(entry.path());
            let bytes = std::fs::read(entry.path())?;
            files.push((relative.to_string_lossy().into_owned(), bytes));
        }
    }
    let files: Vec<(String, &[u8])> = files.iter().map(|(p, b)| (p.clone(), &b[..])).collect();
    Ok(hash_files(&files))
}

fn hash_files(files: &[(String, &[u8])]) -> String {
    let mut sorted: Vec<&(String, &[u8])> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hasher = Sha256::new();
    for (path, bytes) in sorted {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex::encode(hasher.finalize())
}

fn read_manifest(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read(dir.join(MANIFEST))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn write_manifest(dir: &Path, manifest: &BTreeMap<String, String>) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
    let staging = dir.join(format!("{MANIFEST}.{}", std::process::id()));
    std::fs::write(&staging, text)?;
    std::fs::rename(&staging, dir.join(MANIFEST))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUIDE: &str = "bootstrap/references/conversation-guide.md";

    #[test]
    fn the_binary_carries_the_repository_skills() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/public");
        assert!(names().contains(&crate::skills::BOOTSTRAP_SKILL));
        for (path, bytes, _) in FILES {
            assert_eq!(std::fs::read(repo.join(path)).unwrap(), *bytes, "{path}");
        }
        assert!(FILES.iter().any(|(path, _, _)| *path == GUIDE));
    }

    #[test]
    fn installs_updates_unedited_copies_and_keeps_edited_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = install_dir(tmp.path());
        let first = install(&dir).unwrap();
        assert_eq!(first.installed, names());
        assert!(dir.join(GUIDE).is_file());
        assert!(
            crate::skills::load_dir(&dir)
                .iter()
                .any(|s| s.meta.name == "bootstrap")
        );
        // Nothing to do the second time.
        assert_eq!(install(&dir).unwrap(), InstallReport::default());

        // An earlier shipped version, left as installed: the manifest says so, it is updated.
        let skill_md = dir.join("research-report/SKILL.md");
        std::fs::write(&skill_md, "old shipped text").unwrap();
        let mut manifest = read_manifest(&dir);
        manifest.insert(
            "research-report".into(),
            hash_dir(&dir.join("research-report")).unwrap(),
        );
        write_manifest(&dir, &manifest).unwrap();
        // An operator's edit: kept.
        let edited = dir.join("data-analysis/SKILL.md");
        std::fs::write(&edited, "my own version").unwrap();
        // An operator's own skill beside them, and a skill a former version shipped.
        std::fs::create_dir_all(dir.join("mine")).unwrap();
        std::fs::write(dir.join("mine/SKILL.md"), "mine").unwrap();
        std::fs::create_dir_all(dir.join("retired")).unwrap();
        std::fs::write(dir.join("retired/SKILL.md"), "gone").unwrap();
        let mut manifest = read_manifest(&dir);
        manifest.insert("retired".into(), hash_dir(&dir.join("retired")).unwrap());
        write_manifest(&dir, &manifest).unwrap();

        let report = install(&dir).unwrap();
        assert_eq!(report.updated, ["research-report"]);
        assert_eq!(report.kept_edited, ["data-analysis"]);
        assert_eq!(report.removed, ["retired"]);
        assert_ne!(
            std::fs::read_to_string(&skill_md).unwrap(),
            "old shipped text"
        );
        assert_eq!(std::fs::read_to_string(&edited).unwrap(), "my own version");
        assert_eq!(
            std::fs::read_to_string(dir.join("mine/SKILL.md")).unwrap(),
            "mine"
        );
        assert!(!dir.join("retired").exists());
        // No staging directories are left behind.
        let hidden: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert_eq!(hidden, [MANIFEST]);
    }

    #[test]
    fn only_the_data_dir_copy_is_installed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut config = AppConfig {
            data_dir: Some(tmp.path().to_path_buf()),
            ..AppConfig::default()
        };
        config.sandbox.skills_path = Some(tmp.path().join("elsewhere"));
        install_for(&config);
        assert!(!install_dir(tmp.path()).exists());
        config.sandbox.skills_path = None;
        install_for(&config);
        assert!(install_dir(tmp.path()).join(GUIDE).is_file());
    }
}

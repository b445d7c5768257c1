//! Skill discovery: finds `*/SKILL.md` under a skills directory and validates their front
//! matter; an invalid skill is skipped with a warning naming the problem.
//!
//! Results are cached per directory and reused while neither the directory nor any listed
//! SKILL.md has a newer mtime: the lead agent is built on every run and must not rescan the
//! disk each time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::config::AppConfig;
use crate::skills::SKILL_FILE;
use crate::skills::front_matter::{SkillMeta, parse_skill_md};

/// A valid skill found on disk.
#[derive(Clone, Debug, PartialEq)]
pub struct ScannedSkill {
    /// The directory's name: where the skill appears under `/mnt/skills`.
    pub dir_name: String,
    /// The skill's directory on the host (never shown to the model).
    pub host_dir: PathBuf,
    pub meta: SkillMeta,
}

/// The skills directory of a configuration: `sandbox.skills_path` (the config loader fills it),
/// else the data dir's copy of the shipped skills.
pub fn skills_dir(config: &AppConfig) -> PathBuf {
    config
        .sandbox
        .skills_path
        .clone()
        .unwrap_or_else(|| crate::config::shipped_skills_dir(&config.data_dir()))
}

/// Scans `dir` for `*/SKILL.md`, sorted by name; a missing directory yields no skills and an
/// invalid skill is skipped with a warning.
pub fn load_dir(dir: &Path) -> Vec<ScannedSkill> {
    scan(dir).0
}

/// Caches the scan of each skills directory until something in it changes.
#[derive(Default)]
pub struct SkillsLoader {
    cache: Mutex<HashMap<PathBuf, CachedScan>>,
}

struct CachedScan {
    dir_mtime: Option<SystemTime>,
    /// Every SKILL.md the scan read, with its mtime then; an edit to one invalidates the scan.
    files: Vec<(PathBuf, Option<SystemTime>)>,
    skills: Arc<Vec<ScannedSkill>>,
}

impl SkillsLoader {
    pub fn new() -> Self {
        Self::default()
    }

    /// The skills of `dir`, from the cache while it is fresh.
    pub fn load(&self, dir: &Path) -> Arc<Vec<ScannedSkill>> {
        let dir_mtime = mtime(dir);
        {
            let cache = self.lock();
            if let Some(cached) = cache.get(dir)
                && cached.dir_mtime == dir_mtime
                && cached.files.iter().all(|(path, seen)| mtime(path) == *seen)
            {
                return cached.skills.clone();
            }
        }
        // Scan without holding the lock: a concurrent scan of the same dir only costs time.
        let (skills, files) = scan(dir);
        let skills = Arc::new(skills);
        self.lock().insert(
            dir.to_path_buf(),
            CachedScan {
                dir_mtime,
                files,
                skills: skills.clone(),
            },
        );
        skills
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, CachedScan>> {
        // The map only ever holds complete entries, so a poisoned lock is safe to reuse.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

type SeenFiles = Vec<(PathBuf, Option<SystemTime>)>;

fn scan(dir: &Path) -> (Vec<ScannedSkill>, SeenFiles) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "Cannot read the skills directory; running without skills");
            return (Vec::new(), Vec::new());
        }
    };
    let mut skills = Vec::new();
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        // Hidden directories are editor or VCS leftovers, never skills.
        if dir_name.starts_with('.') {
            continue;
        }
        let path = entry.path().join(SKILL_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        files.push((path.clone(), mtime(&path)));
        match parse_skill_md(&text) {
            Ok((meta, _)) => skills.push(ScannedSkill {
                dir_name,
                host_dir: entry.path(),
                meta,
            }),
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "Skipping an invalid skill; fix its SKILL.md front matter")
            }
        }
    }
    skills.sort_by(|a, b| {
        a.meta
            .name
            .cmp(&b.meta.name)
            .then_with(|| a.dir_name.cmp(&b.dir_name))
    });
    (skills, files)
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join(SKILL_FILE), text).unwrap();
    }

    #[test]
    fn skills_are_read_from_front_matter_and_sorted_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            tmp.path(),
            "z-dir",
            "---\nname: alpha\ndescription: \"Does: alpha\"\nlicense: MIT\n---\n# Alpha\n",
        );
        write_skill(tmp.path(), "beta", "---\nname: beta\ndescription: b\n---\n");
        write_skill(tmp.path(), "no-header", "# no front matter\n");
        write_skill(
            tmp.path(),
            "bad-key",
            "---\nname: x\ndescription: y\nfoo: 1\n---\n",
        );
        write_skill(tmp.path(), "broken", "---\nname: [unclosed\n---\n");
        write_skill(tmp.path(), ".hidden", "---\nname: hidden\n---\n");
        std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
        let skills = load_dir(tmp.path());
        let names: Vec<_> = skills.iter().map(|s| s.meta.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert_eq!(skills[0].meta.description, "Does: alpha");
        assert_eq!(skills[0].dir_name, "z-dir");
        assert_eq!(skills[1].meta.description, "b");
    }

    #[test]
    fn a_missing_directory_has_no_skills() {
        assert!(load_dir(Path::new("/nonexistent/antler-skills")).is_empty());
        assert!(
            SkillsLoader::new()
                .load(Path::new("/nonexistent/x"))
                .is_empty()
        );
    }

    #[test]
    fn the_cache_is_reused_until_a_skill_changes() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            tmp.path(),
            "one",
            "---\nname: one\ndescription: first\n---\n",
        );
        let loader = SkillsLoader::new();
        let first = loader.load(tmp.path());
        assert!(Arc::ptr_eq(&first, &loader.load(tmp.path())));
        // Rewrite with a distinct mtime: some filesystems keep a coarse clock.
        let path = tmp.path().join("one").join(SKILL_FILE);
        std::fs::write(&path, "---\nname: one\ndescription: second\n---\n").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let second = loader.load(tmp.path());
        assert_eq!(second[0].meta.description, "second");
    }

    #[test]
    fn the_shipped_bootstrap_skill_is_found() {
        let skills = load_dir(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("skills/public")
                .as_path(),
        );
        let bootstrap = skills
            .iter()
            .find(|s| s.meta.name == crate::skills::BOOTSTRAP_SKILL)
            .unwrap();
        assert_eq!(bootstrap.dir_name, "bootstrap");
        assert!(!bootstrap.meta.description.is_empty());
    }
}

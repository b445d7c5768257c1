//! The skills one user can see: the shipped public skills and the user's own custom skills,
//! each with its enable state and (for installed ones) the archive hash. Every surface (prompt,
//! `/skill` activation, the sandbox's `/mnt/skills`, HTTP, CLI, chat) asks this one place.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::config::AppConfig;
use crate::paths::validate_id;
use crate::sandbox::{MountPoint, SkillMounts, VIRTUAL_SKILLS};
use crate::skills::installer::{self, Unpacked};
use crate::skills::scan::{ScannedSkill, SkillsLoader, skills_dir};
use crate::skills::state::{RecordKey, Scope, SkillStates};
use crate::skills::{SKILL_FILE, SkillError, is_reserved_name};
use antler_store::StoreRef;

/// Where a skill comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillSource {
    /// Shipped in the skills directory; read-only, enabled for everyone by admins.
    Public,
    /// Installed by one user, visible to that user only.
    Custom,
}

/// A skill as the user sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub source: SkillSource,
    pub enabled: bool,
    /// Hex SHA-256 of the archive an installed skill came from.
    pub sha256: Option<String>,
    /// Where the model reads it: `/mnt/skills/{dir}/SKILL.md`.
    pub location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// The skill's host directory: never serialized, never shown to the model.
    #[serde(skip)]
    pub host_dir: PathBuf,
    #[serde(skip)]
    pub(crate) dir_name: String,
}

impl Skill {
    /// The whole SKILL.md, as injected on explicit activation.
    pub fn read_skill_md(&self) -> Result<String, SkillError> {
        std::fs::read_to_string(self.host_dir.join(SKILL_FILE)).map_err(|e| SkillError::Io {
            detail: format!("cannot read the SKILL.md of '{}': {e}", self.name),
        })
    }
}

/// The skills of a configuration and a store. Cheap to build: the scans are cached in the
/// shared [`SkillsLoader`].
#[derive(Clone)]
pub struct SkillCatalog {
    public_dir: PathBuf,
    data_dir: PathBuf,
    states: SkillStates,
    loader: Arc<SkillsLoader>,
}

impl std::fmt::Debug for SkillCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillCatalog")
            .field("public_dir", &self.public_dir)
            .finish_non_exhaustive()
    }
}

impl SkillCatalog {
    pub fn new(
        public_dir: PathBuf,
        data_dir: PathBuf,
        store: StoreRef,
        loader: Arc<SkillsLoader>,
    ) -> Self {
        Self {
            public_dir,
            data_dir,
            states: SkillStates::new(store),
            loader,
        }
    }

    /// The catalog of `config`: its skills directory and data dir.
    pub fn from_config(config: &AppConfig, store: StoreRef, loader: Arc<SkillsLoader>) -> Self {
        Self::new(skills_dir(config), config.data_dir(), store, loader)
    }

    /// Where the public skills are read from.
    pub fn public_dir(&self) -> &Path {
        &self.public_dir
    }

    /// `{data_dir}/users/{user}/skills/custom`.
    pub fn custom_dir(&self, user: &str) -> Result<PathBuf, SkillError> {
        Ok(self.user_skills_dir(user)?.join("custom"))
    }

    fn user_skills_dir(&self, user: &str) -> Result<PathBuf, SkillError> {
        validate_id("user", user).map_err(|e| SkillError::InvalidUser(e.to_string()))?;
        Ok(self.data_dir.join("users").join(user).join("skills"))
    }

    /// Every skill `user` can see, enabled or not, sorted by name. A custom skill that shares a
    /// public skill's name is hidden behind the public one.
    pub fn list(&self, user: &str) -> Result<Vec<Skill>, SkillError> {
        let mut skills = Vec::new();
        let public = self.loader.load(&self.public_dir);
        let records = if public.is_empty() {
            HashMap::new()
        } else {
            self.states.scope(Scope::Public)?
        };
        for scanned in public.iter() {
            let record = records.get(&scanned.meta.name).cloned().unwrap_or_default();
            skills.push(skill(scanned, SkillSource::Public, &record));
        }
        let custom_dir = self.custom_dir(user)?;
        let custom = self.loader.load(&custom_dir);
        let records = if custom.is_empty() {
            HashMap::new()
        } else {
            self.states.scope(Scope::Custom { user })?
        };
        for scanned in custom.iter() {
            let name = &scanned.meta.name;
            if skills
                .iter()
                .any(|s| &s.name == name || s.dir_name == scanned.dir_name)
            {
                tracing::warn!(skill = %name, user, "A custom skill has a public skill's name; the public one is used");
                continue;
            }
            let record = records.get(name).cloned().unwrap_or_default();
            skills.push(skill(scanned, SkillSource::Custom, &record));
        }
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(skills)
    }

    /// The enabled skills of `user`, sorted by name.
    pub fn enabled(&self, user: &str) -> Result<Vec<Skill>, SkillError> {
        let mut skills = self.list(user)?;
        skills.retain(|s| s.enabled);
        Ok(skills)
    }

    pub fn find(&self, user: &str, name: &str) -> Result<Option<Skill>, SkillError> {
        Ok(self.list(user)?.into_iter().find(|s| s.name == name))
    }

    /// Enables or disables a skill: a custom skill for its owner, a public one (for everyone)
    /// only when `admin`.
    pub fn set_enabled(
        &self,
        user: &str,
        name: &str,
        enabled: bool,
        admin: bool,
    ) -> Result<Skill, SkillError> {
        let skill = self.require(user, name)?;
        let key = match skill.source {
            SkillSource::Public if !admin => {
                return Err(SkillError::AdminOnly {
                    name: name.to_string(),
                });
            }
            SkillSource::Public => RecordKey::Public(name),
            SkillSource::Custom => RecordKey::Custom { user, name },
        };
        let record = self.states.update(key, |r| r.enabled = Some(enabled))?;
        Ok(Skill {
            enabled: record.enabled.unwrap_or(true),
            ..skill
        })
    }

    /// Installs `archive` as a custom skill of `user`: unpacked into a staging directory,
    /// validated, then renamed into place. A name already taken is an error.
    pub fn install(&self, user: &str, archive: &[u8]) -> Result<Skill, SkillError> {
        let skills_root = self.user_skills_dir(user)?;
        let custom = skills_root.join("custom");
        std::fs::create_dir_all(&custom).map_err(io)?;
        let staging = skills_root.join(format!(".staging-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&staging).map_err(io)?;
        let result = self.install_staged(user, archive, &staging, &custom);
        // The staging directory is gone after a successful rename of its root; whatever is
        // left (a failure, or the wrapper of a single top directory) is removed.
        let _ = std::fs::remove_dir_all(&staging);
        result
    }

    fn install_staged(
        &self,
        user: &str,
        archive: &[u8],
        staging: &Path,
        custom: &Path,
    ) -> Result<Skill, SkillError> {
        let Unpacked { root, meta, sha256 } = installer::unpack(archive, staging)?;
        let name = meta.name.clone();
        if is_reserved_name(&name) {
            return Err(SkillError::Reserved { name });
        }
        if self
            .list(user)?
            .iter()
            .any(|s| s.name == name || s.dir_name == name)
        {
            return Err(SkillError::Exists { name });
        }
        let target = custom.join(&name);
        // `rename` onto an existing non-empty directory fails, so a concurrent install of the
        // same name loses here instead of merging files.
        if target.exists() {
            return Err(SkillError::Exists { name });
        }
        std::fs::rename(&root, &target).map_err(io)?;
        let record = self
            .states
            .update(RecordKey::Custom { user, name: &name }, |r| {
                r.enabled = None;
                r.sha256 = Some(sha256.clone());
                r.installed_at = Some(chrono::Utc::now());
            })?;
        tracing::info!(skill = %name, user, sha256 = %sha256, "Installed a custom skill");
        let scanned = ScannedSkill {
            dir_name: name.clone(),
            host_dir: target,
            meta,
        };
        Ok(skill(&scanned, SkillSource::Custom, &record))
    }

    /// Deletes one of `user`'s custom skills (files and record).
    pub fn remove(&self, user: &str, name: &str) -> Result<(), SkillError> {
        let skill = self.require(user, name)?;
        if skill.source == SkillSource::Public {
            return Err(SkillError::PublicReadOnly {
                name: name.to_string(),
            });
        }
        std::fs::remove_dir_all(&skill.host_dir).map_err(io)?;
        self.states.remove(RecordKey::Custom { user, name })?;
        Ok(())
    }

    fn require(&self, user: &str, name: &str) -> Result<Skill, SkillError> {
        self.find(user, name)?.ok_or_else(|| SkillError::NotFound {
            name: name.to_string(),
        })
    }

    /// The read-only mounts showing `user`'s enabled skills at `/mnt/skills/{dir}`, over a
    /// root holding one empty directory per skill (bind mounts need an existing mount point,
    /// and a listing of `/mnt/skills` must show nothing else).
    fn skill_mounts(&self, user: &str) -> Result<Vec<MountPoint>, SkillError> {
        let skills = self.enabled(user)?;
        let root = self.user_skills_dir(user)?.join("mounted");
        std::fs::create_dir_all(&root).map_err(io)?;
        for entry in std::fs::read_dir(&root).map_err(io)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !skills.iter().any(|s| s.dir_name == name) {
                // Only ever empty mount points live here; a non-empty one is left alone.
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let mut mounts = vec![MountPoint {
            virtual_path: VIRTUAL_SKILLS.to_string(),
            host_path: root.clone(),
            read_only: true,
        }];
        for skill in &skills {
            std::fs::create_dir_all(root.join(&skill.dir_name)).map_err(io)?;
            mounts.push(MountPoint {
                virtual_path: format!("{VIRTUAL_SKILLS}/{}", skill.dir_name),
                host_path: skill.host_dir.clone(),
                read_only: true,
            });
        }
        Ok(mounts)
    }
}

impl SkillMounts for SkillCatalog {
    fn mounts(&self, user_id: &str) -> Vec<MountPoint> {
        match self.skill_mounts(user_id) {
            Ok(mounts) => mounts,
            Err(error) => {
                tracing::warn!(%error, user = user_id, "Cannot list the user's skills; the sandbox shows none");
                Vec::new()
            }
        }
    }
}

fn skill(
    scanned: &ScannedSkill,
    source: SkillSource,
    record: &crate::skills::state::SkillRecord,
) -> Skill {
    Skill {
        name: scanned.meta.name.clone(),
        description: scanned.meta.description.clone(),
        source,
        enabled: record.enabled.unwrap_or(true),
        sha256: record.sha256.clone(),
        location: format!("{VIRTUAL_SKILLS}/{}/{SKILL_FILE}", scanned.dir_name),
        allowed_tools: scanned.meta.allowed_tools.clone(),
        host_dir: scanned.host_dir.clone(),
        dir_name: scanned.dir_name.clone(),
    }
}

fn io(error: std::io::Error) -> SkillError {
    SkillError::Io {
        detail: error.to_string(),
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
pub(crate) mod tests;

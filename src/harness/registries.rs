//! The per-configuration registries a run uses (tools and models), rebuilt only when the
//! configuration `Arc` or the sandbox provider changes, and the converter the tools share.

use std::sync::Arc;

use crate::config::AppConfig;
use crate::harness::{Harness, Models, RunError, ToolsFor};
use crate::mcp::McpToolSet;
use crate::model::{ModelError, ModelRegistry};
use crate::sandbox::SandboxProvider;
use crate::tools::registry::ToolRegistry;

impl Harness {
    /// Converts uploads and fetched pages in bounded children; `set_program` on it is the
    /// seam for a harness that does not run inside the `antler` binary.
    pub fn converter(&self) -> &antler_convert::Converter {
        &self.inner.converter
    }

    pub(super) fn tools(
        &self,
        config: &Arc<AppConfig>,
        sandbox: &Arc<dyn SandboxProvider>,
        mcp: &Arc<McpToolSet>,
    ) -> Result<Arc<ToolRegistry>, RunError> {
        let mut cache = match self.inner.tools.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(built) = cache.as_ref()
            && Arc::ptr_eq(&built.config, config)
            && Arc::ptr_eq(&built.sandbox, sandbox)
            && Arc::ptr_eq(&built.mcp, mcp)
        {
            return Ok(built.registry.clone());
        }
        let mut registry =
            ToolRegistry::with_converter(config, sandbox.clone(), &self.inner.converter).map_err(
                |problems| {
                    RunError::Tools(
                        problems
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; "),
                    )
                },
            )?;
        registry.add_external(mcp.tools.iter().cloned());
        let registry = Arc::new(registry);
        *cache = Some(ToolsFor {
            config: config.clone(),
            sandbox: sandbox.clone(),
            mcp: mcp.clone(),
            registry: registry.clone(),
        });
        Ok(registry)
    }

    pub(super) fn models(&self, config: &Arc<AppConfig>) -> Result<Arc<ModelRegistry>, ModelError> {
        match &self.inner.models {
            Models::Fixed(registry) => Ok(registry.clone()),
            Models::FromConfig(cache) => {
                let mut cache = match cache.lock() {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
                if let Some((built_for, registry)) = cache.as_ref()
                    && Arc::ptr_eq(built_for, config)
                {
                    return Ok(registry.clone());
                }
                let registry = Arc::new(ModelRegistry::from_config(config)?);
                *cache = Some((config.clone(), registry.clone()));
                Ok(registry)
            }
        }
    }
}

//! Configuration: one typed tree (`schema`), loaded from YAML with `$ENV` resolution, validated
//! with every problem reported by key path, and hot-reloaded when the file changes.

pub mod handle;
pub mod schema;
pub mod secret;

pub use handle::ConfigHandle;
pub use schema::*;
pub use secret::Secret;

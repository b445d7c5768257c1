//! The paths the model sees instead of the host's: a thread's state records them, and the
//! sandbox maps them onto the thread's host directories.

/// Root of every path the model sees; the sandbox maps it onto the thread's host directories.
pub const VIRTUAL_ROOT: &str = "/mnt/user-data";
pub const VIRTUAL_WORKSPACE: &str = "/mnt/user-data/workspace";
pub const VIRTUAL_UPLOADS: &str = "/mnt/user-data/uploads";
pub const VIRTUAL_OUTPUTS: &str = "/mnt/user-data/outputs";

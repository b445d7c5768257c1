//! PLACEHOLDER (owned by the store work).
pub struct MemoryStore;

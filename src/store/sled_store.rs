//! PLACEHOLDER (owned by the store work).
pub struct SledStore;

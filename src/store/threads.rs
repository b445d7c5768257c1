//! PLACEHOLDER (owned by the store work).
pub struct ThreadRecord;
pub enum ThreadStatus {}
pub struct ThreadStore;

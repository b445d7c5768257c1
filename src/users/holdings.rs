//! What a user id holds (memory, custom agents, threads), so linking can say what stays behind
//! under an account's old id and `antler users show` can list it.

use std::fmt;

use antler_store::StoreRef;

use crate::custom_agents::AgentStore;
use crate::memory::repo::{DEFAULT_AGENT, MEMORY_TREE};
use crate::memory::{MemoryRepo, MemoryScope};
use crate::users::UsersError;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Holdings {
    /// Remembered facts, over every agent's memory.
    pub memory_facts: usize,
    pub agents: usize,
    pub threads: usize,
}

impl Holdings {
    pub fn of(store: &StoreRef, agents: &AgentStore, user_id: &str) -> Result<Self, UsersError> {
        let repo = MemoryRepo::new(store.clone());
        let prefix = format!("{user_id}\0");
        let mut memory_facts = 0;
        for (key, _) in store.scan_prefix(MEMORY_TREE, prefix.as_bytes())? {
            let agent = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            let agent = (agent != DEFAULT_AGENT).then_some(agent);
            let scope = MemoryScope::new(user_id, agent.as_deref());
            memory_facts += repo.load(&scope)?.facts.len();
        }
        Ok(Self {
            memory_facts,
            agents: agents.list(user_id)?.len(),
            threads: antler_store::threads::user_thread_count(store.as_ref(), user_id)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl fmt::Display for Holdings {
    /// `2 facts in memory, 1 agent, 3 threads`, or `nothing`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = Vec::new();
        if self.memory_facts > 0 {
            parts.push(plural(
                self.memory_facts,
                "fact in memory",
                "facts in memory",
            ));
        }
        if self.agents > 0 {
            parts.push(plural(self.agents, "agent", "agents"));
        }
        if self.threads > 0 {
            parts.push(plural(self.threads, "thread", "threads"));
        }
        if parts.is_empty() {
            return f.write_str("nothing");
        }
        f.write_str(&parts.join(", "))
    }
}

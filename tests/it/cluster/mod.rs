//! Daemons under leases, on the real binary: a single daemon on sled holds its own and its
//! bot's lease and, restarted after a crash, polls again at once; two daemons on one
//! PostgreSQL database poll one bot token one at a time and fail over.

mod polling;
mod polling_postgres;

//! tsjoin-ballista's integration tests (one binary): an in-process cluster
//! (a scheduler and two executors on loopback ports).

mod codec;
mod newest_first;
mod settings;
mod slt_on_cluster;

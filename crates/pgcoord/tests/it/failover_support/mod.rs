//! What the failover suites share: relays in front of the servers, a
//! primary with a standby whose roles swap at each promotion, and the
//! protected writes with their audit.
#![allow(dead_code)] // each suite uses its part

pub mod faults;
pub mod relay;
pub mod servers;
pub mod writes;

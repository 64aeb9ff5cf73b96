//! Tool families. Each file declares its tools with [`super::tool::tool`] and converts
//! between wire parameters and the domain API; no domain logic lives here.

pub mod colibri;
pub mod learnings;
pub mod system;
pub mod trail;
pub mod vault;
pub mod work;

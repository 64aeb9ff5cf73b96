//! Tool families. Each file declares its tools with [`super::tool::tool`] and converts
//! between wire parameters and the domain API; no domain logic lives here.

pub(crate) mod colibri;
pub(crate) mod learnings;
pub(crate) mod system;
pub(crate) mod trail;
pub(crate) mod vault;
pub(crate) mod work;

//! Who a caller is and what it may touch: the [`context::WorkContext`] a piece of work is
//! bound to (issue, project, worktree, profile, actor), the tools each agent profile may
//! use ([`scope`]), and the daemon's session tokens that carry both ([`tokens`]).

pub mod context;
pub mod scope;
pub(crate) mod tokens;

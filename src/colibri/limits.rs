//! The Colibri document's limits on tool inputs, one constant each. The MCP schemas of
//! `src/mcp/tools/colibri.rs` take their numbers from here; limits shared with the
//! Symphony vocabulary (slugs, labels, branch names) come from `crate::issues::limits`
//! and `crate::work::prs::limits`.

/// Longest task title (characters).
pub(crate) const TITLE_MAX: usize = 256;
/// Longest task description (characters).
pub(crate) const DESCRIPTION_MAX: usize = 8000;
/// Longest task reference (`PFX-N`, `T-N` or an opaque id).
pub(crate) const TASK_ID_MAX: usize = 64;
/// Longest assignee or auditor id.
pub(crate) const ACTOR_MAX: usize = 128;
/// Largest planning estimate, in hours.
pub(crate) const ESTIMATE_HOURS_MAX: u32 = 1000;
/// Largest progress value (a percentage).
pub(crate) const PROGRESS_MAX: u8 = 100;
/// Longest reason for a blocked task.
pub(crate) const BLOCKED_REASON_MAX: usize = 2000;
/// Most statuses in one `task_list` filter (the seven task statuses).
pub(crate) const STATUS_FILTER_MAX: usize = 7;
/// Most priorities in one `task_list` filter (the four priorities).
pub(crate) const PRIORITY_FILTER_MAX: usize = 4;
/// Longest ISO-8601 timestamp filter.
pub(crate) const TIMESTAMP_MAX: usize = 64;
/// Longest `task_list` search text.
pub(crate) const SEARCH_MAX: usize = 500;
/// `task_list` page size: default and largest.
pub(crate) const LIST_LIMIT_DEFAULT: u32 = 50;
pub(crate) const LIST_LIMIT_MAX: u32 = 500;
/// Largest `task_list` offset.
pub(crate) const OFFSET_MAX: u32 = 10_000_000;
/// `task_next_actions` page size: default and largest.
pub(crate) const NEXT_ACTIONS_LIMIT_DEFAULT: u32 = 20;
pub(crate) const NEXT_ACTIONS_LIMIT_MAX: u32 = 100;
/// Longest thought record text.
pub(crate) const THOUGHT_CONTENT_MAX: usize = 5000;
/// Longest commit id (hex digits).
pub(crate) const COMMIT_SHA_MAX: usize = 64;
/// Most tests named in one thought record, and the longest name.
pub(crate) const TESTS_RUN_MAX: usize = 200;
pub(crate) const TEST_NAME_MAX: usize = 500;
/// Most blockers in one thought record, and the longest.
pub(crate) const BLOCKERS_MAX: usize = 100;
pub(crate) const BLOCKER_MAX: usize = 1000;
/// Longest audit session reference (`A-N`).
pub(crate) const SESSION_ID_MAX: usize = 32;
/// `thought_record_list` page size: default and largest.
pub(crate) const THOUGHT_LIST_LIMIT_DEFAULT: u32 = 100;
pub(crate) const THOUGHT_LIST_LIMIT_MAX: u32 = 500;
/// Longest audit reason.
pub(crate) const AUDIT_REASON_MAX: usize = 1000;
/// Longest `skill_list` search text and capability.
pub(crate) const SKILL_SEARCH_MAX: usize = 200;
pub(crate) const CAPABILITY_MAX: usize = 100;

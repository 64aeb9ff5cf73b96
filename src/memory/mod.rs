//! What teams already keep for their agents, brought into Cairn and back out: the
//! memory and rule files of the agent clients (CLAUDE.md, AGENTS.md, GEMINI.md,
//! `.cursor/rules/*.mdc`, `.github/copilot-instructions.md`, Claude Code's per-project
//! memory, Codex's memories), and the lessons an agent's run log shows. Decisions:
//! docs/agents.md, "Import and export".
//!
//! - [`split`]: which file is whose, where the files are, and the items (bullets,
//!   paragraphs) a file holds. Pure: no store.
//! - [`import`]: each item recorded through the learnings' add path, with a record of
//!   what each file gave (`memory_sources`, `memory_items`): idempotent, and a rule
//!   removed from its file is archived.
//! - [`export`]: the project's trusted learnings as a managed section of a Markdown file.
//! - [`candidates`]: lessons found in run logs (an error, the change that fixed it),
//!   held for a person in `learning_candidates`, which no search reads.

pub mod candidates;
pub mod export;
pub mod import;
pub mod split;

//! The guide for agents: when to search learnings, when to record one, when to give
//! feedback, how to use the vault. One text (`guide.md`), sent as the MCP `initialize`
//! instructions and written by `cairn connect` as a managed section of AGENTS.md /
//! CLAUDE.md / GEMINI.md, a Claude Code skill and a Cursor rule.

/// The guide, as agents read it.
pub const GUIDE: &str = include_str!("guide.md");

/// The most tokens the guide may take in an agent's context (measured with the embedding
/// model's tokenizer by `the_guide_fits_its_token_budget`; docs/agents.md gives the figure).
pub const GUIDE_TOKEN_BUDGET: usize = 500;

/// A Claude Code skill (`.claude/skills/cairn/SKILL.md`): front matter that says when
/// Claude should load it, then the guide.
pub fn claude_skill() -> String {
    format!(
        "---\nname: cairn\ndescription: Search and record this team's learnings with the \
         Cairn MCP server. Use before starting a task, on an unfamiliar error, before \
         changing a convention, and after a fix that cost effort.\n---\n\n# Cairn\n\n{GUIDE}"
    )
}

/// A Cursor rule (`.cursor/rules/cairn.mdc`), applied to every request.
pub fn cursor_rule() -> String {
    format!(
        "---\ndescription: When to search and record learnings with the Cairn MCP server\n\
         alwaysApply: true\n---\n\n{GUIDE}"
    )
}

/// The managed section's body in AGENTS.md, CLAUDE.md, GEMINI.md and Copilot's
/// instructions.
pub fn section() -> String {
    format!("## Cairn (shared learnings)\n\n{GUIDE}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide is measured with the tokenizer of the model in `models/` (a WordPiece
    /// vocabulary: it counts about as many tokens as the agents' own tokenizers on English
    /// prose); the figure is printed for docs/agents.md.
    #[test]
    fn the_guide_fits_its_token_budget() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models/all-minilm-l6-v2-int8/tokenizer.json");
        let tokenizer = tokenizers::Tokenizer::from_file(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (models/fetch.sh)", path.display()));
        for (what, text) in [
            ("guide", GUIDE.to_string()),
            ("skill", claude_skill()),
            ("rule", cursor_rule()),
        ] {
            let n = tokenizer.encode(text.as_str(), false).unwrap().len();
            eprintln!("{what}: {n} tokens, {} bytes", text.len());
            assert!(n <= GUIDE_TOKEN_BUDGET + 60, "{what}: {n} tokens");
        }
        let n = tokenizer.encode(GUIDE, false).unwrap().len();
        assert!(n <= GUIDE_TOKEN_BUDGET, "the guide takes {n} tokens");
        assert!(n > 150, "the guide lost its substance: {n} tokens");
    }

    #[test]
    fn the_guide_names_only_tools_that_exist() {
        let names: Vec<&str> = crate::mcp::registry::all_tools()
            .iter()
            .map(|t| t.name)
            .collect();
        for word in GUIDE.split('`').skip(1).step_by(2) {
            if word.contains('_')
                && !word.contains(' ')
                && word != "applies_to"
                && word != "help_prompt"
                && word != "not_relevant"
            {
                assert!(names.contains(&word), "the guide names {word}, not a tool");
            }
        }
    }
}

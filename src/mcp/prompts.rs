//! MCP prompts, and `completion/complete` for their arguments and the resource
//! templates' variables.
//!
//! - `start_work {issue?}`: the issue (the bound one by default), its findings and latest
//!   comments, the learnings of its project that match it and the vault passages that
//!   do, in one user message, closing with what to record before finishing.
//! - `record_learning {lesson}`: the gates `add_learning` applies, the project's
//!   learnings closest to the lesson (to merge into, or to supersede) and the call to
//!   make.
//!
//! A prompt is listed when the session may call the tools it reads through (`get_issue`
//! for `start_work`, `add_learning` for `record_learning`) and each part it gathers is
//! included only when the session could have read it itself. A part that fails (no
//! model, no vault configuration) is named in the message instead of failing the prompt.

use std::fmt::Write as _;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResult,
    ListPromptsResult, Prompt, PromptArgument, PromptMessage, Reference, Role,
};

use crate::error::Error;
use crate::issues::IssueFilter;
use crate::learnings::{LearningSearch, SearchScope, limits};

use super::resources::vault_uri;
use super::server::CairnServer;

/// Learnings and passages a prompt includes.
const SHOWN: usize = 5;
/// Latest comments `start_work` includes.
const COMMENTS: usize = 5;
/// Characters of a passage or comment quoted.
const EXCERPT: usize = 600;

fn prompts() -> [(Prompt, &'static str); 2] {
    [
        (
            Prompt::new(
                "start_work",
                Some(
                    "Start work on an issue: the issue, its findings and latest comments, the \
                     project's learnings and vault passages that match it, in one message.",
                ),
                Some(vec![
                    PromptArgument::new("issue")
                        .with_title("Issue")
                        .with_description(
                            "Identifier (e.g. SHOP-12); the bound issue when omitted.",
                        )
                        .with_required(false),
                ]),
            )
            .with_title("Start work on an issue"),
            "get_issue",
        ),
        (
            Prompt::new(
                "record_learning",
                Some(
                    "Record a learning that passes add_learning's checks: the rules, the \
                     project's closest learnings (merge or supersede) and the call to make.",
                ),
                Some(vec![
                    PromptArgument::new("lesson")
                        .with_title("Lesson")
                        .with_description("What you learned, in your own words.")
                        .with_required(true),
                ]),
            )
            .with_title("Record a learning"),
            "add_learning",
        ),
    ]
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

fn bad_argument(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

impl CairnServer {
    /// `prompts/list`: the prompts this session's scope serves.
    pub(super) fn prompt_list(&self) -> ListPromptsResult {
        ListPromptsResult::with_all_items(
            prompts()
                .into_iter()
                .filter(|(_, tool)| self.allows(tool))
                .map(|(p, _)| p)
                .collect(),
        )
    }

    /// `prompts/get`.
    pub(super) async fn prompt(
        &self,
        request: GetPromptRequestParams,
    ) -> Result<GetPromptResult, McpError> {
        let name = request.name.clone();
        let Some((_, tool)) = prompts().into_iter().find(|(p, _)| p.name == name) else {
            return Err(bad_argument(format!(
                "no prompt named {name:?}; prompts/list shows start_work and record_learning"
            )));
        };
        if !self.allows(tool) {
            return Err(bad_argument(format!(
                "prompt {name} is outside this session's scope (it needs {tool})"
            )));
        }
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| {
            args.get(k)
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let this = self.clone();
        let (issue, lesson) = (arg("issue"), arg("lesson"));
        let built = tokio::task::spawn_blocking(move || match name.as_str() {
            "start_work" => this.start_work(issue),
            _ => this.record_learning(lesson),
        })
        .await
        .map_err(|e| McpError::internal_error(format!("prompt failed: {e}"), None))??;
        // What the prompt quotes (the arguments, stored text) reaches the client as every
        // answer does: without a character the text policy removes.
        let mut v = serde_json::to_value(&built)
            .map_err(|e| McpError::internal_error(format!("prompt failed: {e}"), None))?;
        crate::text::clean_json(&mut v);
        serde_json::from_value(v)
            .map_err(|e| McpError::internal_error(format!("prompt failed: {e}"), None))
    }

    fn start_work(&self, issue: Option<String>) -> Result<GetPromptResult, McpError> {
        let reference = match (issue, &self.work().issue) {
            (Some(i), _) => i,
            (None, Some(bound)) => bound.identifier.clone(),
            (None, None) => {
                return Err(bad_argument(
                    "no issue is bound to this session: pass the argument issue (an identifier)"
                        .into(),
                ));
            }
        };
        let details = self
            .cairn()
            .issue_details_as(&reference, crate::learnings::Reader::agent(self.work()))
            .map_err(|e| match e {
                Error::NotFound { .. } | Error::TaskNotFound(_) => bad_argument(format!(
                    "no issue {reference:?}; pass an existing identifier"
                )),
                other => McpError::internal_error(other.to_string(), None),
            })?;
        let i = &details.issue;
        let mut m = String::new();
        let _ = writeln!(
            m,
            "You are starting work on {}: {} (status {}, priority P{}).\n",
            i.identifier, i.title, i.status, i.priority
        );
        if !i.description.trim().is_empty() {
            let _ = writeln!(m, "## Description\n\n{}\n", i.description.trim());
        }
        let _ = writeln!(m, "## Findings so far ({})\n", details.findings.len());
        for f in &details.findings {
            let _ = writeln!(m, "- [{}] {}", f.category, excerpt(&f.summary));
        }
        let shown = details.comments.len().saturating_sub(COMMENTS);
        let _ = writeln!(
            m,
            "\n## Latest comments ({} of {})\n",
            details.comments.len() - shown,
            details.comments.len()
        );
        for c in &details.comments[shown..] {
            let _ = writeln!(
                m,
                "- {} ({}): {}",
                c.actor,
                c.created_at,
                excerpt(&c.content)
            );
        }
        let query = format!("{} {}", i.title, i.description);
        let query: String = query.chars().take(limits::QUERY_MAX).collect();
        if self.allows("search_learnings") {
            let _ = writeln!(m, "\n## Learnings that may apply\n");
            self.learnings_into(&mut m, &query, &i.project_id);
        }
        if self.allows("search_knowledge")
            && self.work().project_id.as_deref() == Some(&i.project_id)
        {
            let _ = writeln!(m, "\n## Vault passages\n");
            match self
                .cairn()
                .search_knowledge(self.work(), &query, Some(SHOWN), None, None, false)
            {
                Ok(k) if k.results.is_empty() => {
                    let why = k.note.unwrap_or_else(|| "no passage matched".into());
                    let _ = writeln!(m, "(none: {why})");
                }
                Ok(k) => {
                    for h in k.results {
                        let _ = writeln!(
                            m,
                            "- {} › {} ({}, lines {}-{}):\n  {}",
                            h.path,
                            h.metadata.heading_path,
                            vault_uri(&h.metadata.collection, &h.path),
                            h.metadata.line_start,
                            h.metadata.line_end,
                            excerpt(&h.text).replace('\n', "\n  ")
                        );
                    }
                }
                Err(e) => {
                    let _ = writeln!(m, "(vault search unavailable: {e})");
                }
            }
        }
        let _ = writeln!(
            m,
            "\nBefore you finish: record what you learned with add_learning, and tell \
             learning_feedback whether each learning above helped, was not relevant, or was wrong."
        );
        let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, m)]);
        result.description = Some(format!("Start work on {}", i.identifier));
        Ok(result)
    }

    /// The project's learnings closest to `query`, one line each (or why there are none).
    fn learnings_into(&self, m: &mut String, query: &str, project: &str) {
        let found = self.cairn().search_learnings(&LearningSearch {
            query: query.to_owned(),
            scope: SearchScope::Project(project.to_owned()),
            limit: Some(SHOWN),
            min_quality_score: None,
            include_superseded: false,
            include_archived: false,
            min_trust: None,
        });
        match found {
            Ok(r) if r.results.is_empty() => {
                let _ = writeln!(m, "(none found)");
            }
            Ok(r) => {
                for h in r.results {
                    let l = &h.learning;
                    let _ = write!(
                        m,
                        "- {} ({}, quality {}, trust {}): {}",
                        l.id,
                        l.learning_type.as_str(),
                        l.quality_score,
                        l.trust.as_str(),
                        excerpt(&l.pattern)
                    );
                    let similar: Vec<&str> =
                        h.similar.iter().map(|s| s.learning.id.as_str()).collect();
                    if !similar.is_empty() {
                        let _ = write!(m, " (said much the same: {}", similar.join(", "));
                        if h.similar_omitted > 0 {
                            let _ = write!(m, ", and {} more", h.similar_omitted);
                        }
                        let _ = write!(m, ")");
                    }
                    let _ = writeln!(m);
                }
            }
            Err(e) => {
                let _ = writeln!(m, "(learning search unavailable: {e})");
            }
        }
    }

    fn record_learning(&self, lesson: Option<String>) -> Result<GetPromptResult, McpError> {
        let Some(lesson) = lesson else {
            return Err(bad_argument(
                "the argument lesson is required: what you learned, in your own words".into(),
            ));
        };
        let project = self.work().project_id.clone().ok_or_else(|| {
            bad_argument("no project is bound to this session; start it with --issue-id".into())
        })?;
        // Checked as add_learning checks the pattern it becomes: a lesson that hides text
        // is refused, naming the character, and invisible formatting is removed.
        let lesson = crate::text::strict("lesson", &lesson)
            .map_err(|e| bad_argument(format!("{}: {}", e.field, e.message)))?;
        let lesson: String = lesson.chars().take(limits::QUERY_MAX).collect();
        let mut m = String::new();
        let _ = writeln!(
            m,
            "You want to record this lesson for future agents:\n\n> {}\n\n\
             ## The rules add_learning applies\n\n\
             - pattern: the lesson itself, starting with its subject, {}-{} characters; one \
             lesson per learning.\n\
             - context (optional): when and where it applies, {}-{} characters.\n\
             - learning_type: convention, gotcha or pattern (default pattern).\n\
             - applies_to: relative directory or file prefixes it is about (at most {}).\n\
             - The same pattern twice on one issue is refused; a learning of this project that \
             already says the same is merged (your issue counts as its confirmation) unless you \
             pass merge: false.\n\
             - supersedes: [ids] of this project's learnings that yours makes outdated.\n",
            lesson.replace('\n', "\n> "),
            limits::PATTERN_MIN,
            limits::PATTERN_MAX,
            limits::CONTEXT_MIN,
            limits::CONTEXT_MAX,
            limits::APPLIES_TO_MAX,
        );
        if self.allows("search_learnings") {
            let _ = writeln!(m, "## This project's closest learnings\n");
            self.learnings_into(&mut m, &lesson, &project);
            let _ = writeln!(
                m,
                "\nIf one of them already says your lesson, call learning_feedback with outcome \
                 helped instead of adding it. If one is now wrong, add yours with supersedes \
                 naming it."
            );
        }
        let _ = writeln!(
            m,
            "\nThen call add_learning with your pattern (and context, learning_type, applies_to)."
        );
        let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, m)]);
        result.description = Some("Record a learning".into());
        Ok(result)
    }

    /// `completion/complete`: issue identifiers for `start_work`'s `issue`, collections
    /// and document paths for the vault template (only what the session could read). A
    /// prompt or template this server does not have, or an argument it does not take, is
    /// refused (`-32602`), naming what there is.
    pub(super) async fn completion(
        &self,
        request: CompleteRequestParams,
    ) -> Result<CompleteResult, McpError> {
        self.check_completion(&request)?;
        let this = self.clone();
        let values = tokio::task::spawn_blocking(move || this.complete_values(&request))
            .await
            .map_err(|e| McpError::internal_error(format!("completion failed: {e}"), None))?
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let total = values.len();
        let values: Vec<String> = values
            .into_iter()
            .take(CompletionInfo::MAX_VALUES)
            .collect();
        let info = CompletionInfo::with_pagination(
            values,
            Some(total as u32),
            total > CompletionInfo::MAX_VALUES,
        )
        .map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    /// Whether `request` names a prompt this session has and one of its arguments, or one
    /// of the resource templates and one of its variables.
    fn check_completion(&self, request: &CompleteRequestParams) -> Result<(), McpError> {
        let argument = request.argument.name.as_str();
        let (what, arguments): (String, Vec<String>) = match &request.r#ref {
            Reference::Prompt(p) => {
                let listed = self.prompt_list().prompts;
                let Some(prompt) = listed.iter().find(|l| l.name == p.name) else {
                    let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
                    return Err(bad_argument(format!(
                        "no prompt named {:?} in this session; prompts/list shows: {}",
                        p.name,
                        names.join(", ")
                    )));
                };
                let arguments = prompt.arguments.iter().flatten().map(|a| a.name.clone());
                (format!("prompt {}", p.name), arguments.collect())
            }
            Reference::Resource(r) => {
                let templates = self.resource_templates().resource_templates;
                let Some(t) = templates.iter().find(|t| t.uri_template == r.uri) else {
                    let uris: Vec<&str> =
                        templates.iter().map(|t| t.uri_template.as_str()).collect();
                    return Err(bad_argument(format!(
                        "no resource template {:?}; resources/templates/list shows: {}",
                        r.uri,
                        uris.join(", ")
                    )));
                };
                let variables = t
                    .uri_template
                    .split('{')
                    .skip(1)
                    .filter_map(|v| v.split_once('}'))
                    .map(|(v, _)| v.trim_start_matches('+').to_string());
                (format!("template {}", t.uri_template), variables.collect())
            }
            // `Reference` is open to later protocol versions.
            _ => {
                return Err(bad_argument(
                    "completion/complete completes a prompt's argument (ref/prompt) or a \
                     resource template's variable (ref/resource)"
                        .into(),
                ));
            }
        };
        if arguments.iter().any(|a| a == argument) {
            return Ok(());
        }
        Err(bad_argument(format!(
            "{what} has no argument {argument:?}; its arguments: {}",
            arguments.join(", ")
        )))
    }

    fn complete_values(
        &self,
        request: &CompleteRequestParams,
    ) -> crate::error::Result<Vec<String>> {
        let typed = request.argument.value.as_str();
        let starts = |v: &str| v.to_lowercase().starts_with(&typed.to_lowercase());
        match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(p), "issue")
                if p.name == "start_work" && self.allows("get_issue") =>
            {
                let Some(project) = self.work().project_id.clone() else {
                    return Ok(Vec::new());
                };
                let issues = self.cairn().list_issues(&IssueFilter {
                    project: Some(project),
                    ..IssueFilter::default()
                })?;
                Ok(issues
                    .into_iter()
                    .map(|i| i.identifier)
                    .filter(|i| starts(i))
                    .collect())
            }
            (Reference::Resource(r), name) if r.uri.starts_with("cairn://vault/") => {
                let Some(collections) = self.readable_collections() else {
                    return Ok(Vec::new());
                };
                let chosen = request
                    .context
                    .as_ref()
                    .and_then(|c| c.arguments.as_ref())
                    .and_then(|a| a.get("collection"))
                    .cloned();
                let mut out: Vec<String> = Vec::new();
                let mut after: Option<(String, String)> = None;
                loop {
                    let page = self.cairn().vault_documents(
                        collections.as_deref(),
                        after.as_ref().map(|(c, p)| (c.as_str(), p.as_str())),
                        crate::vault::browse::MAX_PAGE,
                    )?;
                    for d in page.documents {
                        let value = match name {
                            "collection" => d.collection,
                            "path" if chosen.as_ref().is_none_or(|c| *c == d.collection) => d.path,
                            _ => continue,
                        };
                        if starts(&value) && !out.contains(&value) {
                            out.push(value);
                        }
                    }
                    match page.next {
                        Some(n) if out.len() <= CompletionInfo::MAX_VALUES => after = Some(n),
                        _ => break,
                    }
                }
                Ok(out)
            }
            _ => Ok(Vec::new()),
        }
    }
}

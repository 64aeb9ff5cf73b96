//! The agent clients and their files: where each reads its MCP servers (project or user
//! scope) and in which format, where it reads instructions, and what `cairn connect` puts
//! there ([`plan`]). Formats, checked against each client's own package or documentation
//! (docs/agents.md, "Formats"):
//!
//! | client | MCP servers | guide |
//! |---|---|---|
//! | Claude Code | `.mcp.json` / `~/.claude.json` `mcpServers` (HTTP: `~/.claude.json` `projects.<dir>.mcpServers`, the private "local" scope) | CLAUDE.md section, skill `.claude/skills/cairn/SKILL.md`, hooks `.claude/settings.json` |
//! | Codex | `~/.codex/config.toml` `[mcp_servers.NAME]` (user scope only: a project's `.codex/config.toml` is read only in projects marked trusted) | AGENTS.md section |
//! | Cursor | `.cursor/mcp.json` / `~/.cursor/mcp.json` `mcpServers` | rule `.cursor/rules/cairn.mdc` |
//! | Gemini CLI | `.gemini/settings.json` / `~/.gemini/settings.json` `mcpServers` (HTTP: `httpUrl`) | GEMINI.md section, hooks in the same settings |
//! | VS Code | `.vscode/mcp.json` / `~/.config/Code/User/mcp.json` `servers` with `type` | `.github/copilot-instructions.md` section |
//!
//! A server reached over HTTP carries its token, so its entry always goes to the user's
//! own file (written 0600), never to a project file meant to be committed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::guide;
use super::hooks::HookClient;
use super::json::Json;

/// An agent client `cairn connect` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    ClaudeCode,
    Codex,
    Cursor,
    GeminiCli,
    Vscode,
    /// Any other client: the common `{"mcpServers": {...}}` JSON, printed.
    Generic,
}

impl Client {
    pub const ALL: [Client; 6] = [
        Client::ClaudeCode,
        Client::Codex,
        Client::Cursor,
        Client::GeminiCli,
        Client::Vscode,
        Client::Generic,
    ];

    /// Whose hook contract `cairn hook` speaks for this client; `Err` when connect does
    /// not install this client's hooks.
    pub fn hook_client(self) -> Result<HookClient, String> {
        match self {
            Client::ClaudeCode => Ok(HookClient::ClaudeCode),
            Client::GeminiCli => Ok(HookClient::GeminiCli),
            _ => Err(format!(
                "--hooks installs Claude Code's and Gemini CLI's hooks; {} takes `cairn hook` \
                 in its own hook configuration, by hand (docs/agents.md, \"Hooks\")",
                self.name()
            )),
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Codex => "codex",
            Client::Cursor => "cursor",
            Client::GeminiCli => "gemini-cli",
            Client::Vscode => "vscode",
            Client::Generic => "generic",
        }
    }

    /// The client named `name` (a few spellings people use are accepted).
    pub fn parse(name: &str) -> Result<Client, String> {
        let n = name.to_ascii_lowercase();
        let found = match n.as_str() {
            "claude" | "claude-code" | "claudecode" => Some(Client::ClaudeCode),
            "gemini" | "gemini-cli" => Some(Client::GeminiCli),
            "vscode" | "vs-code" | "code" => Some(Client::Vscode),
            _ => Client::ALL.into_iter().find(|c| c.name() == n),
        };
        found.ok_or_else(|| {
            let names: Vec<_> = Client::ALL.iter().map(|c| c.name()).collect();
            format!(
                "{name:?} is not a client Cairn connects: {}",
                names.join(", ")
            )
        })
    }
}

/// Whose files: the project's (in its directory, shared through git) or the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    User,
}

/// How the client reaches Cairn.
#[derive(Debug, Clone, PartialEq)]
pub enum Server {
    /// `cairn serve` started by the client over stdio.
    Stdio { command: String, args: Vec<String> },
    /// The daemon's MCP endpoint, with a session token minted for this client.
    Http { url: String, token: String },
}

impl Server {
    fn is_http(&self) -> bool {
        matches!(self, Server::Http { .. })
    }
}

/// What to connect, and where.
#[derive(Debug, Clone)]
pub struct Target {
    pub client: Client,
    pub scope: Scope,
    /// The project's directory (absolute).
    pub dir: PathBuf,
    /// The user's home directory.
    pub home: PathBuf,
    /// Codex's home (`$CODEX_HOME`, default `~/.codex`).
    pub codex_home: Option<PathBuf>,
    /// The server's name in the client's configuration.
    pub name: String,
}

impl Target {
    /// The owner of the edits in the ledger: client and server name.
    pub fn owner(&self) -> String {
        format!("{}:{}", self.client.name(), self.name)
    }

    fn base(&self) -> &Path {
        match self.scope {
            Scope::Project => &self.dir,
            Scope::User => &self.home,
        }
    }

    fn codex_home(&self) -> PathBuf {
        self.codex_home
            .clone()
            .unwrap_or_else(|| self.home.join(".codex"))
    }
}

/// One change to one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Edit {
    /// A member of a JSON object at `path` (object keys, outermost first).
    JsonMember { path: Vec<String>, value: Json },
    /// An item of the JSON array at `path`, appended unless an equal one is there.
    JsonItem { path: Vec<String>, value: Json },
    /// A table of a TOML document at `path`.
    TomlTable { path: Vec<String>, value: Json },
    /// A managed section of a Markdown file ([`super::managed`]).
    Section { name: String, body: String },
    /// A whole file that only Cairn writes.
    File { content: String },
}

/// A change to a file, and whether the file will hold a secret (then it is written 0600).
#[derive(Debug, Clone, PartialEq)]
pub struct FileEdit {
    pub path: PathBuf,
    pub edit: Edit,
    pub secret: bool,
    /// The directory the path must stay inside (no symlink on the way).
    pub base: PathBuf,
}

/// What connecting also writes besides the server entry.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// The guide, in the forms the client reads.
    pub guide: bool,
    /// The hooks (Claude Code, Gemini CLI): each event's name in the client's settings
    /// and its `cairn hook` command line.
    pub hooks: Vec<(&'static str, String)>,
}

fn path(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

fn string_array(items: &[String]) -> Json {
    Json::Array(items.iter().cloned().map(Json::String).collect())
}

fn object(members: Vec<(&str, Json)>) -> Json {
    Json::Object(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

fn bearer(token: &str) -> Json {
    object(vec![(
        "Authorization",
        Json::String(format!("Bearer {token}")),
    )])
}

/// The server entry in `client`'s own form.
pub fn entry(client: Client, server: &Server) -> Json {
    match (client, server) {
        (Client::ClaudeCode | Client::Vscode, Server::Stdio { command, args }) => object(vec![
            ("type", Json::String("stdio".into())),
            ("command", Json::String(command.clone())),
            ("args", string_array(args)),
        ]),
        (Client::ClaudeCode | Client::Vscode, Server::Http { url, token }) => object(vec![
            ("type", Json::String("http".into())),
            ("url", Json::String(url.clone())),
            ("headers", bearer(token)),
        ]),
        (Client::GeminiCli, Server::Http { url, token }) => object(vec![
            ("httpUrl", Json::String(url.clone())),
            ("headers", bearer(token)),
        ]),
        (Client::Codex, Server::Http { url, token }) => object(vec![
            ("url", Json::String(url.clone())),
            ("http_headers", bearer(token)),
        ]),
        (_, Server::Stdio { command, args }) => object(vec![
            ("command", Json::String(command.clone())),
            ("args", string_array(args)),
        ]),
        (_, Server::Http { url, token }) => object(vec![
            ("url", Json::String(url.clone())),
            ("headers", bearer(token)),
        ]),
    }
}

/// The generic form most clients accept: `{"mcpServers": {NAME: entry}}`.
pub fn generic(name: &str, server: &Server) -> String {
    object(vec![(
        "mcpServers",
        object(vec![(name, entry(Client::Generic, server))]),
    )])
    .pretty()
}

/// The files `cairn connect` changes for `target`, and how. `Err` when the client has no
/// such file (the generic client writes none: its JSON is printed).
pub fn plan(target: &Target, server: &Server, extras: &Extras) -> Result<Vec<FileEdit>, String> {
    let mut edits = Edits::default();
    let value = entry(target.client, server);
    let http = server.is_http();
    match target.client {
        Client::ClaudeCode => edits.claude_code(target, value, http, extras),
        Client::Codex => edits.codex(target, value, http, extras),
        Client::Cursor | Client::GeminiCli | Client::Vscode => {
            edits.json_settings(target, value, http, extras)
        }
        Client::Generic => {
            return Err(
                "the generic client has no file of its own: `cairn connect generic` prints \
                 the JSON to paste into the client's configuration"
                    .into(),
            );
        }
    }
    Ok(edits.0)
}

/// `rel` under `base`, with `base` as the directory it must stay inside.
fn at(base: &Path, rel: &str) -> (PathBuf, PathBuf) {
    (base.join(rel), base.to_path_buf())
}

/// The guide's managed section of a Markdown file.
fn guide_section() -> Edit {
    Edit::Section {
        name: "guide".into(),
        body: guide::section(),
    }
}

/// A plan's edits, in the order they are made.
#[derive(Default)]
struct Edits(Vec<FileEdit>);

impl Edits {
    fn push(&mut self, (path, base): (PathBuf, PathBuf), edit: Edit, secret: bool) {
        self.0.push(FileEdit {
            path,
            edit,
            secret,
            base,
        });
    }

    /// Claude Code: the server in `.mcp.json` (project) or `~/.claude.json` (user, or
    /// "local" with HTTP), the guide in `CLAUDE.md` and a skill, the hooks in
    /// `.claude/settings.json`.
    fn claude_code(&mut self, t: &Target, value: Json, http: bool, extras: &Extras) {
        let name = t.name.as_str();
        let project = t.scope == Scope::Project;
        let dir = t.dir.to_string_lossy().into_owned();
        match (http, project) {
            (false, true) => self.push(
                at(&t.dir, ".mcp.json"),
                Edit::JsonMember {
                    path: path(&["mcpServers", name]),
                    value,
                },
                false,
            ),
            (false, false) => self.push(
                at(&t.home, ".claude.json"),
                Edit::JsonMember {
                    path: path(&["mcpServers", name]),
                    value,
                },
                false,
            ),
            // Claude Code's "local" scope: the user's file, for this project only.
            (true, true) => self.push(
                at(&t.home, ".claude.json"),
                Edit::JsonMember {
                    path: path(&["projects", &dir, "mcpServers", name]),
                    value,
                },
                true,
            ),
            (true, false) => self.push(
                at(&t.home, ".claude.json"),
                Edit::JsonMember {
                    path: path(&["mcpServers", name]),
                    value,
                },
                true,
            ),
        }
        if extras.guide {
            let (memory, skill) = match project {
                true => ("CLAUDE.md", ".claude/skills/cairn/SKILL.md"),
                false => (".claude/CLAUDE.md", ".claude/skills/cairn/SKILL.md"),
            };
            self.push(at(t.base(), memory), guide_section(), false);
            self.push(
                at(t.base(), skill),
                Edit::File {
                    content: guide::claude_skill(),
                },
                false,
            );
        }
        self.hook_items(
            at(t.base(), ".claude/settings.json"),
            extras,
            HOOK_TIMEOUT_SECONDS,
        );
    }

    /// Codex: the server in its `config.toml`, the guide in `AGENTS.md`.
    fn codex(&mut self, t: &Target, value: Json, http: bool, extras: &Extras) {
        let home = t.codex_home();
        self.push(
            (home.join("config.toml"), home.clone()),
            Edit::TomlTable {
                path: path(&["mcp_servers", t.name.as_str()]),
                value,
            },
            http,
        );
        if extras.guide {
            let agents = match t.scope == Scope::Project {
                true => at(&t.dir, "AGENTS.md"),
                false => (home.join("AGENTS.md"), home.clone()),
            };
            self.push(agents, guide_section(), false);
        }
    }

    /// Cursor, Gemini CLI and VS Code: the server in their JSON settings (Gemini CLI's
    /// hooks too), the guide in each one's rule or instruction file.
    fn json_settings(&mut self, t: &Target, value: Json, http: bool, extras: &Extras) {
        let project = t.scope == Scope::Project;
        let key = match t.client {
            Client::Vscode => "servers",
            _ => "mcpServers",
        };
        let file = match (t.client, project && !http) {
            (Client::Cursor, true) => at(&t.dir, ".cursor/mcp.json"),
            (Client::Cursor, false) => at(&t.home, ".cursor/mcp.json"),
            (Client::GeminiCli, true) => at(&t.dir, ".gemini/settings.json"),
            (Client::GeminiCli, false) => at(&t.home, ".gemini/settings.json"),
            (_, true) => at(&t.dir, ".vscode/mcp.json"),
            (_, false) => at(&t.home, ".config/Code/User/mcp.json"),
        };
        self.push(
            file,
            Edit::JsonMember {
                path: path(&[key, t.name.as_str()]),
                value,
            },
            http,
        );
        if t.client == Client::GeminiCli {
            // Gemini CLI's hooks sit in its settings, with a timeout in milliseconds.
            let settings = at(t.base(), ".gemini/settings.json");
            self.hook_items(settings, extras, HOOK_TIMEOUT_SECONDS * 1000);
        }
        if extras.guide {
            match (t.client, project) {
                (Client::Cursor, true) => self.push(
                    at(&t.dir, ".cursor/rules/cairn.mdc"),
                    Edit::File {
                        content: guide::cursor_rule(),
                    },
                    false,
                ),
                // Cursor's user rules live in its settings, not in a file.
                (Client::Cursor, false) => {}
                (Client::GeminiCli, true) => {
                    self.push(at(&t.dir, "GEMINI.md"), guide_section(), false)
                }
                (Client::GeminiCli, false) => {
                    self.push(at(&t.home, ".gemini/GEMINI.md"), guide_section(), false)
                }
                (_, true) => self.push(
                    at(&t.dir, ".github/copilot-instructions.md"),
                    guide_section(),
                    false,
                ),
                // VS Code's user instructions live in its settings.
                (_, false) => {}
            }
        }
    }

    /// One item per hook in `settings` (`hooks.<Event>[]`, the form Claude Code and
    /// Gemini CLI share): `{"hooks": [{"type": "command", "command", "timeout"}]}`.
    fn hook_items(&mut self, settings: (PathBuf, PathBuf), extras: &Extras, timeout: u64) {
        for (event, command) in &extras.hooks {
            let handler = object(vec![
                ("type", Json::String("command".into())),
                ("command", Json::String(command.clone())),
                ("timeout", Json::Number(timeout.into())),
            ]);
            self.push(
                settings.clone(),
                Edit::JsonItem {
                    path: path(&["hooks", event]),
                    value: object(vec![("hooks", Json::Array(vec![handler]))]),
                },
                false,
            );
        }
    }
}

/// The timeout written with each hook (seconds); `cairn hook` itself gives
/// up well before ([`super::hooks::BUDGET`]).
pub const HOOK_TIMEOUT_SECONDS: u64 = 10;

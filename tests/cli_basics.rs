//! The CLI for people and orchestrators: projects, issues, scope files, exit codes.

use crate::common::Env;

#[test]
fn project_and_issue_round_trip() {
    let env = Env::new();
    let repo = env.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    env.project("shop", Some(&repo));
    let id = env.ok(&[
        "issue",
        "create",
        "--project",
        "shop",
        "--title",
        "Fix checkout",
        "--priority",
        "2",
        "--label",
        "bug",
        "--label",
        "payments",
    ]);
    assert_eq!(id, "SHOP-1\n", "identifier alone on stdout");
    let second = env.issue("shop", "Second");
    assert_eq!(second, "SHOP-2");
    let shown = env.json(&["issue", "show", "SHOP-1"]);
    assert_eq!(shown["title"], "Fix checkout");
    assert_eq!(shown["priority"], 2);
    assert_eq!(shown["status"], "todo");
    assert_eq!(shown["labels"], serde_json::json!(["bug", "payments"]));
    let listed = env.json(&["issue", "list", "--project", "shop"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["identifier"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["SHOP-1", "SHOP-2"], "priority 2 before priority 3");
    let project = env.json(&["project", "show", "shop"]);
    assert_eq!(
        project["path"].as_str().unwrap(),
        std::fs::canonicalize(&repo).unwrap().to_str().unwrap()
    );
}

#[test]
fn custom_prefix_and_bad_input_exit_codes() {
    let env = Env::new();
    env.ok(&[
        "project", "create", "--slug", "web", "--name", "Web", "--prefix", "WB",
    ]);
    assert_eq!(env.issue("web", "x"), "WB-1");
    let bad = env.run(&["project", "create", "--slug", "Not A Slug", "--name", "n"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("slug"));
    let missing = env.run(&["issue", "show", "WB-99"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
}

#[test]
fn every_command_has_help() {
    // Every command and subcommand, found by walking the help itself: each prints its
    // usage, says what it is for, and every option it takes has a description.
    let env = Env::new();
    let commands_of = |help: &str| -> Vec<String> {
        help.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| *c != "help")
            .map(str::to_string)
            .collect()
    };
    let mut pending: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = env.ok(&args);
        let usage = format!("Usage: cairn {}", path.join(" "));
        assert!(out.contains(usage.trim_end()), "{args:?}: {out}");
        let about = out.lines().next().unwrap_or_default();
        assert!(
            !about.trim().is_empty() && !about.starts_with("Usage"),
            "{args:?} says nothing of itself: {out}"
        );
        // An option's description follows it on its line, or (clap's layout when the
        // help is long) on the next line, indented further.
        let lines: Vec<&str> = out.lines().collect();
        let indent = |l: &str| l.len() - l.trim_start().len();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if !(t.starts_with("--") || (t.starts_with('-') && t.contains(", --"))) {
                continue;
            }
            let same_line = t.split("  ").filter(|p| !p.trim().is_empty()).count() > 1;
            let next = lines.get(i + 1).copied().unwrap_or_default();
            let next_line = !next.trim().is_empty()
                && indent(next) > indent(line)
                && !next.trim_start().starts_with('-');
            assert!(
                same_line || next_line,
                "{args:?}: an option without a description: {line}"
            );
        }
        for c in commands_of(&out) {
            let mut next = path.clone();
            next.push(c);
            pending.push(next);
        }
        seen += 1;
    }
    // The walk reached every command (15 at the top, their subcommands below them).
    assert!(seen >= 45, "only {seen} commands found");
}

#[test]
fn scope_compute_writes_the_file_serve_reads_and_warns() {
    let env = Env::new();
    let out = env.path().join("tools-JUDGE.json");
    let o = env.run(&[
        "scope",
        "compute",
        "--profile",
        "judge",
        "--deny",
        "approve_pr",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("critical tool approve_pr"));
    let tools: Vec<String> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(tools.contains(&"reject_pr".to_string()));
    assert!(!tools.contains(&"approve_pr".to_string()));
    assert!(
        !tools.contains(&"create_issue".to_string()),
        "judges do not create issues"
    );
    // Stored lists are used by later computations.
    env.ok(&["scope", "set", "--profile", "judge", "--deny", "reject_pr"]);
    let shown = env.json(&["scope", "show", "--profile", "judge"]);
    assert_eq!(
        shown["stored"]["disallowed_tools"],
        serde_json::json!(["reject_pr"])
    );
    assert!(
        !shown["effective"]["tools"]
            .as_array()
            .unwrap()
            .contains(&"reject_pr".into())
    );
    let bad = env.run(&[
        "scope",
        "set",
        "--profile",
        "judge",
        "--deny",
        "no_such_tool",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_person_creates_a_sub_task_that_blocks_its_parent() {
    let env = Env::new();
    env.project("shop", None);
    let parent = env.issue("shop", "Parent");
    let child = env.ok(&[
        "issue",
        "subtask",
        &parent,
        "--title",
        "Child",
        "--description",
        "d",
        "--priority",
        "1",
    ]);
    assert_eq!(child.trim(), "SHOP-2");
    let c = env.json(&["issue", "show", "SHOP-2"]);
    assert_eq!(c["parent"], "SHOP-1");
    assert_eq!(c["priority"], 1);
    assert_eq!(c["description"], "d");
    assert_eq!(env.json(&["issue", "show", "SHOP-1"])["status"], "blocked");
}

/// `cairn issue list --json | head -1`: the reader goes away after one line while the
/// command still has most of its output to write; it ends quietly with exit 0.
#[test]
fn a_reader_that_closes_stdout_early_ends_the_command_quietly() {
    use std::io::BufRead;
    let env = Env::new();
    env.project("big", None);
    let description = "Every line of this description makes the listing longer. ".repeat(340);
    for i in 0..24 {
        let title = format!("Issue {i}");
        env.ok(&[
            "issue",
            "create",
            "--project",
            "big",
            "--title",
            &title,
            "--description",
            &description,
        ]);
    }
    let args = ["issue", "list", "--project", "big", "--json"];
    // Several times what a pipe holds (64 KiB on Linux): the command is still writing
    // when the reader leaves.
    let full = env.ok(&args);
    assert!(full.len() > 6 * 64 * 1024, "{} bytes", full.len());

    let mut child = env
        .cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first, "[\n");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "nothing on stderr for a closed stdout"
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

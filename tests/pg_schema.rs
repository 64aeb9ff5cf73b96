//! The PostgreSQL dialect of the migrations (`migrations/postgres/`), on a real
//! throwaway cluster ([`PgCluster`]), applied as the runner applies them (each file once,
//! in one transaction): the same tables, columns, keys and indexes as the SQLite schema,
//! and the database refusing what SQLite's triggers refuse, with the same messages.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::pg::PgCluster;

/// The migration files of one dialect, in order.
fn migration_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    files
}

fn sqlite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations")
}

fn postgres_dir() -> PathBuf {
    sqlite_dir().join("postgres")
}

/// A new database of the shared cluster with every PostgreSQL migration applied, each
/// file once and in one transaction (`psql -1 -v ON_ERROR_STOP=1 -f`).
fn migrated(name: &str) -> (&'static PgCluster, String) {
    let pg = PgCluster::shared();
    let db = PgCluster::database_of(&pg.create_database(name)).to_string();
    for f in migration_files(&postgres_dir()) {
        let out = pg.psql(&db).arg("-1").arg("-f").arg(&f).output().unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (pg, db)
}

/// An in-memory SQLite database with every SQLite migration applied.
fn sqlite_migrated() -> rusqlite::Connection {
    let c = rusqlite::Connection::open_in_memory().unwrap();
    for f in migration_files(&sqlite_dir()) {
        c.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    c
}

/// The statement fails with exactly `message` (psql prints `ERROR:  <message>`).
fn refused(pg: &PgCluster, db: &str, statement: &str, message: &str) {
    match pg.sql(db, statement) {
        Ok(out) => panic!("{statement}: accepted ({out}), expected {message:?}"),
        Err(e) => assert_eq!(e, format!("ERROR:  {message}"), "{statement}"),
    }
}

/// Rows of `SELECT` as sets of `|`-separated lines.
fn rows(pg: &PgCluster, db: &str, query: &str) -> BTreeSet<String> {
    pg.ok(db, query)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The SQLite schema of `migrations/*.sql`, described as the PostgreSQL one is below.
struct Described {
    /// `table|column|type|not null`
    columns: BTreeSet<String>,
    /// `table|col,col` of every unique index (primary keys included)
    uniques: BTreeSet<String>,
    /// `table|column|referenced table|referenced column|on delete`
    foreign_keys: BTreeSet<String>,
    indexes: BTreeSet<String>,
    triggers: BTreeSet<String>,
}

fn describe_sqlite() -> Described {
    let c = sqlite_migrated();
    let strings = |q: &str| -> BTreeSet<String> {
        let mut s = c.prepare(q).unwrap();
        s.query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    // FTS5's virtual table and its shadow tables have no PostgreSQL twin: the text
    // search is a generated column there.
    let tables = strings(
        "SELECT name FROM sqlite_master WHERE type = 'table'
           AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'issues_fts%'",
    );
    let pg_type = |t: &str| match t {
        "INTEGER" => "bigint",
        "TEXT" => "text",
        "REAL" => "double precision",
        "BLOB" => "bytea",
        other => panic!("SQLite type {other} has no mapping"),
    };
    let (mut columns, mut uniques, mut foreign_keys) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for t in &tables {
        let mut s = c
            .prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY pk")
            .unwrap();
        let cols: Vec<(String, String, bool, i64)> = s
            .query_map([t], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut pk = Vec::new();
        for (name, ty, not_null, in_pk) in cols {
            // A primary key column is NOT NULL in PostgreSQL (SQLite lets a TEXT one be NULL).
            let not_null = not_null || in_pk > 0;
            columns.insert(format!("{t}|{name}|{}|{not_null}", pg_type(&ty)));
            if in_pk > 0 {
                pk.push(name);
            }
        }
        uniques.insert(format!("{t}|{}", pk.join(",")));
        let mut s = c
            .prepare(
                "SELECT l.name, group_concat(i.name, ',') FROM pragma_index_list(?1) l,
                        pragma_index_info(l.name) i WHERE l.\"unique\" GROUP BY l.name",
            )
            .unwrap();
        for u in s
            .query_map([t], |r| r.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
        {
            uniques.insert(format!("{t}|{u}"));
        }
        let mut s = c
            .prepare(
                "SELECT \"from\", \"table\", \"to\", on_delete FROM pragma_foreign_key_list(?1)",
            )
            .unwrap();
        for fk in s
            .query_map([t], |r| {
                Ok(format!(
                    "{t}|{}|{}|{}|{}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
        {
            foreign_keys.insert(fk);
        }
    }
    Described {
        columns,
        uniques,
        foreign_keys,
        indexes: strings("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"),
        triggers: strings("SELECT name FROM sqlite_master WHERE type = 'trigger'"),
    }
}

fn describe_postgres(pg: &PgCluster, db: &str) -> Described {
    let on_delete = "CASE c.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'c' THEN 'CASCADE'
                     WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT'
                     WHEN 'r' THEN 'RESTRICT' END";
    Described {
        columns: rows(
            pg,
            db,
            "SELECT table_name || '|' || column_name || '|' || data_type || '|'
                    || (is_nullable = 'NO')
             FROM information_schema.columns WHERE table_schema = 'public'",
        ),
        uniques: rows(
            pg,
            db,
            "SELECT t.relname || '|' || string_agg(a.attname, ',' ORDER BY k.n)
             FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                  JOIN pg_namespace s ON s.oid = t.relnamespace AND s.nspname = 'public',
                  unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                  JOIN pg_attribute a ON a.attnum = k.attnum
             WHERE i.indisunique AND a.attrelid = i.indrelid
             GROUP BY t.relname, i.indexrelid",
        ),
        foreign_keys: rows(
            pg,
            db,
            &format!(
                "SELECT c.conrelid::regclass || '|' || a.attname || '|' || c.confrelid::regclass
                        || '|' || af.attname || '|' || {on_delete}
                 FROM pg_constraint c
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                 JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]
                 WHERE c.contype = 'f'"
            ),
        ),
        indexes: rows(
            pg,
            db,
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'",
        ),
        triggers: rows(
            pg,
            db,
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal",
        ),
    }
}

#[test]
fn pg_migrations_mirror_the_sqlite_schema() {
    let names = |dir: &Path| -> Vec<String> {
        migration_files(dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        names(&postgres_dir()),
        names(&sqlite_dir()),
        "every migration exists in both dialects, with the same number and name"
    );
    let (pg, db) = migrated("mirror");
    let lite = describe_sqlite();
    let post = describe_postgres(pg, &db);

    // The same columns with the mapped types and the same unique keys; PostgreSQL adds
    // only SQLite's implicit rowid where the application orders by it (unique), and the
    // text search column.
    same_but(
        "columns",
        &lite.columns,
        &post.columns,
        &[
            "issues|rowid|bigint|true",
            "issues|search_vector|tsvector|false",
            "pull_requests|rowid|bigint|true",
            "runs|rowid|bigint|true",
        ],
    );
    same_but(
        "unique keys",
        &lite.uniques,
        &post.uniques,
        &["issues|rowid", "pull_requests|rowid", "runs|rowid"],
    );
    assert_eq!(post.foreign_keys, lite.foreign_keys);
    let missing_indexes: Vec<_> = lite.indexes.difference(&post.indexes).collect();
    assert_eq!(missing_indexes, Vec::<&String>::new());
    assert!(post.indexes.contains("issues_search"), "{:?}", post.indexes);

    // Every SQLite trigger has its twin of the same name, except FTS5's upkeep (a
    // generated column needs none) and one renamed for PostgreSQL's firing order; and
    // each append-only table refuses TRUNCATE too.
    let expected: BTreeSet<String> = lite
        .triggers
        .iter()
        .filter(|t| !t.starts_with("issues_fts_"))
        .map(|t| match t.as_str() {
            "audit_sessions_identity_fixed" => "audit_sessions_fixed_identity".to_string(),
            other => other.to_string(),
        })
        .chain(
            [
                "trail_records_no_truncate",
                "thought_records_no_truncate",
                "audit_merkle_leaves_no_truncate",
                "audit_sessions_no_truncate",
                "learning_history_no_truncate",
            ]
            .map(String::from),
        )
        .collect();
    assert_eq!(post.triggers, expected);
}

/// PostgreSQL's set is SQLite's plus exactly `extra`.
fn same_but(what: &str, lite: &BTreeSet<String>, post: &BTreeSet<String>, extra: &[&str]) {
    let added: Vec<&str> = post.difference(lite).map(String::as_str).collect();
    let missing: Vec<&String> = lite.difference(post).collect();
    assert_eq!(
        (added, missing),
        (extra.to_vec(), vec![]),
        "{what}: (added, missing)"
    );
}

const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn pg_triggers_identities_and_issue_search_behave_as_in_sqlite() {
    let (cluster, db) = migrated("behaviour");
    let pg = |s: &str| cluster.ok(&db, s);
    let refused = |s: &str, m: &str| refused(cluster, &db, s, m);

    for statement in search_rows() {
        pg(&statement);
    }
    // SQLite's implicit rowid, explicit here: insertion order.
    assert_eq!(
        pg("SELECT string_agg(id, ',' ORDER BY rowid) FROM issues"),
        "iss_1,iss_2,iss_3"
    );

    // The trail: a chain of two, then every kind of tampering refused.
    let trail = |id: &str, pos: &str, prev: &str, hash: &str| {
        format!(
            "INSERT INTO trail_records(id, issue_id, position, kind, body, actor, created_at,
                                       prev_hash, hash)
             VALUES ('{id}', 'iss_1', {pos}, 'finding', '{{}}', 'agent', '2026-01-01T00:00:00Z',
                     '{prev}', '{hash}')"
        )
    };
    let next_link = "trail records are append-only: an insert must be the next link of its chain";
    refused(&trail("f-1", "2", ZEROS, "h1"), next_link);
    refused(&trail("f-1", "1", "h0", "h1"), next_link);
    pg(&trail("f-1", "1", ZEROS, "h1"));
    refused(&trail("f-2", "3", "h1", "h2"), next_link);
    refused(&trail("f-2", "2", ZEROS, "h2"), next_link);
    refused(&trail("f-1", "2", "h1", "h2"), next_link);
    refused(
        &format!(
            "{} ON CONFLICT (id) DO UPDATE SET body = 'x'",
            trail("f-1", "1", ZEROS, "hX")
        ),
        next_link,
    );
    pg(&trail("f-2", "2", "h1", "h2"));
    assert_eq!(
        pg("SELECT string_agg(id || ':' || position, ',' ORDER BY position) FROM trail_records"),
        "f-1:1,f-2:2"
    );
    refused(
        "UPDATE trail_records SET body = '{\"x\":1}' WHERE id = 'f-2'",
        "trail records are append-only: UPDATE refused",
    );
    refused(
        "DELETE FROM trail_records WHERE id = 'f-2'",
        "trail records are append-only: DELETE refused",
    );
    refused(
        "TRUNCATE trail_records CASCADE",
        "trail records are append-only: TRUNCATE refused",
    );
    // Truncating what the trail references cascades to it, and is refused the same way.
    refused(
        "TRUNCATE issues CASCADE",
        "trail records are append-only: TRUNCATE refused",
    );

    // Thought records: an insert onto an existing record or chain position is refused.
    let thought = |id: Option<i64>, pos: i64| {
        let (col, val) = id.map_or((String::new(), String::new()), |i| {
            ("id, ".into(), format!("{i}, "))
        });
        format!(
            "INSERT INTO thought_records({col}issue_id, task_ref, chain_position, type, content,
                                         hash, recorded_at, recorded_by)
             VALUES ({val}'iss_2', 'SHOP-2', {pos}, 'decision', 'c', 'h', '2026-01-01T00:00:00Z',
                     'agent') RETURNING id"
        )
    };
    let first = pg(&thought(None, 1));
    let thought_insert = "thought records are append-only: INSERT refused";
    refused(&thought(None, 1), thought_insert);
    refused(&thought(Some(first.parse().unwrap()), 2), thought_insert);
    let second = pg(&thought(None, 2));
    refused(
        "UPDATE thought_records SET content = 'x'",
        "thought records are append-only: UPDATE refused",
    );
    refused(
        "DELETE FROM thought_records",
        "thought records are append-only: DELETE refused",
    );
    refused(
        "TRUNCATE thought_records",
        "thought records are append-only: TRUNCATE refused",
    );

    // Identities: monotonic, and never reused, not even after the highest row is gone
    // or an insert failed (SQLite's AUTOINCREMENT; PostgreSQL may leave gaps).
    assert!(second.parse::<i64>().unwrap() > first.parse::<i64>().unwrap());
    let doc = |path: &str| {
        format!(
            "INSERT INTO vault_documents(root_key, path, collection, content_hash,
                                         chunker_version, embed_model, indexed_at)
             VALUES ('dir:/x', '{path}', 'notes', 'h', 1, 'm', '2026-01-01T00:00:00Z')
             RETURNING id"
        )
    };
    let ids: Vec<i64> = ["a.md", "b.md"]
        .map(|p| pg(&doc(p)).parse().unwrap())
        .into();
    assert!(ids[1] > ids[0], "{ids:?}");
    pg(&format!(
        "DELETE FROM vault_documents WHERE id = {}",
        ids[1]
    ));
    let again: i64 = pg(&doc("c.md")).parse().unwrap();
    assert!(
        again > ids[1],
        "a deleted id was reused: {again} after {ids:?}"
    );

    // Audit sessions and their frozen leaves.
    let session = pg(
        "INSERT INTO audit_sessions(issue_id, auditor_id, scope, started_at)
                      VALUES ('iss_1', 'auditor', 'deep', '2026-01-01T00:00:00Z') RETURNING id",
    );
    refused(
        &format!(
            "INSERT INTO audit_sessions(id, issue_id, auditor_id, scope, started_at)
             VALUES ({session}, 'iss_1', 'x', 'deep', '2026-01-01T00:00:00Z')"
        ),
        "audit sessions are append-only: INSERT refused",
    );
    let leaf = |pos: i64| {
        format!(
            "INSERT INTO audit_merkle_leaves(session_id, position, chain, record_id, hash)
             VALUES ({session}, {pos}, 'trail', 'f-{pos}', 'h{pos}')"
        )
    };
    let leaf_insert = "audit Merkle leaves are append-only: INSERT refused";
    // No leaf before the session says how many it has.
    refused(&leaf(1), leaf_insert);
    pg(&format!(
        "UPDATE audit_sessions SET leaf_count = 2, merkle_root = 'r' WHERE id = {session}"
    ));
    pg(&leaf(1));
    refused(&leaf(1), leaf_insert);
    pg(&leaf(2));
    refused(&leaf(3), leaf_insert);
    refused(
        &format!("UPDATE audit_sessions SET auditor_id = 'mallory' WHERE id = {session}"),
        "an audit session's identity is fixed: UPDATE refused",
    );
    // Naming an identity column without changing it is not a change.
    pg(&format!(
        "UPDATE audit_sessions SET auditor_id = 'auditor', tree_depth = 1 WHERE id = {session}"
    ));
    pg(&format!(
        "UPDATE audit_sessions SET finalized_at = '2026-01-02T00:00:00Z' WHERE id = {session}"
    ));
    refused(
        &format!("UPDATE audit_sessions SET merkle_root = 'other' WHERE id = {session}"),
        "audit session is finalized: UPDATE refused",
    );
    // Both rules broken: the identity's message, as in SQLite.
    refused(
        &format!("UPDATE audit_sessions SET scope = 'shallow' WHERE id = {session}"),
        "an audit session's identity is fixed: UPDATE refused",
    );
    refused(
        "DELETE FROM audit_sessions",
        "audit sessions are append-only: DELETE refused",
    );
    refused(
        "UPDATE audit_merkle_leaves SET hash = 'x'",
        "audit Merkle leaves are append-only: UPDATE refused",
    );
    refused(
        "DELETE FROM audit_merkle_leaves",
        "audit Merkle leaves are append-only: DELETE refused",
    );
    refused(
        "TRUNCATE audit_merkle_leaves",
        "audit Merkle leaves are append-only: TRUNCATE refused",
    );
    refused(
        "TRUNCATE audit_sessions CASCADE",
        "audit sessions are append-only: TRUNCATE refused",
    );

    // task_list's search, as migrations/postgres/0005_colibri.sql tells the application
    // to run it: prefixes, all tokens, title or description, diacritics folded, a
    // caller's token with punctuation a phrase, hostile text harmless.
    let search = |q: &str| {
        pg(&format!(
            "PREPARE search(text) AS
               SELECT coalesce(string_agg(identifier, ',' ORDER BY rowid), '') FROM issues i
               WHERE ($1::text IS NULL
                      OR i.search_vector @@ (SELECT cairn_issue_search_query($1::text)));
             EXECUTE search({})",
            quote(q)
        ))
    };
    for (q, found) in SEARCHES {
        assert_eq!(search(q), found, "search {q:?}");
    }
    // The same rows and searches on SQLite's FTS5, queried as the application queries
    // it (each whitespace-separated token quoted, as a prefix): the same answers.
    let lite = sqlite_migrated();
    for statement in search_rows() {
        lite.execute_batch(&statement).unwrap();
    }
    for (q, found) in SEARCHES {
        let tokens: Vec<String> = q
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|t| !t.is_empty())
            .map(|t| format!("\"{}\"*", t.replace('"', "\"\"")))
            .collect();
        if tokens.is_empty() {
            continue; // the application does not search then
        }
        let got: String = lite
            .query_row(
                "SELECT coalesce(group_concat(identifier, ','), '') FROM (
                   SELECT identifier FROM issues WHERE rowid IN
                     (SELECT rowid FROM issues_fts WHERE issues_fts MATCH ?1) ORDER BY rowid)",
                [tokens.join(" ")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(got, found, "SQLite FTS5, search {q:?}");
    }
    // The column follows the row.
    pg("UPDATE issues SET description = 'nothing left' WHERE id = 'iss_3'");
    assert_eq!(search("istanbul"), "");
    assert_eq!(search("nothing"), "SHOP-3");
}

/// A project and three issues, in SQL that both dialects run.
fn search_rows() -> Vec<String> {
    let mut rows = vec![
        "INSERT INTO projects(id, slug, name, prefix, created_at, updated_at)
         VALUES ('proj_1', 'shop', 'Shop', 'SHOP', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')"
            .to_string(),
    ];
    for (n, title, description) in [
        (1, "Wire up handler", "the task_create tool"),
        (2, "Write tests", "résumé of the naïve cases"),
        (3, "Paths", "see src/main.rs, foo-bar_baz and İstanbul"),
    ] {
        rows.push(format!(
            "INSERT INTO issues(id, project_id, seq, identifier, title, description,
                                created_at, updated_at)
             VALUES ('iss_{n}', 'proj_1', {n}, 'SHOP-{n}', '{title}', '{description}',
                     '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')"
        ));
    }
    rows
}

/// task_list searches over [`search_rows`] and the identifiers they find.
const SEARCHES: [(&str, &str); 24] = [
    ("handl", "SHOP-1"),
    ("resume naive", "SHOP-2"),
    ("RÉSUMÉ", "SHOP-2"),
    ("re\u{301}sume\u{301}", "SHOP-2"),
    ("istanbul", "SHOP-3"),
    ("main", "SHOP-3"),
    ("src/mai", "SHOP-3"),
    ("foo-ba", "SHOP-3"),
    ("bar_baz", "SHOP-3"),
    ("baz foo", "SHOP-3"),
    ("wire tool", "SHOP-1"),
    ("w", "SHOP-1,SHOP-2"),
    ("bar-foo", ""),
    ("cate", ""),
    // A phrase is never matched across the end of the title into the description.
    ("handler-the", ""),
    ("\"unbalanced", ""),
    ("AND OR NOT", ""),
    ("title:x NEAR(a b)", ""),
    ("*", ""),
    ("^ - + ( ) { } : ' \\", ""),
    ("\u{1}", ""),
    ("🐦 \u{2028}", ""),
    ("o'brien\\x 'w", ""),
    ("tests \u{a0}résumé", "SHOP-2"),
];

/// `s` as an SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A database created before migration 0010 (issue aliases), with an issue moved from
/// P-1 (its `moved-from:P-1` label) and a `moved-from:P-2` label on another issue while
/// P-2 is a live identifier; `before` runs on it the migrations before 0010 and `after`
/// the rest, on SQLite and PostgreSQL: the move becomes an alias, the live identifier
/// does not.
const BEFORE_0010: &str = "
    INSERT INTO projects (id, slug, name, prefix, next_seq, created_at, updated_at)
    VALUES ('proj_p', 'p', 'P', 'P', 3, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
           ('proj_q', 'q', 'Q', 'Q', 3, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
    INSERT INTO issues (id, project_id, seq, identifier, title, created_at, updated_at)
    VALUES ('iss_moved', 'proj_q', 1, 'Q-1', 'moved', '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
           ('iss_live', 'proj_p', 2, 'P-2', 'live', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
           ('iss_other', 'proj_q', 2, 'Q-2', 'other', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
    INSERT INTO issue_labels (issue_id, label)
    VALUES ('iss_moved', 'moved-from:P-1'), ('iss_other', 'moved-from:P-2');
";

#[test]
fn migration_0010_turns_earlier_moves_into_aliases_on_both_stores() {
    let split = |dir: &Path| -> (Vec<PathBuf>, Vec<PathBuf>) {
        migration_files(dir)
            .into_iter()
            .partition(|f| f.file_name().unwrap().to_string_lossy().as_ref() < "0010")
    };
    let (before, after) = split(&sqlite_dir());
    let c = rusqlite::Connection::open_in_memory().unwrap();
    for f in before {
        c.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap();
    }
    c.execute_batch(BEFORE_0010).unwrap();
    for f in after {
        c.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap();
    }
    let mut stmt = c
        .prepare("SELECT identifier, issue_id FROM issue_aliases ORDER BY identifier")
        .unwrap();
    let aliases: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(aliases, [("P-1".to_string(), "iss_moved".to_string())]);

    let (before, after) = split(&postgres_dir());
    let pg = PgCluster::shared();
    let db = PgCluster::database_of(&pg.create_database("aliases")).to_string();
    let apply = |f: &Path| {
        let out = pg.psql(&db).arg("-1").arg("-f").arg(f).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    before.iter().for_each(|f| apply(f));
    pg.ok(&db, BEFORE_0010);
    after.iter().for_each(|f| apply(f));
    let got = pg.ok(
        &db,
        "SELECT identifier || '=' || issue_id FROM issue_aliases ORDER BY 1",
    );
    assert_eq!(got.trim(), "P-1=iss_moved");
}

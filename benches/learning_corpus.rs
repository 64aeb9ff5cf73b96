//! Generated learnings for the benchmarks (`benches/learnings.rs`, `benches/load.rs`),
//! which include this file. Two corpora, both deterministic:
//!
//! - [`Corpus::Hard`]: every word drawn from short lists (50 technologies, 25 things, 20
//!   actions, 16 gotchas, 6 contexts) in one sentence shape. Each word is in several
//!   percent of all learnings, so a query's postings lists are long at any size: the
//!   hard case for the lexical half.
//! - [`Corpus::Zipf`]: word frequencies that follow real learnings. The vocabulary is every
//!   token of the learnings of `tests/eval/*.jsonl` (patterns and contexts, 488 learnings,
//!   about 6,000 distinct tokens; identifiers, paths and versions kept whole, case kept),
//!   ranked by how often those learnings use it, then twice as many compound identifiers
//!   (`word_word`, `wordWord`, `word/word.rs`, from two of those tokens) ranked after
//!   them: the rare names a large corpus keeps adding. Each word of a learning is a Zipf
//!   draw (probability ∝ 1 / rank, exponent 1) over that ranked vocabulary; a pattern has
//!   as many words as a random real pattern, a context (as many real learnings have one)
//!   as many as a random real context, and `applies_to` 0-2 of the real learnings' paths.
//!   Queries are the real queries of the same files.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use cairn::base::rng::SplitMix64;

/// The two corpora.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corpus {
    Hard,
    Zipf,
}

impl Corpus {
    pub fn parse(s: &str) -> Option<Corpus> {
        match s.trim() {
            "hard" => Some(Corpus::Hard),
            "zipf" => Some(Corpus::Zipf),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Corpus::Hard => "hard",
            Corpus::Zipf => "zipf",
        }
    }
}

/// One generated learning.
pub struct Gen {
    pub pattern: String,
    pub context: Option<String>,
    pub applies_to: Vec<String>,
}

/// A corpus's generator: call [`Generator::next`] for each learning in turn.
pub struct Generator {
    rng: Rng,
    zipf: Option<&'static Zipf>,
}

impl Generator {
    /// The generator of `corpus`, seeded.
    pub fn new(corpus: Corpus, seed: u64) -> Generator {
        Generator {
            rng: Rng(SplitMix64::new(seed)),
            zipf: (corpus == Corpus::Zipf).then(Zipf::get),
        }
    }

    pub fn next(&mut self) -> Gen {
        match self.zipf {
            Some(z) => z.generate(&mut self.rng),
            None => hard(&mut self.rng),
        }
    }
}

/// Natural-language queries of the kind agents send: 40 of each corpus's own shape.
pub fn queries(corpus: Corpus) -> Vec<String> {
    match corpus {
        Corpus::Hard => hard_queries(),
        Corpus::Zipf => Zipf::get().queries.clone(),
    }
}

/// Corpus choices over the crate's seeded PRNG.
pub struct Rng(pub SplitMix64);

impl Rng {
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.0.below(xs.len() as u64) as usize]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.below(100) < percent
    }
    /// Uniform in `[0, 1)` (`below(u64::MAX)` misses one value of 2^64: a raw draw here).
    fn unit(&mut self) -> f64 {
        (self.0.below(u64::MAX) >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub const TECH: &[&str] = &[
    "Postgres",
    "SQLite",
    "Redis",
    "Kafka",
    "nginx",
    "Docker",
    "Kubernetes",
    "Terraform",
    "React",
    "Vue",
    "Nuxt",
    "Next.js",
    "webpack",
    "Vite",
    "Jest",
    "Vitest",
    "Playwright",
    "Cypress",
    "GraphQL",
    "gRPC",
    "tokio",
    "serde",
    "axum",
    "Django",
    "Rails",
    "Spring",
    "Prisma",
    "TypeORM",
    "Celery",
    "RabbitMQ",
    "Elasticsearch",
    "S3",
    "Lambda",
    "Cloudflare",
    "GitHub Actions",
    "Helm",
    "ESLint",
    "Prettier",
    "Tailwind",
    "Storybook",
    "pnpm",
    "cargo",
    "rustls",
    "OpenSSL",
    "Sentry",
    "Datadog",
    "Stripe",
    "OAuth",
    "JWT",
    "WebSocket",
];
pub const THING: &[&str] = &[
    "connection pool",
    "migrations",
    "cache keys",
    "retry policy",
    "health check",
    "feature flags",
    "env variables",
    "build cache",
    "test fixtures",
    "auth middleware",
    "rate limiter",
    "background jobs",
    "file uploads",
    "log format",
    "error boundaries",
    "query builder",
    "snapshot tests",
    "lock file",
    "config loader",
    "request timeout",
    "session store",
    "webhook handler",
    "schema validation",
    "date parsing",
    "pagination",
];
const VERB: &[&str] = &[
    "always",
    "never",
    "prefer to",
    "avoid trying to",
    "make sure to",
    "remember to",
    "do not",
    "be careful to",
];
const ACTION: &[&str] = &[
    "pin the version of",
    "close the pool used by",
    "set an explicit timeout on",
    "await every promise returned by",
    "mock the clock before testing",
    "invalidate the cache of",
    "run the migrations before starting",
    "wrap a transaction around",
    "batch the requests to",
    "disable auto-import for",
    "import explicitly from",
    "restart the watcher of",
    "validate the payload sent to",
    "sort the keys produced by",
    "reuse the client of",
    "stub the network calls of",
    "configure the retries of",
    "check the exit code of",
    "escape user input passed to",
    "bump the memory limit of",
];
const GOTCHA: &[&str] = &[
    "or the tests hang forever in CI",
    "otherwise CI fails with a cryptic error",
    "because the default timeout is unbounded",
    "since it silently drops messages under load",
    "or you'll get already-defined errors at build time",
    "because it leaks file descriptors",
    "otherwise deploys serve stale assets",
    "or the container is OOM-killed",
    "because the lock is held across await points",
    "since retries are not idempotent",
    "or flaky failures appear only on Mondays",
    "because the fake timers never advance",
    "otherwise the migration deadlocks with the app",
    "because prod uses a different locale",
    "or the snapshot order changes between runs",
    "since the token expires after an hour",
];
pub const PATHS: &[&str] = &[
    "src/api/",
    "app/utils/",
    "app/composables/",
    "server/db/",
    "migrations/",
    "tests/e2e/",
    "packages/ui/",
    "infra/terraform/",
    ".github/workflows/",
    "src/workers/",
    "lib/auth/",
    "config/",
    "scripts/",
    "src/components/",
    "crates/core/src/",
];
const CONTEXT: &[&str] = &[
    "This bit us during the release of the billing service, when the nightly import job ran against staging.",
    "Seen repeatedly in the monorepo after upgrading dependencies; the failure only shows under parallel test runs.",
    "Applies to every service that talks to the shared database through the common client wrapper.",
    "We lost half a day to this while debugging the checkout flow; the logs pointed at the wrong component.",
    "Reproduced locally with the docker compose setup; CI runners with fewer cores hit it much more often.",
    "The behaviour changed in the last major version, and the upgrade guide does not mention it at all.",
];

fn hard(rng: &mut Rng) -> Gen {
    let t1 = rng.pick(TECH);
    let t2 = rng.pick(TECH);
    let pattern = format!(
        "{t1} {}: {} {} {t2} {}",
        rng.pick(THING),
        rng.pick(VERB),
        rng.pick(ACTION),
        rng.pick(GOTCHA)
    );
    let context = rng.chance(50).then(|| {
        format!(
            "{} Relevant for {} and {}.",
            rng.pick(CONTEXT),
            rng.pick(TECH),
            rng.pick(PATHS)
        )
    });
    let applies_to = (0..rng.0.below(3))
        .map(|_| rng.pick(PATHS).to_string())
        .collect();
    Gen {
        pattern,
        context,
        applies_to,
    }
}

fn hard_queries() -> Vec<String> {
    let mut rng = Rng(SplitMix64::new(0xC0FFEE));
    let shapes: [fn(&mut Rng) -> String; 5] = [
        |r| {
            format!(
                "how do I fix {} {} timeout in ci",
                r.pick(TECH),
                r.pick(THING)
            )
        },
        |r| format!("{} {} flaky tests", r.pick(TECH), r.pick(THING)),
        |r| {
            format!(
                "why does {} leak file descriptors with {}",
                r.pick(TECH),
                r.pick(TECH)
            )
        },
        |r| format!("{} migrations deadlock {}", r.pick(TECH), r.pick(PATHS)),
        |r| format!("auto-imp {} already defined error", r.pick(TECH)),
    ];
    (0..40)
        .map(|i| shapes[i % shapes.len()](&mut rng))
        .collect()
}

/// A pattern or context shorter than Cairn accepts is drawn again (the store's limits:
/// 50 and 100 characters).
const PATTERN_MIN: usize = 50;
const CONTEXT_MIN: usize = 100;

/// The ranked vocabulary and the shapes of the real learnings (see the module docs).
struct Zipf {
    /// Tokens by rank: the real ones by frequency, then the compounds.
    vocabulary: Vec<String>,
    /// Cumulative Zipf weights of the ranks, normalised to end at 1.
    cdf: Vec<f64>,
    /// Words per real pattern, and per real context.
    pattern_words: Vec<usize>,
    context_words: Vec<usize>,
    /// Percent of real learnings that have a context.
    context_percent: u64,
    paths: Vec<String>,
    queries: Vec<String>,
}

/// The tokens of a real text: runs of letters, digits and `_ . / -` inside a word, as
/// identifiers, paths and versions are written (`openssl-sys`, `src/api/mod.rs`, `1.8`).
fn tokens(text: &str) -> Vec<&str> {
    let inner = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    text.split(|c: char| !inner(c))
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|t| !t.is_empty())
        .collect()
}

fn eval_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/eval");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/eval")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

impl Zipf {
    fn get() -> &'static Zipf {
        static ZIPF: std::sync::OnceLock<Zipf> = std::sync::OnceLock::new();
        ZIPF.get_or_init(Zipf::load)
    }

    fn load() -> Zipf {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        let (mut pattern_words, mut context_words) = (Vec::new(), Vec::new());
        let (mut learnings, mut paths, mut queries) = (0, Vec::new(), Vec::new());
        for file in eval_files() {
            for line in std::fs::read_to_string(&file).unwrap().lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                match v["type"].as_str() {
                    Some("learning") => {}
                    Some("query") => {
                        if let Some(q) = v["query"].as_str() {
                            queries.push(q.to_string());
                        }
                        continue;
                    }
                    _ => continue,
                }
                learnings += 1;
                let pattern = v["pattern"].as_str().unwrap_or_default();
                pattern_words.push(tokens(pattern).len());
                let context = v["context"].as_str().unwrap_or_default();
                if !context.is_empty() {
                    context_words.push(tokens(context).len());
                }
                for t in tokens(pattern).into_iter().chain(tokens(context)) {
                    let next = counts.len();
                    counts.entry(t.to_string()).or_insert((0, next)).0 += 1;
                }
                for p in v["applies_to"].as_array().into_iter().flatten() {
                    if let Some(p) = p.as_str() {
                        paths.push(p.to_string());
                    }
                }
            }
        }
        assert!(learnings > 0, "no learnings in tests/eval/*.jsonl");
        // By frequency, ties in order of first appearance (deterministic).
        let mut real: Vec<(String, (usize, usize))> = counts.into_iter().collect();
        real.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
        let mut vocabulary: Vec<String> = real.into_iter().map(|(t, _)| t).collect();
        let parts: Vec<String> = vocabulary
            .iter()
            .filter(|t| t.len() >= 3 && t.chars().all(|c| c.is_ascii_lowercase()))
            .cloned()
            .collect();
        let mut rng = Rng(SplitMix64::new(0x5EED));
        for _ in 0..2 * vocabulary.len() {
            let a = &parts[rng.0.below(parts.len() as u64) as usize];
            let b = &parts[rng.0.below(parts.len() as u64) as usize];
            vocabulary.push(match rng.0.below(3) {
                0 => format!("{a}_{b}"),
                1 => {
                    let mut upper = b.chars();
                    let first = upper.next().unwrap().to_ascii_uppercase();
                    format!("{a}{first}{}", upper.as_str())
                }
                _ => format!("{a}/{b}.rs"),
            });
        }
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (1..=vocabulary.len())
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        for x in &mut cdf {
            *x /= total;
        }
        // Forty queries spread over every file's, in file order.
        let step = (queries.len() / 40).max(1);
        let queries = queries.into_iter().step_by(step).take(40).collect();
        Zipf {
            vocabulary,
            cdf,
            pattern_words,
            context_percent: (context_words.len() * 100 / learnings) as u64,
            context_words,
            paths,
            queries,
        }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let rank = self.cdf.partition_point(|c| *c < u);
        &self.vocabulary[rank.min(self.vocabulary.len() - 1)]
    }

    fn text(&self, rng: &mut Rng, lengths: &[usize], min: usize) -> String {
        loop {
            let n = lengths[rng.0.below(lengths.len() as u64) as usize];
            let words: Vec<&str> = (0..n).map(|_| self.word(rng)).collect();
            let text = format!("{}.", words.join(" "));
            if text.chars().count() >= min {
                return text;
            }
        }
    }

    fn generate(&self, rng: &mut Rng) -> Gen {
        let pattern = self.text(rng, &self.pattern_words, PATTERN_MIN);
        let context = rng
            .chance(self.context_percent)
            .then(|| self.text(rng, &self.context_words, CONTEXT_MIN));
        let applies_to = (0..rng.0.below(3))
            .map(|_| self.paths[rng.0.below(self.paths.len() as u64) as usize].clone())
            .collect();
        Gen {
            pattern,
            context,
            applies_to,
        }
    }
}

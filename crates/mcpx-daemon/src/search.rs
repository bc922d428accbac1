//! Tool search: ranks tools against a user's words with BM25F (Robertson and Zaragoza, "The
//! Probabilistic Relevance Framework: BM25 and Beyond", 2009, section 3.6) over each tool's
//! name, title, server, description and parameter names.
//!
//! An [`Index`] holds the tools' words and the collection's statistics. The daemon keeps the
//! last few ([`Indexes`]), keyed by what they were built from (each server's
//! cached listing, its tool filters and its holds), so a query costs only the scoring
//! while no listing changes, and a changed listing is read at the next query. Names are split
//! into words at `_`, `-`, `.`, spaces and camelCase boundaries, every word is lowercased and
//! lightly stemmed (plurals, `-ing`, `-ed`), and common English words are ignored in the query.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::value::RawValue;

/// The searchable text of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolText {
    /// The server's name, as configured.
    pub server: String,
    /// The tool's name, as the server sent it.
    pub name: String,
    /// The tool's `title`, or its `annotations.title` (MCP 2025-06-18, "Tools").
    pub title: Option<String>,
    /// The tool's description.
    pub description: Option<String>,
    /// The names of the properties of the tool's `inputSchema`.
    pub params: Vec<String>,
}

impl ToolText {
    /// Reads the searchable parts of a tool object as a server sent it in `tools/list`.
    ///
    /// Returns `None` when the object has no string `name`.
    pub fn from_tool(server: &str, tool: &RawValue) -> Option<ToolText> {
        let t: RawTool = serde_json::from_str(tool.get()).ok()?;
        let params = t.input_schema.and_then(|s| s.properties).map(|p| p.into_keys().collect()).unwrap_or_default();
        Some(ToolText {
            server: server.to_owned(),
            name: t.name,
            title: t.title.or_else(|| t.annotations.and_then(|a| a.title)),
            description: t.description,
            params,
        })
    }
}

/// Ranks `tools` against the words of `query`: [`Index::rank`] of an index built for
/// this one query.
pub fn rank(tools: &[ToolText], query: &[String]) -> Vec<(usize, f64)> {
    Index::new(tools.to_vec()).rank(query)
}

/// The tools of a search, with their words counted and the collection's statistics, built
/// once and ranked against any number of queries.
pub struct Index {
    tools: Vec<ToolText>,
    docs: Vec<Doc>,
    stats: Stats,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("tools", &self.tools.len()).finish_non_exhaustive()
    }
}

impl Index {
    /// The index of `tools`, in their order.
    pub fn new(tools: Vec<ToolText>) -> Index {
        let docs: Vec<Doc> = tools.iter().map(Doc::new).collect();
        let stats = Stats::new(&docs);
        Index { tools, docs, stats }
    }

    /// The tools, in the order [`Index::rank`]'s indices refer to.
    pub fn tools(&self) -> &[ToolText] {
        &self.tools
    }

    /// Ranks the tools against the words of `query` (any number of words per string).
    ///
    /// Returns `(index into the tools, score)` for every tool that matches at least one
    /// query word, best first; equal scores keep the tools' order. When every query word
    /// is a common word ("the", "a", ...), those words are searched for rather than nothing.
    pub fn rank(&self, query: &[String]) -> Vec<(usize, f64)> {
        rank_docs(&self.docs, &self.stats, query)
    }
}

/// How many indexes [`Indexes`] keeps: a few callers, profiles or projects at once.
pub const KEPT_INDEXES: usize = 4;

/// The last [`KEPT_INDEXES`] indexes the daemon built, each by a hash of what it was
/// built from (each server's cached listing, holds and tool filters), so a query while
/// nothing changed costs only the scoring.
#[derive(Debug, Default)]
pub struct Indexes(std::sync::Mutex<Vec<(u64, std::sync::Arc<Index>)>>);

impl Indexes {
    /// The index whose inputs hash to `key`, built by `build` when none is kept.
    pub fn get(&self, key: u64, build: impl FnOnce() -> Index) -> std::sync::Arc<Index> {
        if let Some((_, index)) = crate::sync::lock(&self.0).iter().find(|(k, _)| *k == key) {
            return index.clone();
        }
        let index = std::sync::Arc::new(build());
        let mut kept = crate::sync::lock(&self.0);
        if kept.len() >= KEPT_INDEXES {
            kept.remove(0);
        }
        kept.push((key, index.clone()));
        index
    }
}

/// [`Index::rank`] over `docs` and their `stats`.
fn rank_docs(docs: &[Doc], stats: &Stats, query: &[String]) -> Vec<(usize, f64)> {
    let typed: Vec<String> = query.iter().flat_map(|q| words(q)).collect();
    let mut kept: Vec<&String> = typed.iter().filter(|w| !STOP_WORDS.contains(&w.as_str())).collect();
    if kept.is_empty() {
        kept = typed.iter().collect();
    }
    let mut seen = HashSet::new();
    kept.retain(|w| seen.insert(stem(w)));
    if kept.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    // Each word: its stem and synonyms (the best of them counts), and the word as typed.
    let terms: Vec<(Vec<(String, f64)>, String)> =
        kept.iter().map(|w| (expansions(&stem(w)), format!("={w}"))).collect();
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let score = terms
                .iter()
                .map(|(alts, exact)| {
                    let best = alts.iter().map(|(t, w)| w * stats.term_score(doc, t)).fold(0.0, f64::max);
                    best + EXACT_WEIGHT * stats.term_score(doc, exact)
                })
                .sum::<f64>();
            (i, score)
        })
        .filter(|(_, score)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// The fields of a tool, each with its weight in BM25F's combined term frequency.
#[derive(Debug, Clone, Copy)]
enum Field {
    Name,
    Title,
    Server,
    Description,
    Params,
}

impl Field {
    const ALL: [Field; 5] = [Field::Name, Field::Title, Field::Server, Field::Description, Field::Params];

    /// How much a word found in this field counts, against 1 for the description.
    fn weight(self) -> f64 {
        match self {
            Field::Name => 2.0,
            Field::Title | Field::Server | Field::Description => 1.0,
            // Parameter names are weak evidence (`page_size` is not about pages).
            Field::Params => 0.1,
        }
    }
}

/// BM25's saturation of the term frequency.
const K1: f64 = 1.2;
/// How much a field's length lowers the weight of a word found in it (BM25's `b`), for
/// every field. Below the usual 0.75: a long description is often long because it is
/// careful, not because it is about many things.
const B: f64 = 0.5;

/// One tool's fields as stemmed words: how often each occurs, and how many words there are.
struct Doc {
    fields: [(HashMap<String, u32>, usize); 5],
}

impl Doc {
    fn new(t: &ToolText) -> Doc {
        let count = |texts: &mut dyn Iterator<Item = &str>| {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut len = 0;
            for w in texts.flat_map(words) {
                *counts.entry(stem(&w)).or_default() += 1;
                // The word as written, for the bonus of an exact match.
                *counts.entry(format!("={w}")).or_default() += 1;
                len += 1;
            }
            (counts, len)
        };
        Doc {
            fields: [
                count(&mut std::iter::once(t.name.as_str())),
                count(&mut t.title.as_deref().into_iter()),
                count(&mut std::iter::once(t.server.as_str())),
                count(&mut t.description.as_deref().into_iter()),
                count(&mut t.params.iter().map(String::as_str)),
            ],
        }
    }

    fn contains(&self, term: &str) -> bool {
        self.fields.iter().any(|(counts, _)| counts.contains_key(term))
    }
}

/// What BM25F needs of the whole collection: document frequencies and mean field lengths.
struct Stats {
    docs: f64,
    df: HashMap<String, f64>,
    mean_len: [f64; 5],
}

impl Stats {
    fn new(docs: &[Doc]) -> Stats {
        let mut df: HashMap<String, f64> = HashMap::new();
        let mut total = [0.0; 5];
        for doc in docs {
            let mut unique: HashSet<&str> = HashSet::new();
            for (i, (counts, len)) in doc.fields.iter().enumerate() {
                total[i] += *len as f64;
                unique.extend(counts.keys().map(String::as_str));
            }
            for w in unique {
                *df.entry(w.to_owned()).or_default() += 1.0;
            }
        }
        let n = docs.len() as f64;
        Stats { docs: n, df, mean_len: total.map(|t| (t / n).max(1.0)) }
    }

    /// One query term's contribution to a document's score.
    fn term_score(&self, doc: &Doc, term: &str) -> f64 {
        if !doc.contains(term) {
            return 0.0;
        }
        let tf: f64 = Field::ALL
            .iter()
            .enumerate()
            .map(|(i, field)| {
                let (counts, len) = &doc.fields[i];
                let count = counts.get(term).copied().unwrap_or(0) as f64;
                let norm = 1.0 - B + B * *len as f64 / self.mean_len[i];
                field.weight() * count / norm
            })
            .sum();
        let df = self.df.get(term).copied().unwrap_or(0.0);
        let idf = (1.0 + (self.docs - df + 0.5) / (df + 0.5)).ln();
        idf * tf / (K1 + tf)
    }
}

/// How much a word found exactly as typed (`requests`, not just `request`) adds, against 1
/// for its stem: it only tells apart tools that the stems rank alike.
const EXACT_WEIGHT: f64 = 0.25;

/// How much a synonym found counts, against 1 for the word the user typed.
const SYNONYM_WEIGHT: f64 = 0.5;

/// Verbs that tools and their users name the same actions with (an API's CRUD verbs and
/// their everyday words). A query word also finds the other words of its groups, at
/// [`SYNONYM_WEIGHT`].
const SYNONYMS: &[&[&str]] = &[
    &["create", "make", "new", "add", "open"],
    &["get", "fetch", "retrieve", "read", "show", "view", "display"],
    &["list", "show", "enumerate"],
    &["delete", "remove", "erase"],
    &["update", "edit", "modify", "change"],
    &["search", "find", "look", "lookup", "query"],
    &["run", "execute", "evaluate", "invoke", "exec"],
    &["write", "save", "store"],
    &["add", "insert", "append", "put", "store", "save"],
    &["send", "post"],
    &["move", "rename"],
];

/// A stemmed query term and its synonyms, stemmed, with the weight each counts with.
fn expansions(term: &str) -> Vec<(String, f64)> {
    let mut out = vec![(term.to_owned(), 1.0)];
    for group in SYNONYMS.iter().filter(|g| g.iter().any(|w| stem(w) == term)) {
        for w in group.iter().map(|w| stem(w)) {
            if !out.iter().any(|(t, _)| *t == w) {
                out.push((w, SYNONYM_WEIGHT));
            }
        }
    }
    out
}

/// Words of English that say nothing about what a tool does.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "please", "some", "that", "the", "this", "to",
    "up", "what", "which", "with", "you", "your",
];

/// The lowercase words of `text`: runs of letters and digits, cut also where a lowercase
/// letter or digit meets an uppercase one (`getUser`), and before the last capital of a run
/// of capitals followed by a lowercase letter (`HTTPServer` is `http server`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
        let chars: Vec<char> = run.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let cut = (cur.is_uppercase() && (prev.is_lowercase() || prev.is_numeric()))
                || (cur.is_uppercase() && prev.is_uppercase() && next_lower);
            if cut {
                out.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        out.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    out
}

/// A light English stemmer: plural `-s`/`-es`/`-ies`, `-ing` and `-ed` are removed, so that
/// "files" finds "file" and "created" finds "create". It errs on the side of leaving a word
/// alone: a stem is never shorter than three letters.
fn stem(word: &str) -> String {
    let w = word;
    let n = w.chars().count();
    if !w.is_ascii() || n <= 3 {
        return w.to_owned();
    }
    if let Some(s) = w.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{s}y");
    }
    if let Some(s) = w.strip_suffix("sses") {
        return format!("{s}ss");
    }
    for suffix in ["ing", "ed"] {
        if let Some(s) = w.strip_suffix(suffix).filter(|s| s.len() >= 3 && s.bytes().any(|b| is_vowel(&b))) {
            return undouble(s);
        }
    }
    if let Some(s) = w.strip_suffix("es").filter(|s| s.ends_with(['x', 'z']) || s.ends_with("ch") || s.ends_with("sh"))
    {
        return s.to_owned();
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return strip_e(&w[..w.len() - 1]);
    }
    strip_e(w)
}

/// `runn` is `run` (a doubled final consonant left by `-ing` or `-ed`), and an `-e` stem
/// (`creat` from `created`) is met by removing the final `e` everywhere (`create`).
fn undouble(s: &str) -> String {
    let b = s.as_bytes();
    let n = b.len();
    if n >= 4 && b[n - 1] == b[n - 2] && !is_vowel(&b[n - 1]) && !matches!(b[n - 1], b'l' | b's' | b'z') {
        return s[..n - 1].to_owned();
    }
    s.to_owned()
}

/// The word without a final silent `e`, when that leaves three letters or more.
fn strip_e(w: &str) -> String {
    match w.strip_suffix('e') {
        Some(s) if s.len() >= 3 => s.to_owned(),
        _ => w.to_owned(),
    }
}

fn is_vowel(b: &u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// The parts of a tool object the search reads.
#[derive(Deserialize)]
struct RawTool {
    name: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "inputSchema")]
    input_schema: Option<RawSchema>,
    #[serde(default)]
    annotations: Option<RawAnnotations>,
}

#[derive(Deserialize)]
struct RawSchema {
    /// Only the names are read; the schemas are skipped unparsed.
    #[serde(default)]
    properties: Option<std::collections::BTreeMap<String, serde::de::IgnoredAny>>,
}

#[derive(Deserialize)]
struct RawAnnotations {
    #[serde(default)]
    title: Option<String>,
}

#[cfg(test)]
mod tests;

//! The workspace as the tidy checks see it: every Rust file under `crates/` with its
//! production facts, each crate's module tree (a module is a file; an inline `mod x { … }`
//! belongs to its file), and the import graph between a crate's modules with the circles
//! in it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::source::{self, Facts, PathRef};

/// A module's path from its crate root (`[]` for `lib.rs` or `main.rs`).
pub type ModPath = Vec<String>;

/// Every Rust file under `crates/`, and the crates' module trees.
pub struct Workspace {
    /// The repository's root (`.` for a workspace made of given files).
    pub root: PathBuf,
    /// The files, in path order.
    pub files: Vec<SourceFile>,
    /// One module tree per crate root (`src/lib.rs`, `src/main.rs`).
    pub crates: Vec<ModTree>,
    /// `ARCHITECTURE.md`'s text (empty when there is none).
    pub architecture: String,
}

/// One Rust file.
pub struct SourceFile {
    /// Its path from the repository root, with `/` separators.
    pub rel: String,
    /// Its text.
    pub text: String,
    /// What its production code says.
    pub facts: Facts,
    /// Whether it is test code as a whole: not reachable from a crate root through
    /// production `mod` declarations (`tests.rs`, `tests/`, the integration tests).
    pub test: bool,
}

impl SourceFile {
    /// `rel:line` of byte offset `at`, for messages.
    pub fn place(&self, at: usize) -> String {
        format!("{}:{}", self.rel, source::line_of(&self.text, at))
    }
}

/// The module tree of one crate root.
pub struct ModTree {
    /// The crate's directory name (`mcpx-daemon`).
    pub name: String,
    /// The directory its module files are in, from the repository root (`crates/mcpx/src`).
    pub src: String,
    /// The file modules: path to the index of their file in [`Workspace::files`].
    pub modules: BTreeMap<ModPath, usize>,
    /// The inline modules (`mod x { … }`), which belong to their file.
    pub inline: BTreeSet<ModPath>,
}

/// Where an edge of the import graph comes from: the first place the path is named.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// `file:line`.
    pub place: String,
    /// The path as written.
    pub path: String,
}

impl Workspace {
    /// Reads every `.rs` file under `<root>/crates` and builds the module trees.
    pub fn load(root: &Path) -> Workspace {
        let mut paths = Vec::new();
        rust_files(&root.join("crates"), &mut paths);
        let files = paths.iter().map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            (p.strip_prefix(root).unwrap_or(p).to_string_lossy().replace('\\', "/"), text)
        });
        let mut ws = Workspace::from_files(files.collect());
        ws.root = root.to_owned();
        ws.architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
        ws
    }

    /// The workspace of these files: (path from the repository root, text).
    pub fn from_files(mut sources: Vec<(String, String)>) -> Workspace {
        sources.sort();
        let mut files: Vec<SourceFile> = sources
            .into_iter()
            .map(|(rel, text)| SourceFile { facts: source::facts(&text), rel, text, test: true })
            .collect();
        let by_rel: HashMap<String, usize> = files.iter().enumerate().map(|(i, f)| (f.rel.clone(), i)).collect();
        let mut roots: Vec<(String, usize)> = files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let (name, file) = f.rel.strip_prefix("crates/")?.split_once("/src/")?;
                matches!(file, "lib.rs" | "main.rs").then(|| (name.to_owned(), i))
            })
            .collect();
        roots.sort();
        let mut crates = Vec::new();
        for (name, index) in roots {
            let src = format!("crates/{name}/src");
            let mut tree = ModTree { name, src, modules: BTreeMap::new(), inline: BTreeSet::new() };
            tree.add(&mut files, &by_rel, Vec::new(), index);
            crates.push(tree);
        }
        Workspace { root: PathBuf::from("."), files, crates, architecture: String::new() }
    }

    /// The file at `rel`, if it exists.
    #[cfg(test)]
    pub fn file(&self, rel: &str) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.rel == rel)
    }
}

/// Collects the `.rs` files under `dir`, skipping build output and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "snapshots" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

impl ModTree {
    /// Adds the module at `path`, whose file is `files[index]`, and every module it
    /// declares, marking their files as production code.
    fn add(&mut self, files: &mut [SourceFile], by_rel: &HashMap<String, usize>, path: ModPath, index: usize) {
        files[index].test = false;
        self.modules.insert(path.clone(), index);
        let rel = files[index].rel.clone();
        let dir = match rel.rsplit_once('/') {
            Some((dir, "lib.rs" | "main.rs" | "mod.rs")) => dir.to_owned(),
            _ => rel.trim_end_matches(".rs").to_owned(),
        };
        let mods = files[index].facts.mods.clone();
        for m in mods {
            let mut child = path.clone();
            child.extend(m.scope.iter().cloned());
            child.push(m.name.clone());
            if m.inline {
                self.inline.insert(child);
                continue;
            }
            let sub: String = m.scope.iter().map(|s| format!("/{s}")).collect();
            let found = [format!("{dir}{sub}/{}.rs", m.name), format!("{dir}{sub}/{}/mod.rs", m.name)]
                .into_iter()
                .find_map(|c| by_rel.get(&c).copied());
            if let Some(child_index) = found {
                self.add(files, by_rel, child, child_index);
            }
        }
    }

    /// A module's file path from the crate's `src/`, for messages (`transport/http.rs`).
    pub fn short(&self, ws: &Workspace, m: &ModPath) -> String {
        let rel = &ws.files[self.modules[m]].rel;
        rel.strip_prefix(&format!("{}/", self.src)).unwrap_or(rel).to_owned()
    }

    fn is_module(&self, path: &[String]) -> bool {
        let path = path.to_vec();
        self.modules.contains_key(&path) || self.inline.contains(&path)
    }

    /// The import graph: an edge from module A to module B, with the first place A
    /// names B, when A's production code names a path into B (or into an inline module
    /// of B's file). A path through a `use` or a re-export counts for the module the
    /// item really lives in; a name imported twice under different `cfg`s (`use linux as
    /// sys`, `use macos as sys`) counts for both. `mod` declarations are not edges.
    pub fn edges(&self, ws: &Workspace) -> BTreeMap<(ModPath, ModPath), Evidence> {
        let mut imports: Imports = HashMap::new();
        for (m, &index) in &self.modules {
            for u in &ws.files[index].facts.uses {
                if let Some(name) = &u.binds {
                    imports.entry(scope_of(m, u)).or_default().entry(name.clone()).or_default().push(u.segs.clone());
                }
            }
        }
        let resolver = Resolver { tree: self, imports };
        let mut edges = BTreeMap::new();
        for (m, &index) in &self.modules {
            let file = &ws.files[index];
            for r in file.facts.uses.iter().chain(&file.facts.paths) {
                for abs in resolver.absolute(&scope_of(m, r), &r.segs, 0) {
                    for to in resolver.modules_of(&abs, 0) {
                        if &to != m {
                            edges
                                .entry((m.clone(), to))
                                .or_insert_with(|| Evidence { place: file.place(r.at), path: r.segs.join("::") });
                        }
                    }
                }
            }
        }
        edges
    }
}

/// The module (with inline modules) a path is named in.
fn scope_of(module: &ModPath, r: &PathRef) -> ModPath {
    module.iter().chain(&r.scope).cloned().collect()
}

/// The names each module (or inline module) imports, and the paths each stands for.
type Imports = HashMap<ModPath, HashMap<String, Vec<Vec<String>>>>;

/// Resolves written paths to absolute ones and to the file modules they name.
struct Resolver<'a> {
    tree: &'a ModTree,
    imports: Imports,
}

/// How many `use`s and re-exports a path is followed through.
const MAX_HOPS: usize = 8;

impl Resolver<'_> {
    /// The paths from the crate root that `segs`, written in module `scope`, may name;
    /// none for paths outside the crate (other crates, `std`, local items).
    fn absolute(&self, scope: &[String], segs: &[String], hops: usize) -> Vec<Vec<String>> {
        let Some(first) = segs.first() else { return Vec::new() };
        let mut base: Vec<String> = scope.to_vec();
        match first.as_str() {
            "crate" => return vec![segs[1..].to_vec()],
            "self" => return vec![base.into_iter().chain(segs[1..].iter().cloned()).collect()],
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                for _ in 0..ups {
                    if base.pop().is_none() {
                        return Vec::new();
                    }
                }
                return vec![base.into_iter().chain(segs[ups..].iter().cloned()).collect()];
            }
            _ => {}
        }
        base.push(first.clone());
        if self.tree.is_module(&base) {
            return vec![scope.iter().chain(segs).cloned().collect()];
        }
        let Some(targets) = self.imports.get(scope).and_then(|m| m.get(first)) else { return Vec::new() };
        if hops >= MAX_HOPS {
            return Vec::new();
        }
        targets
            .iter()
            .filter(|t| !(t.len() == 1 && t[0] == *first))
            .flat_map(|t| self.absolute(scope, &[t.clone(), segs[1..].to_vec()].concat(), hops + 1))
            .collect()
    }

    /// The file modules an absolute path leads into, following re-exports.
    fn modules_of(&self, abs: &[String], hops: usize) -> Vec<ModPath> {
        let mut at: ModPath = Vec::new();
        let mut file: ModPath = Vec::new();
        for (k, seg) in abs.iter().enumerate() {
            let mut next = at.clone();
            next.push(seg.clone());
            if self.tree.modules.contains_key(&next) {
                file = next.clone();
            } else if !self.tree.inline.contains(&next) {
                // An item of `at`: if `at` imports it, it lives where the import points.
                let targets = self.imports.get(&at).and_then(|m| m.get(seg)).filter(|_| hops < MAX_HOPS);
                if let Some(targets) = targets {
                    let found: Vec<ModPath> = targets
                        .iter()
                        .flat_map(|t| self.absolute(&at, &[t.clone(), abs[k + 1..].to_vec()].concat(), hops + 1))
                        .flat_map(|a| self.modules_of(&a, hops + 1))
                        .collect();
                    if !found.is_empty() {
                        return found;
                    }
                }
                break;
            }
            at = next;
        }
        vec![file]
    }
}

/// The circles of a graph: its strongly connected components of more than one node,
/// each with the elementary cycles through it (the shortest first, at most `cap`).
pub fn circles<N: Ord + Clone>(edges: &BTreeSet<(N, N)>, cap: usize) -> Vec<(Vec<N>, Vec<Vec<N>>)> {
    let nodes: Vec<N> =
        edges.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect::<BTreeSet<_>>().into_iter().collect();
    let index = |n: &N| nodes.binary_search(n).unwrap_or_else(|at| at);
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (a, b) in edges {
        next[index(a)].push(index(b));
    }
    let mut out = Vec::new();
    for component in components(&next) {
        if component.len() < 2 {
            continue;
        }
        let inside: BTreeSet<usize> = component.iter().copied().collect();
        let mut cycles = Vec::new();
        for &start in &component {
            // Cycles whose smallest node is `start`, so each is found once.
            let mut path = vec![start];
            cycles_from(&next, &inside, start, &mut path, &mut cycles, cap * 4);
        }
        cycles.sort_by_key(|c: &Vec<usize>| (c.len(), c.clone()));
        cycles.truncate(cap);
        let named = |ids: &[usize]| ids.iter().map(|&i| nodes[i].clone()).collect::<Vec<N>>();
        out.push((named(&component), cycles.iter().map(|c| named(c)).collect()));
    }
    out
}

/// Depth-first search for the cycles back to `path[0]` through nodes greater than it.
fn cycles_from(
    next: &[Vec<usize>],
    inside: &BTreeSet<usize>,
    start: usize,
    path: &mut Vec<usize>,
    found: &mut Vec<Vec<usize>>,
    cap: usize,
) {
    let Some(&at) = path.last() else { return };
    for &n in &next[at] {
        if found.len() >= cap {
            return;
        }
        if n == start {
            let mut cycle = path.clone();
            cycle.push(start);
            found.push(cycle);
        } else if n > start && inside.contains(&n) && !path.contains(&n) {
            path.push(n);
            cycles_from(next, inside, start, path, found, cap);
            path.pop();
        }
    }
}

/// Tarjan's strongly connected components, each sorted, in node order.
fn components(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &next[v] {
            match s.index[w] {
                None => {
                    visit(w, next, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            s.out.push(component);
        }
    }
    let n = next.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, next, &mut s);
        }
    }
    s.out.sort();
    s.out
}

//! Reading one Rust source file for the tidy checks: a small lexer (comments and
//! literals never look like code) and the facts the checks need from a file once its
//! test-only code is removed: `mod` declarations, the paths of `use` trees, the other
//! paths the code names, and the remaining tokens.
//!
//! It is not a Rust parser. It knows just enough of the grammar for this tree: where an
//! item under `#[cfg(test)]` ends, how `use` trees nest, and which identifiers start a
//! path. Code counts as test-only when its `cfg` is false for a build without `test`
//! and without the `test-hooks` feature (`#[cfg(test)]`, `#[cfg(all(test, unix))]`,
//! `#[cfg(feature = "test-hooks")]`, `#[test]`); `#[cfg(not(test))]` is production code.

/// One token of Rust source: what it is and where it starts (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What the token is.
    pub kind: Tok,
    /// The byte offset of its first character in the file.
    pub at: usize,
}

/// The kinds of token the checks tell apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (a raw identifier without its `r#`).
    Ident(String),
    /// `::`, or any other single punctuation character.
    Punct(&'static str),
    /// A string, character or number literal, as written.
    Lit(String),
    /// A lifetime or a loop label.
    Lifetime,
}

impl Token {
    fn is_ident(&self, name: &str) -> bool {
        matches!(&self.kind, Tok::Ident(s) if s == name)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.kind, Tok::Punct(q) if q == p)
    }

    fn ident(&self) -> Option<&str> {
        match &self.kind {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }
}

/// Splits `text` into tokens, dropping whitespace and comments (doc comments too).
pub fn lex(text: &str) -> Vec<Token> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i = block_comment_end(b, i);
        } else if c == b'"' {
            i = quoted_end(b, i + 1, b'"');
            out.push(Token { kind: Tok::Lit(text[start..i].to_owned()), at: start });
        } else if c == b'\'' {
            i = quote_or_lifetime(text, i, &mut out);
        } else if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 {
            i = word(text, i, &mut out);
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            out.push(Token { kind: Tok::Lit(text[start..i].to_owned()), at: start });
        } else if b[i..].starts_with(b"::") {
            out.push(Token { kind: Tok::Punct("::"), at: start });
            i += 2;
        } else {
            let p = PUNCT.iter().find(|p| p.as_bytes()[0] == c).copied().unwrap_or("?");
            out.push(Token { kind: Tok::Punct(p), at: start });
            i += 1;
        }
    }
    out
}

/// The punctuation characters kept apart; anything else lexes as `?`.
const PUNCT: [&str; 27] = [
    "{", "}", "(", ")", "[", "]", ";", ",", ".", ":", "#", "!", "=", "<", ">", "&", "|", "+", "-", "*", "/", "%", "^",
    "@", "$", "~", "\\",
];

/// The end of a `/* ... */` comment starting at `i` (they nest).
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// The offset just past the closing `quote` of a literal whose body starts at `i`.
fn quoted_end(b: &[u8], mut i: usize, quote: u8) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            q if q == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// Lexes what follows a `'`: a character literal (`'a'`, `'\n'`, `'é'`) or a lifetime.
fn quote_or_lifetime(text: &str, i: usize, out: &mut Vec<Token>) -> usize {
    let b = text.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        let end = quoted_end(b, i + 1, b'\'');
        out.push(Token { kind: Tok::Lit(text[i..end].to_owned()), at: i });
        return end;
    }
    let next = text[i + 1..].chars().next().map_or(0, char::len_utf8);
    if next > 0 && b.get(i + 1 + next) == Some(&b'\'') {
        let end = i + 2 + next;
        out.push(Token { kind: Tok::Lit(text[i..end].to_owned()), at: i });
        return end;
    }
    let mut end = i + 1;
    while end < b.len() && (b[end] == b'_' || b[end].is_ascii_alphanumeric()) {
        end += 1;
    }
    out.push(Token { kind: Tok::Lifetime, at: i });
    end
}

/// Lexes an identifier at `i`, or the literal it prefixes (`b"…"`, `r#"…"#`, `b'x'`).
fn word(text: &str, i: usize, out: &mut Vec<Token>) -> usize {
    let b = text.as_bytes();
    let mut end = i;
    while end < b.len() && (b[end] == b'_' || b[end].is_ascii_alphanumeric() || b[end] >= 0x80) {
        end += 1;
    }
    let w = &text[i..end];
    let raw = matches!(w, "r" | "br" | "cr");
    let lit_end = match b.get(end) {
        Some(b'"') if raw => Some(raw_string_end(b, end)),
        Some(b'#') if raw && matches!(b.get(end + 1), Some(b'"' | b'#')) => Some(raw_string_end(b, end)),
        Some(b'"') if matches!(w, "b" | "c") => Some(quoted_end(b, end + 1, b'"')),
        Some(b'\'') if w == "b" => Some(quoted_end(b, end + 1, b'\'')),
        _ => None,
    };
    if let Some(lit_end) = lit_end {
        out.push(Token { kind: Tok::Lit(text[i..lit_end].to_owned()), at: i });
        return lit_end;
    }
    if w == "r" && b.get(end) == Some(&b'#') {
        // A raw identifier, `r#type`: the identifier is what follows the `#`.
        let mut ident_end = end + 1;
        while ident_end < b.len() && (b[ident_end] == b'_' || b[ident_end].is_ascii_alphanumeric()) {
            ident_end += 1;
        }
        out.push(Token { kind: Tok::Ident(text[end + 1..ident_end].to_owned()), at: i });
        return ident_end;
    }
    out.push(Token { kind: Tok::Ident(w.to_owned()), at: i });
    end
}

/// The end of a raw string whose hashes (or opening quote) start at `i`.
fn raw_string_end(b: &[u8], mut i: usize) -> usize {
    let mut hashes = 0;
    while b.get(i) == Some(&b'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // The opening quote.
    while i < b.len() {
        if b[i] == b'"' && b[i + 1..].iter().take(hashes).filter(|c| **c == b'#').count() == hashes {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].bytes().filter(|c| *c == b'\n').count() + 1
}

/// A `mod` declaration: `mod name;` (a file) or `mod name { … }` (inline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDecl {
    /// The inline modules around the declaration, outermost first (empty at file level).
    pub scope: Vec<String>,
    /// The module's name.
    pub name: String,
    /// Whether its body is inline (`{ … }`) rather than a file of its own.
    pub inline: bool,
}

/// A path the code names, as written: `crate::a::B`, `super::x`, `std::fs::write`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRef {
    /// The inline modules around the path, outermost first (empty at file level).
    pub scope: Vec<String>,
    /// The segments, as written (`crate`, `self`, `super` included; a glob ends in `*`).
    pub segs: Vec<String>,
    /// For a `use` path, the name it brings into scope (`None` for globs and `as _`).
    pub binds: Option<String>,
    /// The byte offset where the path (or its `use` statement) starts.
    pub at: usize,
}

/// What one file says once its test-only code is removed.
#[derive(Debug, Default)]
pub struct Facts {
    /// Its `mod` declarations.
    pub mods: Vec<ModDecl>,
    /// The paths of its `use` trees, one per leaf.
    pub uses: Vec<PathRef>,
    /// The other paths of two or more segments in its code.
    pub paths: Vec<PathRef>,
    /// The tokens of its production code, in order.
    pub tokens: Vec<Token>,
    /// The byte ranges of its test-only items (`#[cfg(test)] mod tests { … }`, a
    /// `#[test]` function), each from its attribute to its end.
    pub test_items: Vec<std::ops::Range<usize>>,
}

/// Reads the facts of one file's production code (see the module docs).
pub fn facts(text: &str) -> Facts {
    let tokens = lex(text);
    let mut f = Facts::default();
    // The open delimiters, each with the inline module it opened, if any.
    let mut open: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let scope = || open.iter().flatten().cloned().collect::<Vec<String>>();
        if t.is_punct("#") {
            let (end, inner, test_only) = attribute(&tokens, i);
            if test_only && inner {
                // `#![cfg(test)]`: the whole file is test code.
                return Facts::default();
            }
            if test_only {
                let in_list = i > 0 && tokens[i - 1].is_punct(",");
                let start = t.at;
                i = item_end(&tokens, end, in_list);
                let until = tokens.get(i.saturating_sub(1)).map_or(text.len(), |last| last.at + 1);
                f.test_items.push(start..until.max(start));
                continue;
            }
        }
        if t.is_ident("use") && !tokens.get(i + 1).is_some_and(|n| n.is_punct("::") || n.is_punct("!")) {
            let at = t.at;
            let end = use_tree(&tokens, i + 1, true, &mut Vec::new(), &mut |segs, binds| {
                f.uses.push(PathRef { scope: scope(), segs, binds, at });
            });
            f.tokens.extend_from_slice(&tokens[i..end.min(tokens.len())]);
            i = end;
            continue;
        }
        let decl = match (tokens.get(i + 1).and_then(Token::ident), tokens.get(i + 2)) {
            (Some(name), Some(next)) if t.is_ident("mod") && (next.is_punct(";") || next.is_punct("{")) => {
                Some((name.to_owned(), next.is_punct("{")))
            }
            _ => None,
        };
        if let Some((name, inline)) = decl {
            f.mods.push(ModDecl { scope: scope(), name: name.clone(), inline });
            f.tokens.extend_from_slice(&tokens[i..i + 3]);
            if inline {
                open.push(Some(name));
            }
            i += 3;
            continue;
        }
        match &t.kind {
            Tok::Punct("{" | "(" | "[") => open.push(None),
            Tok::Punct("}" | ")" | "]") => {
                open.pop();
            }
            Tok::Ident(_) if i == 0 || !(tokens[i - 1].is_punct("::") || tokens[i - 1].is_punct(".")) => {
                let segs = path_at(&tokens, i);
                if segs.len() > 1 {
                    f.paths.push(PathRef { scope: scope(), segs, binds: None, at: t.at });
                }
            }
            _ => {}
        }
        f.tokens.push(t.clone());
        i += 1;
    }
    f
}

/// The segments of the path starting at `i`: identifiers joined by `::` (a turbofish
/// `::<` ends it).
fn path_at(tokens: &[Token], mut i: usize) -> Vec<String> {
    let mut segs = Vec::new();
    while let Some(name) = tokens.get(i).and_then(Token::ident) {
        segs.push(name.to_owned());
        if tokens.get(i + 1).is_some_and(|t| t.is_punct("::")) && tokens.get(i + 2).and_then(Token::ident).is_some() {
            i += 2;
        } else {
            break;
        }
    }
    segs
}

/// Reads the attribute at `i` (`#[…]` or `#![…]`): where it ends, whether it is an
/// inner attribute, and whether it makes what it is on test-only.
fn attribute(tokens: &[Token], i: usize) -> (usize, bool, bool) {
    let inner = tokens.get(i + 1).is_some_and(|t| t.is_punct("!"));
    let open = if inner { i + 2 } else { i + 1 };
    if !tokens.get(open).is_some_and(|t| t.is_punct("[")) {
        return (i + 1, false, false);
    }
    let close = matching(tokens, open);
    let body = &tokens[open + 1..close.saturating_sub(1).max(open + 1)];
    let test_only = match body {
        [t] if t.is_ident("test") => true,
        [cfg, paren, rest @ ..] if cfg.is_ident("cfg") && paren.is_punct("(") => cfg_value(rest).0 == Some(false),
        _ => false,
    };
    (close, inner, test_only)
}

/// The offset just past the delimiter that closes the one at `open`.
fn matching(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t.kind {
            Tok::Punct("{" | "(" | "[") => depth += 1,
            Tok::Punct("}" | ")" | "]") => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// Evaluates the `cfg` predicate at the start of `tokens` for a build without `test`
/// and without the `test-hooks` feature: `Some(value)`, or `None` when it depends on
/// something else (the OS, another feature). Also returns how many tokens it used.
fn cfg_value(tokens: &[Token]) -> (Option<bool>, usize) {
    let Some(name) = tokens.first().and_then(Token::ident) else { return (None, 1) };
    if tokens.get(1).is_some_and(|t| t.is_punct("=")) {
        let value = match tokens.get(2).map(|t| &t.kind) {
            Some(Tok::Lit(v)) if name == "feature" && v == "\"test-hooks\"" => Some(false),
            _ => None,
        };
        return (value, 3);
    }
    if !tokens.get(1).is_some_and(|t| t.is_punct("(")) {
        return (if name == "test" { Some(false) } else { None }, 1);
    }
    // `all(…)`, `any(…)` or `not(…)`: evaluate each argument.
    let mut values = Vec::new();
    let mut k = 2;
    while k < tokens.len() && !tokens[k].is_punct(")") {
        let (v, used) = cfg_value(&tokens[k..]);
        values.push(v);
        k += used;
        if tokens.get(k).is_some_and(|t| t.is_punct(",")) {
            k += 1;
        }
    }
    let value = match name {
        "not" => values.first().copied().flatten().map(|v| !v),
        "all" if values.contains(&Some(false)) => Some(false),
        "all" if values.iter().all(|v| *v == Some(true)) => Some(true),
        "any" if values.contains(&Some(true)) => Some(true),
        "any" if values.iter().all(|v| *v == Some(false)) => Some(false),
        _ => None,
    };
    (value, k + 1)
}

/// The offset just past the item (or statement) that starts at `i`: at its `;`, or
/// its closing `}`; in a comma-separated list (`in_list`), at its `,`. An enclosing
/// delimiter that closes first ends it too, and is not consumed.
fn item_end(tokens: &[Token], mut i: usize, in_list: bool) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i].kind {
            Tok::Punct("{" | "(" | "[") => depth += 1,
            Tok::Punct("}" | ")" | "]") => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
                if depth == 0 && tokens[i].is_punct("}") {
                    return i + 1;
                }
            }
            Tok::Punct(";") if depth == 0 => return i + 1,
            Tok::Punct(",") if depth == 0 && in_list => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Reads the `use` tree starting at `i` under `prefix`, calling `leaf` with each full
/// path and the name it binds; returns the offset just past the tree (past the `;`
/// for the `top` tree).
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    top: bool,
    prefix: &mut Vec<String>,
    leaf: &mut dyn FnMut(Vec<String>, Option<String>),
) -> usize {
    let base = prefix.len();
    if tokens.get(i).is_some_and(|t| t.is_punct("::")) {
        i += 1;
    }
    // One pass per segment: `continue` after a `::`, `break` at the tree's end.
    while let Some(t) = tokens.get(i) {
        if let Some(name) = t.ident() {
            prefix.push(name.to_owned());
            i += 1;
            if tokens.get(i).is_some_and(|t| t.is_punct("::")) {
                i += 1;
                continue;
            }
            let mut path = prefix.clone();
            if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
                path.pop();
            }
            let mut binds = path.last().cloned();
            if tokens.get(i).is_some_and(|t| t.is_ident("as")) {
                binds = tokens.get(i + 1).and_then(Token::ident).filter(|n| *n != "_").map(str::to_owned);
                i += 2;
            }
            leaf(path, binds);
        } else if t.is_punct("*") {
            let mut path = prefix.clone();
            path.push("*".to_owned());
            leaf(path, None);
            i += 1;
        } else if t.is_punct("{") {
            i += 1;
            while tokens.get(i).is_some_and(|t| !t.is_punct("}")) {
                i = use_tree(tokens, i, false, prefix, leaf);
                if tokens.get(i).is_some_and(|t| t.is_punct(",")) {
                    i += 1;
                }
            }
            i += 1;
        }
        break;
    }
    prefix.truncate(base);
    if top {
        while tokens.get(i).is_some_and(|t| !t.is_punct(";")) {
            i += 1;
        }
        i += 1;
    }
    i
}

//! TypeScript names for servers, tools and schema definitions: any string made a valid,
//! deterministic identifier (ECMAScript 2024, section 12.7 "Names and Keywords", ASCII only).

use std::collections::HashSet;

/// Words that cannot name a namespace, function or type (ECMAScript reserved words, strict
/// mode's, and TypeScript's contextual type keywords), so such a name gets a `_` appended.
const RESERVED: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    "declare",
    "namespace",
    "module",
    "type",
    "any",
    "unknown",
    "never",
    "undefined",
    "symbol",
    "bigint",
    "object",
    "string",
    "number",
    "boolean",
];

/// `name` as an identifier: every character outside `[A-Za-z0-9_$]` becomes `_`, a leading
/// digit (or an empty name) gets a `_` before it, and a reserved word a `_` after it.
/// Deterministic; distinct names may meet (`a-b` and `a_b`): [`Namer`] keeps them apart.
pub fn identifier(name: &str) -> String {
    let mut id: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    if RESERVED.contains(&id.as_str()) {
        id.push('_');
    }
    id
}

/// Whether `name` can stand unquoted as a property name (any ASCII identifier name,
/// reserved words included, as ECMAScript allows for property names).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Gives names that stay apart: each name asked for gets its [`identifier`]; one that is
/// reserved (a global the runtime has, a type the file declares) gets a `_` appended; one
/// already given gets `_2`, `_3`... Callers ask in a sorted order, so the result is
/// deterministic.
#[derive(Debug, Default)]
pub struct Namer {
    /// Names that must not be given: they get a `_` appended first.
    reserved: HashSet<String>,
    /// Names given so far (and the reserved ones).
    taken: HashSet<String>,
}

impl Namer {
    /// A namer that gives none of `reserved`.
    pub fn reserving<'a>(reserved: impl IntoIterator<Item = &'a str>) -> Namer {
        let reserved: HashSet<String> = reserved.into_iter().map(str::to_owned).collect();
        Namer { taken: reserved.clone(), reserved }
    }

    /// A fresh identifier for `name`.
    pub fn name(&mut self, name: &str) -> String {
        let mut base = identifier(name);
        if self.reserved.contains(&base) {
            base.push('_');
        }
        let mut unique = base.clone();
        let mut n = 2;
        while self.taken.contains(&unique) {
            unique = format!("{base}_{n}");
            n += 1;
        }
        self.taken.insert(unique.clone());
        unique
    }
}

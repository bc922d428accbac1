//! JSON Schema to TypeScript: one schema (a tool's `inputSchema` or `outputSchema`) becomes a
//! type expression plus one named type per `$defs` (or draft-07 `definitions`) entry.
//!
//! Covered: JSON Schema 2020-12 ("JSON Schema Core" and "Validation", draft 2020-12) and
//! draft-07: `type` (one or a list), `$ref` to `$defs`/`definitions` entries, to the root
//! (`#`) and to other local JSON pointers (RFC 6901), `allOf` (intersection),
//! `anyOf`/`oneOf` (union), `enum`, `const`, `properties`/`required`,
//! `additionalProperties`/`patternProperties` (index signatures), `items`, `prefixItems` and
//! draft-07 tuple `items`/`additionalItems`, `nullable` (OpenAPI 3.0) and `null` in `type`;
//! `title`, `description`, `examples`, `default` and `deprecated` become JSDoc. Anything else
//! that would shape the type (a remote `$ref`, `not`, a pointer that leads nowhere) becomes
//! `unknown` with a comment saying why: one odd schema never fails the whole file.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::names::{Namer, is_identifier};

/// How deep one type expression may nest (objects in arrays in unions...) before the rest
/// becomes `unknown`: a bound on the output of a hostile schema.
const MAX_DEPTH: usize = 48;

/// How many inline `$ref`s (to pointers that are not `$defs` entries) may be followed inside
/// one another: a cycle through them ends as `unknown`.
const MAX_INLINE_REFS: usize = 8;

/// One schema translated: the root's type expression and the named types it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The root schema's type expression (may span lines, indented for `indent`).
    pub root: String,
    /// The root's JSDoc text (title, description, examples, default), if any.
    pub root_doc: Option<String>,
    /// One named type per `$defs`/`definitions` entry, in the order of their TypeScript
    /// names: `(name, type expression, JSDoc text)`.
    pub defs: Vec<NamedType>,
}

/// A `$defs` entry as a TypeScript type alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedType {
    /// The alias's name: the entry's name made an identifier, unique in its schema.
    pub name: String,
    /// The entry's type expression.
    pub ty: String,
    /// Its JSDoc text, if any.
    pub doc: Option<String>,
}

/// Translates `schema`, whose root type will be named `root_name` (so `{"$ref": "#"}` refers
/// to it), with its definitions named apart from `taken` (names already used beside them).
/// Multi-line types are indented as if written at `indent` levels of two spaces.
pub fn translate(schema: &Value, root_name: &str, taken: &[&str], indent: usize) -> Translation {
    let mut t = Translator::new(schema, root_name, taken);
    let root = t.ty(schema, indent, 0);
    let mut defs = Vec::new();
    let entries: Vec<(String, String)> = t.defs.iter().map(|(p, n)| (p.clone(), n.clone())).collect();
    for (pointer, name) in entries {
        let Some(def) = resolve(schema, &pointer) else { continue };
        let ty = t.ty(def, indent, 0);
        defs.push(NamedType { name, ty, doc: doc_text(def) });
    }
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    Translation { root, root_doc: doc_text(schema), defs }
}

/// The JSDoc text of a schema: its title, description, `@default`, `@example`s and
/// `@deprecated`, or `None` when it has none of them.
pub fn doc_text(schema: &Value) -> Option<String> {
    let s = schema.as_object()?;
    let mut parts: Vec<String> = Vec::new();
    let text = |k: &str| s.get(k).and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    let title = text("title");
    let description = text("description");
    if let Some(title) = title {
        parts.push(title.to_owned());
    }
    if let Some(description) = description.filter(|d| Some(*d) != title) {
        parts.push(description.to_owned());
    }
    let mut tags = Vec::new();
    if let Some(default) = s.get("default") {
        tags.push(format!("@default {}", compact(default)));
    }
    match s.get("examples") {
        Some(Value::Array(examples)) => tags.extend(examples.iter().map(|e| format!("@example {}", compact(e)))),
        Some(example) => tags.push(format!("@example {}", compact(example))),
        None => {}
    }
    if s.get("deprecated") == Some(&Value::Bool(true)) {
        tags.push("@deprecated".to_owned());
    }
    if !tags.is_empty() {
        parts.push(tags.join("\n"));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Writes `text` as a JSDoc comment at `indent` levels into `out`, `*/` escaped so the text
/// cannot end the comment.
pub fn write_doc(out: &mut String, text: &str, indent: usize) {
    let pad = "  ".repeat(indent);
    let text = text.replace("*/", "*\\/");
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    if let [line] = lines.as_slice() {
        let _ = writeln!(out, "{pad}/** {line} */");
        return;
    }
    let _ = writeln!(out, "{pad}/**");
    for line in lines {
        match line.is_empty() {
            true => {
                let _ = writeln!(out, "{pad} *");
            }
            false => {
                let _ = writeln!(out, "{pad} * {line}");
            }
        }
    }
    let _ = writeln!(out, "{pad} */");
}

/// `unknown` with a comment saying why (the comment made safe to embed).
fn unknown(why: &str) -> String {
    format!("unknown /* {} */", why.replace("*/", "*\\/"))
}

/// A JSON value on one line, for JSDoc tags (long values cut at 200 characters).
fn compact(value: &Value) -> String {
    let text = value.to_string();
    match text.chars().count() > 200 {
        true => format!("{}...", text.chars().take(200).collect::<String>()),
        false => text,
    }
}

/// The schema that the local JSON pointer `pointer` (`#/...`, RFC 6901, percent-encoded as a
/// URI fragment) names in `root`.
fn resolve<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let fragment = pointer.strip_prefix('#')?;
    let decoded = percent_decode(fragment)?;
    root.pointer(&decoded)
}

/// `%XX` escapes decoded (a URI fragment to a JSON pointer); `None` if malformed.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The state of one schema's translation: its root and the names given to its definitions.
struct Translator<'a> {
    root: &'a Value,
    root_name: String,
    /// `#/$defs/<name>` (or `#/definitions/<name>`) to the TypeScript name given to it.
    defs: BTreeMap<String, String>,
    /// How many inline `$ref`s are being followed now.
    inline_refs: usize,
}

impl<'a> Translator<'a> {
    fn new(root: &'a Value, root_name: &str, taken: &[&str]) -> Translator<'a> {
        let reserved = RESERVED_TYPE_NAMES.iter().copied().chain(taken.iter().copied()).chain([root_name]);
        let mut namer = Namer::reserving(reserved);
        let mut defs = BTreeMap::new();
        for keyword in ["$defs", "definitions"] {
            let Some(entries) = root.get(keyword).and_then(Value::as_object) else { continue };
            for name in entries.keys() {
                defs.insert(format!("#/{keyword}/{}", escape_pointer(name)), namer.name(name));
            }
        }
        Translator { root, root_name: root_name.to_owned(), defs, inline_refs: 0 }
    }

    /// The type expression of `schema`, written at `indent`, `depth` levels into the root.
    fn ty(&mut self, schema: &Value, indent: usize, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return unknown("nested too deeply");
        }
        let s = match schema {
            Value::Bool(true) => return "unknown".to_owned(),
            Value::Bool(false) => return "never".to_owned(),
            Value::Object(s) => s,
            _ => return unknown("not a schema"),
        };
        if let Some(value) = s.get("const") {
            return self.nullable(s, literal(value));
        }
        if let Some(values) = s.get("enum") {
            return match values.as_array() {
                Some(values) if !values.is_empty() => {
                    let parts: Vec<String> = values.iter().map(literal).collect();
                    self.nullable(s, union(parts))
                }
                _ => unknown("empty or malformed enum"),
            };
        }
        let mut parts: Vec<String> = Vec::new();
        if let Some(reference) = s.get("$ref") {
            parts.push(self.reference(reference, indent, depth));
        }
        if let Some(base) = self.base(s, indent, depth) {
            parts.push(base);
        }
        if let Some(all) = s.get("allOf").and_then(Value::as_array) {
            parts.extend(all.iter().map(|part| self.ty(part, indent, depth + 1)));
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(any) = s.get(keyword).and_then(Value::as_array) {
                let options: Vec<String> = any.iter().map(|part| self.ty(part, indent, depth + 1)).collect();
                if !options.is_empty() {
                    parts.push(union(options));
                }
            }
        }
        let ty = match parts.len() {
            0 if s.contains_key("not") => unknown("`not` is not expressible"),
            0 if s.contains_key("if") => unknown("`if`/`then`/`else` is not expressible"),
            0 => "unknown".to_owned(),
            _ => intersection(parts),
        };
        self.nullable(s, ty)
    }

    /// `ty | null` when the schema says `nullable: true` (OpenAPI 3.0), else `ty`.
    fn nullable(&self, s: &Map<String, Value>, ty: String) -> String {
        match s.get("nullable") == Some(&Value::Bool(true)) && ty != "null" {
            true => union(vec![ty, "null".to_owned()]),
            false => ty,
        }
    }

    /// The type a `$ref` names: a definition's name, the root's name, or the pointed-to
    /// schema inline (at most [`MAX_INLINE_REFS`] deep).
    fn reference(&mut self, reference: &Value, indent: usize, depth: usize) -> String {
        let Some(reference) = reference.as_str() else { return unknown("malformed $ref") };
        if reference == "#" || reference.is_empty() {
            return self.root_name.clone();
        }
        if let Some(name) = self.defs.get(reference).or_else(|| {
            let decoded = percent_decode(reference)?;
            self.defs.get(&decoded)
        }) {
            return name.clone();
        }
        if !reference.starts_with('#') {
            return unknown(&format!("$ref {reference:?} is not in this schema"));
        }
        let Some(target) = resolve(self.root, reference) else {
            return unknown(&format!("$ref {reference:?} leads nowhere"));
        };
        if self.inline_refs >= MAX_INLINE_REFS {
            return unknown(&format!("$ref {reference:?} refers to itself"));
        }
        self.inline_refs += 1;
        let ty = self.ty(target, indent, depth + 1);
        self.inline_refs -= 1;
        ty
    }

    /// The type given by `type` and the keywords of its kind (`properties`, `items`...), or
    /// `None` when the schema says neither.
    fn base(&mut self, s: &Map<String, Value>, indent: usize, depth: usize) -> Option<String> {
        let types: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => {
                // `required` alone (as in `anyOf: [{"required": ["a"]}, ...]`) only says which
                // properties are present: it makes no type, so the object beside it stays closed.
                let object = ["properties", "additionalProperties", "patternProperties"];
                let array = ["items", "prefixItems"];
                if object.iter().any(|k| s.contains_key(*k)) {
                    vec!["object"]
                } else if array.iter().any(|k| s.contains_key(*k)) {
                    vec!["array"]
                } else {
                    return None;
                }
            }
        };
        let parts: Vec<String> = types
            .iter()
            .map(|t| match *t {
                "string" => "string".to_owned(),
                "number" | "integer" => "number".to_owned(),
                "boolean" => "boolean".to_owned(),
                "null" => "null".to_owned(),
                "object" => self.object(s, indent, depth),
                "array" => self.array(s, indent, depth),
                other => unknown(&format!("unknown type {other:?}")),
            })
            .collect();
        match parts.is_empty() {
            true => None,
            false => Some(union(parts)),
        }
    }

    /// An object type: its properties (optional unless `required`), then an index signature
    /// from `additionalProperties` and `patternProperties`.
    fn object(&mut self, s: &Map<String, Value>, indent: usize, depth: usize) -> String {
        let required: HashSet<&str> =
            s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let properties = s.get("properties").and_then(Value::as_object);
        let pad = "  ".repeat(indent + 1);
        let mut body = String::new();
        let mut member_types = Vec::new();
        for (name, schema) in properties.into_iter().flatten() {
            let ty = self.ty(schema, indent + 1, depth + 1);
            if let Some(doc) = doc_text(schema) {
                write_doc(&mut body, &doc, indent + 1);
            }
            let key = match is_identifier(name) {
                true => name.clone(),
                false => Value::String(name.clone()).to_string(),
            };
            let optional = if required.contains(name.as_str()) { "" } else { "?" };
            let _ = writeln!(body, "{pad}{key}{optional}: {ty};");
            member_types.push(ty);
        }
        // `additionalProperties` absent: no index signature when there are properties, so a
        // misspelt argument is caught; an object with no properties takes any key.
        let mut extra: Vec<String> = Vec::new();
        match s.get("additionalProperties") {
            None if properties.is_none_or(Map::is_empty) && !s.contains_key("patternProperties") => {
                extra.push("unknown".to_owned());
            }
            None | Some(Value::Bool(false)) => {}
            Some(schema) => extra.push(self.ty(schema, indent + 1, depth + 1)),
        }
        for schema in s.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|p| p.values()) {
            extra.push(self.ty(schema, indent + 1, depth + 1));
        }
        if !extra.is_empty() {
            // Every property must fit the index signature's type (TypeScript's rule), so the
            // properties' types join it; `undefined` covers optional ones.
            let mut index = extra;
            if !member_types.is_empty() && !index.iter().any(|t| t == "unknown") {
                index.extend(member_types);
                index.push("undefined".to_owned());
            }
            let _ = writeln!(body, "{pad}[key: string]: {};", union(dedup(index)));
        }
        match body.is_empty() {
            true => "{}".to_owned(),
            false => format!("{{\n{body}{}}}", "  ".repeat(indent)),
        }
    }

    /// An array type: `T[]`, or a tuple from `prefixItems` (or draft-07 `items` as a list),
    /// whose elements past `minItems` are optional, with the rest from `items` (or
    /// `additionalItems`).
    fn array(&mut self, s: &Map<String, Value>, indent: usize, depth: usize) -> String {
        let (prefix, rest) = match (s.get("prefixItems"), s.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (None, Some(Value::Array(prefix))) => (Some(prefix), s.get("additionalItems")),
            (_, items) => (None, items),
        };
        let Some(prefix) = prefix else {
            let item = match rest {
                Some(items) => self.ty(items, indent, depth + 1),
                None => "unknown".to_owned(),
            };
            return format!("{}[]", parenthesized(item));
        };
        let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let mut elements: Vec<String> = Vec::new();
        for (i, item) in prefix.iter().enumerate() {
            let ty = self.ty(item, indent, depth + 1);
            elements.push(match (i as u64) < min {
                true => ty,
                false => format!("{}?", parenthesized(ty)),
            });
        }
        match rest {
            Some(Value::Bool(false)) => {}
            Some(items) => elements.push(format!("...{}[]", parenthesized(self.ty(items, indent, depth + 1)))),
            None => elements.push("...unknown[]".to_owned()),
        }
        format!("[{}]", elements.join(", "))
    }
}

/// Type names a definition cannot take (TypeScript's own types, and the names the generated
/// file uses itself), so a definition named `string` becomes `string_`.
const RESERVED_TYPE_NAMES: &[&str] = &[
    "any",
    "unknown",
    "never",
    "object",
    "string",
    "number",
    "boolean",
    "bigint",
    "symbol",
    "undefined",
    "null",
    "void",
    "this",
    "Array",
    "Promise",
    "Record",
    "Object",
    "String",
    "Number",
    "Boolean",
    "CallToolResult",
    "ContentBlock",
];

/// A JSON pointer token escaped (RFC 6901, section 3: `~` as `~0`, `/` as `~1`).
fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// A JSON value as a TypeScript literal type (objects and arrays as object and tuple types).
fn literal(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", items.iter().map(literal).collect::<Vec<_>>().join(", ")),
        Value::Object(fields) if fields.is_empty() => "{}".to_owned(),
        Value::Object(fields) => {
            let members: Vec<String> = fields
                .iter()
                .map(|(k, v)| {
                    let key = if is_identifier(k) { k.clone() } else { Value::String(k.clone()).to_string() };
                    format!("{key}: {}", literal(v))
                })
                .collect();
            format!("{{ {} }}", members.join("; "))
        }
        // A JSON number, string, boolean or null is also a TypeScript literal; U+2028 and
        // U+2029 are allowed in TypeScript strings.
        other => other.to_string(),
    }
}

/// The union of `parts` (unions among them flattened, duplicates removed).
fn union(parts: Vec<String>) -> String {
    let flat = parts.iter().flat_map(|p| top_level_parts(p, '|')).map(str::to_owned).collect();
    let parts = dedup(flat);
    if parts.iter().any(|p| p == "unknown") {
        return "unknown".to_owned();
    }
    parts.join(" | ")
}

/// The intersection of `parts`, each union among them in parentheses.
fn intersection(parts: Vec<String>) -> String {
    let parts: Vec<String> = dedup(parts).into_iter().filter(|p| p != "unknown").collect();
    match parts.len() {
        0 => "unknown".to_owned(),
        1 => parts.into_iter().next().unwrap_or_default(),
        _ => parts.into_iter().map(parenthesized).collect::<Vec<_>>().join(" & "),
    }
}

/// `ty` in parentheses when it is a union or an intersection at its top level (so `[]` or
/// `&` binds right).
fn parenthesized(ty: String) -> String {
    match has_top_level_operator(&ty) {
        true => format!("({ty})"),
        false => ty,
    }
}

/// Whether `ty` has a `|` or `&` outside brackets, string literals and comments.
fn has_top_level_operator(ty: &str) -> bool {
    top_level_parts(ty, '|').len() > 1 || top_level_parts(ty, '&').len() > 1
}

/// `ty` split at each `separator` outside brackets, string literals and comments, each part
/// trimmed.
fn top_level_parts(ty: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut chars = ty.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            '"' => {
                // A JSON string literal: skip to its closing quote, escapes included.
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek().is_some_and(|(_, c)| *c == '*') => {
                let mut last = ' ';
                for (_, c) in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            c if c == separator && depth == 0 => {
                parts.push(ty[start..i].trim());
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(ty[start..].trim());
    parts
}

/// `parts` with later duplicates removed, order kept.
fn dedup(parts: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    parts.into_iter().filter(|p| seen.insert(p.clone())).collect()
}

#[cfg(test)]
mod tests;

//! What the activity record keeps of a call's arguments and result when it keeps them
//! (`"activity": {"arguments": true}`): the JSON text with every secret replaced by
//! `[secret]`, then cut at the configured size.
//!
//! A secret is any value of the secret store (for a login it keeps, its access token,
//! refresh token and client secret) and any value the call's server entry's `${VAR}`,
//! `${secret:NAME}` and `${input:ID}` references expand to. A secret is replaced
//! wherever it occurs, inside a longer string too. Values shorter than
//! [`MIN_SECRET_CHARS`] are left alone: they would blank out ordinary words.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpx_config::{StoreIn, referenced_values};
use mcpx_platform::fs::Dir;
use mcpx_platform::secrets::{SecretStore, change_stamp};

/// What a secret becomes.
pub const MASK: &str = "[secret]";

/// The shortest value treated as a secret, in characters.
pub const MIN_SECRET_CHARS: usize = 4;

/// How long the store's values are remembered when the store cannot say whether they
/// changed (a keychain).
const KEYCHAIN_FRESH: Duration = Duration::from_secs(10);

/// The fields of a kept login (stored as JSON in the secret store) that are secret.
const LOGIN_FIELDS: [&str; 3] = ["access_token", "refresh_token", "client_secret"];

/// Replaces secrets in kept arguments and results; lives on the record's writer thread.
pub struct Redactor {
    state: Dir,
    env: Arc<HashMap<String, String>>,
    /// The store's values, longest first, and the stamp they were read under.
    store: Vec<String>,
    read: Option<(Option<String>, Instant)>,
}

impl Redactor {
    /// A redactor reading the secret store of `state` and expanding with `env` (the
    /// daemon's environment).
    pub fn new(state: Dir, env: Arc<HashMap<String, String>>) -> Redactor {
        Redactor { state, env, store: Vec::new(), read: None }
    }

    /// `text` (JSON text) with the store's secrets and what `templates` (the call's
    /// server entry's, [`mcpx_config::ServerEntry::templates`]) stand for replaced by
    /// [`MASK`], then cut to at most `max` bytes (on a character boundary, with a note
    /// of how much was cut).
    pub fn keep(&mut self, text: &str, templates: &[String], max: usize) -> String {
        self.refresh();
        let secrets = StoreIn(&self.state);
        let mut values: Vec<String> =
            templates.iter().flat_map(|t| referenced_values(t, &self.env, &secrets)).collect();
        values.extend(self.store.iter().cloned());
        values.retain(|v| v.chars().count() >= MIN_SECRET_CHARS);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let mut text = text.to_owned();
        for value in &values {
            // As the value appears inside JSON text: escaped, without its quotes.
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let inner = &escaped[1..escaped.len().saturating_sub(1).max(1)];
            for form in [value.as_str(), inner] {
                if !form.is_empty() && text.contains(form) {
                    text = text.replace(form, MASK);
                }
            }
        }
        cut(text, max)
    }

    /// Reads the store's values again when they may have changed.
    fn refresh(&mut self) {
        let stamp = change_stamp(&self.state);
        let fresh = match &self.read {
            Some((Some(was), _)) => stamp.as_ref() == Some(was),
            Some((None, at)) => stamp.is_none() && at.elapsed() < KEYCHAIN_FRESH,
            None => false,
        };
        if fresh {
            return;
        }
        self.store = store_values(&self.state);
        self.read = Some((stamp, Instant::now()));
    }
}

/// Every value of the secret store of `state`, and the secret fields of the logins it
/// keeps; none when there is no store or it cannot be read.
fn store_values(state: &Dir) -> Vec<String> {
    let Ok(store) = SecretStore::open(state) else { return Vec::new() };
    let names = store.list().unwrap_or_default();
    let mut values = Vec::new();
    for name in names {
        let Ok(Some(value)) = store.get(&name) else { continue };
        let value = value.expose().to_owned();
        if let Ok(serde_json::Value::Object(login)) = serde_json::from_str::<serde_json::Value>(&value) {
            values.extend(LOGIN_FIELDS.iter().filter_map(|f| login.get(*f)?.as_str().map(str::to_owned)));
        }
        values.push(value);
    }
    values
}

/// `text` cut to at most `max` bytes on a character boundary, with `…[N bytes cut]`
/// after.
fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("…[{cut} bytes cut]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_of_the_store_logins_and_templates_are_masked_then_the_text_cut() {
        let dir = tempfile::tempdir().unwrap();
        let state = Dir::open_unchecked(dir.path()).unwrap();
        let store = SecretStore::choose(&state, mcpx_platform::secrets::Wanted::File).unwrap();
        let set = |name: &str, value: &str| {
            store.set(name, &mcpx_platform::secrets::SecretValue::new(value.to_owned())).unwrap();
        };
        set("api", "s3cr3t-value");
        set("short", "abc");
        set("login", r#"{"access_token":"tok-AAAA","refresh_token":"ref\"BBBB"}"#);
        let env = Arc::new(HashMap::from([("TOKEN".to_owned(), "env-token-1".to_owned())]));
        let mut redactor = Redactor::new(state, env);
        let templates = vec!["--key=${TOKEN}".to_owned(), "${UNSET:-fallback-x}".to_owned()];
        let text = serde_json::json!({ "a": "say s3cr3t-value twice s3cr3t-value", "b": "tok-AAAA",
            "c": "ref\"BBBB", "d": "env-token-1", "e": "fallback-x", "f": "abc" })
        .to_string();
        let kept = redactor.keep(&text, &templates, 1 << 20);
        for secret in ["s3cr3t", "tok-AAAA", "BBBB", "env-token-1", "fallback-x"] {
            assert!(!kept.contains(secret), "{secret} in {kept}");
        }
        assert!(kept.contains(r#""a":"say [secret] twice [secret]""#) && kept.contains(r#""f":"abc""#), "{kept}");
        // A value set since is seen at the next keep.
        set("later", "new-secret-zz");
        assert_eq!(redactor.keep(r#""new-secret-zz""#, &[], 100), r#""[secret]""#);
        assert_eq!(cut("héllo".to_owned(), 2), "h…[5 bytes cut]");
    }
}

//! "Did you mean": the names closest to a mistyped one (servers, tools, arguments).

/// The names among `known` closest to `typed`, best first, at most three.
///
/// Names are compared lowercase with `-` and `_` taken as the same character, so
/// `get_sum` finds `get-sum` (distance 0 after that). A name is offered when its
/// Damerau-Levenshtein distance (`strsim`) is at most a third of the longer name,
/// and at least 1; ties keep `known`'s order. Empty when nothing is close.
pub fn closest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let fold = |s: &str| s.to_lowercase().replace('-', "_");
    let typed_folded = fold(typed);
    let mut near: Vec<(usize, &str)> = known
        .into_iter()
        .filter(|name| *name != typed)
        .filter_map(|name| {
            let folded = fold(name);
            let distance = strsim::damerau_levenshtein(&typed_folded, &folded);
            let limit = (typed_folded.chars().count().max(folded.chars().count()) / 3).max(1);
            (distance <= limit).then_some((distance, name))
        })
        .collect();
    near.sort_by_key(|(distance, _)| *distance);
    near.into_iter().take(3).map(|(_, name)| name).collect()
}

/// `" did you mean `a`?"` (or `` `a` or `b` ``) for [`closest`]'s names, with a
/// leading space and no trailing one; empty when there are none.
pub fn did_you_mean<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = closest(typed, known).into_iter().map(|n| format!("`{n}`")).collect();
    if names.is_empty() { String::new() } else { format!(" did you mean {}?", names.join(" or ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_and_the_other_separator() {
        let names = ["everything", "filesystem", "github"];
        assert_eq!(closest("everythng", names), ["everything"]);
        assert_eq!(closest("get_sum", ["get-sum", "echo"]), ["get-sum"]);
        assert_eq!(closest("gh", names), Vec::<&str>::new());
        assert_eq!(did_you_mean("githb", names), " did you mean `github`?");
        assert_eq!(did_you_mean("zzz", names), "");
    }
}

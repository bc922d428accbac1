//! The primitives every human output goes through: lines on stdout or stderr and
//! JSON, with control characters escaped (`sanitize`), aligned tables, and one-line
//! cuts of server text.

use mcpx_platform::sanitize;

/// Prints one line (or several) of human output on stdout, control characters
/// escaped.
pub fn say(text: &str) {
    println!("{}", sanitize::text(text));
}

/// [`say`] on stderr.
pub fn warn(text: &str) {
    eprintln!("{}", sanitize::text(text));
}

/// Prints JSON text on stdout, with the same value but no raw control character.
pub fn say_json(text: &str) {
    println!("{}", sanitize::json(text));
}

/// Prints rows as aligned columns, each cell escaped first so that the columns
/// align on what the terminal shows.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    say(table_text(header, rows).trim_end());
}

/// [`table`]'s text, each line ending with a newline.
pub fn table_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.iter().map(|cell| sanitize::text(cell).into_owned()).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    text
}

/// The first line of `text`, trimmed, cut to `max` characters with `…` (empty for
/// `None`).
pub fn one_line(text: Option<&str>, max: usize) -> String {
    let first = text.unwrap_or_default().lines().next().unwrap_or_default().trim();
    if first.chars().count() > max {
        format!("{}…", first.chars().take(max - 1).collect::<String>())
    } else {
        first.to_owned()
    }
}

//! Plain terminal tables: columns aligned by display width, two spaces apart, no borders.

/// `header` and `rows` as aligned text, one line each, trailing spaces trimmed.
pub fn plain<R: IntoIterator<Item = String>>(header: &[&str], rows: impl IntoIterator<Item = R>) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING).set_header(header.to_vec());
    for row in rows {
        table.add_row(row.into_iter().collect::<Vec<String>>());
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    let text: Vec<String> = table.to_string().lines().map(|line| line.trim_end().to_string()).collect();
    text.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align_by_display_width() {
        let text =
            super::plain(&["A", "B"], [vec!["µs".to_string(), "x".to_string()], vec!["long".into(), "y".into()]]);
        assert_eq!(text, "A     B\nµs    x\nlong  y\n");
    }
}

//! Column alignment as istioctl prints its tables: Go's `text/tabwriter` with minimum width 0,
//! padding 5 and blanks (`tabwriter.NewWriter(w, 0, 8, 5, ' ', 0)`). Every cell but a row's last is
//! padded to its column's widest cell (in characters) plus 5 blanks, so a row whose last cells are
//! empty ends in blanks, as istioctl's output does; the last cell of a row is written as is.

/// The padding after each column's widest cell (istioctl's tabwriter padding).
const PADDING: usize = 5;

/// Renders `rows` (the header first) as aligned lines, each ending in `\n`.
pub fn render(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in rows {
        // The last cell of a row is not part of a column (tabwriter: it is not tab-terminated).
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] + PADDING - cell.chars().count();
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

/// A row of owned cells from string slices.
pub fn row<S: AsRef<str>>(cells: &[S]) -> Vec<String> {
    cells.iter().map(|c| c.as_ref().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_like_istioctls_tabwriter() {
        // istioctl's route testdata: empty last cells leave the padding of the previous column.
        let rows = vec![
            row(&["NAME", "VHOST NAME", "DOMAINS", "MATCH", "VIRTUAL SERVICE"]),
            row(&["http.8080", "httpbin.example.com:80", "httpbin.example.com", "/get*", "httpbin.default"]),
            row(&["", "backend", "*", "/stats/prometheus*", ""]),
        ];
        assert_eq!(
            render(&rows),
            "NAME          VHOST NAME                 DOMAINS                 MATCH                  VIRTUAL SERVICE\n\
             http.8080     httpbin.example.com:80     httpbin.example.com     /get*                  httpbin.default\n\
             \x20             backend                    *                       /stats/prometheus*     \n"
        );
    }

    #[test]
    fn counts_characters_not_bytes() {
        let out = render(&[row(&["é", "x"]), row(&["ab", "y"])]);
        assert_eq!(out, "é      x\nab     y\n");
    }

    #[test]
    fn empty_table() {
        assert_eq!(render(&[]), "");
    }
}

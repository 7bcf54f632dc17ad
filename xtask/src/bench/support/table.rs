//! The printed results: a Markdown table and the formats of its cells.

use std::time::Duration;

use super::procfs::ProcStats;

/// A Markdown table, padded so it also reads well in a terminal.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    pub fn push(&mut self, mut row: Vec<String>) {
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// The table as Markdown.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([self.headers[i].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            format!("| {} |", padded.join(" | "))
        };
        let mut out = vec![line(&self.headers)];
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push(line(&rule));
        out.extend(self.rows.iter().map(|row| line(row)));
        out.join("\n")
    }
}

/// Seconds with two decimals, e.g. `12.35`.
pub fn secs(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64())
}

/// `value / per` with two decimals, or `n/a`.
pub fn ratio(value: Option<f64>, per: usize) -> String {
    match value {
        Some(value) if per > 0 => format!("{:.2}", value / per as f64),
        _ => "n/a".to_owned(),
    }
}

/// Peak RSS in MiB with one decimal (a ratio near a goal such as ⅓ needs it), or `n/a`.
pub fn mib(stats: &ProcStats) -> String {
    stats.peak_rss_kib.map_or_else(
        || "n/a".to_owned(),
        |kib| format!("{:.1}", kib as f64 / 1024.0),
    )
}

/// CPU seconds, or `n/a`.
pub fn cpu(stats: &ProcStats) -> String {
    stats
        .cpu_seconds
        .map_or_else(|| "n/a".to_owned(), |s| format!("{s:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_padded_markdown() {
        let mut table = Table::new(&["CCM", "time (s)"]);
        table.push(vec!["Rust".to_owned(), "1.50".to_owned()]);
        table.push(vec!["Go, longer".to_owned()]);
        assert_eq!(
            table.render(),
            "| CCM        | time (s) |\n\
             | ---------- | -------- |\n\
             | Rust       | 1.50     |\n\
             | Go, longer |          |"
        );
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(secs(Duration::from_millis(12_345)), "12.35");
        assert_eq!(ratio(Some(3000.0), 1000), "3.00");
        assert_eq!(ratio(None, 1000), "n/a");
        assert_eq!(ratio(Some(1.0), 0), "n/a");
        let stats = ProcStats {
            peak_rss_kib: Some(95_744),
            cpu_seconds: Some(12.34),
        };
        assert_eq!(mib(&stats), "93.5");
        assert_eq!(cpu(&stats), "12.3");
        assert_eq!(mib(&ProcStats::default()), "n/a");
        assert_eq!(cpu(&ProcStats::default()), "n/a");
    }
}

//! Golden text: a command's output compared with a file under `tests/cli/golden/`, a mismatch shown as a
//! line diff. `CANARYD_BLESS=1` writes the output to the file instead, to be read and committed by a person.

use std::path::PathBuf;

/// Asserts that `actual` is the text of `tests/cli/golden/NAME`.
pub fn assert_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli/golden")
        .join(name);
    if std::env::var_os("CANARYD_BLESS").is_some() {
        std::fs::write(&path, actual).expect("the golden file is written");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (CANARYD_BLESS=1 writes it)", path.display()));
    if expected != actual {
        panic!(
            "the output differs from {} (- expected, + actual; CANARYD_BLESS=1 rewrites it):\n{}",
            path.display(),
            diff(&expected, actual)
        );
    }
}

/// A line diff of `expected` and `actual` from their longest common subsequence of lines.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    // common[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("  {}\n", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || common[i][j + 1] >= common[i + 1][j]) {
            out += &format!("+ {}\n", b[j]);
            j += 1;
        } else {
            out += &format!("- {}\n", a[i]);
            i += 1;
        }
    }
    out
}

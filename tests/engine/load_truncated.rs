//! Whatever a YAML file holds, loading it never panics: every shipped template and fixture, cut off at the
//! end of each of its lines (without its line break) and at each of its first 512 bytes, loads or reports an
//! error. A file ending inside a block scalar (`a: |` then `  x` with no final line
//! break) used to panic inside the YAML parser.

use std::path::{Path, PathBuf};

use canaryd::cli::load::{collect_files, parse_documents};

#[test]
fn a_block_scalar_that_ends_the_file_without_a_line_break_loads() {
    for text in [
        "a: |\n  x",
        "a: >\n  x",
        "a: |2-\n   x",
        "a: |\n  x\r",
        "- |\n  x",
    ] {
        let (docs, error) = parse_documents(Path::new("cut.yaml"), text);
        assert!(error.is_none(), "{text:?}: {error:?}");
        assert_eq!(docs.len(), 1, "{text:?}");
    }
}

#[test]
fn every_yaml_file_cut_off_at_a_line_end_or_early_loads_or_reports_an_error() {
    let roots: Vec<PathBuf> = [
        "analysis-templates",
        "tests/fixtures",
        "charts/canaryd/examples",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let files = collect_files(&roots).expect("the repository's YAML files");
    assert!(files.len() > 20, "only {} files found", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        // The published CRDs are megabytes; their shape is covered by the smaller files.
        if text.len() > 64 * 1024 {
            continue;
        }
        let line_ends = text.match_indices('\n').map(|(i, _)| i);
        let cuts = (0..=text.len().min(512))
            .chain(line_ends)
            .filter(|&i| text.is_char_boundary(i));
        for cut in cuts {
            let piece = &text[..cut];
            let outcome = std::panic::catch_unwind(|| parse_documents(&file, piece));
            assert!(
                outcome.is_ok(),
                "{} cut at byte {cut} panicked",
                file.display()
            );
        }
    }
}

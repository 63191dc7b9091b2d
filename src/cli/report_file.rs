//! `--report FILE` for `rehearse`, `analyze` and `demo`: the file is created before anything runs, so a
//! path that cannot be written is bad input (exit 2) rather than a verdict thrown away, and the report is
//! written into it at the end. What the report says is `web::report`'s.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Exit;
use crate::web::report::{Report, render};

#[derive(Debug)]
pub struct ReportFile {
    path: PathBuf,
    file: File,
}

impl ReportFile {
    /// Creates (or empties) `path`; the error is phrased for the user, with the command's name.
    pub fn create(command: &str, path: &Path) -> Result<ReportFile, String> {
        File::create(path)
            .map(|file| ReportFile {
                path: path.to_path_buf(),
                file,
            })
            .map_err(|e| {
                format!(
                    "canaryd {command}: cannot write the report {}: {e}",
                    path.display()
                )
            })
    }

    /// Writes the report; a failure now is an error while running (exit 4), said on stderr.
    pub fn write(mut self, report: &Report) -> Result<(), Exit> {
        let written = self
            .file
            .write_all(render(report).as_bytes())
            .and_then(|()| self.file.flush());
        written.map_err(|e| {
            eprintln!(
                "canaryd: cannot write the report {}: {e}",
                self.path.display()
            );
            Exit::Error
        })
    }
}

/// Creates the report file when `--report` was given; `Err` is the exit for a path that cannot be written.
pub fn open(command: &str, path: Option<&Path>) -> Result<Option<ReportFile>, Exit> {
    path.map(|p| ReportFile::create(command, p))
        .transpose()
        .map_err(|message| {
            eprintln!("{message}");
            Exit::Usage
        })
}

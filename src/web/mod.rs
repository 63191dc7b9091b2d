//! HTML for people: the document shell and its style (`page`), charts as inline SVG (`svg`), and one
//! AnalysisRun as a section (`analysis`), shared by the offline reports and the dashboard. Everything here
//! is handed the objects it shows and returns text: no I/O, no clock, and no decision (phases, verdicts and
//! the judge's numbers are the engine's; this layer only lays them out).

pub mod analysis;
pub mod page;
pub mod report;
pub mod svg;

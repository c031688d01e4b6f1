// Package reports writes a graded run record in the formats its readers
// need: run.json (the record itself), JUnit XML for CI test views (a case
// per criterion and per probe), a Markdown summary that fits a pull-request
// comment or a job summary, SARIF 2.1.0 for code scanning (findings only,
// at the target file's lines), a self-contained HTML page for auditors, and
// the residual-risk register. One file per format, each behind Writer; an
// unknown format is an error, never a fallback.
//
// Over stored runs it compares: Diff (material changes, new failures,
// fixes, changed evidence; what `sandcheck diff` and a `run --baseline`
// report), History (a trend page) and Compare (probes by sandbox kind).
//
// The reports do not grade: they show the verdict the policy wrote. Every
// result is shown and counted, whatever its outcome; one the runner could
// not test, or with an outcome this build does not know, is never a pass.
//
// Everything in a record is treated as hostile text: probe details come from
// inside the sandbox and a record may be forged. Each writer escapes for its
// own format.
package reports

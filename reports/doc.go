// Package reports writes a graded run record in the formats its readers
// need: run.json (the record itself), JUnit XML for CI test views and a
// Markdown summary for a CI job to post. One file per format, each behind
// Writer; an unknown format is an error, never a fallback.
//
// Everything in a record is treated as hostile text: probe details come from
// inside the sandbox and a record may be forged. Each writer escapes for its
// own format.
package reports

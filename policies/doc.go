// Package policies grades a run record against sandcheck's release criteria.
//
// The criteria are Rego (rego/*.rego, embedded), one file per criterion in
// package sandcheck.criteria, written conftest-style: deny_* rules fail a
// criterion, unconfirmed_* rules leave it unconfirmed, warn_* rules warn,
// pass_* rules are evidence it holds. release.rego gathers those and any user
// rules (package sandcheck.user...), applies waivers and writes the verdict;
// profiles.rego holds the design guide's profiles as data. The Go side loads
// user policies and waivers, prepares the query, hands it the record and the
// probe catalog and decodes the verdict; it never decides a verdict itself.
// The Rego tests (rego/*_test.rego) run with `go test`. The input is
// published as a JSON Schema (schema/run.schema.json); docs/policy.md
// describes it for teams writing their own rules.
package policies

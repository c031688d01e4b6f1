// Package policies grades a run record against sandcheck's release criteria.
//
// The criteria are Rego (release.rego, embedded), written conftest-style:
// deny_* rules fail a criterion, warn_* rules leave it unconfirmed. The Go
// side only prepares the query, hands it the record and the probe catalog and
// decodes the verdict; it never decides a verdict itself. The Rego tests
// (*_test.rego) run with `go test` and with `opa test policies/`.
package policies

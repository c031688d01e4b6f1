// Package depcheck holds a test, and nothing else, that keeps test
// libraries (testcontainers-go, Ginkgo, Gomega, testify, httpexpect) out of
// the binaries sandcheck ships: they belong to the tests, and linking them
// makes the release binary bigger and its cold build slower.
package depcheck

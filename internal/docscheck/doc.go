// Package docscheck holds the tests that keep the README and the pages
// under docs/ true to the code: the probe count the README states, the
// probes the matrix page lists, the README's length, and every link between
// the pages. It has no code of its own.
package docscheck

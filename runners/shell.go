package runners

import "strings"

// ShellQuote joins argv into one POSIX shell command line, each word in
// single quotes (a quote inside a word as '\”), for backends whose exec
// takes a command string rather than an argv.
func ShellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

package runners

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// ProbeAnswers is a runner's readiness check: it execs the probe binary's
// `list` in sb, bounded by timeout. It returns nil when the probe answers
// (exit code 0); otherwise why not: the exit code and the last lines of
// its stderr, or the exec's error. When ctx ended during the attempt it
// returns ctx.Err(), which says nothing of the box (a caller keeps its last
// finished attempt instead).
func ProbeAnswers(ctx context.Context, sb Sandbox, timeout time.Duration) error {
	probe := ProbeMount + "/" + ProbeBinary
	ectx, cancel := context.WithTimeout(ctx, timeout)
	res, err := sb.Exec(ectx, []string{probe, "list"})
	cancel()
	switch {
	case err == nil && res.ExitCode == 0:
		return nil
	case err == nil:
		return fmt.Errorf("running %s list: exit code %d, stderr %q", probe, res.ExitCode, LastLines(res.Stderr, 5))
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("running %s list: %w", probe, err)
}

// LastLines keeps the last n lines of hostile text, printable and joined
// with " | " so they fit in one error message.
func LastLines(b []byte, n int) string {
	s := strings.Map(func(r rune) rune {
		if r == '\n' || (unicode.IsPrint(r) && r != unicode.ReplacementChar) {
			return r
		}
		if r == '\t' {
			return ' '
		}
		return -1
	}, strings.ToValidUTF8(string(b), ""))
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

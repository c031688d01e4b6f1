package impl

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sandcheck/sandcheck/probes"
)

// ev collects the evidence of one result. Values may come from inside the box
// (paths, variable names, server answers); finish cleans and bounds them.
type ev map[string]string

func (e ev) set(k, v string)                  { e[k] = v }
func (e ev) setf(k, format string, a ...any)  { e[k] = fmt.Sprintf(format, a...) }
func (e ev) setInt(k string, n int)           { e[k] = strconv.Itoa(n) }
func (e ev) setList(k string, items []string) { e[k] = joinCapped(items, probes.MaxEvidenceValue) }
func (e ev) setErr(prefix string, err error)  { setErrInto(e, prefix, err) }
func result(o probes.Outcome, detail string, e ev) probes.Result {
	return probes.Result{Outcome: o, Evidence: e, Detail: detail}
}
func blocked(detail string, e ev) probes.Result { return result(probes.Blocked, detail, e) }
func escaped(detail string, e ev) probes.Result { return result(probes.Escaped, detail, e) }
func inconclusive(detail string, e ev) probes.Result {
	return result(probes.Inconclusive, detail, e)
}

// setErrInto records an error as "<prefix>errno" (its errno name, when it
// carries one) and "<prefix>err" (its text).
func setErrInto(e ev, prefix string, err error) {
	if err == nil {
		return
	}
	if n, ok := errnoOf(err); ok {
		e[prefix+"errno"] = errnoLabel(n)
	}
	e[prefix+"err"] = err.Error()
}

// errnoOf finds the errno inside a wrapped error (os.PathError, os.SyscallError,
// net.OpError all unwrap to it).
func errnoOf(err error) (unix.Errno, bool) {
	var n unix.Errno
	if errors.As(err, &n) {
		return n, true
	}
	return 0, false
}

// errnoLabel renders an errno as "EPERM(1)"; unknown numbers keep the number.
func errnoLabel(n unix.Errno) string {
	name := unix.ErrnoName(n)
	if name == "" {
		name = "errno"
	}
	return fmt.Sprintf("%s(%d)", name, int(n))
}

// joinCapped joins items with ", " and cuts the list, never an item, when it
// would pass max bytes, ending with how many were left out.
func joinCapped(items []string, max int) string {
	note := func(left int, after string) string {
		n := fmt.Sprintf("... (+%d more)", left)
		if after != "" {
			n = ", " + n
		}
		return n
	}
	s := ""
	for i, it := range items {
		next := it
		if i > 0 {
			next = s + ", " + it
		}
		last := i == len(items)-1
		if len(next) > max || !last && len(next)+len(note(len(items)-i-1, next)) > max {
			return clip(s+note(len(items)-i, s), max)
		}
		s = next
	}
	return s
}

// finish makes r valid by construction: it cleans evidence keys to the allowed
// vocabulary, bounds values and detail at a rune boundary (after replacing
// invalid UTF-8, which JSON would widen), and drops keys past the limit, in
// sorted order, leaving a note. Probes keep well inside the limits; this is the
// safety net that keeps one odd path from rejecting a whole output.
func finish(r probes.Result) probes.Result {
	if !r.Outcome.Valid() {
		r.Outcome = probes.Inconclusive
	}
	r.Detail = clip(r.Detail, probes.MaxDetail)
	if len(r.Evidence) == 0 {
		r.Evidence = nil
		return r
	}
	keys := make([]string, 0, len(r.Evidence))
	for k := range r.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		if len(out) == probes.MaxEvidenceKeys-1 && i < len(keys)-1 {
			out["evidence_dropped"] = strconv.Itoa(len(keys) - i)
			break
		}
		out[cleanKey(k)] = clip(r.Evidence[k], probes.MaxEvidenceValue)
	}
	r.Evidence = out
	return r
}

// cleanKey maps any string onto [a-z][a-z0-9_.-]{0,63}.
func cleanKey(k string) string {
	b := []byte(strings.ToLower(k))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "k" + s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// clip replaces invalid UTF-8 and control characters and cuts s to at most
// max bytes at a rune boundary.
func clip(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

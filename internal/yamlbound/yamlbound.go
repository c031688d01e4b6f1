// Package yamlbound measures a YAML document before a full parser sees it:
// its nesting depth, its aliases and its number of documents, in one linear
// pass over the bytes with no allocation per level. The YAML parsers this
// project uses grow memory and time far faster than the input on deep
// nesting (100k levels in a 200 KB file took 15 GB and 50 s), so files from
// users (targets, waivers) are checked here first.
//
// The scan is conservative: it may count a level that the YAML parser would
// not (a bracket inside a plain scalar), never the reverse, so a file it
// passes nests no deeper than it says.
package yamlbound

import (
	"fmt"
)

// Limits bound one file.
type Limits struct {
	// MaxBytes bounds the file's size.
	MaxBytes int
	// MaxDepth bounds nesting: block indentation levels plus flow brackets.
	MaxDepth int
	// MaxAliases bounds alias nodes (*name), which a decoder may expand.
	MaxAliases int
}

// Default are the limits for the project's hand-written files.
var Default = Limits{MaxBytes: 1 << 20, MaxDepth: 64, MaxAliases: 16}

// Error is a file beyond a limit, at a line (1-based) when known.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Shape is what a scan measured.
type Shape struct {
	// Depth is the deepest nesting seen (an upper bound).
	Depth int
	// Aliases is the number of alias nodes.
	Aliases int
	// Documents is the number of documents with content.
	Documents int
}

// Check scans b and returns its shape, or an *Error naming the first limit it
// passes.
func Check(b []byte, l Limits) (Shape, error) {
	var sh Shape
	if l.MaxBytes > 0 && len(b) > l.MaxBytes {
		return sh, &Error{Msg: fmt.Sprintf("larger than %d bytes", l.MaxBytes)}
	}
	s := scanner{lim: l, sh: &sh}
	line := 0
	for start := 0; start < len(b); {
		end := start
		for end < len(b) && b[end] != '\n' {
			end++
		}
		line++
		if err := s.line(b[start:end]); err != nil {
			err.Line = line
			return sh, err
		}
		start = end + 1
	}
	if s.content {
		sh.Documents++
	}
	return sh, nil
}

type scanner struct {
	lim   Limits
	sh    *Shape
	stack [256]int // block indentation columns
	n     int      // entries used in stack
	flow  int      // open flow brackets
	quote byte     // open quoted scalar: '\'' or '"', else 0
	// scalar is the indentation of the line that opened a block scalar (| or
	// >), -1 when none is open.
	scalar  int
	inBlock bool
	content bool // the current document has content
}

func (s *scanner) line(ln []byte) *Error {
	if len(ln) > 0 && ln[len(ln)-1] == '\r' {
		ln = ln[:len(ln)-1]
	}
	indent := 0
	for indent < len(ln) && ln[indent] == ' ' {
		indent++
	}
	blank := indent == len(ln) || ln[indent] == '#'
	if s.inBlock {
		if blank || indent > s.scalar {
			return nil
		}
		s.inBlock = false
	}
	if s.quote == 0 && s.flow == 0 && indent == 0 && isMarker(ln) {
		if s.content {
			s.sh.Documents++
		}
		s.content, s.n = false, 0
		rest := 3
		for rest < len(ln) && (ln[rest] == ' ' || ln[rest] == '\t') {
			rest++
		}
		if rest == len(ln) || ln[rest] == '#' {
			return nil
		}
		// Content on the marker's line ("--- [a]").
		s.content = true
		if err := s.push(0); err != nil {
			return err
		}
		return s.rest(ln, rest)
	}
	if blank && s.quote == 0 {
		return nil
	}
	s.content = true
	i := indent
	if s.quote == 0 && s.flow == 0 {
		// Block context: the line's indentation and its compact indicators
		// ("- - x", "? x") each open a level.
		for s.n > 0 && s.stack[s.n-1] >= indent {
			s.n--
		}
		if err := s.push(indent); err != nil {
			return err
		}
		for i+1 < len(ln) && (ln[i] == '-' || ln[i] == '?' || ln[i] == ':') && ln[i+1] == ' ' {
			i += 2
			for i < len(ln) && ln[i] == ' ' {
				i++
			}
			if err := s.push(i); err != nil {
				return err
			}
		}
	}
	return s.rest(ln, i)
}

func (s *scanner) push(col int) *Error {
	if s.n >= len(s.stack) || s.n+s.flow >= s.lim.MaxDepth {
		return &Error{Msg: fmt.Sprintf("nested deeper than %d levels", s.lim.MaxDepth)}
	}
	s.stack[s.n] = col
	s.n++
	s.sh.Depth = max(s.sh.Depth, s.n+s.flow)
	return nil
}

// rest scans a line from i: quoted scalars, comments, flow brackets, aliases
// and block scalar indicators.
func (s *scanner) rest(ln []byte, i int) *Error {
	start := true // at a position where a node may start
	for ; i < len(ln); i++ {
		c := ln[i]
		if s.quote != 0 {
			switch {
			case s.quote == '"' && c == '\\':
				i++
			case c == s.quote && s.quote == '\'' && i+1 < len(ln) && ln[i+1] == '\'':
				i++
			case c == s.quote:
				s.quote, start = 0, false
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t':
			continue
		case c == '#' && (i == 0 || ln[i-1] == ' ' || ln[i-1] == '\t'):
			return nil
		case c == '[' || c == '{':
			s.flow++
			s.sh.Depth = max(s.sh.Depth, s.n+s.flow)
			if s.n+s.flow > s.lim.MaxDepth {
				return &Error{Msg: fmt.Sprintf("nested deeper than %d levels", s.lim.MaxDepth)}
			}
			start = true
			continue
		case c == ']' || c == '}':
			if s.flow > 0 {
				s.flow--
			}
			start = false
			continue
		case c == ',' || c == ':':
			// A plain word's colons are skipped with the word: this one
			// follows a space, a quote or a bracket, and a value may follow.
			start = true
			continue
		case (c == '-' || c == '?') && (i+1 == len(ln) || ln[i+1] == ' '):
			start = true
			continue
		}
		if start {
			switch c {
			case '\'', '"':
				s.quote = c
				start = false
				continue
			case '*':
				s.sh.Aliases++
				if s.sh.Aliases > s.lim.MaxAliases {
					return &Error{Msg: fmt.Sprintf("more than %d aliases", s.lim.MaxAliases)}
				}
			case '|', '>':
				if s.flow == 0 {
					// Its content is indented past the innermost block level.
					s.inBlock, s.scalar = true, s.stack[max(s.n-1, 0)]
					return nil
				}
			case '&', '!':
				// An anchor or a tag: the node itself follows.
				for i+1 < len(ln) && !isBreak(ln[i+1]) {
					i++
				}
				continue
			}
		}
		start = false
		// Skip the rest of a plain word up to a break or a ": "; brackets
		// inside it still count (conservatively) on the next iterations.
		for i+1 < len(ln) && !isBreak(ln[i+1]) && !valueIndicator(ln, i+1) {
			i++
		}
	}
	return nil
}

// valueIndicator reports a ':' at i that ends a key.
func valueIndicator(ln []byte, i int) bool {
	return ln[i] == ':' && (i+1 == len(ln) || ln[i+1] == ' ' || ln[i+1] == '\t')
}

func isBreak(c byte) bool {
	switch c {
	case ' ', '\t', '[', ']', '{', '}', ',':
		return true
	}
	return false
}

// isMarker reports a document marker line: "---" or "..." alone or followed
// by a space.
func isMarker(ln []byte) bool {
	if len(ln) < 3 || (string(ln[:3]) != "---" && string(ln[:3]) != "...") {
		return false
	}
	return len(ln) == 3 || ln[3] == ' ' || ln[3] == '\t'
}

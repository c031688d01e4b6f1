// Package labelfilter parses the label expressions `sandcheck run
// --label-filter` takes, in the syntax Ginkgo v2 uses for --label-filter, so
// one expression selects the same probes from the CLI and from
// `ginkgo ./suites`, without linking a test framework into the CLI.
//
// The grammar, loosest binding first:
//
//	expr    = and { ("||" | ",") and }
//	and     = unary { "&&" unary }
//	unary   = "!" unary | primary
//	primary = "(" expr ")" | label | "/" regexp "/"
//
// A label matches a spec carrying it, compared without regard to case; a
// regexp matches a spec with at least one label it matches. Ginkgo's set
// operations over key:value labels are refused: sandcheck's vocabulary has
// no such labels.
package labelfilter

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Filter reports whether a spec with these labels is selected.
type Filter func(labels []string) bool

// All selects every spec; it is what an empty expression parses to.
func All([]string) bool { return true }

// Parse parses expr. An empty or blank expression selects everything.
func Parse(expr string) (Filter, error) {
	if strings.TrimSpace(expr) == "" {
		return All, nil
	}
	p := &parser{in: expr}
	f, err := p.or()
	if err != nil {
		return nil, fmt.Errorf("parsing label filter %q: %w", expr, err)
	}
	if p.skip(); p.pos < len(p.in) {
		return nil, fmt.Errorf("parsing label filter %q: %w", expr, p.errorf("unexpected %q", p.in[p.pos]))
	}
	return f, nil
}

// special are the characters that end a label.
const special = "&|!,()/:"

type parser struct {
	in  string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("at column %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *parser) skip() {
	for p.pos < len(p.in) && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t') {
		p.pos++
	}
}

// eat consumes tok, after blanks, when it comes next.
func (p *parser) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.in[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *parser) or() (Filter, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for {
		if !p.eat("||") && !p.eat(",") {
			if p.eat("|") {
				return nil, p.errorf("a single '|': did you mean '||'?")
			}
			return left, nil
		}
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(labels []string) bool { return l(labels) || right(labels) }
	}
}

func (p *parser) and() (Filter, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		if !p.eat("&&") {
			if p.eat("&") {
				return nil, p.errorf("a single '&': did you mean '&&'?")
			}
			return left, nil
		}
		right, err := p.unary()
		if err != nil {
			return nil, err
		}
		l := left
		left = func(labels []string) bool { return l(labels) && right(labels) }
	}
}

func (p *parser) unary() (Filter, error) {
	if p.eat("!") {
		f, err := p.unary()
		if err != nil {
			return nil, err
		}
		return func(labels []string) bool { return !f(labels) }, nil
	}
	return p.primary()
}

func (p *parser) primary() (Filter, error) {
	p.skip()
	if p.pos >= len(p.in) {
		return nil, p.errorf("a label, '!', '(' or a /regexp/ is missing at the end")
	}
	switch c := p.in[p.pos]; {
	case c == '(':
		p.pos++
		f, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, p.errorf("a ')' is missing")
		}
		return f, nil
	case c == '/':
		p.pos++
		end := strings.IndexByte(p.in[p.pos:], '/')
		if end < 0 {
			return nil, p.errorf("the regexp has no closing '/'")
		}
		re, err := regexp.Compile(p.in[p.pos : p.pos+end])
		if err != nil {
			return nil, p.errorf("regexp: %v", err)
		}
		p.pos += end + 1
		return func(labels []string) bool {
			for _, l := range labels {
				if re.MatchString(l) {
					return true
				}
			}
			return false
		}, nil
	case strings.IndexByte(special, c) >= 0:
		return nil, p.errorf("a label, '!', '(' or a /regexp/ is missing before %q", c)
	}
	start := p.pos
	for p.pos < len(p.in) && strings.IndexByte(special, p.in[p.pos]) < 0 {
		p.pos++
	}
	if p.pos < len(p.in) && p.in[p.pos] == ':' {
		return nil, errors.New("set operations on key:value labels are not supported (sandcheck's labels have no values)")
	}
	label := strings.TrimSpace(p.in[start:p.pos])
	if strings.ContainsAny(label, " \t") {
		return nil, fmt.Errorf("at column %d: %q is two labels without an operator between them", start+1, label)
	}
	want := strings.ToLower(label)
	return func(labels []string) bool {
		for _, l := range labels {
			if strings.ToLower(l) == want {
				return true
			}
		}
		return false
	}, nil
}

package sandbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A small reader and evaluator of Seatbelt profiles (SBPL), so a test can
// check what a profile allows, not how its text looks. SBPL is Scheme:
// lists, symbols, "strings", #"regexes" and ; comments. Seatbelt decides
// an operation by the last rule that matches it.

// sexp is an atom (a symbol, a string or a regex) or a list.
type sexp struct {
	atom  string
	kind  byte // 's' symbol, '"' string, '#' regex, '(' list
	items []sexp
}

func (e sexp) String() string {
	switch e.kind {
	case '(':
		var parts []string
		for _, it := range e.items {
			parts = append(parts, it.String())
		}
		return "(" + strings.Join(parts, " ") + ")"
	case '"':
		return strconv.Quote(e.atom)
	case '#':
		return `#"` + e.atom + `"`
	}
	return e.atom
}

// readSBPL reads every top-level expression of a profile.
func readSBPL(src string) ([]sexp, error) {
	var stack [][]sexp
	var top []sexp
	emit := func(e sexp) {
		if len(stack) == 0 {
			top = append(top, e)
		} else {
			stack[len(stack)-1] = append(stack[len(stack)-1], e)
		}
	}
	// str reads a quoted text from src[i] (the opening quote) and returns
	// it raw (escapes kept) and the index after its closing quote.
	str := func(i int) (string, int, error) {
		for j := i + 1; j < len(src); j++ {
			switch src[j] {
			case '\\':
				j++
			case '"':
				return src[i+1 : j], j + 1, nil
			case '\n':
				return "", 0, fmt.Errorf("offset %d: string not closed on its line", i)
			}
		}
		return "", 0, fmt.Errorf("offset %d: string not closed", i)
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(':
			stack = append(stack, []sexp{})
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("offset %d: ')' without '('", i)
			}
			items := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			emit(sexp{kind: '(', items: items})
			i++
		case c == '"':
			raw, next, err := str(i)
			if err != nil {
				return nil, err
			}
			s, err := strconv.Unquote(`"` + raw + `"`)
			if err != nil {
				return nil, fmt.Errorf("offset %d: string %q: %v", i, raw, err)
			}
			emit(sexp{kind: '"', atom: s})
			i = next
		case c == '#' && i+1 < len(src) && src[i+1] == '"':
			raw, next, err := str(i + 1)
			if err != nil {
				return nil, err
			}
			emit(sexp{kind: '#', atom: strings.ReplaceAll(raw, `\"`, `"`)})
			i = next
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n();\"", rune(src[j])) {
				j++
			}
			emit(sexp{kind: 's', atom: src[i:j]})
			i = j
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("%d list(s) not closed", len(stack))
	}
	return top, nil
}

// sbRule is one (allow …) or (deny …): its operations, then its filters
// (none: every object of those operations).
type sbRule struct {
	allow   bool
	ops     []string
	filters []sexp
	text    string
}

// rules reads a profile's rules, failing the test on anything that is not
// (version 1) or a rule.
func rules(t *testing.T, profile string) []sbRule {
	t.Helper()
	exprs, err := readSBPL(profile)
	if err != nil {
		t.Fatalf("the profile does not read as S-expressions: %v\n%s", err, profile)
	}
	if len(exprs) == 0 || exprs[0].String() != "(version 1)" {
		t.Errorf("the profile does not start with (version 1), which sandbox-exec requires")
	}
	var out []sbRule
	for i, e := range exprs {
		if e.kind != '(' || len(e.items) == 0 || e.items[0].kind != 's' {
			t.Fatalf("expression %d is not a list headed by a symbol: %s", i, e)
		}
		switch head := e.items[0].atom; head {
		case "version":
			if i != 0 || e.String() != "(version 1)" {
				t.Errorf("expression %d: %s; want (version 1) first and only there", i, e)
			}
		case "allow", "deny":
			r := sbRule{allow: head == "allow", text: e.String()}
			for _, it := range e.items[1:] {
				if it.kind == 's' && len(r.filters) == 0 {
					r.ops = append(r.ops, it.atom)
				} else if it.kind == '(' {
					r.filters = append(r.filters, it)
				} else {
					t.Fatalf("rule %s: %s is neither an operation nor a filter", e, it)
				}
			}
			if len(r.ops) == 0 {
				t.Fatalf("rule %s names no operation", e)
			}
			out = append(out, r)
		default:
			t.Fatalf("expression %d: unknown form %s", i, e)
		}
	}
	return out
}

// covers tells whether a rule's operation (maybe a wildcard such as
// file-read*, or default) covers op.
func covers(ruleOp, op string) bool {
	if ruleOp == "default" || ruleOp == op {
		return true
	}
	prefix, wild := strings.CutSuffix(ruleOp, "*")
	return wild && strings.HasPrefix(op, prefix)
}

// matchPath tells whether a file filter matches path.
func matchPath(t *testing.T, f sexp, path string) bool {
	if len(f.items) != 2 || f.items[0].kind != 's' {
		return false
	}
	arg := f.items[1]
	switch f.items[0].atom {
	case "literal":
		return arg.kind == '"' && path == arg.atom
	case "subpath":
		return arg.kind == '"' && (path == arg.atom || strings.HasPrefix(path, strings.TrimSuffix(arg.atom, "/")+"/"))
	case "regex":
		re, err := regexp.Compile(arg.atom)
		if err != nil {
			t.Fatalf("regex %s: %v", arg, err)
		}
		return arg.kind == '#' && re.MatchString(path)
	}
	return false
}

// decide is Seatbelt's verdict on op for a file path: the last rule that
// covers op and has no filter or a filter matching path. It returns that
// rule's index (-1 when none matched: denied).
func decide(t *testing.T, rs []sbRule, op, path string) (bool, int) {
	t.Helper()
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		hit := false
		for _, o := range r.ops {
			hit = hit || covers(o, op)
		}
		if !hit {
			continue
		}
		if len(r.filters) == 0 {
			return r.allow, i
		}
		for _, f := range r.filters {
			if matchPath(t, f, path) {
				return r.allow, i
			}
		}
	}
	return false, -1
}

// The reader itself: strings unquoted, regexes kept, comments dropped.
func TestReadSBPL(t *testing.T) {
	exprs, err := readSBPL("(version 1) ; a comment (\n(allow file-read* (literal \"/a \\\"b\\\"\") (regex #\"^/x/\\.git(/|$)\"))\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) != 2 || exprs[1].items[2].items[1].atom != `/a "b"` || exprs[1].items[3].items[1].atom != `^/x/\.git(/|$)` {
		t.Errorf("read %v", exprs)
	}
	for _, bad := range []string{"(allow", "(allow))", `(literal "/a)`} {
		if _, err := readSBPL(bad); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}

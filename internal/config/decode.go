package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
)

// Error is one problem in a JSONC document, with its position.
type Error struct {
	File      string
	Line, Col int
	Key       string // dotted key path, if the problem belongs to a key
	Msg       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors is every problem found in one document.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Sorted returns the errors in file order.
func (es Errors) Sorted() Errors {
	slices.SortStableFunc(es, func(a, b *Error) int { return cmp.Or(a.Line-b.Line, a.Col-b.Col) })
	return es
}

// decoder decodes a hujson tree into a Go value strictly: every key must be
// a field (exact case), no key may repeat, and each value must have the
// field's type. It records where each key path was written so that later
// validation errors can point at it.
type decoder struct {
	file   string
	src    []byte
	expand bool // expand ${VAR} in strings
	errs   Errors
	pos    map[string]int // key path → offset of its value
}

// DecodeStrict decodes the JSONC document src (named file in errors) into
// out, a pointer to a struct. It returns the positions of every key path
// present, or Errors.
func DecodeStrict(file string, src []byte, out any, expandEnv bool) (map[string]int, error) {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil, Errors{syntaxError(file, err)}
	}
	d := &decoder{file: file, src: src, expand: expandEnv, pos: map[string]int{}}
	d.value(&root, reflect.ValueOf(out).Elem(), "")
	if len(d.errs) > 0 {
		// The keys that decoded are set, so callers can still validate them.
		return d.pos, d.errs
	}
	return d.pos, nil
}

var parseErrRE = regexp.MustCompile(`^hujson: line (\d+), column (\d+): (.*)$`)

func syntaxError(file string, err error) *Error {
	e := &Error{File: file, Line: 1, Col: 1, Msg: "syntax error: " + err.Error()}
	if m := parseErrRE.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Col, _ = strconv.Atoi(m[2])
		e.Msg = "syntax error: " + m[3] + "; check for a missing comma, quote or bracket"
	}
	return e
}

// LineCol returns line and column (1-based) of byte offset n in src.
func LineCol(src []byte, n int) (int, int) {
	if n > len(src) {
		n = len(src)
	}
	line := 1 + bytes.Count(src[:n], []byte("\n"))
	col := 1 + n - (bytes.LastIndexByte(src[:n], '\n') + 1)
	return line, col
}

func (d *decoder) fail(off int, key, format string, args ...any) {
	line, col := LineCol(d.src, off)
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Col: col, Key: key, Msg: fmt.Sprintf(format, args...)})
}

var durationType = reflect.TypeOf(Duration(0))

func kindName(v hujson.ValueTrimmed) string {
	switch v.Kind() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

func (d *decoder) value(v *hujson.Value, rv reflect.Value, path string) {
	d.pos[path] = v.StartOffset
	name := path
	if name == "" {
		name = "the document"
	}
	if rv.Type() == durationType {
		lit, ok := v.Value.(hujson.Literal)
		if !ok || lit.Kind() != '"' {
			d.fail(v.StartOffset, path, "%s must be a duration string like \"30m\", not %s", name, kindName(v.Value))
			return
		}
		var dur Duration
		if err := dur.UnmarshalJSON(lit); err != nil {
			d.fail(v.StartOffset, path, "%s: %v", name, err)
			return
		}
		rv.Set(reflect.ValueOf(dur))
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if lit, ok := v.Value.(hujson.Literal); ok && lit.Kind() == 'n' {
			rv.Set(reflect.Zero(rv.Type()))
			return
		}
		nv := reflect.New(rv.Type().Elem())
		d.value(v, nv.Elem(), path)
		rv.Set(nv)
	case reflect.Struct:
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			d.fail(v.StartOffset, path, "%s must be an object, not %s", name, kindName(v.Value))
			return
		}
		d.object(obj, rv, path)
	case reflect.Slice:
		arr, ok := v.Value.(*hujson.Array)
		if !ok {
			d.fail(v.StartOffset, path, "%s must be an array, not %s", name, kindName(v.Value))
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(arr.Elements), len(arr.Elements))
		for i := range arr.Elements {
			d.value(&arr.Elements[i], s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		rv.Set(s)
	case reflect.String:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || lit.Kind() != '"' {
			d.fail(v.StartOffset, path, "%s must be a string, not %s", name, kindName(v.Value))
			return
		}
		s := lit.String()
		if d.expand {
			var err error
			if s, err = expandEnv(s); err != nil {
				d.fail(v.StartOffset, path, "%s: %v", name, err)
				return
			}
		}
		rv.SetString(s)
	case reflect.Bool:
		lit, ok := v.Value.(hujson.Literal)
		if !ok || (lit.Kind() != 't' && lit.Kind() != 'f') {
			d.fail(v.StartOffset, path, "%s must be true or false, not %s", name, kindName(v.Value))
			return
		}
		rv.SetBool(lit.Bool())
	case reflect.Int:
		lit, ok := v.Value.(hujson.Literal)
		n, err := strconv.ParseInt(string(lit), 10, 64)
		if !ok || lit.Kind() != '0' || err != nil {
			d.fail(v.StartOffset, path, "%s must be a whole number, not %s", name, kindName(v.Value))
			return
		}
		rv.SetInt(n)
	case reflect.Float64:
		lit, ok := v.Value.(hujson.Literal)
		f, err := strconv.ParseFloat(string(lit), 64)
		if !ok || lit.Kind() != '0' || err != nil {
			d.fail(v.StartOffset, path, "%s must be a number, not %s", name, kindName(v.Value))
			return
		}
		rv.SetFloat(f)
	case reflect.Map:
		// An object of named entries: each one the file names replaces
		// the default's entry of that name, the others stay.
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			d.fail(v.StartOffset, path, "%s must be an object, not %s", name, kindName(v.Value))
			return
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMap(rv.Type()))
		}
		seen := map[string]bool{}
		for i := range obj.Members {
			m := &obj.Members[i]
			key := m.Name.Value.(hujson.Literal).String()
			kp := path + "." + key
			if seen[key] {
				d.fail(m.Name.StartOffset, kp, "duplicate key %q: remove one of the two", kp)
				continue
			}
			seen[key] = true
			ev := reflect.New(rv.Type().Elem()).Elem()
			d.value(&m.Value, ev, kp)
			rv.SetMapIndex(reflect.ValueOf(key), ev)
		}
	default:
		panic("config: unsupported field type " + rv.Type().String())
	}
}

func (d *decoder) object(obj *hujson.Object, rv reflect.Value, path string) {
	fields := map[string]int{}
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		if tag := jsonName(t.Field(i)); tag != "" {
			fields[tag] = i
		}
	}
	seen := map[string]bool{}
	for i := range obj.Members {
		m := &obj.Members[i]
		key := m.Name.Value.(hujson.Literal).String()
		kp := key
		if path != "" {
			kp = path + "." + key
		}
		if seen[key] {
			d.fail(m.Name.StartOffset, kp, "duplicate key %q: remove one of the two", kp)
			continue
		}
		seen[key] = true
		idx, ok := fields[key]
		if !ok {
			d.fail(m.Name.StartOffset, kp, "unknown key %q%s", kp, suggest(path, key, fields))
			continue
		}
		d.value(&m.Value, rv.Field(idx), kp)
	}
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	return name
}

// suggest names the field a mistyped key probably meant.
func suggest(path, key string, fields map[string]int) string {
	if path != "" {
		path += "."
	}
	best, bestDist := "", 3
	for f := range fields {
		if strings.EqualFold(f, key) {
			return fmt.Sprintf(" (keys are case-sensitive: write %q)", path+f)
		}
		if dist := levenshtein(strings.ToLower(key), strings.ToLower(f)); dist < bestDist {
			best, bestDist = f, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", path+best)
	}
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	slices.Sort(names)
	return "; known keys here: " + strings.Join(names, ", ")
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

var envRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

var errUnset = errors.New("environment variable is not set")

// expandEnv replaces ${VAR} and ${VAR:-default} from the environment.
func expandEnv(s string) (string, error) {
	var err error
	out := envRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRE.FindStringSubmatch(m)
		if v, ok := os.LookupEnv(sub[1]); ok && (v != "" || sub[2] == "") {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		err = fmt.Errorf("%w: ${%s}; set it, or give a default as ${%s:-value}", errUnset, sub[1], sub[1])
		return m
	})
	return out, err
}

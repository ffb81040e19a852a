package security

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// layoutPaths calls every method of layout.Layout that names a path (with
// each of folders where it takes one), and every method of the IPCDir it
// returns, so a path added to the layout is checked without naming it here.
func layoutPaths(t *testing.T, l layout.Layout, folders ...string) []string {
	t.Helper()
	str := reflect.TypeOf("")
	var out []string
	var collect func(v reflect.Value)
	collect = func(v reflect.Value) {
		for i := range v.NumMethod() {
			m := v.Method(i)
			mt := m.Type()
			if mt.NumOut() != 1 || mt.Out(0).Kind() != reflect.String {
				continue // StateFiles and the like
			}
			var calls [][]reflect.Value
			switch {
			case mt.NumIn() == 0:
				calls = [][]reflect.Value{nil}
			case mt.NumIn() == 1 && mt.In(0) == str:
				for _, f := range folders {
					calls = append(calls, []reflect.Value{reflect.ValueOf(f)})
				}
			default:
				t.Fatalf("layout method %s has a signature this test does not know: %s", v.Type().Method(i).Name, mt)
			}
			for _, args := range calls {
				r := m.Call(args)[0]
				out = append(out, r.String())
				if r.Type() != str && r.NumMethod() > 0 {
					collect(r) // an IPCDir
				}
			}
		}
	}
	collect(reflect.ValueOf(l))
	return out
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// A state file added to the layout cannot escape the sandbox: every path
// the layout names under the data dir is the group's own (its IPC
// directory and session), a parent of those, or denied to the group; and
// every other group's files are denied.
func TestLayoutStateIsDenied(t *testing.T) {
	l := host.Layout
	const own, other = "family", "work"
	e := Resolve(global, Group{Folder: own}, host)
	denied := func(p string) bool {
		return slices.ContainsFunc(e.DenyRead, func(d string) bool { return within(p, d) })
	}
	ownDirs := []string{string(l.IPC(own)), l.Session(own)}
	paths := layoutPaths(t, l, own, other)
	if len(paths) < 20 {
		t.Fatalf("found only %d layout paths: %v", len(paths), paths)
	}
	for _, p := range paths {
		switch {
		case within(p, l.GroupsDir):
			if within(p, l.Group(other)) && !denied(p) {
				t.Errorf("%s, another group's, is not denied", p)
			}
		case !within(p, l.DataDir):
			t.Errorf("%s is outside the data and groups dirs", p)
		case slices.ContainsFunc(ownDirs, func(d string) bool { return within(p, d) }):
			// The group's own.
		case slices.ContainsFunc(ownDirs, func(d string) bool { return within(d, p) }):
			// A parent of the group's own dirs: its other entries are denied
			// on their own (checked through the other group's paths).
		case !denied(p):
			t.Errorf("%s is in the data dir, not the group's own, and not denied: add it to Layout.StateFiles", p)
		}
	}
	for _, s := range l.StateFiles() {
		if !slices.Contains(e.DenyRead, s) {
			t.Errorf("state file %s is missing from denyRead", s)
		}
	}
	if !slices.Contains(e.DenyWrite, l.GroupLogs(own)) {
		t.Errorf("the group's own logs %s are writable to it", l.GroupLogs(own))
	}
}

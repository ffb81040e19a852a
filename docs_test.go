package nanoclawd

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The one package map, in docs/architecture.md, names every folder of
// internal/: a newcomer finds each room by its noun.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !bytes.Contains(doc, []byte("\ninternal/"+d.Name()+"/ ")) {
			t.Errorf("docs/architecture.md does not list internal/%s/", d.Name())
		}
	}
	kit, err := os.ReadDir("internal/testkit")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range kit {
		if d.IsDir() && !bytes.Contains(doc, []byte("\n  "+d.Name()+"/ ")) {
			t.Errorf("docs/architecture.md does not list internal/testkit/%s/", d.Name())
		}
	}
}

// The README is read to the end: what it is, the two commands, the first
// run and where to read on; the rest lives in docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines; move detail into docs/ (at most 200)", n)
	}
}

// The project's own docs and code send nobody to a document they cannot
// see (the spec the developers share is not in the repository), and every
// relative link in docs/ and the README leads to a file that exists.
func TestDocsStandAlone(t *testing.T) {
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "data" || d.Name() == "groups" || d.Name() == "bin") {
			return fs.SkipDir
		}
		ext := filepath.Ext(p)
		if d.IsDir() || (ext != ".go" && ext != ".md" && ext != ".ts") || p == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("CONTRACT")) {
			t.Errorf("%s refers to CONTRACT, which is not in the repository", p)
		}
		if ext == ".md" {
			for _, link := range relativeLinks(string(b)) {
				if _, err := os.Stat(filepath.Join(filepath.Dir(p), link)); err != nil {
					t.Errorf("%s links to %s, which does not exist", p, link)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// relativeLinks are the targets of the markdown links in s that point at
// files of the repository (no scheme, no bare anchor), without anchors.
func relativeLinks(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "](")
		if i < 0 {
			return out
		}
		s = s[i+2:]
		j := strings.IndexByte(s, ')')
		if j < 0 {
			return out
		}
		target, _, _ := strings.Cut(s[:j], "#")
		if strings.Contains(target, ".") && !strings.Contains(target, "://") && !strings.HasPrefix(target, "mailto:") && !strings.ContainsAny(target, " `") {
			out = append(out, target)
		}
		s = s[j:]
	}
}

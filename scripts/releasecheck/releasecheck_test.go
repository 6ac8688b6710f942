package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCheckGoModRefusesReplace protects release-check's first promise: a
// published module with a replace (or exclude) directive is refused, in
// every form go.mod allows, and a comment that mentions one is not.
func TestCheckGoModRefusesReplace(t *testing.T) {
	cases := []struct {
		name  string
		gomod string
		path  string
		bad   []string // the lines the error must name; none: no error
	}{
		{"clean", "module github.com/samsa-go/samsa/observe/samsaprom\n\ngo 1.26.0\n\nrequire github.com/samsa-go/samsa v0.1.0 // replace it? no\n",
			"github.com/samsa-go/samsa/observe/samsaprom", nil},
		{"quoted module path", "module \"example.com/m\"\n", "example.com/m", nil},
		{"replace line", "module m\n\nrequire github.com/samsa-go/samsa v0.1.0\n\nreplace github.com/samsa-go/samsa => ../..\n",
			"m", []string{"line 5: replace github.com/samsa-go/samsa => ../.."}},
		{"replace block", "module m\n\nreplace (\n\tgithub.com/samsa-go/samsa => ../..\n)\n",
			"m", []string{"line 3: replace ("}},
		{"exclude", "module m\n\nexclude github.com/x/y v1.0.0\n", "m", []string{"line 3: exclude github.com/x/y v1.0.0"}},
		{"replace inside a require block is a module path", "module m\n\nrequire (\n\treplace v1.0.0\n)\n", "m", nil},
		{"commented out", "module m\n\n// replace github.com/samsa-go/samsa => ../..\n", "m", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, err := checkGoMod([]byte(tc.gomod))
			if path != tc.path {
				t.Errorf("module path %q, want %q", path, tc.path)
			}
			if len(tc.bad) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, line := range tc.bad {
				if !strings.Contains(err.Error(), line) {
					t.Errorf("error %q does not name %q", err, line)
				}
			}
		})
	}
	if _, err := checkGoMod([]byte("go 1.26.0\n")); err == nil {
		t.Error("a go.mod without a module directive was accepted")
	}
}

// TestModuleFilesLeaveOutNestedModules: a module's zip holds neither a
// nested module's files (its own zip does) nor the workspace files.
func TestModuleFilesLeaveOutNestedModules(t *testing.T) {
	repo := []string{
		"go.mod", "go.sum", "go.work", "go.work.sum", "README.md", "producer/producer.go",
		"observe/samsaprom/go.mod", "observe/samsaprom/samsaprom.go",
		"observe/doc.txt",
		"interop/go.mod", "interop/kafka/pom.xml",
		"scripts/release-check.sh", "scripts/releasecheck/go.mod", "scripts/releasecheck/main.go",
		"compression/testdata/go.mod.txt",
	}
	cases := []struct {
		dir  string
		want []string
	}{
		{".", []string{"README.md", "compression/testdata/go.mod.txt", "go.mod", "go.sum", "observe/doc.txt", "producer/producer.go", "scripts/release-check.sh"}},
		{"observe/samsaprom", []string{"go.mod", "samsaprom.go"}},
		{"interop", []string{"go.mod", "kafka/pom.xml"}},
	}
	for _, tc := range cases {
		got, err := moduleFiles(tc.dir, repo)
		if err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.dir, got, tc.want)
		}
	}
	if _, err := moduleFiles("observe", repo); err == nil {
		t.Error("a directory without go.mod was taken as a module")
	}
}

// TestWriteZipLayout: every entry is module@version/file, as the go
// command expects of a proxy's zip.
func TestWriteZipLayout(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module example.com/m\n", "a/b.go": "package a\n"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	mod := &module{path: "example.com/m", files: []string{"a/b.go", "go.mod"}}
	if err := writeZip(&buf, mod, "v0.1.0", dir, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	want := []string{"example.com/m@v0.1.0/a/b.go", "example.com/m@v0.1.0/go.mod"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
}

// TestQuickstart: the Quick start is the section's first Go block, and
// it must be a complete package main.
func TestQuickstart(t *testing.T) {
	const prog = "package main\n\nfunc main() {}\n"
	cases := []struct {
		name, readme, want string
		line               int // of the block's first line
		err                string
	}{
		{"first block of the section", "# x\n\n```go\npackage other\n```\n\n## Quick start\n\nText.\n\n```go\n" + prog + "```\n\n```go\npackage main\n```\n", prog, 12, ""},
		{"leading comment", "## Quick start\n\n```go\n// A program.\n" + prog + "```\n", "// A program.\n" + prog, 4, ""},
		{"no section", "# x\n\n```go\n" + prog + "```\n", "", 0, "no \"## Quick start\" section"},
		{"fragment", "## Quick start\n\n```go\np.Send(ctx, r)\n```\n", "", 0, "not a complete package main"},
		{"block in the next section", "## Quick start\n\nnone\n\n## Next\n\n```go\n" + prog + "```\n", "", 0, "no closed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, line, err := quickstart(tc.readme)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || line != tc.line {
				t.Errorf("got %q at line %d, want %q at line %d", got, line, tc.want, tc.line)
			}
		})
	}
}

package readmecheck

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapEntry is one line of DESIGN.md's file map: a file or a directory
// (its path ends in "/"), as a slash-separated path from the repository
// root.
type mapEntry struct {
	path string
	line int // in DESIGN.md, 1-based
}

// fileMap parses the tree of the "## File map" section of a DESIGN.md
// text: the section's first fenced block, one entry per line, indented two
// spaces per level under its directory. An entry is its name (a file, or
// a directory ending in "/"; either may hold slashes, as `cmd/testbroker/`
// or `java/pom.xml`), then at least one space and what it is:
//
//	producer/            public API
//	  producer.go        Producer, New, Send
//	  cmd/x/             a command
//	    main.go          flags
func fileMap(text string) ([]mapEntry, error) {
	head, after, ok := strings.Cut("\n"+text, "\n## File map\n")
	if !ok {
		return nil, errNoFileMap
	}
	if end := strings.Index(after, "\n## "); end >= 0 {
		after = after[:end]
	}
	first := strings.Count(head, "\n") + 2 // DESIGN.md's line of after's first line
	lines := strings.Split(after, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, errNoTree
	}
	var (
		entries []mapEntry
		dirs    []string // the directories open at each depth
		seen    = map[string]int{}
	)
	for i := start + 1; ; i++ {
		if i == len(lines) {
			return nil, errTreeNotClosed
		}
		l := lines[i]
		n := first + i
		if strings.HasPrefix(l, "```") {
			break
		}
		if strings.TrimSpace(l) == "" {
			continue
		}
		body := strings.TrimLeft(l, " ")
		indent := len(l) - len(body)
		name, what, _ := strings.Cut(body, " ")
		switch {
		case indent%2 != 0:
			return nil, fmt.Errorf("DESIGN.md:%d: indented by %d spaces, not a multiple of 2", n, indent)
		case indent/2 > len(dirs):
			return nil, fmt.Errorf("DESIGN.md:%d: %q is indented deeper than under a directory", n, name)
		case strings.TrimSpace(what) == "":
			return nil, fmt.Errorf("DESIGN.md:%d: %q does not say what it is", n, name)
		case name == "/" || strings.HasPrefix(name, "/") || strings.Contains(name, "//") || strings.Contains(name, "\\"):
			return nil, fmt.Errorf("DESIGN.md:%d: %q is not a relative slash-separated name", n, name)
		}
		dirs = dirs[:indent/2]
		p := name
		if len(dirs) > 0 {
			p = dirs[len(dirs)-1] + name
		}
		if path.Clean(p) != strings.TrimSuffix(p, "/") {
			return nil, fmt.Errorf("DESIGN.md:%d: %q is not a clean path", n, p)
		}
		if prev, ok := seen[p]; ok {
			return nil, fmt.Errorf("DESIGN.md:%d: %q is listed twice (first on line %d)", n, p, prev)
		}
		seen[p] = n
		entries = append(entries, mapEntry{path: p, line: n})
		if strings.HasSuffix(name, "/") {
			dirs = append(dirs, p)
		}
	}
	return entries, nil
}

type fileMapError string

func (e fileMapError) Error() string { return string(e) }

const (
	errNoFileMap     = fileMapError(`no "## File map" section`)
	errNoTree        = fileMapError("the File map section has no fenced tree")
	errTreeNotClosed = fileMapError("the File map's fenced tree is not closed")
)

// mappable reports whether the file map must name file: everything git
// tracks but testdata/ contents, go.sum and go.work.sum files and
// dot-files (or files under a dot-directory such as .ci/).
func mappable(file string) bool {
	if base := path.Base(file); base == "go.sum" || base == "go.work.sum" {
		return false
	}
	for _, part := range strings.Split(file, "/") {
		if part == "testdata" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// checkFileMap compares a file map with the files it must name (mappable,
// slash-separated) and reports what is missing and what is listed but
// absent (exists reports whether a listed path is there: a file, or a
// directory when the path ends in "/").
func checkFileMap(entries []mapEntry, files []string, exists func(string) bool) (missing, stale []string) {
	listed := map[string]bool{}
	for _, e := range entries {
		listed[e.path] = true
		if !exists(e.path) {
			stale = append(stale, fmt.Sprintf("DESIGN.md:%d: %s", e.line, e.path))
		}
	}
	for _, f := range files {
		if !listed[f] {
			where := "at the top level"
			if d := path.Dir(f); d != "." {
				where = "under " + d + "/"
			}
			missing = append(missing, fmt.Sprintf("%s (a line %s)", f, where))
		}
	}
	sort.Strings(missing)
	return missing, stale
}

func TestFileMapParsing(t *testing.T) {
	const design = "# d\n\n## File map\n\nText `not/an/entry.go`.\n\n```text\n" +
		"go.mod         the module\n" +
		"sasl/          mechanisms\n" +
		"  plain.go     PLAIN\n" +
		"  awsmskiam/   a module\n" +
		"    doc.go     its doc\n" +
		"  scram.go     SCRAM, after a subdirectory\n" +
		"bench/         benchmarks\n" +
		"  clients/     one per library\n" +
		"    java/src/Main.java   Java's\n" +
		"  cmd/peerbench/         the command\n" +
		"    main.go    its main\n" +
		"\n" +
		"README.md      back at the top\n" +
		"```\n\n## Next\n\n```\nlater.go  after the section\n```\n"
	entries, err := fileMap(design)
	require.NoError(t, err)
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.path)
	}
	assert.Equal(t, []string{
		"go.mod", "sasl/", "sasl/plain.go", "sasl/awsmskiam/", "sasl/awsmskiam/doc.go", "sasl/scram.go",
		"bench/", "bench/clients/", "bench/clients/java/src/Main.java", "bench/cmd/peerbench/",
		"bench/cmd/peerbench/main.go", "README.md",
	}, paths)
	assert.Equal(t, 8, entries[0].line, "go.mod's line in the text")
	assert.Equal(t, 20, entries[len(entries)-1].line, "README.md's line in the text")

	cases := []struct {
		name, tree, err string
	}{
		{"odd indent", "a/  dir\n   b.go  file\n", "not a multiple of 2"},
		{"under a file", "a.go  file\n  b.go  file\n", "deeper than under a directory"},
		{"two levels at once", "a/  dir\n    b.go  file\n", "deeper than under a directory"},
		{"no description", "a/  dir\n  b.go\n", `"b.go" does not say what it is`},
		{"twice", "a/  dir\n  b.go  one\n  b.go  two\n", `"a/b.go" is listed twice (first on line`},
		{"absolute", "/a.go  root\n", "not a relative"},
		{"unclean", "a/  dir\n  ../b.go  escape\n", "not a clean path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fileMap("## File map\n\n```\n" + tc.tree + "```\n")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	_, err = fileMap("# d\n")
	assert.ErrorIs(t, err, errNoFileMap)
	_, err = fileMap("# d\n\n## File map\n\nno tree\n")
	assert.ErrorIs(t, err, errNoTree)
	_, err = fileMap("# d\n\n## File map\n\n```\na.go  x\n")
	assert.ErrorIs(t, err, errTreeNotClosed)
}

func TestFileMapChecking(t *testing.T) {
	entries := []mapEntry{{"go.mod", 5}, {"sasl/", 6}, {"sasl/plain.go", 7}, {"sasl/gone.go", 8}, {"old/", 9}}
	files := []string{"go.mod", "sasl/plain.go", "sasl/scram.go", "Makefile"}
	onDisk := map[string]bool{"go.mod": true, "sasl/": true, "sasl/plain.go": true, "sasl/scram.go": true, "Makefile": true}
	missing, stale := checkFileMap(entries, files, func(p string) bool { return onDisk[p] })
	assert.Equal(t, []string{"Makefile (a line at the top level)", "sasl/scram.go (a line under sasl/)"}, missing)
	assert.Equal(t, []string{"DESIGN.md:8: sasl/gone.go", "DESIGN.md:9: old/"}, stale)

	for file, want := range map[string]bool{
		"go.mod": true, "go.sum": false, "bench/go.sum": false, "go.work": true, "go.work.sum": false,
		".gitignore": false, ".ci/run": false, "interop/kafka/.gitignore": false,
		"compression/testdata/vectors/a.gz": false, "producer/sink.go": true,
	} {
		assert.Equal(t, want, mappable(file), file)
	}
}

// TestDesignFileMapNamesEveryFile keeps DESIGN.md's file map complete and
// true: every file git tracks, but testdata/ contents, go.sum files and
// dot-files, has a line of its own in the tree, and every line names a
// file or directory that exists.
func TestDesignFileMapNamesEveryFile(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git command on PATH")
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout (no .git at the repository root)")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files")

	design, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	require.NoError(t, err)
	entries, err := fileMap(string(design))
	require.NoError(t, err, "DESIGN.md")

	exists := func(p string) bool {
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(p, "/"))))
		return err == nil && fi.IsDir() == strings.HasSuffix(p, "/")
	}
	var files []string
	for _, file := range strings.Split(string(out), "\x00") {
		if file != "" && mappable(file) && exists(file) { // a file deleted in the work tree is not yet out of the index
			files = append(files, file)
		}
	}
	missing, stale := checkFileMap(entries, files, exists)
	if len(missing) > 0 {
		t.Errorf("DESIGN.md's File map does not name %d files; add a line for each, with a few words:\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
	if len(stale) > 0 {
		t.Errorf("DESIGN.md's File map names %d paths that do not exist; remove or rename them:\n%s",
			len(stale), strings.Join(stale, "\n"))
	}
}

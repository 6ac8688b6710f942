package readmecheck

import (
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

// mapRow is one row of DESIGN.md's file map: the directory of its first
// cell (a backticked path ending in "/", "./" for the root, stored without
// the slash: "" for the root) and the backticked names of the whole row.
type mapRow struct {
	dir   string
	names map[string]bool
}

// fileMap parses the table rows of the "## File map" section of a
// DESIGN.md text.
func fileMap(text string) ([]mapRow, error) {
	_, after, ok := strings.Cut(text, "\n## File map\n")
	if !ok {
		return nil, errNoFileMap
	}
	if end := strings.Index(after, "\n## "); end >= 0 {
		after = after[:end]
	}
	var rows []mapRow
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(line, "|", 3)
		first := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !strings.HasSuffix(first, "/") {
			continue // not a directory's row
		}
		row := mapRow{dir: strings.TrimSuffix(strings.TrimPrefix(first, "./"), "/"), names: map[string]bool{}}
		// Between the odd and the even backticks: the names.
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts); i += 2 {
			row.names[parts[i]] = true
		}
		rows = append(rows, row)
	}
	return rows, nil
}

type fileMapError string

func (e fileMapError) Error() string { return string(e) }

const errNoFileMap = fileMapError(`no "## File map" section`)

// mapped reports whether rows name file (a slash-separated path from the
// repository root), and which row must: the row of the deepest directory
// that holds the file, whose backticked names must include the file's
// path relative to that directory (its base name when the directory has
// a row of its own).
func mapped(rows []mapRow, file string) (row string, ok bool) {
	best := -1
	for i, r := range rows {
		if r.dir != "" && !strings.HasPrefix(file, r.dir+"/") {
			continue
		}
		if best < 0 || len(r.dir) > len(rows[best].dir) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	r := rows[best]
	rel := file
	if r.dir != "" {
		rel = strings.TrimPrefix(file, r.dir+"/")
	}
	return r.dir, r.names[rel]
}

// mappable reports whether the file map must name file: everything git
// tracks but testdata/ contents, go.sum files and dot-files (or files
// under a dot-directory such as .ci/).
func mappable(file string) bool {
	if path.Base(file) == "go.sum" {
		return false
	}
	for _, part := range strings.Split(file, "/") {
		if part == "testdata" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

func TestFileMapMatching(t *testing.T) {
	design := "# d\n\n## File map\n\n| path | what |\n|---|---|\n" +
		"| `./` | `README.md`, `go.mod` |\n" +
		"| `sasl/` | `doc.go`, `plain.go` |\n" +
		"| `sasl/awsmskiam/` | `doc.go` |\n" +
		"| `bench/clients/java/` | `pom.xml`, `src/Main.java` |\n" +
		"| `producer/hooks.go` | not a directory |\n" +
		"\n## Next\n\n| `later/` | `x.go` |\n"
	rows, err := fileMap(design)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	for _, c := range []struct {
		file string
		row  string
		ok   bool
	}{
		{"README.md", "", true},
		{"Makefile", "", false},
		{"sasl/doc.go", "sasl", true},
		{"sasl/scram.go", "sasl", false},
		{"sasl/awsmskiam/doc.go", "sasl/awsmskiam", true},
		{"sasl/awsmskiam/plain.go", "sasl/awsmskiam", false}, // named in sasl/ only
		{"bench/clients/java/src/Main.java", "bench/clients/java", true},
		{"bench/clients/java/Main.java", "bench/clients/java", false},
		{"later/x.go", "", false}, // after the section
		{"producer/hooks.go", "", false},
	} {
		row, ok := mapped(rows, c.file)
		assert.Equal(t, c.row, row, c.file)
		assert.Equal(t, c.ok, ok, c.file)
	}
	_, err = fileMap("# d\n")
	assert.ErrorIs(t, err, errNoFileMap)

	for file, want := range map[string]bool{
		"go.mod": true, "go.sum": false, "bench/go.sum": false, ".gitignore": false,
		".ci/run": false, "interop/kafka/.gitignore": false, "compression/testdata/vectors/a.gz": false,
		"producer/sink.go": true,
	} {
		assert.Equal(t, want, mappable(file), file)
	}
}

// TestDesignFileMapNamesEveryFile keeps DESIGN.md's file map complete:
// every file git tracks, but testdata/ contents, go.sum files and
// dot-files, is named in backticks in the row of its directory.
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
	rows, err := fileMap(string(design))
	require.NoError(t, err, "DESIGN.md")

	var missing []string
	for _, file := range strings.Split(string(out), "\x00") {
		if file == "" || !mappable(file) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		row, ok := mapped(rows, file)
		if ok {
			continue
		}
		rel := strings.TrimPrefix(file, row+"/")
		dir := path.Dir(file)
		switch {
		case row == "" && dir != ".":
			missing = append(missing, "`"+dir+"/` (a new row) with `"+path.Base(file)+"`, or `"+file+"` in the row `./`")
		case row == "":
			missing = append(missing, "`"+file+"` in the row `./`")
		case row != dir:
			missing = append(missing, "`"+rel+"` in the row `"+row+"/` (or a row `"+dir+"/` with `"+path.Base(file)+"`)")
		default:
			missing = append(missing, "`"+rel+"` in the row `"+row+"/`")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("DESIGN.md's File map does not name %d files; add, with a few words each:\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
}

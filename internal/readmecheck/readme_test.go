package readmecheck

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// skipMarker, on the line before a block's fence, marks a fragment.
const skipMarker = "<!-- compile: skip -->"

// block is one ```go block of a markdown file.
type block struct {
	line int    // of the opening fence, 1-based
	skip bool   // marked as a fragment
	code string // without the fences
}

// goBlocks returns the ```go blocks of a markdown text.
func goBlocks(text string) ([]block, error) {
	var (
		blocks []block
		cur    *block
		prev   string // the last non-empty line before a fence
		code   strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```go":
			cur = &block{line: n, skip: prev == skipMarker}
			code.Reset()
		case cur != nil && trimmed == "```":
			cur.code = code.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the ```go block of line %d is not closed", cur.line)
	}
	return blocks, sc.Err()
}

// packageName returns the name of the block's package clause, "" when it
// has none (a fragment).
func packageName(code string) string {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "package "); ok {
			return strings.TrimSpace(name)
		}
		return ""
	}
	return ""
}

func TestGoBlocks(t *testing.T) {
	md := "# t\n\n```go\npackage main\n\nfunc main() {}\n```\n\n" + skipMarker + "\n\n```go\np.Send(ctx, r)\n```\n\n```sh\nls\n```\n\n```go\nx := 1\n```\n"
	blocks, err := goBlocks(md)
	require.NoError(t, err)
	require.Len(t, blocks, 3)
	assert.Equal(t, block{line: 3, code: "package main\n\nfunc main() {}\n"}, blocks[0])
	assert.Equal(t, block{line: 11, skip: true, code: "p.Send(ctx, r)\n"}, blocks[1])
	assert.Equal(t, block{line: 19, code: "x := 1\n"}, blocks[2])
	assert.Equal(t, "main", packageName(blocks[0].code))
	assert.Equal(t, "", packageName(blocks[2].code))
	assert.Equal(t, "orders_test", packageName("// A test.\npackage orders_test\n"))

	_, err = goBlocks("```go\npackage main\n")
	assert.ErrorContains(t, err, "line 1 is not closed")
}

// docFiles are the markdown files whose Go blocks must compile: the
// README and every file of docs/, as paths from the repository root.
func docFiles(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(filepath.Join("docs", filepath.Base(d))))
	}
	return files, nil
}

// TestReadmeCompiles builds and vets every complete Go block of the
// README and of docs/*.md against this checkout.
func TestReadmeCompiles(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	files, err := docFiles(root)
	require.NoError(t, err)

	dir := t.TempDir()
	complete := map[string]int{}
	for _, name := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		require.NoError(t, err)
		blocks, err := goBlocks(string(text))
		require.NoError(t, err, name)
		for _, b := range blocks {
			if b.skip {
				continue
			}
			pkg := packageName(b.code)
			if pkg == "" {
				t.Errorf("%s:%d: a Go block that is not a complete file: make it one, or mark it with %s on the line before", name, b.line, skipMarker)
				continue
			}
			file := "main.go"
			if strings.HasSuffix(pkg, "_test") {
				file = "readme_test.go"
			}
			sub := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(name), fmt.Sprintf("line%d", b.line))
			require.NoError(t, os.MkdirAll(sub, 0o755))
			// //line keeps the compiler's positions those of the markdown file.
			src := fmt.Sprintf("//line %s:%d\n%s", name, b.line+1, b.code)
			require.NoError(t, os.WriteFile(filepath.Join(sub, file), []byte(src), 0o644))
			complete[name]++
		}
	}
	require.Positive(t, complete["README.md"], "the quick start at least is a complete program")

	gomod := fmt.Sprintf("module readmecheck.example\n\ngo 1.26.0\n\nrequire github.com/samsa-go/samsa v0.0.0\n\nreplace github.com/samsa-go/samsa => %s\n", root)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))

	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// -mod=mod lets go complete the temporary go.mod from the
		// checkout's requirements; GOWORK=off keeps the repository's
		// go.work out of it.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "go %s of the Go blocks of %s:\n%s", strings.Join(args, " "), strings.Join(files, ", "), out)
	}
}

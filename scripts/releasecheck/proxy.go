package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// module is one module directory as it would be published.
type module struct {
	path  string   // the module path of its go.mod
	gomod []byte   // its go.mod
	files []string // slash-separated, relative to the module directory
}

// publish adds the module in root/dir to the proxy in out at version.
func publish(root, dir, version, out string) (*module, error) {
	mod, err := readModule(root, dir)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(out, filepath.FromSlash(mod.path), "@v")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	info, err := json.Marshal(struct{ Version, Time string }{version, now.Format(time.RFC3339)})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(base, version+".info"), info, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(base, version+".mod"), mod.gomod, 0o644); err != nil {
		return nil, err
	}
	zf, err := os.Create(filepath.Join(base, version+".zip"))
	if err != nil {
		return nil, err
	}
	err = writeZip(zf, mod, version, filepath.Join(root, filepath.FromSlash(dir)), now)
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	list, err := os.OpenFile(filepath.Join(base, "list"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintln(list, version)
	if cerr := list.Close(); err == nil {
		err = cerr
	}
	return mod, err
}

// readModule reads the go.mod of root/dir, refuses it when a user would
// build it differently from us, and lists the files it would publish.
func readModule(root, dir string) (*module, error) {
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "go.mod"))
	if err != nil {
		return nil, err
	}
	mpath, err := checkGoMod(gomod)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, "go.mod"), err)
	}
	listed, err := gitFiles(root, dir)
	if err != nil {
		return nil, err
	}
	files, err := moduleFiles(dir, listed)
	if err != nil {
		return nil, err
	}
	// Only regular files go into a module zip (as cmd/go's own zips).
	regular := files[:0]
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(dir), filepath.FromSlash(f)))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the work tree
			}
			return nil, err
		}
		if fi.Mode().IsRegular() {
			regular = append(regular, f)
		}
	}
	return &module{path: mpath, gomod: gomod, files: regular}, nil
}

// errDirective is the error of a go.mod with a directive that only the
// main module's go.mod obeys.
var errDirective = errors.New("a published module must not have replace or exclude directives (users' builds ignore them; develop through go.work)")

// checkGoMod returns the module path of a go.mod, or an error naming each
// line of a replace or exclude directive.
func checkGoMod(gomod []byte) (string, error) {
	var (
		mpath string
		bad   []string
		block string // the directive of the open ( block, if any
	)
	for i, line := range strings.Split(string(gomod), "\n") {
		if c := strings.Index(line, "//"); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		verb := fields[0]
		if block != "" {
			if verb == ")" {
				block = ""
				continue
			}
			verb = block
		} else if len(fields) == 2 && fields[1] == "(" {
			block = verb
			if verb == "replace" || verb == "exclude" {
				bad = append(bad, fmt.Sprintf("line %d: %s (", i+1, verb))
			}
			continue
		}
		switch {
		case verb == "module" && block == "" && len(fields) == 2:
			mpath = fields[1]
			if unq, err := strconv.Unquote(mpath); err == nil {
				mpath = unq
			}
		case (verb == "replace" || verb == "exclude") && block == "":
			bad = append(bad, fmt.Sprintf("line %d: %s", i+1, strings.Join(fields, " ")))
		}
	}
	if mpath == "" {
		return "", errors.New("no module directive")
	}
	if len(bad) > 0 {
		return mpath, fmt.Errorf("%w:\n\t%s", errDirective, strings.Join(bad, "\n\t"))
	}
	return mpath, nil
}

// gitFiles lists the files git would publish under root/dir at a tag made
// from the work tree: tracked and untracked-but-not-ignored, relative to
// root.
func gitFiles(root, dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", dir)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files (release-check needs a git checkout): %v: %s", err, stderr.Bytes())
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// moduleFiles picks, from files (slash-separated, relative to the
// repository root), those of the module in dir, relative to dir: not in
// a nested module's directory (one with a go.mod of its own), not
// go.work or go.work.sum at the module's root, and not twice.
func moduleFiles(dir string, files []string) ([]string, error) {
	dir = path.Clean(dir)
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	var rel []string
	nested := map[string]bool{}
	for _, f := range files {
		r, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		rel = append(rel, r)
		if path.Base(r) == "go.mod" && r != "go.mod" {
			nested[path.Dir(r)] = true
		}
	}
	if !contains(rel, "go.mod") {
		return nil, fmt.Errorf("%s: git does not list its go.mod", dir)
	}
	seen := map[string]bool{}
	var keep []string
	for _, r := range rel {
		if r == "go.work" || r == "go.work.sum" || seen[r] || inNested(r, nested) {
			continue
		}
		seen[r] = true
		keep = append(keep, r)
	}
	sort.Strings(keep)
	return keep, nil
}

func inNested(file string, nested map[string]bool) bool {
	for d := path.Dir(file); d != "."; d = path.Dir(d) {
		if nested[d] {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeZip writes the module zip: every file under module@version/.
func writeZip(w io.Writer, mod *module, version, dir string, modified time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range mod.files {
		src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		dst, err := zw.CreateHeader(&zip.FileHeader{Name: mod.path + "@" + version + "/" + f, Method: zip.Deflate, Modified: modified})
		if err != nil {
			return err
		}
		if _, err := dst.Write(src); err != nil {
			return err
		}
	}
	return zw.Close()
}

// Command releasecheck is the Go half of scripts/release-check.sh, which
// proves that samsa's published modules work for a user before they are
// tagged. It has two subcommands:
//
//	releasecheck proxy -root DIR -version vX.Y.Z -out PROXY MODULEDIR...
//
// writes a file-system module proxy (GOPROXY=file://PROXY) holding each
// module directory (relative to -root; "." is the root module) at the
// version: its .info, .mod and .zip under module/@v/, and @v/list. It
// refuses a module whose go.mod has a replace or exclude directive: such a
// module builds here and not for its users (and `go run pkg@version` of
// it fails). A module's zip holds what git would publish at a tag: the
// tracked and untracked-but-not-ignored files of its directory, without
// the directories of nested modules and without go.work and go.work.sum.
//
//	releasecheck quickstart README.md
//
// prints the Quick start program: the first ```go block of the README's
// "## Quick start" section, which must be a complete package main (the
// same block internal/readmecheck compiles), after a //line directive
// that keeps compiler errors at the README's lines.
//
// It lives in a module of its own, which nothing publishes and nothing
// imports, so that it reaches no user.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "proxy":
		err = runProxy(os.Args[2:])
	case "quickstart":
		err = runQuickstart(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: releasecheck proxy -root DIR -version vX.Y.Z -out PROXY MODULEDIR...\n       releasecheck quickstart README.md")
	os.Exit(2)
}

func runProxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	root := fs.String("root", ".", "the repository root")
	version := fs.String("version", "", "the version every module is published at (vX.Y.Z)")
	out := fs.String("out", "", "the proxy directory to write")
	fs.Parse(args)
	if *version == "" || *out == "" || fs.NArg() == 0 {
		usage()
	}
	for _, dir := range fs.Args() {
		mod, err := publish(*root, dir, *version, *out)
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s (%d files)\n", mod.path, *version, len(mod.files))
	}
	return nil
}

func runQuickstart(args []string) error {
	if len(args) != 1 {
		usage()
	}
	readme, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	code, line, err := quickstart(string(readme))
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	// //line makes the compiler's positions those of the README.
	_, err = fmt.Printf("//line %s:%d\n%s", filepath.Base(args[0]), line, code)
	return err
}

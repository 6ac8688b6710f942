// Package readmecheck holds the tests that keep the user docs and
// DESIGN.md true.
//
// TestReadmeCompiles: every ```go block of README.md and docs/*.md is
// either a complete file (it starts with a package clause), which the test
// builds and vets against this checkout in a module of its own, or a
// fragment marked with the line <!-- compile: skip --> right before its
// fence. A block that is neither fails the test, so a new fragment cannot
// drift unnoticed. A block in a package whose name ends in _test is vetted
// as a test file.
//
// TestDesignFileMapNamesEveryFile: the tree of DESIGN.md's "## File map"
// (its first fenced block: one line per file or directory, indented two
// spaces under its directory, each saying what it is) names every file git
// tracks (testdata/ contents, go.sum and go.work.sum files and dot-files
// aside), and every path it names exists. It is skipped outside a git
// checkout.
//
// The package has no code of its own.
package readmecheck

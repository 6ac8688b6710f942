// Package readmecheck holds the tests that keep the Go code of README.md
// and docs/*.md compiling: every ```go block of those files is either a
// complete file
// (it starts with a package clause), which the test builds and vets
// against this checkout in a module of its own, or a fragment marked
// with the line <!-- compile: skip --> right before its fence. A block
// that is neither fails the test, so a new fragment cannot drift
// unnoticed. A block in a package whose name ends in _test is vetted as a
// test file.
//
// It also keeps DESIGN.md's file map complete: TestDesignFileMapNamesEveryFile
// fails for every file git tracks (testdata/ contents, go.sum files and
// dot-files aside) that the "## File map" section does not name, in
// backticks, in the row of the file's directory; it is skipped outside a
// git checkout.
//
// The package has no code of its own.
package readmecheck

//go:build !race

package compression_test

const raceEnabled = false

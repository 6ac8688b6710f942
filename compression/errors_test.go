package compression

import (
	"errors"
	"testing"
)

// TestErrorMessages pins the text of the package's errors: "compression:"
// once, then what is wrong, and errors.Is still finds the sentinel.
func TestErrorMessages(t *testing.T) {
	parseErr := func(s string) error { _, err := ParseType(s); return err }
	compressorErr := func(c Type, level int) error { _, err := NewCompressor(c, level); return err }
	decompressErr := func(c Type, src []byte) error { _, err := AppendDecompress(c, nil, src, 1<<10); return err }
	cases := []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"unknown name", parseErr("brotli"), `compression: unsupported type "brotli" (valid: none, gzip, snappy, lz4, zstd)`, ErrUnsupported},
		{"unknown type", compressorErr(Type(9), 0), "compression: unsupported type compression(9)", ErrUnsupported},
		{"unknown level", compressorErr(Gzip, 42), "compression: unsupported gzip level 42 (valid: 1 to 9, or 0 or -1 for the default 6)", ErrUnsupported},
		{"decompress unknown type", decompressErr(Type(9), []byte("x")), "compression: unsupported type compression(9)", ErrUnsupported},
		{"empty input", decompressErr(Zstd, nil), "compression: zstd: corrupt compressed data: empty input", ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			if !errors.Is(tc.err, tc.is) {
				t.Errorf("%v does not wrap %v", tc.err, tc.is)
			}
		})
	}
}

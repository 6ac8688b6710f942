package conn

import (
	"encoding/binary"
	"testing"
)

func TestParseResponseHeader(t *testing.T) {
	cases := []struct {
		name     string
		in       []byte
		flexible bool
		corr     int32
		rest     string
		wantErr  bool
	}{
		{"v0", []byte{0, 0, 0, 7, 'x'}, false, 7, "x", false},
		{"v1 no tags", []byte{0, 0, 1, 0, 0, 'b'}, true, 256, "b", false},
		{"v1 one tag", []byte{0, 0, 0, 1, 1, 5, 2, 'a', 'a', 'z'}, true, 1, "z", false},
		{"negative corr", []byte{0xff, 0xff, 0xff, 0xff}, false, -1, "", false},
		{"short", []byte{0, 0, 1}, false, 0, "", true},
		{"v1 missing tags", []byte{0, 0, 0, 1}, true, 0, "", true},
		{"v1 tag too long", []byte{0, 0, 0, 1, 1, 5, 9, 'a'}, true, 0, "", true},
		{"v1 truncated varint", []byte{0, 0, 0, 1, 0x80}, true, 0, "", true},
	}
	for _, tc := range cases {
		corr, rest, err := parseResponseHeader(tc.in, tc.flexible)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err %v, want error %v", tc.name, err, tc.wantErr)
		}
		if err == nil && (corr != tc.corr || string(rest) != tc.rest) {
			t.Fatalf("%s: got %d %q, want %d %q", tc.name, corr, rest, tc.corr, tc.rest)
		}
	}
}

func FuzzParseResponseHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 7, 'x'}, false)
	f.Add([]byte{0, 0, 0, 1, 1, 5, 2, 'a', 'a', 'z'}, true)
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Fuzz(func(t *testing.T, b []byte, flexible bool) {
		corr, rest, err := parseResponseHeader(b, flexible)
		if err != nil {
			return
		}
		if len(b) < 4 || corr != int32(binary.BigEndian.Uint32(b)) {
			t.Fatalf("corr %d from %x", corr, b)
		}
		if len(rest) > len(b)-4 {
			t.Fatalf("rest longer than input")
		}
		if !flexible && len(rest) != len(b)-4 {
			t.Fatalf("v0 header consumed more than 4 bytes")
		}
	})
}

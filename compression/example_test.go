package compression_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/samsa-go/samsa/compression"
)

func Example() {
	// One Compressor per codec, created once and shared by all goroutines.
	typ, err := compression.ParseType("zstd") // e.g. from compression.type
	if err != nil {
		panic(err)
	}
	c, err := compression.NewCompressor(typ, 0) // 0: the codec's default level
	if err != nil {
		panic(err)
	}

	records := bytes.Repeat([]byte(`{"user":"ada","event":"click"}`), 100)
	compressed, err := c.AppendCompress(nil, records)
	if err != nil {
		panic(err)
	}

	// Decompression always takes a limit on the output size.
	out, err := compression.AppendDecompress(c.Type(), nil, compressed, 1<<20)
	fmt.Println(len(records), len(compressed) < len(records)/10, bytes.Equal(out, records), err)
	// Output: 3000 true true <nil>
}

func ExampleAppendDecompress_limit() {
	c, _ := compression.NewCompressor(compression.Gzip, 0)
	bomb, _ := c.AppendCompress(nil, make([]byte, 4<<20)) // 4 MiB of zeros: about 4 KiB

	_, err := compression.AppendDecompress(compression.Gzip, nil, bomb, 1<<20)
	fmt.Println(errors.Is(err, compression.ErrTooLarge))
	fmt.Println(err)
	// Output:
	// true
	// compression: gzip: decompressed data exceeds the size limit: more than 1048576 bytes
}

func ExampleParseType() {
	_, err := compression.ParseType("brotli")
	fmt.Println(err)
	// Output: compression: unsupported type "brotli" (valid: none, gzip, snappy, lz4, zstd)
}

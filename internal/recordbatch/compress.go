package recordbatch

import (
	"errors"
	"fmt"
)

// Temporary until compression/ lands: only uncompressed batches.
var errTooLarge = errors.New("recordbatch: records exceed the decompression cap")

func tooLarge(n, max int) error {
	return fmt.Errorf("%w: %d bytes > %d", errTooLarge, n, max)
}

func decompress(codec int16, dst, src []byte, max int) ([]byte, error) {
	return nil, fmt.Errorf("recordbatch: compression codec %d not supported yet", codec)
}

package workload

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// payloadMagic is the first line of a payload file.
const payloadMagic = "samsa-bench-payload 2"

// WriteFile writes the workload s and p's keys and values to path, for a
// client that is not written in Go (the Java one) to send the very same
// bytes. The format is text header lines, then length-prefixed binary:
//
//	samsa-bench-payload 2
//	workload NAME
//	topic TOPIC
//	compression none|lz4|zstd
//	partitions N
//	key-stride S
//	values N
//	N × (uint32 big-endian length, bytes)
//	keys M
//	M × (uint32 big-endian length, bytes)
//	key-order K
//	K × uint32 big-endian key index
//
// Record i has value i mod N and, when M > 0, key order[i mod K] when K >
// 0 (KeysZipf), else key (i × S) mod M (S is KeyStride for KeysScattered,
// 1 for KeysOrdered); see Payload.Key and Payload.Value. M is 0 for an
// unkeyed workload, K is 0 but for KeysZipf.
func (p *Payload) WriteFile(path string, s Spec) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%s\nworkload %s\ntopic %s\ncompression %s\npartitions %d\nkey-stride %d\n",
		payloadMagic, s.Name, s.Topic(), s.Compression, s.Partitions, p.stride)
	list := func(name string, bs [][]byte) {
		fmt.Fprintf(w, "%s %d\n", name, len(bs))
		var n [4]byte
		for _, b := range bs {
			binary.BigEndian.PutUint32(n[:], uint32(len(b)))
			_, _ = w.Write(n[:])
			_, _ = w.Write(b)
		}
	}
	list("values", p.values)
	list("keys", p.keys)
	fmt.Fprintf(w, "key-order %d\n", len(p.order))
	var n [4]byte
	for _, k := range p.order {
		binary.BigEndian.PutUint32(n[:], uint32(k))
		_, _ = w.Write(n[:])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadPayloadFile reads a file written by WriteFile back: the workload's
// name and the payload. The harness's tests use it to check the format.
func ReadPayloadFile(path string) (name string, p *Payload, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	line := func() (string, string, error) {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", "", fmt.Errorf("payload file %s: %w", path, err)
		}
		k, v, _ := strings.Cut(strings.TrimSuffix(l, "\n"), " ")
		return k, v, nil
	}
	list := func(want string) ([][]byte, error) {
		k, v, err := line()
		if err != nil {
			return nil, err
		}
		n, cerr := strconv.Atoi(v)
		if k != want || cerr != nil || n < 0 {
			return nil, fmt.Errorf("payload file %s: want %q and a count, got %q %q", path, want, k, v)
		}
		var out [][]byte
		for range n {
			var l [4]byte
			if _, err := io.ReadFull(r, l[:]); err != nil {
				return nil, fmt.Errorf("payload file %s: %w", path, err)
			}
			b := make([]byte, binary.BigEndian.Uint32(l[:]))
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, fmt.Errorf("payload file %s: %w", path, err)
			}
			out = append(out, b)
		}
		return out, nil
	}
	if l, _ := r.ReadString('\n'); strings.TrimSuffix(l, "\n") != payloadMagic {
		return "", nil, errors.New("payload file " + path + ": not a payload file")
	}
	p = &Payload{}
	for range 5 { // workload, topic, compression, partitions, key-stride
		k, v, err := line()
		if err != nil {
			return "", nil, err
		}
		switch k {
		case "workload":
			name = v
		case "key-stride":
			if p.stride, err = strconv.Atoi(v); err != nil || p.stride <= 0 {
				return "", nil, fmt.Errorf("payload file %s: bad key-stride %q", path, v)
			}
		}
	}
	if p.values, err = list("values"); err != nil {
		return "", nil, err
	}
	if p.keys, err = list("keys"); err != nil {
		return "", nil, err
	}
	k, v, err := line()
	if err != nil {
		return "", nil, err
	}
	n, cerr := strconv.Atoi(v)
	if k != "key-order" || cerr != nil || n < 0 {
		return "", nil, fmt.Errorf("payload file %s: want \"key-order\" and a count, got %q %q", path, k, v)
	}
	p.order = make([]int32, n)
	for i := range p.order {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", nil, fmt.Errorf("payload file %s: %w", path, err)
		}
		if p.order[i] = int32(binary.BigEndian.Uint32(b[:])); int(p.order[i]) >= len(p.keys) {
			return "", nil, fmt.Errorf("payload file %s: key index %d of %d keys", path, p.order[i], len(p.keys))
		}
	}
	return name, p, nil
}

package bufferpool

import (
	"context"
	"testing"
	"time"
)

func BenchmarkAllocateRelease(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name     string
		opts     Options
		size     int
		parallel bool
		try      bool
	}{
		{name: "pooled-uncontended", size: DefaultPooledSize},
		{name: "pooled-uncontended-try", size: DefaultPooledSize, try: true},
		{name: "pooled-contended", size: DefaultPooledSize, parallel: true},
		{name: "pooled-leakdetect", opts: Options{LeakDetection: true}, size: DefaultPooledSize},
		{name: "pooled-leakdetect-contended", opts: Options{LeakDetection: true}, size: DefaultPooledSize, parallel: true},
		{name: "nonpooled-1KiB", size: 1 << 10},
		{name: "nonpooled-64KiB", size: 64 << 10},
		{name: "nonpooled-1KiB-contended", size: 1 << 10, parallel: true},
		{name: "nonpooled-1KiB-leakdetect", opts: Options{LeakDetection: true}, size: 1 << 10},
		// A small pool where goroutines wait for each other's buffers.
		{name: "pooled-contended-waiting", opts: Options{Size: 2 * DefaultPooledSize}, size: DefaultPooledSize, parallel: true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			p, err := New(tc.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(tc.size))
			b.ReportAllocs()
			if tc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						buf, err := p.Allocate(ctx, tc.size, time.Minute)
						if err != nil {
							b.Error(err)
							return
						}
						p.Release(buf)
					}
				})
				return
			}
			for b.Loop() {
				var buf []byte
				if tc.try {
					buf = p.TryAllocate(tc.size)
				} else {
					buf, err = p.Allocate(ctx, tc.size, time.Minute)
					if err != nil {
						b.Fatal(err)
					}
				}
				p.Release(buf)
			}
		})
	}
}

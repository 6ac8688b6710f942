package freelist

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListIsBoundedLIFO(t *testing.T) {
	l := List[*int]{Max: 2}
	a, b, c := new(int), new(int), new(int)
	require.True(t, l.Put(a))
	require.True(t, l.Put(b))
	require.False(t, l.Put(c), "full at Max")
	require.Equal(t, 2, l.Len())
	v, ok := l.Get()
	require.True(t, ok)
	require.Same(t, b, v, "last in, first out")
	v, _ = l.Get()
	require.Same(t, a, v)
	v, ok = l.Get()
	require.False(t, ok)
	require.Nil(t, v)
	require.Nil(t, l.items[:1][0], "a handed-out value is not kept alive")
	var none List[int]
	require.False(t, none.Put(1), "the zero list keeps nothing")
}

func TestListGetPutAllocateNothing(t *testing.T) {
	l := List[*int]{Max: 4}
	v := new(int)
	l.Put(v)
	require.Zero(t, testing.AllocsPerRun(100, func() {
		x, _ := l.Get()
		l.Put(x)
	}))
}

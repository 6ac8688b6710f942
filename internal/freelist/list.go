package freelist

// List keeps at most Max values; the zero value keeps none.
type List[T any] struct {
	items []T
	// Max bounds the values kept, so that a burst does not pin its memory
	// for good.
	Max int
}

// Get returns the value put last, or the zero T and false if the list is
// empty.
func (l *List[T]) Get() (T, bool) {
	var zero T
	n := len(l.items)
	if n == 0 {
		return zero, false
	}
	v := l.items[n-1]
	l.items[n-1] = zero // the list must not keep what it handed out alive
	l.items = l.items[:n-1]
	return v, true
}

// Put keeps v and reports true, or reports false if the list is full.
func (l *List[T]) Put(v T) bool {
	if len(l.items) >= l.Max {
		return false
	}
	l.items = append(l.items, v)
	return true
}

// Len returns the number of values kept.
func (l *List[T]) Len() int { return len(l.items) }

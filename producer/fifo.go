// The IO goroutine's queues: a FIFO that reuses its memory.

package producer

// fifo is a queue that reuses its memory: popping from the front only moves
// an index, and the live part is moved back to the start once the dead part
// is as large as it, so the IO goroutine's queues never regrow under load.
type fifo[T any] struct {
	buf  []T
	head int
}

func (q *fifo[T]) len() int    { return len(q.buf) - q.head }
func (q *fifo[T]) at(i int) *T { return &q.buf[q.head+i] }
func (q *fifo[T]) push(v T)    { q.compact(); q.buf = append(q.buf, v) }
func (q *fifo[T]) compact() {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}

// pop drops the first n elements.
func (q *fifo[T]) pop(n int) {
	clear(q.buf[q.head : q.head+n])
	q.head += n
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// filter keeps the elements for which keep returns true, in order.
func (q *fifo[T]) filter(keep func(T) bool) {
	live := q.buf[:0]
	for _, v := range q.buf[q.head:] {
		if keep(v) {
			live = append(live, v)
		}
	}
	clear(q.buf[len(live):])
	q.buf, q.head = live, 0
}

// insertSorted inserts v after every element not after it (after reports
// whether a comes after b); usually that is the end.
func (q *fifo[T]) insertSorted(v T, after func(a, b T) bool) {
	q.compact()
	i := len(q.buf)
	for i > q.head && after(q.buf[i-1], v) {
		i--
	}
	q.buf = append(q.buf, v)
	if i < len(q.buf)-1 {
		copy(q.buf[i+1:], q.buf[i:len(q.buf)-1])
		q.buf[i] = v
	}
}

func popFront[T any](q []T, n int) []T {
	if n == 0 {
		return q
	}
	clear(q[:n])
	q = q[n:]
	if len(q) == 0 {
		return q[:0:0]
	}
	return q
}

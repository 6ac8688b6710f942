// Package freelist is a bounded last-in, first-out list of values kept for
// reuse: the batch structs, completion chunks, waiters and Produce requests
// that let samsa's steady state allocate nothing. It has no lock; each owner
// guards its list with its own.
package freelist

package peer

import (
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Owners returns the first n of members in the order of their rendezvous
// weight for the file with the given id (highest random weight hashing):
// the first is its owner, the next ones keep its replicas. Every node that
// knows the same members computes the same owners, and a member's arrival
// or departure moves only the files whose first n it enters or leaves
// (about 1/len(members) of them), never a file between two other members.
// dst is reused.
func Owners(dst []string, id string, members []string, n int) []string {
	dst = dst[:0]
	if n <= 0 || len(members) == 0 {
		return dst
	}
	n = min(n, len(members))
	type scored struct {
		w uint64
		m string
	}
	var buf [8]scored
	top := buf[:0]
	for _, m := range members {
		s := scored{weight(id, m), m}
		i, _ := slices.BinarySearchFunc(top, s, func(a, b scored) int {
			// Descending weight; ties (64 bits: never in practice) by name.
			switch {
			case a.w > b.w:
				return -1
			case a.w < b.w:
				return 1
			case a.m < b.m:
				return -1
			case a.m > b.m:
				return 1
			}
			return 0
		})
		if i >= n {
			continue
		}
		top = slices.Insert(top, i, s)
		if len(top) > n {
			top = top[:n]
		}
	}
	for _, s := range top {
		dst = append(dst, s.m)
	}
	return dst
}

// weight is member m's weight for file id.
func weight(id, m string) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(m)
	d.Write([]byte{0})
	d.WriteString(id)
	return d.Sum64()
}

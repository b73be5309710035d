package sampler

import "math/bits"

// blockWords is the number of 64-bit words one Fenwick leaf counts: 512
// samples, so the tree costs 4 bytes per 512 samples (1/128 of a byte per
// sample) on top of the 1-bit seen vector.
const blockWords = 8

// drawSet is a job's seen vector over the local indices 0..n-1 of its subset:
// 1 bit per sample, set once the sample is taken (served this epoch or
// planned in the job's lookahead window). A Fenwick tree over 512-sample
// blocks counts the free (unset) bits so that the k-th free index, and with
// it a uniform draw from the free set, is found in O(log n) without a
// permutation array.
type drawSet struct {
	n    int
	bits []uint64 // 1 = taken; the bits past n are set for good
	tree []int32  // Fenwick tree, 1-based, over blocks: free bits per block
	free int
}

func newDrawSet(n int) *drawSet {
	words := (n + 63) / 64
	blocks := (words + blockWords - 1) / blockWords
	d := &drawSet{n: n, bits: make([]uint64, words), tree: make([]int32, blocks+1)}
	d.reset()
	return d
}

// reset frees every index (a new epoch).
func (d *drawSet) reset() {
	for i := range d.bits {
		d.bits[i] = 0
	}
	if r := d.n % 64; r != 0 {
		d.bits[len(d.bits)-1] = ^uint64(0) << uint(r)
	}
	d.free = d.n
	for i := range d.tree {
		d.tree[i] = 0
	}
	for b := 0; b < len(d.tree)-1; b++ {
		c := 0
		for w := b * blockWords; w < (b+1)*blockWords && w < len(d.bits); w++ {
			c += 64 - bits.OnesCount64(d.bits[w])
		}
		d.tree[b+1] += int32(c)
		if p := (b + 1) + ((b + 1) & -(b + 1)); p < len(d.tree) {
			d.tree[p] += d.tree[b+1]
		}
	}
}

// has reports whether local index i is taken.
func (d *drawSet) has(i int) bool { return d.bits[i>>6]&(1<<uint(i&63)) != 0 }

func (d *drawSet) add(block int, delta int32) {
	for p := block + 1; p < len(d.tree); p += p & -p {
		d.tree[p] += delta
	}
}

// take marks a free index taken.
func (d *drawSet) take(i int) {
	d.bits[i>>6] |= 1 << uint(i&63)
	d.free--
	d.add((i>>6)/blockWords, -1)
}

// untake frees a taken index.
func (d *drawSet) untake(i int) {
	d.bits[i>>6] &^= 1 << uint(i&63)
	d.free++
	d.add((i>>6)/blockWords, 1)
}

// kth returns the k-th free index (0-based, in index order); 0 <= k < free.
func (d *drawSet) kth(k int) int {
	// Descend the Fenwick tree to the block holding the k-th free bit.
	pos, rem := 0, int32(k)
	step := 1
	for step*2 < len(d.tree) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if next := pos + step; next < len(d.tree) && d.tree[next] <= rem {
			pos = next
			rem -= d.tree[next]
		}
	}
	// pos is the number of whole blocks before the target block.
	for w := pos * blockWords; w < len(d.bits); w++ {
		freeBits := ^d.bits[w]
		c := int32(bits.OnesCount64(freeBits))
		if rem < c {
			for ; rem > 0; rem-- {
				freeBits &= freeBits - 1
			}
			return w*64 + bits.TrailingZeros64(freeBits)
		}
		rem -= c
	}
	panic("sampler: drawSet.kth out of range")
}

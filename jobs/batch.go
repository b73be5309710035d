package jobs

// A batch of views: the samples drawn for a rank gathered (slow ones
// deferred), produced or taken from the caches, and assembled into one
// .npz in one buffer (npz.go). views.go has the design.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/epochfs/epochfs/ctlpath"
	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/preprocess"
	"go.uber.org/zap"
)

// Batch is one batch of views.
type Batch struct {
	NPZ     []byte // in the buffer from the Batch call's alloc
	mem     Buffer
	Paths   []string // dataset-relative, in the batch's order
	Corrupt []string // left out: could not be preprocessed
}

// Batch returns the next batch of a job (rank -1: a job of world size 1)
// as an .npz assembled in memory from alloc (nil: the manager's pool), or end=true once
// at the end of each epoch.
func (m *Manager) Batch(ctx context.Context, name string, rank int, alloc Alloc) (b *Batch, end bool, err error) {
	if alloc == nil {
		alloc = m.bufs.alloc
	}
	if m.vs == nil {
		return nil, false, fmt.Errorf("%w: the mount serves no views", ErrInvalid)
	}
	j, err := m.lookupJob(name)
	if err != nil {
		return nil, false, err
	}
	if rank < 0 {
		if err := j.soloRank(name, "batch"); err != nil {
			return nil, false, err
		}
		rank = 0
	}
	key := rankKey{name, rank}
	m.mu.Lock()
	jv, size := j.vw, j.cfg.BatchSize
	if jv != nil {
		m.activateLocked(name, jv)
	}
	c := m.vs.carries[key]
	if c == nil {
		c = &carry{}
		m.vs.carries[key] = c
	}
	m.mu.Unlock()
	if jv == nil {
		return nil, false, fmt.Errorf("%w: job %q has no view", ErrInvalid, name)
	}
	if (jv.form == ViewAugmented || jv.form == ViewDecoded) && !jv.fixed {
		return nil, false, fmt.Errorf("%w: view=%s: the pipeline's samples do not all have one size (end it with a crop, or resize:HxW), so a batch cannot stack them; read next and the views one by one", ErrInvalid, jv.form)
	}
	if err := m.s.Touch(name, rank); err != nil {
		return nil, false, wrap(err)
	}
	c.mu.Lock()
	pick, err := m.gather(ctx, name, rank, jv, c, size)
	c.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	if pick == nil {
		return nil, true, nil
	}
	return m.assemble(ctx, jv, pick, alloc)
}

// gather chooses the batch's samples from the carry, drawing more from the
// sampler as needed; nil means the end of the epoch.
func (m *Manager) gather(ctx context.Context, name string, rank int, jv *jobView, c *carry, size int) ([]int, error) {
	ready := func() int {
		n := 0
		for _, s := range c.samples {
			if jv.form != ViewAugmented || jv.view.Status(jv.consumer, s) != preprocess.StatusSlow {
				n++
			}
		}
		return n
	}
	for !c.ended && ready() < size {
		idx, end, err := m.nextIndices(ctx, name, rank)
		if err != nil {
			return nil, err
		}
		if end {
			c.ended = true
			break
		}
		c.samples = append(c.samples, idx...)
		if jv.form == ViewAugmented {
			for _, s := range idx {
				jv.view.Want(jv.consumer, s)
			}
		}
	}
	if len(c.samples) == 0 {
		c.ended = false // the end, once; the next read starts the next epoch
		return nil, nil
	}
	// Ready and in-production samples first, in order; slow ones only when
	// the epoch has nothing else left.
	var pick, rest []int
	for _, s := range c.samples {
		slow := jv.form == ViewAugmented && jv.view.Status(jv.consumer, s) == preprocess.StatusSlow
		if len(pick) < size && (!slow || c.ended) {
			pick = append(pick, s)
		} else {
			rest = append(rest, s)
		}
	}
	if len(pick) == 0 { // every one is slow: take them anyway
		n := min(size, len(rest))
		pick, rest = rest[:n], rest[n:]
	}
	c.samples = append(c.samples[:0], rest...)
	return pick, nil
}

// assemble produces (or takes) the samples' forms and builds the .npz in
// one buffer (npz.go): tensors are copied into it once, files are read
// straight into their slots.
//
// Long: one pass lays out the archive, reads the files into place and writes the tensors once; split, its offsets would travel between functions.
func (m *Manager) assemble(ctx context.Context, jv *jobView, pick []int, alloc Alloc) (*Batch, bool, error) {
	type got struct {
		e    *placement.Entry
		t    *preprocess.Tensor
		r    *placement.Reader // view=encoded: the file, open
		info preprocess.TakeInfo
		err  error
	}
	res := make([]got, len(pick))
	defer func() {
		for i := range res {
			if res[i].r != nil {
				res[i].r.Close()
			}
		}
	}()
	cat := m.p.Catalog()
	var wg sync.WaitGroup
	for i, s := range pick {
		r := &res[i]
		if r.e = cat.ByIndex(s); r.e == nil {
			r.err = fmt.Errorf("jobs: sample %d: %w", s, placement.ErrNoEntry)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch jv.form {
			case ViewAugmented:
				r.t, r.info, r.err = jv.view.Take(ctx, jv.consumer, s)
			case ViewDecoded:
				var img *preprocess.Image
				if img, r.err = jv.view.Decoded(ctx, s); r.err == nil {
					r.t = &preprocess.Tensor{DType: preprocess.Uint8, Shape: []int{img.H, img.W, 3}, U8: img.Compact().Pix}
				}
			default:
				r.r, r.err = m.p.Open(ctx, r.e)
			}
		}()
	}
	wg.Wait()

	b := &Batch{}
	var keep []int // indexes into res of the samples in the batch
	var shape []int
	dtype := preprocess.Uint8
	total := 0
	for i := range res {
		r := &res[i]
		if r.err != nil {
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("jobs: batch: %w", ctx.Err())
			}
			if r.e != nil && errors.Is(r.err, preprocess.ErrBadSample) {
				jv.corrupt.Add(1)
				b.Corrupt = append(b.Corrupt, r.e.Path)
				continue
			}
			path := "?"
			if r.e != nil {
				path = r.e.Path
			}
			return nil, false, fmt.Errorf("jobs: batch: %s: %w", path, r.err)
		}
		if r.t != nil {
			if shape == nil {
				shape, dtype = r.t.Shape, r.t.DType
			} else if !slices.Equal(shape, r.t.Shape) {
				return nil, false, fmt.Errorf("%w: %s has shape %v, the batch %v: the pipeline does not end every sample at one size", ErrInvalid, r.e.Path, r.t.Shape, shape)
			}
			total += len(tensorBytes(r.t))
			if r.info.Cached {
				jv.cached.Add(1)
			} else {
				jv.produced.Add(1)
			}
		} else {
			total += int(r.r.Size())
		}
		keep = append(keep, i)
		b.Paths = append(b.Paths, r.e.Path)
	}
	if max := m.vs.maxBatchBytes(); int64(total) > max {
		return nil, false, fmt.Errorf("%w: a batch of %d files is %d MiB, over the mount's %d MiB (views.max_batch_bytes): lower batch_size", ErrInvalid, len(keep), total>>20, max>>20)
	}
	quoted := make([]string, len(keep))
	labels := make([]int64, len(keep))
	for k, i := range keep {
		quoted[k] = ctlpath.Quote(res[i].e.Path)
		labels[k] = jv.label(res[i].e.Path)
	}

	x := npyMember{name: "x", descr: "|u1", shape: []int{total}, size: total}
	members := []npyMember{x}
	if jv.form == ViewEncoded {
		members = append(members, npyMember{name: "offsets", descr: "<i8", shape: []int{len(keep) + 1}, size: 8 * (len(keep) + 1)})
	} else {
		if dtype == preprocess.Float32 {
			members[0].descr = "<f4"
		}
		members[0].shape = append([]int{len(keep)}, shape...)
		if len(keep) == 0 {
			// No sample made it (all corrupt): still the batch's shape.
			members[0].shape = append([]int{0}, jv.shape...)
			if jv.dtype == preprocess.Float32 {
				members[0].descr = "<f4"
			}
		}
	}
	width := stringsWidth(quoted)
	members = append(members,
		npyMember{name: "y", descr: "<i8", shape: []int{len(keep)}, size: 8 * len(keep)},
		npyMember{name: "paths", descr: "<U" + strconv.Itoa(width), shape: []int{len(keep)}, size: 4 * width * len(keep)})
	f, err := newNPZ(members, alloc)
	if err != nil {
		return nil, false, err
	}
	ok := false
	defer func() {
		if !ok {
			f.mem.Free()
		}
	}()
	data := f.Data(0)
	offsets := make([]int64, 0, len(keep)+1)
	off := 0
	for _, i := range keep {
		r := &res[i]
		offsets = append(offsets, int64(off))
		if r.t != nil {
			off += copy(data[off:], tensorBytes(r.t))
		} else {
			off += int(r.r.Size())
		}
	}
	offsets = append(offsets, int64(off))
	if jv.form == ViewEncoded {
		errs := make([]error, len(keep))
		for k, i := range keep {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = res[i].r.ReadFull(ctx, data[offsets[k]:offsets[k+1]])
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				return nil, false, fmt.Errorf("jobs: batch: %s: %w", b.Paths[k], err)
			}
		}
		putInt64s(f.Data(1), offsets)
	}
	n := len(members)
	putInt64s(f.Data(n-2), labels)
	putStrings(f.Data(n-1), quoted, width)
	b.NPZ, b.mem = f.Finish(), f.mem
	ok = true
	if len(b.Corrupt) > 0 {
		m.log.Warn("batch: samples left out", zap.Strings("corrupt", b.Corrupt))
	}
	return b, false, nil
}

// Release frees the batch's buffer (the pool's: for later batches); b.NPZ
// must not be used afterwards.
func (b *Batch) Release() {
	if b != nil && b.mem != nil {
		b.mem.Free()
		b.mem, b.NPZ = nil, nil
	}
}

// Buffer is the memory b.NPZ is in (nil for the end of an epoch).
func (b *Batch) Buffer() Buffer { return b.mem }

// tensorBytes is t's data as bytes (little-endian: the platforms epochfs
// runs on).
func tensorBytes(t *preprocess.Tensor) []byte {
	if t.DType != preprocess.Float32 {
		return t.U8
	}
	if len(t.F32) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&t.F32[0])), 4*len(t.F32))
}

package views

// A batch of views: the samples drawn for a rank gathered (slow ones
// deferred: carry.go), produced or taken from the caches, and assembled
// into one .npz in one buffer (npz.go). views.go has the design.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sync/errgroup"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// Batch is one batch of views.
type Batch struct {
	NPZ     []byte // in the buffer from the Batch call's alloc
	mem     Buffer
	Paths   []string // dataset-relative, in the batch's order
	Corrupt []string // left out: could not be preprocessed
}

// batchWorkers bounds the samples of one batch made or read at once: a
// batch of a million samples starts no more goroutines, and opens no more
// files, than this.
const batchWorkers = 32

// readEncoded reads e whole into dst, which is its size in the catalog
// when the batch was sized: a file of another size since fails the batch
// (the source changed: the next batch has its new size).
func (s *Set) readEncoded(ctx context.Context, e *catalog.Entry, dst []byte) error {
	r, err := s.o.Placer.Open(ctx, e)
	if err != nil {
		return err
	}
	defer r.Close()
	if r.Size() != int64(len(dst)) {
		return fmt.Errorf("%w: %d bytes, %d when the batch was sized", source.ErrChanged, r.Size(), len(dst))
	}
	return r.ReadFull(ctx, dst)
}

// assemble produces (or takes) the samples' forms for job j and builds the
// .npz in one buffer from alloc (npz.go): tensors are copied into it once,
// files are read straight into their slots.
//
// Long: one pass lays out the archive, reads the files into place and writes the tensors once; split, its offsets would travel between functions.
func (s *Set) assemble(ctx context.Context, jv *Job, pick []int, alloc Alloc) (*Batch, error) {
	type got struct {
		e    *catalog.Entry
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
	cat := s.o.Placer.Catalog()
	var g errgroup.Group
	g.SetLimit(batchWorkers)
	for i, smp := range pick {
		r := &res[i]
		if r.e = cat.ByIndex(smp); r.e == nil {
			r.err = fmt.Errorf("views: sample %d: %w", smp, placement.ErrNoEntry)
			continue
		}
		if jv.form == Encoded {
			continue // opened once the batch's size is known (below)
		}
		g.Go(func() error {
			switch jv.form {
			case Augmented:
				r.t, r.info, r.err = jv.view.Take(ctx, jv.consumer, smp)
			case Decoded:
				var img *preprocess.Image
				if img, r.err = jv.view.Decoded(ctx, smp); r.err == nil {
					r.t = ImageTensor(img)
				}
			}
			return nil
		})
	}
	g.Wait()

	b := &Batch{}
	var keep []int // indexes into res of the samples in the batch
	var shape []int
	dtype := preprocess.Uint8
	total := 0
	for i := range res {
		r := &res[i]
		if r.err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("views: batch: %w", ctx.Err())
			}
			if r.e != nil && errors.Is(r.err, preprocess.ErrBadSample) {
				jv.corrupt.Add(1)
				b.Corrupt = append(b.Corrupt, r.e.Path())
				continue
			}
			path := "?"
			if r.e != nil {
				path = r.e.Path()
			}
			return nil, fmt.Errorf("views: batch: %s: %w", path, r.err)
		}
		if r.t != nil {
			if shape == nil {
				shape, dtype = r.t.Shape, r.t.DType
			} else if !slices.Equal(shape, r.t.Shape) {
				return nil, fmt.Errorf("%w: %s has shape %v, the batch %v: the pipeline does not end every sample at one size", ErrInvalid, r.e.Path(), r.t.Shape, shape)
			}
			total += len(tensorBytes(r.t))
			jv.count(r.info)
		} else {
			// A file's size as the catalog has it: the batch is sized,
			// and refused when too large, before any file is opened.
			total += int(r.e.Attr().Size)
		}
		keep = append(keep, i)
		b.Paths = append(b.Paths, r.e.Path())
	}
	if max := s.maxBatchBytes(); int64(total) > max {
		return nil, fmt.Errorf("%w: a batch of %d files is %d MiB, over the mount's %d MiB (views.max_batch_bytes): lower batch_size", ErrInvalid, len(keep), total>>20, max>>20)
	}
	quoted := make([]string, len(keep))
	labels := make([]int64, len(keep))
	for k, i := range keep {
		quoted[k] = ctlpath.Quote(res[i].e.Path())
		labels[k] = jv.label(res[i].e.Path())
	}

	x := npyMember{name: "x", descr: "|u1", shape: []int{total}, size: total}
	members := []npyMember{x}
	if jv.form == Encoded {
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
		return nil, err
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
			off += int(r.e.Attr().Size)
		}
	}
	offsets = append(offsets, int64(off))
	if jv.form == Encoded {
		// batchWorkers files at a time, each opened, read into its place
		// and closed: a batch never holds more descriptors than that.
		var g errgroup.Group
		g.SetLimit(batchWorkers)
		for k, i := range keep {
			g.Go(func() error {
				dst := data[offsets[k]:offsets[k+1]]
				if err := s.readEncoded(ctx, res[i].e, dst); err != nil {
					return fmt.Errorf("views: batch: %s: %w", b.Paths[k], err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		putInt64s(f.Data(1), offsets)
	}
	n := len(members)
	putInt64s(f.Data(n-2), labels)
	putStrings(f.Data(n-1), quoted, width)
	b.NPZ, b.mem = f.Finish(), f.mem
	ok = true
	if len(b.Corrupt) > 0 {
		s.log.Warn("batch: samples left out", zap.Strings("corrupt", b.Corrupt))
	}
	return b, nil
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

package jobs

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/cespare/xxhash/v2"
	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sampler"
)

// Resumable jobs: a job's state document (state.go) names the samples it
// handed out by their positions in the job's epoch samples in path order,
// so that it means the same on any mount of the same files: another node,
// a remount, a catalog numbered after refreshes. The sampler does the rest
// (internal/sampler/resume.go).

// State returns the job's state document (a cluster job's: see
// clusterHanded).
func (m *Manager) State(ref Ref) ([]byte, error) {
	name := ref.Name
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, err
	}
	sn, err := m.s.Snapshot(j.key)
	if err != nil {
		return nil, wrap(err)
	}
	var unread []string
	if sn.Cluster {
		if unread, err = m.clusterHanded(name, j, &sn); err != nil {
			return nil, err
		}
	}
	if m.vs != nil {
		// Samples handed out for the job's batches and not put in one yet
		// (slow ones, carried to the next batch) were not read.
		files := m.fileList()
		for _, i := range m.vs.Carried(j.key, sn.WorldSize) {
			unread = append(unread, files.At(i).Path())
		}
	}
	order, hash := m.epochSamples(sn.Subset, sn.Size)
	doc, err := stateOf(name, j.cfg, sn, order, hash, m.numbered(j.cfg.Subset))
	if err != nil {
		return nil, err
	}
	for _, p := range unread {
		doc = append(doc, "unread "+ctlpath.Quote(p)+"\n"...)
	}
	return doc, nil
}

// clusterHanded makes a cluster job's snapshot the cluster's: each epoch's
// samples handed out are those the cluster's ranks claimed (on any node)
// and those handed out here (an epoch drawn locally after a claim failed).
// Claimed ones are not all handed out: the samples this node's ranks drew
// ahead are returned as the document's unread lines, and every node's
// document has its own, so the job's state is one node's document with
// the unread lines of all (the Python DistributedSampler gathers them).
func (m *Manager) clusterHanded(name string, j *job, sn *sampler.Snapshot) ([]string, error) {
	m.mu.Lock()
	k := j.cl
	m.mu.Unlock()
	if k == nil {
		return nil, fmt.Errorf("%w: job %q: the job is not in the cluster", ErrInvalid, name)
	}
	files := m.fileList()
	var unread []string
	for i, ep := range sn.Epochs {
		claimed, err := k.seen(ep.Num, sn.Size)
		if err != nil {
			return nil, fmt.Errorf("jobs: job %q: the cluster's epoch %d: %w", name, ep.Num, err)
		}
		for w := range claimed {
			if w < len(ep.Here) {
				claimed[w] |= ep.Here[w]
			}
		}
		eachBit(ep.Planned, func(l int) {
			g := int32(l)
			if sn.Subset != nil {
				g = sn.Subset[l]
			}
			unread = append(unread, files.At(int(g)).Path())
		})
		sn.Epochs[i].Handed = claimed
	}
	return unread, nil
}

// stateOf renders the state document of a job's snapshot, its epoch
// samples in path order and their hash (epochOrder), and the files the
// mount numbered (numbered).
func stateOf(name string, cfg Config, sn sampler.Snapshot, order []int32, hash uint64, numbered int) ([]byte, error) {
	d := &stateDoc{Job: name, Kind: cfg.Sampler, Seed: cfg.Seed, BatchSize: cfg.BatchSize,
		WorldSize: sn.WorldSize, DropLast: cfg.DropLast, Samples: len(order), Hash: hash, Numbered: numbered}
	// pos maps a local index to its position in order (-1: gone).
	pos := positions(order, sn.Size)
	for _, ep := range sn.Epochs {
		set := roaring.New()
		if pos == nil {
			set = roaring.FromDense(ep.Handed, false)
		} else {
			eachBit(ep.Handed, func(l int) {
				if l < len(pos) && pos[l] >= 0 {
					set.Add(uint32(pos[l]))
				}
			})
		}
		d.Epochs = append(d.Epochs, stateEpoch{Num: ep.Num, Handed: int(set.GetCardinality()), Ranks: ep.Got, Set: set})
	}
	return d.format()
}

// Resume makes the job, which must not have read yet, continue the state
// document doc: the epoch it was in, the samples it handed out left out
// of it. The state must be of the same samples (the same paths, less
// those removed from the dataset), sampler and seed; world_size,
// batch_size and drop_last may differ. A refused state changes nothing.
func (m *Manager) Resume(ref Ref, doc []byte) error {
	name := ref.Name
	d, err := parseState(doc)
	if err != nil {
		return err
	}
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	if err := m.attrsRead(); err != nil {
		return err
	}
	if d.Kind != j.cfg.Sampler || d.Seed != j.cfg.Seed {
		return stateError("of a sampler=%s seed=%d job; job %q is sampler=%s seed=%d", d.Kind, d.Seed, name, j.cfg.Sampler, j.cfg.Seed)
	}
	sn, err := m.s.Snapshot(j.key)
	if err != nil {
		return wrap(err)
	}
	if sn.Started {
		return stateError("job %q has read already: write its resume before its first read", name)
	}
	order, hash := m.epochSamples(sn.Subset, sn.Size)
	var later []uint64
	vanished := 0
	if n := len(order); n != d.Samples || hash != d.Hash {
		// On the mount that saved it, a refresh may have removed and added
		// files since: the saved samples are then those numbered before it.
		var ok bool
		if !j.cfg.Cluster {
			order, later, ok = m.sameMount(d, j.cfg.Subset, sn)
		}
		if !ok {
			why := "another dataset or subset, or files were added or removed since it was saved on another mount"
			if d.Numbered == 0 {
				// (stateDoc.Numbered)
				why += ", or on this one after files of the job were removed before it was saved"
			}
			return stateError("of %d samples (hash %016x); job %q has %d (hash %016x): %s",
				d.Samples, d.Hash, name, n, hash, why)
		}
	}
	unread, err := m.unreadLocals(d.Unread, sn)
	if err != nil {
		return err
	}
	eps := resumeEpochs(d, order, sn.Size, unread)
	if later != nil {
		// Removed files left out of what is left are counted as skipped;
		// added ones join at the next epoch.
		eps[0].Later = later
		for p, l := range order {
			if l < 0 && !d.Epochs[0].Set.Contains(uint32(p)) {
				vanished++
			}
		}
		eps[0].Vanished = vanished
	}
	if j.cfg.Cluster {
		// Its epochs are the cluster's: every node of the job seeds the
		// same samples there.
		m.mu.Lock()
		k := j.cl
		m.mu.Unlock()
		if k == nil {
			return fmt.Errorf("%w: job %q: the job is not in the cluster", ErrInvalid, name)
		}
		for _, ep := range eps {
			if err := k.seed(ep.Num, ep.Handed); err != nil {
				return fmt.Errorf("jobs: job %q: the state could not be marked in the cluster (try again): %w", name, err)
			}
		}
	}
	return m.resumeFrom(ref, j, &ResumePoint{check: fmt.Sprintf("%08x", d.Check), eps: eps})
}

// A ResumePoint is what a job resumed from, as the sampler took it: the
// state's check and its epochs, O(samples/8) bytes, whatever the size of
// the document (whose unread lines are the writer's to make long).
type ResumePoint struct {
	check string
	eps   []sampler.ResumeEpoch
}

// resumeFrom applies a resume point to the job j of ref.
func (m *Manager) resumeFrom(ref Ref, j *job, pt *ResumePoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.movedLocked()
	if cur, err := m.jobOfLocked(ref); err != nil || cur != j {
		return fmt.Errorf("%w: %q", ErrNoJob, ref.Name)
	}
	if err := m.s.Resume(j.key, pt.eps); err != nil {
		if errors.Is(err, sampler.ErrStarted) {
			return stateError("job %q has read already: write its resume before its first read", ref.Name)
		}
		return wrap(err)
	}
	j.resumed = pt
	m.wakeUp()
	return nil
}

// Resumed returns what the job last resumed from, nil if nothing (since
// its config was last written): what Unresume puts back.
func (m *Manager) Resumed(ref Ref) *ResumePoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, err := m.jobOfLocked(ref); err == nil {
		return j.resumed
	}
	return nil
}

// Unresume puts a job that has not read back as it was at pt (Resumed's
// answer before a resume that is then refused): resumed from pt, or, if
// pt is nil, started over from its config.
func (m *Manager) Unresume(ref Ref, pt *ResumePoint) error {
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	if pt != nil {
		return m.resumeFrom(ref, j, pt)
	}
	m.mu.Lock()
	resumed, cfg := j.resumed != nil, j.cfg
	m.mu.Unlock()
	if !resumed {
		return nil
	}
	return m.configure(ref, cfg)
}

// numbered is the state's count of numbered files (stateDoc.Numbered):
// the files numbered so far, when no file of the job's subset prefixes
// was removed from the dataset; else 0.
func (m *Manager) numbered(prefixes []string) int { return numberedOf(m.fileList(), prefixes) }

// numberedOf is numbered over files.
func numberedOf(files *catalog.Numbering, prefixes []string) int {
	for _, e := range files.All() {
		if e.Gone() && underSubset(e.Path(), prefixes) {
			return 0
		}
	}
	return files.Len()
}

// sameMount rebuilds, on the mount that saved d, the job's epoch samples
// as they were then (the files numbered before it, removed ones included)
// after a refresh: order holds, per position of the saved list, the local
// index of its sample in the job, or -1 for a file removed since; later
// are the job's samples a refresh added since (they join at the next
// epoch). ok is false when the rebuilt list is not the saved one (another
// mount, or files were removed before the save).
func (m *Manager) sameMount(d *stateDoc, prefixes []string, sn sampler.Snapshot) (order []int32, later []uint64, ok bool) {
	files := m.fileList()
	if d.Numbered == 0 || d.Numbered > files.Len() {
		return nil, nil, false
	}
	later = make([]uint64, (sn.Size+63)/64)
	var globals []int32
	for l := range sn.Size {
		g := int32(l)
		if sn.Subset != nil {
			g = sn.Subset[l]
		}
		if int(g) >= d.Numbered {
			later[l>>6] |= 1 << uint(l&63)
			continue
		}
		globals = append(globals, g)
	}
	for g := range d.Numbered {
		if e := files.At(g); e.Gone() && underSubset(e.Path(), prefixes) {
			globals = append(globals, int32(g))
		}
	}
	if len(globals) != d.Samples {
		return nil, nil, false
	}
	slices.SortFunc(globals, func(a, b int32) int { return pathCompare(files.At(int(a)).Path(), files.At(int(b)).Path()) })
	h := xxhash.New()
	for _, g := range globals {
		h.WriteString(files.At(int(g)).Path())
		h.Write([]byte{0})
	}
	if h.Sum64() != d.Hash {
		return nil, nil, false
	}
	order = make([]int32, len(globals))
	for p, g := range globals {
		order[p] = -1
		if l, ok := localOf(sn.Subset, sn.Size, g); ok && !files.At(int(g)).Gone() {
			order[p] = int32(l)
		}
	}
	return order, later, true
}

// resumeEpochs maps a state's epochs to the sampler's: its positions in
// order (the job's epoch samples in path order) to local indices of a
// subset of size samples, less the samples given back (unread).
func resumeEpochs(d *stateDoc, order []int32, size int, unread []int) []sampler.ResumeEpoch {
	eps := make([]sampler.ResumeEpoch, len(d.Epochs))
	for i, ep := range d.Epochs {
		words := make([]uint64, (size+63)/64)
		ep.Set.Iterate(func(p uint32) bool {
			if l := order[p]; l >= 0 { // -1: removed since (sameMount)
				words[l>>6] |= 1 << uint(l&63)
			}
			return true
		})
		eps[i] = sampler.ResumeEpoch{Num: ep.Num, Handed: words}
	}
	// A sample given back is the latest hand-out of it: a rank an epoch
	// ahead read it last.
	for _, l := range unread {
		for i := len(eps) - 1; i >= 0; i-- {
			if w := &eps[i].Handed[l>>6]; *w&(1<<uint(l&63)) != 0 {
				*w &^= 1 << uint(l&63)
				break
			}
		}
	}
	return eps
}

// unreadLocals maps the paths a state gives back to the job's local
// indices. A path that is not one of the job's samples, or that is given
// twice, is refused. Whether the path is a file of the dataset the job
// does not see, or no file at all, the answer is the same: a job's owner
// learns nothing of the files they may not open.
func (m *Manager) unreadLocals(paths []string, sn sampler.Snapshot) ([]int, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	cat := m.p.Catalog()
	files := m.fileList()
	out := make([]int, 0, len(paths))
	seen := make(map[int]struct{}, len(paths))
	for _, p := range paths {
		e := cat.Find(p)
		l, ok := 0, e != nil && e.Index >= 0 && int(e.Index) < files.Len() && files.At(int(e.Index)) == e
		if ok {
			l, ok = localOf(sn.Subset, sn.Size, e.Index)
		}
		if !ok {
			return nil, stateError("unread %q: not a sample of the job", clip(p))
		}
		if _, dup := seen[l]; dup {
			return nil, stateError("unread %q: given back twice", clip(p))
		}
		seen[l] = struct{}{}
		out = append(out, l)
	}
	return out, nil
}

// localOf maps a sample to its local index in a subset (nil: every
// sample, size of them).
func localOf(subset []int32, size int, e int32) (int, bool) {
	if subset == nil {
		return int(e), int(e) < size
	}
	l, ok := slices.BinarySearch(subset, e)
	return l, ok
}

// epochSamples is epochOrder over the manager's files.
func (m *Manager) epochSamples(subset []int32, size int) ([]int32, uint64) {
	return epochOrder(m.fileList(), m.p.Catalog().SampleGone, m.base, subset, size)
}

// epochOrder returns a job's epoch samples (local indices 0..size-1 of
// subset; nil: every sample) less those gone from the dataset, as local
// indices in path order (the catalog's order of a fresh walk), and the
// xxhash64 of their paths, each ended by a NUL. files are the dataset's
// files by index; the first base of them were numbered in path order.
func epochOrder(files *catalog.Numbering, gone func(int) bool, base int, subset []int32, size int) ([]int32, uint64) {
	global := func(l int32) int32 {
		if subset == nil {
			return l
		}
		return subset[l]
	}
	order := make([]int32, 0, size)
	walked := true // every sample numbered by the start's walk: index order is path order
	for l := range int32(size) {
		g := global(l)
		if gone(int(g)) {
			continue
		}
		order = append(order, l)
		walked = walked && int(g) < base
	}
	if !walked {
		// Files a refresh added are numbered after every other.
		slices.SortFunc(order, func(a, b int32) int {
			return pathCompare(files.At(int(global(a))).Path(), files.At(int(global(b))).Path())
		})
	}
	h := xxhash.New()
	for _, l := range order {
		h.WriteString(files.At(int(global(l))).Path())
		h.Write([]byte{0})
	}
	return order, h.Sum64()
}

// positions inverts order: the position of each local index, -1 for the
// ones left out; nil when order is 0..size-1 itself.
func positions(order []int32, size int) []int32 {
	if len(order) == size {
		identity := true
		for i, l := range order {
			if int(l) != i {
				identity = false
				break
			}
		}
		if identity {
			return nil
		}
	}
	pos := make([]int32, size)
	for i := range pos {
		pos[i] = -1
	}
	for p, l := range order {
		pos[l] = int32(p)
	}
	return pos
}

// pathCompare orders dataset paths as a walk of the tree lists them: by
// their first differing component, bytewise ('/' sorts before any byte).
func pathCompare(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == '/' {
			return -1
		}
		if y == '/' {
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// eachBit calls fn with the index of every set bit.
func eachBit(words []uint64, fn func(int)) {
	for w, word := range words {
		for ; word != 0; word &= word - 1 {
			fn(w*64 + bits.TrailingZeros64(word))
		}
	}
}

package placement

import (
	"strings"
	"sync"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// ErrNoEntry means a path names nothing in the dataset (or nothing its
// user may open): catalog.ErrNoEntry.
var ErrNoEntry = catalog.ErrNoEntry

// warmup is the set of files a user asked to have placed ahead of reads.
// A request is queued at once (Warmup, WarmupAll) or held (HoldWarmup):
// a held request counts in the set and its progress but is queued only
// when it is released, and a cancelled one takes back what it added.
type warmup struct {
	mu       sync.Mutex
	all      bool // the whole dataset was queued
	allHolds int  // held requests for the whole dataset
	files    []*catalog.Entry
	set      map[*catalog.Entry]*warmState
}

// warmState is a file's place in the warmup set.
type warmState struct {
	queued bool // handed to the placer
	holds  int  // held requests that name it and have not ended
}

// warmupProgress reports how much of the warmup set is resident.
type WarmupProgress struct {
	Files      int64 // files in the warmup set
	Done       int64 // of them resident
	Skipped    int64 // of them that fit no tier
	BytesDone  int64
	BytesTotal int64
	Pct        float64 // BytesDone / BytesTotal × 100 (100 when empty)
}

// resolvePaths turns dataset-relative paths (files or directories) into
// the files they name, or an error naming the first that does not exist.
// Surrounding white space is trimmed from each path; every file counts (the
// daemon's own view). Control files use ResolvePathsAs.
func (p *Placer) resolvePaths(paths []string) ([]*catalog.Entry, error) {
	trimmed := make([]string, len(paths))
	for i, raw := range paths {
		trimmed[i] = strings.TrimSpace(raw)
	}
	return p.cat.ResolvePathsAs(nil, trimmed)
}

// warmupAll queues every file of the dataset, in path order.
func (p *Placer) warmupAll() {
	p.warm.mu.Lock()
	p.warm.all = true
	p.warm.mu.Unlock()
	p.feed(nil)
}

// Warmup queues the given files, in the given order.
func (p *Placer) Warmup(files []*catalog.Entry) {
	p.warm.mu.Lock()
	var fresh []*catalog.Entry
	for _, f := range files {
		st := p.warm.add(f)
		if !st.queued {
			st.queued = true
			fresh = append(fresh, f)
		}
	}
	p.warm.mu.Unlock()
	if len(fresh) > 0 { // feed(nil) would queue the whole dataset
		p.feed(fresh)
	}
}

// add returns f's state in the set, adding f. Callers hold w.mu.
func (w *warmup) add(f *catalog.Entry) *warmState {
	if w.set == nil {
		w.set = map[*catalog.Entry]*warmState{}
	}
	st := w.set[f]
	if st == nil {
		st = &warmState{}
		w.set[f] = st
		w.files = append(w.files, f)
	}
	return st
}

// WarmupHold is a held warmup request (HoldWarmup). Release or Cancel it
// once; later calls do nothing.
type WarmupHold struct {
	p     *Placer
	all   bool
	files []*catalog.Entry // the files it holds, not yet queued when it was made
	count int64            // what it adds to Stats().Queued
	ended bool
}

// HoldWarmup adds files (all: the whole dataset) to the warmup set without
// queuing them: progress counts them at once, and so does Stats().Queued
// (they are warmup backlog). A ctl file holds what a document asked for
// until the document's last close, so that a document a later line
// rejects queued nothing.
func (p *Placer) HoldWarmup(files []*catalog.Entry, all bool) *WarmupHold {
	h := &WarmupHold{p: p, all: all}
	w := &p.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if all {
		w.allHolds++
		if !w.all {
			h.count = p.cat.Files()
		}
	}
	for _, f := range files {
		if st := w.add(f); !st.queued {
			st.holds++
			h.files = append(h.files, f)
		}
	}
	h.count += int64(len(h.files))
	p.queued.Add(h.count)
	return h
}

// Release queues what h holds.
func (h *WarmupHold) Release() {
	w := &h.p.warm
	w.mu.Lock()
	if h.ended {
		w.mu.Unlock()
		return
	}
	h.ended = true
	var fresh []*catalog.Entry
	for _, f := range h.files {
		st := w.set[f]
		st.holds--
		if !st.queued {
			st.queued = true
			fresh = append(fresh, f)
		}
	}
	all := false
	if h.all {
		w.allHolds--
		all = !w.all
		w.all = true
	}
	w.mu.Unlock()
	// One change of the count: what the hold counted becomes what is fed.
	fed := int64(len(fresh))
	if all {
		fed += h.p.cat.Files()
	}
	h.p.queued.Add(fed - h.count)
	if all {
		h.p.feedCounted(nil)
	}
	if len(fresh) > 0 {
		h.p.feedCounted(fresh)
	}
}

// Cancel takes back what h added to the warmup set; it queued nothing.
func (h *WarmupHold) Cancel() {
	w := &h.p.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.ended {
		return
	}
	h.ended = true
	h.p.queued.Add(-h.count)
	if h.all {
		w.allHolds--
	}
	gone := false
	for _, f := range h.files {
		st := w.set[f]
		if st.holds--; st.holds == 0 && !st.queued {
			delete(w.set, f)
			gone = true
		}
	}
	if gone {
		// A new slice: progress reads the old one without the lock.
		kept := make([]*catalog.Entry, 0, len(w.set))
		for _, f := range w.files {
			if _, ok := w.set[f]; ok {
				kept = append(kept, f)
			}
		}
		w.files = kept
	}
}

// feed queues files (nil: the whole dataset) from a goroutine. The files
// not yet handed to the queue count as queued in Stats.
func (p *Placer) feed(files []*catalog.Entry) {
	n := int64(len(files))
	if files == nil {
		n = p.cat.Files()
	}
	p.queued.Add(n)
	p.feedCounted(files)
}

// feedCounted is feed for files already counted in queued.
func (p *Placer) feedCounted(files []*catalog.Entry) {
	n := int64(len(files))
	if files == nil {
		n = p.cat.Files()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if files == nil {
			// "all" is the whole tree: wait until it is.
			select {
			case <-p.cat.WalkDone():
			case <-p.ctx.Done():
			}
			p.queued.Add(p.cat.Files() - n)
			n = p.cat.Files()
		}
		put := func(e *catalog.Entry) bool {
			err := p.enqueueCounted(p.ctx, e)
			n--
			return err == nil
		}
		if files == nil {
			p.cat.Root().Files(put)
		} else {
			for _, e := range files {
				if !put(e) {
					break
				}
			}
		}
		p.queued.Add(-n) // what a shutdown left unqueued
	}()
}

// warmupProgressAll counts the warmup set's resident files and bytes.
func (p *Placer) warmupProgressAll() WarmupProgress {
	return p.warmupProgress(func(*catalog.Entry) bool { return true })
}

// warmupProgress counts the files of the warmup set that count says to.
func (p *Placer) warmupProgress(count func(*catalog.Entry) bool) WarmupProgress {
	var w WarmupProgress
	add := func(e *catalog.Entry) bool {
		if !count(e) {
			return true
		}
		size := e.Attr().Size
		w.Files++
		w.BytesTotal += size
		switch {
		case e.Tier() >= 0:
			w.Done++
			w.BytesDone += size
		case e.NoSpace():
			w.Skipped++
		}
		return true
	}
	p.warm.mu.Lock()
	if p.warm.all || p.warm.allHolds > 0 {
		p.warm.mu.Unlock()
		p.cat.Root().Files(add)
	} else {
		files := p.warm.files
		p.warm.mu.Unlock()
		for _, e := range files {
			add(e)
		}
	}
	w.Pct = pct(w.BytesDone, w.BytesTotal, w.Done, w.Files)
	if w.Files == 0 {
		// Nothing requested (as the reader sees it) is not "all done": a
		// script waiting for 100 would stop before anything was queued.
		w.Pct = 0
	}
	return w
}

// residency counts the dataset's resident files and bytes.
func (p *Placer) residency() (files, bytes int64) {
	p.cat.Root().Files(func(e *catalog.Entry) bool {
		if e.Tier() >= 0 {
			files++
			bytes += e.Attr().Size
		}
		return true
	})
	return files, bytes
}

// pct is the resident share by bytes (by files when there are no bytes),
// never rounded up to 100 while something is missing.
func pct(bytesDone, bytesTotal, filesDone, files int64) float64 {
	done, total := bytesDone, bytesTotal
	if total == 0 {
		done, total = filesDone, files
	}
	if total == 0 {
		return 100
	}
	p := float64(done) * 100 / float64(total)
	if (done < total || filesDone < files) && p > 99.99 {
		p = 99.99
	}
	return p
}

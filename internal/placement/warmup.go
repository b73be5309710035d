package placement

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// ErrNoEntry means a path names nothing in the dataset (or nothing its
// user may open): catalog.ErrNoEntry.
var ErrNoEntry = catalog.ErrNoEntry

// Warmups is the placer's warmup, a component of its own
// (Placer.Warmups): the set of files users asked to have placed ahead of
// reads, each user's bound on it (warmup_quota.go), their requests
// (Request: what a warmup document asks, checked as its lines come, held
// at each close, queued at its end) and their progress as each user sees
// it. It hands the files to the placer's copier (feed).
type Warmups struct {
	cat    *catalog.Catalog
	max    int64         // Options.MaxWarmupPerUser (0: no bound)
	queued *atomic.Int64 // the placer's copies waiting (Stats().Queued)
	// feed hands files already counted in queued to the copier's queue
	// from a goroutine (nil: the whole dataset, once it is walked).
	feed  func(files []*catalog.Entry)
	set   warmup
	quota warmQuota
}

// Warmups is the placer's warmup.
func (p *Placer) Warmups() *Warmups { return p.warmups }

// newWarmups is the warmup of p.
func (p *Placer) newWarmups() *Warmups {
	return &Warmups{cat: p.cat, max: p.o.MaxWarmupPerUser, queued: &p.cp.queued, feed: p.cp.feedCounted}
}

// warmup is the set of files users asked to have placed ahead of reads.
// A request is queued at once (queue, queueAll) or held (hold):
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

// queueAll queues every file of the dataset, in path order.
func (w *Warmups) queueAll() {
	w.set.mu.Lock()
	w.set.all = true
	w.set.mu.Unlock()
	w.count(nil)
}

// wholeDataset reports whether the whole dataset was queued.
func (w *Warmups) wholeDataset() bool {
	w.set.mu.Lock()
	defer w.set.mu.Unlock()
	return w.set.all
}

// queue queues the given files, in the given order.
func (w *Warmups) queue(files []*catalog.Entry) {
	w.set.mu.Lock()
	var fresh []*catalog.Entry
	for _, f := range files {
		st := w.set.add(f)
		if !st.queued {
			st.queued = true
			fresh = append(fresh, f)
		}
	}
	w.set.mu.Unlock()
	if len(fresh) > 0 { // count(nil) would queue the whole dataset
		w.count(fresh)
	}
}

// count counts files (nil: the whole dataset) in queued and feeds them.
func (w *Warmups) count(files []*catalog.Entry) {
	n := int64(len(files))
	if files == nil {
		n = w.cat.Files()
	}
	w.queued.Add(n)
	w.feed(files)
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

// WarmupHold is a held warmup request (hold). Release or Cancel it once;
// later calls do nothing.
type WarmupHold struct {
	w     *Warmups
	undo  func() // takes back the request's charge on its user's bound
	all   bool
	files []*catalog.Entry // the files it holds, not yet queued when it was made
	count int64            // what it adds to Stats().Queued
	ended bool
}

// hold adds files (all: the whole dataset) to the warmup set without
// queuing them: progress counts them at once, and so does Stats().Queued
// (they are warmup backlog). A ctl file holds what a document asked for
// until the document's last close, so that a document a later line
// rejects queued nothing.
func (w *Warmups) hold(files []*catalog.Entry, all bool) *WarmupHold {
	h := &WarmupHold{w: w, all: all}
	set := &w.set
	set.mu.Lock()
	defer set.mu.Unlock()
	if all {
		set.allHolds++
		if !set.all {
			h.count = w.cat.Files()
		}
	}
	for _, f := range files {
		if st := set.add(f); !st.queued {
			st.holds++
			h.files = append(h.files, f)
		}
	}
	h.count += int64(len(h.files))
	w.queued.Add(h.count)
	return h
}

// Release queues what h holds.
func (h *WarmupHold) Release() {
	w := &h.w.set
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
		fed += h.w.cat.Files()
	}
	h.w.queued.Add(fed - h.count)
	if all {
		h.w.feed(nil)
	}
	if len(fresh) > 0 {
		h.w.feed(fresh)
	}
}

// Cancel takes back what h added to the warmup set, and its charge on its
// user's bound; it queued nothing.
func (h *WarmupHold) Cancel() {
	w := &h.w.set
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.ended {
		return
	}
	h.ended = true
	if h.undo != nil {
		h.undo()
	}
	h.w.queued.Add(-h.count)
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

// feedCounted is feed for files already counted in queued.
func (p *copier) feedCounted(files []*catalog.Entry) {
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
			case <-p.ready:
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

// progressAll counts the warmup set's resident files and bytes.
func (w *Warmups) progressAll() WarmupProgress {
	return w.progress(func(*catalog.Entry) bool { return true })
}

// progress counts the files of the warmup set that count says to.
func (w *Warmups) progress(count func(*catalog.Entry) bool) WarmupProgress {
	var pr WarmupProgress
	add := func(e *catalog.Entry) bool {
		if !count(e) {
			return true
		}
		size := e.Attr().Size
		pr.Files++
		pr.BytesTotal += size
		switch {
		case e.Tier() >= 0:
			pr.Done++
			pr.BytesDone += size
		case e.Residency().NoSpace():
			pr.Skipped++
		}
		return true
	}
	w.set.mu.Lock()
	if w.set.all || w.set.allHolds > 0 {
		w.set.mu.Unlock()
		w.cat.Root().Files(add)
	} else {
		files := w.set.files
		w.set.mu.Unlock()
		for _, e := range files {
			add(e)
		}
	}
	pr.Pct = pct(pr.BytesDone, pr.BytesTotal, pr.Done, pr.Files)
	if pr.Files == 0 {
		// Nothing requested (as the reader sees it) is not "all done": a
		// script waiting for 100 would stop before anything was queued.
		pr.Pct = 0
	}
	return pr
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

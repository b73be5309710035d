package placement

// A user's warmup backlog is bounded: the bytes of the files a user other
// than root asked to warm up and that are not resident yet never pass
// Options.MaxWarmupPerUser. Warmup shares the copy workers and the source
// with every job on the node; without a bound one user's "all" of a
// dataset larger than the tiers keeps the workers busy for hours ahead of
// everyone else's requests. Root's requests are not bounded.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// ErrWarmupQuota: the request would take the user's warmup backlog past
// Options.MaxWarmupPerUser.
var ErrWarmupQuota = errors.New("placement: warmup backlog over placement.max_warmup_per_user")

// warmQuota tracks each user's requested files not yet resident.
type warmQuota struct {
	mu     sync.Mutex
	byUser map[uint32]map[*catalog.Entry]struct{}
}

// waiting is whether f still needs a copy.
func waiting(f *catalog.Entry) bool { return f.Tier() < 0 && !f.Gone() }

// backlogLocked prunes uid's set of what is resident and returns the
// bytes still waiting.
func (q *warmQuota) backlogLocked(uid uint32) int64 {
	var n int64
	for f := range q.byUser[uid] {
		if !waiting(f) {
			delete(q.byUser[uid], f)
			continue
		}
		n += f.Attr().Size
	}
	if len(q.byUser[uid]) == 0 {
		delete(q.byUser, uid)
	}
	return n
}

// WarmupCheck vets a warmup document's files as its lines arrive, so that
// a writer whose close(2) errors go unseen (a shell redirection) is told
// at the write; charge charges them at the document's commit. Each
// line costs what its own files do: who's backlog is summed once per
// document (it only shrinks meanwhile, so the check errs on the safe
// side).
type WarmupCheck struct {
	w    *Warmups
	who  *catalog.Cred
	have int64 // who's backlog at the document's first line
	add  int64 // what the document's lines so far add to it
	seen map[*catalog.Entry]struct{}
}

// check starts the check of one document by who.
func (w *Warmups) check(who *catalog.Cred) *WarmupCheck { return &WarmupCheck{w: w, who: who} }

// Add takes the files of one more line, or refuses them with
// ErrWarmupQuota (and takes nothing) when they would pass the bound.
func (c *WarmupCheck) Add(files []*catalog.Entry) error {
	max := c.w.max
	if c.who.Root() || max <= 0 {
		return nil
	}
	q := &c.w.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.seen == nil {
		c.have, c.seen = q.backlogLocked(c.who.UID), map[*catalog.Entry]struct{}{}
	}
	mine := q.byUser[c.who.UID]
	var add int64
	var fresh []*catalog.Entry
	for _, f := range files {
		_, dup := c.seen[f]
		_, queued := mine[f]
		if dup || queued || !waiting(f) {
			continue
		}
		c.seen[f] = struct{}{}
		add += f.Attr().Size
		fresh = append(fresh, f)
	}
	if c.have+c.add+add > max {
		for _, f := range fresh {
			delete(c.seen, f)
		}
		return fmt.Errorf("%w: uid %d has %d bytes waiting and asks for %d more; the bound is %d", ErrWarmupQuota, c.who.UID, c.have, c.add+add, max)
	}
	c.add += add
	return nil
}

// costLocked is what files add to uid's backlog (without the files
// already in it or resident), or ErrWarmupQuota past max.
func (q *warmQuota) costLocked(uid uint32, files []*catalog.Entry, max int64) (int64, []*catalog.Entry, error) {
	have := q.backlogLocked(uid)
	mine := q.byUser[uid]
	var add int64
	var fresh []*catalog.Entry
	seen := map[*catalog.Entry]bool{}
	for _, f := range files {
		if _, dup := mine[f]; dup || seen[f] || !waiting(f) {
			continue
		}
		seen[f] = true
		add += f.Attr().Size
		fresh = append(fresh, f)
	}
	if have+add > max {
		return 0, nil, fmt.Errorf("%w: uid %d has %d bytes waiting and asks for %d more; the bound is %d", ErrWarmupQuota, uid, have, add, max)
	}
	return add, fresh, nil
}

// charge adds files to who's backlog, or refuses them all with
// ErrWarmupQuota when the backlog would pass the bound. undo takes back
// the charge of a request that is cancelled (never queued).
func (w *Warmups) charge(who *catalog.Cred, files []*catalog.Entry) (undo func(), _ error) {
	if who.Root() || w.max <= 0 {
		return func() {}, nil
	}
	q := &w.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byUser == nil {
		q.byUser = map[uint32]map[*catalog.Entry]struct{}{}
	}
	_, fresh, err := q.costLocked(who.UID, files, w.max)
	if err != nil {
		return nil, err
	}
	mine := q.byUser[who.UID]
	if mine == nil {
		mine = map[*catalog.Entry]struct{}{}
		q.byUser[who.UID] = mine
	}
	for _, f := range fresh {
		mine[f] = struct{}{}
	}
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, f := range fresh {
			delete(q.byUser[who.UID], f)
		}
	}, nil
}

// backlogs is each user's warmup bytes not resident yet.
func (w *Warmups) backlogs() map[uint32]int64 {
	q := &w.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[uint32]int64{}
	for uid := range q.byUser {
		if n := q.backlogLocked(uid); n > 0 {
			out[uid] = n
		}
	}
	return out
}

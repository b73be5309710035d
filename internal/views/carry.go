package views

// A rank's next batch: the one call the jobs layer makes (NextBatch). The
// rank's draws from the sampler gather in its carry until a batch is
// ready; slow samples wait there for a later batch.

import (
	"context"
	"fmt"
	"sync"

	"github.com/epochfs/epochfs/internal/preprocess"
)

// Draw is a rank's next draw from its job's sampler: sample indices, or
// end: the epoch ended. It may wait (for the slowest rank, up to the
// lease) and must return when ctx ends.
type Draw func(ctx context.Context) (idx []int, end bool, err error)

// NextBatch returns the next batch of size samples of rank rank of job jv
// (key: the job's key), drawn with draw and assembled into one buffer from
// alloc; end=true, and no batch, once at the end of each epoch.
//
// A rank's batch reads take turns: one draws while the others wait for
// the turn (interrupted by their ctx), so that a rank's batches never mix
// two epochs. The turn is not a lock: a reader waiting for it holds none,
// and the carry's lock is taken only around the carry's own changes, never
// across a draw (docs/architecture.md has the lock order).
func (s *Set) NextBatch(ctx context.Context, jv *Job, key string, rank, size int, draw Draw, alloc Alloc) (b *Batch, end bool, err error) {
	if err := jv.checkBatches(); err != nil {
		return nil, false, err
	}
	c := s.carry(key, rank)
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("views: rank %d waiting for its batch read in progress: %w", rank, ctx.Err())
	}
	pick, err := c.fill(ctx, jv, size, draw)
	<-c.turn
	if err != nil || pick == nil {
		return nil, err == nil, err
	}
	b, err = s.assemble(ctx, jv, pick, alloc)
	return b, false, err
}

// carry is what a rank drew and has not been handed yet: samples set
// aside while slow, and the draws taken to complete a batch. Its lock
// guards samples and ended only, so that the job's state (Carried) never
// waits for a batch read's draw.
type carry struct {
	turn    chan struct{} // the batch read drawing (capacity 1)
	mu      sync.Mutex    // samples and ended
	samples []int
	ended   bool // the sampler ended the epoch; the carry drains first
}

// carry returns the carry of a rank of job key, made at its first batch
// read; Install and Drop forget a job's.
func (s *Set) carry(key string, rank int) *carry {
	k := rankKey{key, rank}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.carries[k]
	if c == nil {
		c = &carry{turn: make(chan struct{}, 1)}
		s.carries[k] = c
	}
	return c
}

// Carried returns the samples the carries of job key's ranks 0..ranks-1
// hold: handed out by the sampler, not yet put in a batch (a job's state
// gives them back). It does not wait for a batch read in progress (which
// may be waiting for the slowest rank): taken after the sampler's
// snapshot, it holds every sample the snapshot counts as handed and no
// batch holds yet (a sample handed since is given back too, harmlessly: the
// state does not count it).
func (s *Set) Carried(key string, ranks int) []int {
	var out []int
	for r := range ranks {
		s.mu.Lock()
		c := s.carries[rankKey{key, r}]
		s.mu.Unlock()
		if c == nil {
			continue
		}
		c.mu.Lock()
		out = append(out, c.samples...)
		c.mu.Unlock()
	}
	return out
}

// checkBatches refuses a batch of a job whose samples do not all have one
// shape.
func (j *Job) checkBatches() error {
	if (j.form == Augmented || j.form == Decoded) && !j.fixed {
		return fmt.Errorf("%w: view=%s: the pipeline's samples do not all have one size (end it with a crop, or resize:HxW), so a batch cannot stack them; read next and the views one by one", ErrInvalid, j.form)
	}
	return nil
}

// fill draws until the carry holds a batch of size (or the epoch ended)
// and picks it; nil means the end of the epoch. The caller has the turn.
func (c *carry) fill(ctx context.Context, j *Job, size int, draw Draw) ([]int, error) {
	for c.wants(j, size) {
		idx, end, err := draw(ctx)
		if err != nil {
			return nil, err
		}
		c.add(j, idx, end)
	}
	return c.pick(j, size), nil
}

// wants reports whether the carry needs more draws for a batch of size:
// the epoch has not ended and fewer than size samples are ready.
func (c *carry) wants(j *Job, size int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	n := 0
	for _, s := range c.samples {
		if j.form != Augmented || j.view.Status(j.consumer, s) != preprocess.StatusSlow {
			n++
		}
	}
	return n < size
}

// add adds a draw of the sampler's (end: the epoch ended instead); an
// augmented job's production of each sample is asked for at once.
func (c *carry) add(j *Job, idx []int, end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end {
		c.ended = true
		return
	}
	c.samples = append(c.samples, idx...)
	if j.form == Augmented {
		for _, s := range idx {
			j.view.Want(j.consumer, s)
		}
	}
}

// pick chooses the batch's samples from the carry after the draws wants
// asked for; nil means the end of the epoch.
func (c *carry) pick(j *Job, size int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == 0 {
		c.ended = false // the end, once; the next read starts the next epoch
		return nil
	}
	// Ready and in-production samples first, in order; slow ones only when
	// the epoch has nothing else left.
	var pick, rest []int
	for _, s := range c.samples {
		slow := j.form == Augmented && j.view.Status(j.consumer, s) == preprocess.StatusSlow
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
	return pick
}

package preprocess

// The productions of an Engine: a sample submitted to the pool, its
// completion, and what is cached of it (engine.go has the design).

import (
	"context"
	"errors"
	"fmt"
)

// submit hands pr to the pool: blocking for room when wait; else, when the
// pool is full, the prefetch is dropped (and a Take that joined it
// meanwhile submits it again, waiting).
func (e *Engine) submit(pr *prod, wait bool) bool {
	v := pr.v
	s := pr.sample
	st := &State{Key: pr.key, RNG: SampleRNG(e.o.Seed+pr.gen, e.o.Name(s))}
	var steps []Step
	e.mu.Lock()
	dec, cached := v.static.dec[s]
	roomForDecoded := e.decUsed < e.o.DecodedBytes
	e.mu.Unlock()
	if cached {
		e.mu.Lock()
		e.st.DecodedHits++
		e.mu.Unlock()
		st.Img, st.Decoded = dec, dec
		steps = v.p.AugmentSteps()
	} else {
		pr.decodes = true
		st.Keep = roomForDecoded
		load := func(ctx context.Context, st *State) error {
			data, err := e.o.Load(ctx, s)
			if err != nil {
				return fmt.Errorf("preprocess: load sample %d: %w", s, err)
			}
			st.Data = data
			return nil
		}
		steps = append([]Step{load}, v.p.EncodedSteps()...)
	}
	task := Task{Key: pr.key, State: st, Steps: steps}
	if !wait {
		ok, err := e.pool.trySubmit(task)
		if ok || err == nil {
			if !ok {
				e.mu.Lock()
				takers := pr.takers
				if takers == 0 {
					e.dropLocked(pr)
				}
				e.mu.Unlock()
				if takers != 0 {
					return e.submit(pr, true)
				}
			}
			return ok
		}
		wait = true // an error: report it as a waiting submit would
	}
	if err := e.pool.Submit(e.ctx, task); err != nil {
		e.mu.Lock()
		if e.closed {
			err = ErrEngineClosed
		}
		e.finishLocked(pr, nil, err, false)
		e.mu.Unlock()
		return false
	}
	return true
}

// dropLocked forgets a prefetch the pool had no room for.
func (e *Engine) dropLocked(pr *prod) {
	delete(e.prods, pr.key)
	e.st.InFlight = len(e.prods)
	e.augUsed -= pr.reserved
	pr.reserved = 0
	v := pr.v
	for c, w := range v.want[pr.sample] {
		if w == pr {
			delete(v.want[pr.sample], c)
		}
	}
	if len(v.want[pr.sample]) == 0 {
		delete(v.want, pr.sample)
	}
	// The generation number is not reused: numbers only need to differ.
}

// trySubmit queues t if the pool has room now; ok is false (and err nil)
// when it has not.
func (p *Pool) trySubmit(t Task) (ok bool, err error) {
	select {
	case p.slots <- struct{}{}:
	default:
		return false, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return false, fmt.Errorf("preprocess: submit %s: %w", t.Key, ErrClosed)
	}
	if p.pending[t.Key] {
		p.mu.Unlock()
		<-p.slots
		return false, fmt.Errorf("preprocess: submit %s: %w: already submitted", t.Key, ErrBadOptions)
	}
	p.pending[t.Key] = true
	p.mu.Unlock()
	p.submitted.Add(1)
	p.in <- &job{task: t}
	return true, nil
}

// drain takes finished samples from the pool.
func (e *Engine) drain() {
	defer e.wg.Done()
	for {
		r, err := e.pool.Next(e.ctx)
		if err != nil {
			return
		}
		e.mu.Lock()
		if ch, ok := e.oneOff[r.Key]; ok {
			delete(e.oneOff, r.Key)
			e.mu.Unlock()
			ch <- r
			continue
		}
		pr := e.prods[r.Key]
		if pr == nil {
			e.mu.Unlock()
			continue
		}
		if r.Err == nil {
			e.st.Augments++
			if pr.decodes {
				e.st.Decodes++
			}
			if d := r.State.Decoded; d != nil {
				pr.v.admitDecodedLocked(pr.sample, d)
			}
		}
		e.finishLocked(pr, r.State.Out, r.Err, r.Slow)
		e.mu.Unlock()
		if f := e.finished.Load(); f != nil {
			(*f)()
		}
	}
}

func (v *View) admitDecodedLocked(s int, d *Image) {
	if _, ok := v.static.dec[s]; ok {
		return
	}
	if v.e.decUsed+d.Bytes() > v.e.o.DecodedBytes {
		return
	}
	v.static.dec[s] = d
	v.e.decUsed += d.Bytes()
}

// finishLocked delivers pr's result: to its takers, and into the cache
// for the live consumers that have not taken it, within the budget.
func (e *Engine) finishLocked(pr *prod, t *Tensor, err error, slow bool) {
	if _, ok := e.prods[pr.key]; !ok {
		return
	}
	delete(e.prods, pr.key)
	e.st.InFlight = len(e.prods)
	v := pr.v
	e.augUsed -= pr.reserved
	pr.reserved = 0
	for c, w := range v.want[pr.sample] {
		if w == pr {
			delete(v.want[pr.sample], c)
		}
	}
	if len(v.want[pr.sample]) == 0 {
		delete(v.want, pr.sample)
	}
	pr.t, pr.slow = t, slow
	if err != nil {
		pr.err = fmt.Errorf("preprocess: sample %d: %w", pr.sample, err)
		if !errors.Is(err, ErrEngineClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) &&
			!errors.Is(err, context.DeadlineExceeded) {
			e.failed[v.failKey(pr.sample)] = pr.err
			e.st.Failed++
		}
		close(pr.done)
		return
	}
	n := t.Bytes()
	if v.avg == 0 {
		v.avg = n
	} else {
		v.avg = (v.avg*7 + n) / 8
	}
	rest := v.live &^ pr.takers
	if rest != 0 && e.augUsed+n <= e.o.AugmentedBytes {
		v.aug[pr.sample] = append(v.aug[pr.sample], &augGen{gen: pr.gen, t: t, taken: pr.takers})
		e.augUsed += n
	}
	close(pr.done)
}

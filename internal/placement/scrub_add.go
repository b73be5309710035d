package placement

// Adding what a refresh found new on the source.

import (
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"go.uber.org/zap"
)

// A refresh adds the new entries of a directory (addEntries) once it
// holds addBatch of them, or the first has waited addWait.
const (
	addBatch = 4096
	addWait  = time.Second
)

// addEntries adds the new entries es of the directory d found on the
// source, and returns those added.
func (p *Scrubber) addEntries(d *catalog.Entry, es []*catalog.Entry, run *scrubRun) []*catalog.Entry {
	if len(es) == 0 {
		return nil
	}
	added, err := p.cat.AddAll(d, es)
	if err != nil {
		run.fail(err)
	}
	for _, e := range added {
		p.added(e, run)
	}
	return added
}

// addEntry adds a new entry found on the source.
func (p *Scrubber) addEntry(e *catalog.Entry, run *scrubRun) bool {
	if err := p.cat.Add(e); err != nil {
		run.fail(err)
		return false
	}
	p.added(e, run)
	return true
}

// added follows an entry's addition to the catalog: a file is valid, may
// be queued, and the mount is told.
func (p *Scrubber) added(e *catalog.Entry, run *scrubRun) {
	if e.Kind == catalog.KindFile {
		e.Residency().SetValidated(true)
		run.added.Add(1)
		p.enqueueIfWarm(e)
	}
	p.log.Info("added on the source; added to the dataset", zap.String("path", e.Path()))
	p.notify(EntryAdded, e, false)
}

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
		p.added(e, run, len(added) == 1)
	}
	if len(added) > 1 {
		files := 0
		for _, e := range added {
			if e.Kind() == catalog.KindFile {
				files++
			}
		}
		logBatch(p.log, "added on the source; added to the dataset", d, added, files)
	}
	return added
}

// addEntry adds a new entry found on the source.
func (p *Scrubber) addEntry(e *catalog.Entry, run *scrubRun) bool {
	if err := p.cat.Add(e); err != nil {
		run.fail(err)
		return false
	}
	p.added(e, run, true)
	return true
}

// added follows an entry's addition to the catalog: a file is valid, may
// be queued, and the mount is told. An entry added alone is logged at
// Info; one of a batch at Debug (the batch has its line: logBatch).
func (p *Scrubber) added(e *catalog.Entry, run *scrubRun, alone bool) {
	if e.Kind() == catalog.KindFile {
		e.Residency().SetValidated(true)
		run.added.Add(1)
		p.enqueueIfWarm(e)
	}
	level := zap.DebugLevel
	if alone {
		level = zap.InfoLevel
	}
	if ce := p.log.Check(level, "added on the source; added to the dataset"); ce != nil {
		ce.Write(zap.String("path", e.Path()))
	}
	p.notify(EntryAdded, e, false)
}

// logBatch logs, in one Info line, that the entries es of the directory
// d were added or removed together: a refresh of a directory of a
// million files that finds ten thousand new ones logs a line a batch,
// not a line a file. The line names the directory, the count, the
// dataset files they are (those under removed directories included),
// and the first and last paths.
func logBatch(log *zap.Logger, msg string, d *catalog.Entry, es []*catalog.Entry, files int) {
	log.Info(msg, zap.String("dir", d.Path()), zap.Int("entries", len(es)), zap.Int("files", files),
		zap.String("first", es[0].Path()), zap.String("last", es[len(es)-1].Path()))
}

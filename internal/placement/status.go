package placement

import (
	"slices"
	"strconv"

	"github.com/epochfs/epochfs/internal/status"
)

// Status fills the placer's section of the mount's status (docs/ctl.md):
// the dataset and what of it is resident, the source's section, the
// copies, the catalog's section, the users' warmup backlogs and the shared
// buffer.
func (p *Placer) Status(d *status.Doc) {
	cat := p.cat
	var files, bytes int64
	for _, t := range p.Tiers() {
		files += t.Files()
		bytes += t.Used()
	}
	pct := 100.0
	if cat.Bytes() > 0 {
		pct = float64(bytes) * 100 / float64(cat.Bytes())
		if bytes < cat.Bytes() && pct > 99.99 {
			pct = 99.99 // never round a partial residency up to 100
		}
	}
	d.Int("files_total", cat.Files())
	d.Int("bytes_total", cat.Bytes())
	d.Int("files_resident", files)
	d.Int("bytes_resident", bytes)
	d.Float("resident_pct", pct, 2)
	p.src.Status(d)
	ps := p.Stats()
	d.Int("served_stale_on_error", ps.StaleOnError)
	d.Int("files_removed", ps.Removed)
	d.Int("files_drop_held", p.val.heldDrops())
	d.Text("validate", p.validateMode().String())
	d.Text("validate_ttl", p.val.validateTTL().String())
	d.Int("revalidate_pending", p.val.rechecksPending())
	d.Int("placements_queued", ps.Queued)
	d.Int("placements_done", ps.Done)
	d.Int("placements_failed", ps.Failed)
	d.Int("placements_skipped_nospace", ps.SkippedNoSpace)
	d.Int("demand_fallbacks", ps.DemandFallbacks)
	d.Int("read_ahead_copies", ps.ReadAhead)
	d.Int("fills", ps.Fills)
	d.Int("fill_copies", ps.FillQueued)
	d.Int("remote_reads", ps.RemoteReads)
	d.Int("placements_bytes", ps.BytesPlaced)
	cat.Status(d, !p.cp.walking()) // ok once the recorded copies are checked
	d.Int("copies_lost", ps.CopiesMissingAtMount+ps.CopiesWrongSizeAtMount)
	backlogs := p.warmups.backlogs()
	uids := make([]uint32, 0, len(backlogs))
	for uid := range backlogs {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		d.Int("warmup_bytes.uid."+strconv.FormatUint(uint64(uid), 10), backlogs[uid])
	}
	bs := p.buffer.Stats()
	d.Int("buffer_budget", bs.Budget)
	d.Int("buffer_bytes", bs.Bytes)
	d.Int("buffer_entries", bs.Entries)
	d.Int("buffer_fetches", bs.Fetches)
	d.Int("buffer_hits", bs.Hits)
	d.Int("buffer_hits_waiting", bs.Waiting)
	d.Int("buffer_refused", bs.Refused)
}

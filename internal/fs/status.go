package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// kv is one status line. Numeric values are rendered as JSON numbers.
type kv struct {
	k   string
	v   string
	num bool
}

func i64(k string, v int64) kv { return kv{k, strconv.FormatInt(v, 10), true} }

// status returns the status keys in a stable order (docs/ctl.md lists them).
//
// Long: the status keys in their documented order (docs/ctl.md), a line each.
func (fsys *FS) status() []kv {
	p := fsys.p
	cat := p.Catalog()
	ps := p.Stats()
	ss := p.Source().Stats()
	var filesRes, bytesRes int64
	for _, t := range p.Tiers() {
		filesRes += t.Files()
		bytesRes += t.Used()
	}
	pct := 100.0
	if cat.Bytes() > 0 {
		pct = float64(bytesRes) * 100 / float64(cat.Bytes())
		if bytesRes < cat.Bytes() && pct > 99.99 {
			pct = 99.99 // never round a partial residency up to 100
		}
	}
	catState, catPending := cat.Health()
	walkEntries, walkPending := cat.WalkProgress()
	if cat.Walking() {
		catState = "walking"
	}
	// The source's health as its prober last found it: status never
	// waits on the source.
	health := p.Source().Health()
	srcState, srcSince, srcAnswer := health.State, "", ""
	if !health.Since.IsZero() {
		srcSince = health.Since.UTC().Format(time.RFC3339)
	}
	if !health.LastAnswer.IsZero() {
		srcAnswer = health.LastAnswer.UTC().Format(time.RFC3339)
	}
	// A source mounted again under the live mount is a new source.
	srcMounts, srcMountedAt := p.Source().Mounts()
	srcMountedAtText := ""
	if srcMounts > 0 {
		srcMountedAtText = srcMountedAt.UTC().Format(time.RFC3339)
	}
	pt := "off"
	if fsys.passthrough.Load() {
		pt = "on"
	}
	out := []kv{
		{"version", fsys.o.Version, false},
		{"source", fsys.o.Source, false},
		{"mountpoint", fsys.o.Mountpoint, false},
		i64("pid", int64(os.Getpid())),
		{"passthrough", pt, false},
	}
	out = append(out, fsys.transportStatus()...)
	out = append(out, []kv{
		i64("files_total", cat.Files()),
		i64("bytes_total", cat.Bytes()),
		i64("files_resident", filesRes),
		i64("bytes_resident", bytesRes),
		{"resident_pct", strconv.FormatFloat(pct, 'f', 2, 64), true},
		i64("source_opens", ss.Opens),
		i64("source_reads", ss.Reads),
		i64("source_bytes", ss.Bytes),
		i64("source_stats", ss.Stats),
		i64("source_errors", ss.Errors),
		i64("source_timeouts", ss.Timeouts),
		i64("source_stuck", ss.Stuck),
		{"source_state", srcState, false},
		{"source_unavailable_since", srcSince, false},
		{"source_last_answer", srcAnswer, false},
		i64("source_mounts", srcMounts),
		{"source_mounted_at", srcMountedAtText, false},
		i64("served_stale_on_error", ps.StaleOnError),
		i64("files_removed", ps.Removed),
		i64("files_drop_held", fsys.p.DropsHeld()),
		{"validate", p.ValidateMode().String(), false},
		{"validate_ttl", p.ValidateTTL().String(), false},
		i64("revalidate_pending", p.Rechecks()),
		i64("placements_queued", ps.Queued),
		i64("placements_done", ps.Done),
		i64("placements_failed", ps.Failed),
		i64("placements_skipped_nospace", ps.SkippedNoSpace),
		i64("demand_fallbacks", ps.DemandFallbacks),
		i64("read_ahead_copies", ps.ReadAhead),
		i64("fills", ps.Fills),
		i64("fill_copies", ps.FillQueued),
		i64("remote_reads", ps.RemoteReads),
		i64("placements_bytes", ps.BytesPlaced),
		{"catalog", catState, false},
		i64("walk_entries", walkEntries),
		i64("walk_dirs_pending", walkPending),
		i64("catalog_pending", int64(catPending)),
		i64("copies_lost", ps.CopiesMissingAtMount+ps.CopiesWrongSizeAtMount),
	}...)
	njobs := 0
	if fsys.o.Jobs != nil {
		njobs = len(fsys.o.Jobs.Jobs())
	}
	bs := p.BufferStats()
	out = append(out, i64("jobs", int64(njobs)))
	if fsys.o.Jobs != nil {
		byUser := fsys.o.Jobs.JobsByUser()
		uids := make([]uint32, 0, len(byUser))
		for uid := range byUser {
			uids = append(uids, uid)
		}
		slices.Sort(uids)
		for _, uid := range uids {
			out = append(out, i64("jobs.uid."+strconv.FormatUint(uint64(uid), 10), int64(byUser[uid])))
		}
	}
	backlogs := p.WarmupBacklogs()
	uids := make([]uint32, 0, len(backlogs))
	for uid := range backlogs {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		out = append(out, i64("warmup_bytes.uid."+strconv.FormatUint(uint64(uid), 10), backlogs[uid]))
	}
	out = append(out,
		i64("buffer_budget", bs.Budget),
		i64("buffer_bytes", bs.Bytes),
		i64("buffer_entries", bs.Entries),
		i64("buffer_fetches", bs.Fetches),
		i64("buffer_hits", bs.Hits),
		i64("buffer_refused", bs.Refused),
	)
	if v := fsys.o.Views; v != nil {
		es := v.Engine().Stats()
		out = append(out,
			i64("decoded_cache_budget", es.DecodedBudget),
			i64("decoded_cache_bytes", es.DecodedBytes),
			i64("decoded_cache_entries", int64(es.DecodedEntries)),
			i64("decoded_cache_hits", es.DecodedHits),
			i64("augmented_cache_budget", es.AugmentedBudget),
			i64("augmented_cache_bytes", es.AugmentedBytes),
			i64("augmented_cache_entries", int64(es.AugmentedEntries)),
			i64("augmented_cache_hits", es.AugmentedHits),
			i64("augmented_cache_evictions", es.AugmentedEvicted),
			i64("preprocess_decodes", es.Decodes),
			i64("preprocess_augments", es.Augments),
			i64("preprocess_failed", es.Failed),
			i64("preprocess_in_flight", int64(es.InFlight)),
		)
	}
	out = append(out, fsys.openStatus()...)
	out = append(out, fsys.prewarmStatus()...)
	if more := fsys.o.MoreStatus; more != nil {
		for _, e := range more() {
			out = append(out, kv{e.Key, e.Value, e.Numeric})
		}
	}
	for i, t := range p.Tiers() {
		pre := "tier." + t.Name() + "."
		tpt := "off"
		if fsys.passthroughTier(i) {
			tpt = "on"
		}
		healthy := "yes"
		if !t.Healthy() {
			healthy = "no"
		}
		out = append(out,
			kv{pre + "path", t.Dir(), false},
			i64(pre+"quota", t.Quota()),
			i64(pre+"used", t.Used()),
			i64(pre+"files", t.Files()),
			i64(pre+"errors", t.Errors()),
			kv{pre + "healthy", healthy, false},
			kv{pre + "passthrough", tpt, false},
		)
	}
	return out
}

func (fsys *FS) statusText() []byte {
	var b bytes.Buffer
	for _, e := range fsys.status() {
		fmt.Fprintf(&b, "%s=%s\n", e.k, e.v)
	}
	return b.Bytes()
}

func (fsys *FS) statsJSON() []byte {
	var b bytes.Buffer
	b.WriteString("{")
	for i, e := range fsys.status() {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteString(":")
		if e.num {
			b.WriteString(e.v)
		} else {
			v, _ := json.Marshal(e.v)
			b.Write(v)
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// dropText is what drop removed since the mount.
func (fsys *FS) dropText() []byte {
	files, bytes := fsys.p.Dropped()
	return []byte(fmt.Sprintf("dropped=%d\nbytes_dropped=%d\npending=%d\n", files, bytes, fsys.dropsPending.Load()))
}

// warmupText is warmup's progress as who sees it: only the files who
// could open count (placement.WarmupProgressAs).
func (fsys *FS) warmupText(who *catalog.Cred) []byte {
	w := fsys.p.WarmupProgressAs(who)
	return []byte(fmt.Sprintf("queued=%d\ndone=%d\nskipped=%d\nbytes_done=%d\nbytes_total=%d\npct=%.2f\n",
		w.Files, w.Done, w.Skipped, w.BytesDone, w.BytesTotal, w.Pct))
}

func (fsys *FS) scrubText() []byte {
	s := fsys.p.ScrubStatus()
	running := 0
	if s.Running {
		running = 1
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "running=%d\npending=%d\nfinished=%d\nkind=%s\n", running, s.Pending, s.Finished, s.Kind)
	fmt.Fprintf(&b, "checked=%d\nchanged=%d\nadded=%d\nremoved=%d\ndropped=%d\nheld=%d\nerrors=%d\n",
		s.Checked, s.Changed, s.Added, s.Removed, s.Dropped, s.Held, s.Errors)
	fmt.Fprintf(&b, "took_s=%.3f\nlast_error=%s\n", s.Took.Seconds(), s.LastErr)
	return b.Bytes()
}

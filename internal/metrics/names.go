package metrics

import (
	"sort"
	"strings"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/prometheus/client_golang/prometheus"
)

// spec names one status key in Prometheus terms.
type spec struct {
	name  string // without the epochfs_ prefix; a counter's ends in _total
	kind  prometheus.ValueType
	help  string
	scale float64 // the value is multiplied by this (0: 1)
	label bool    // exported as a label of the _info gauge, not as a value
}

func gauge(name, help string) spec { return spec{name: name, kind: prometheus.GaugeValue, help: help} }
func counter(name, help string) spec {
	return spec{name: name, kind: prometheus.CounterValue, help: help}
}

// statusSpecs gives the keys of .epochfs/status (docs/ctl.md) their
// names and types. Keys not listed are still exported (specFor).
var statusSpecs = map[string]spec{
	"pid":                        {label: true},
	"files_total":                gauge("dataset_files", "Files in the dataset (the catalog)."),
	"bytes_total":                gauge("dataset_bytes", "Bytes of the dataset's files."),
	"files_resident":             gauge("resident_files", "Files with a copy in a tier."),
	"bytes_resident":             gauge("resident_bytes", "Bytes of the files with a copy in a tier."),
	"resident_pct":               {name: "resident_ratio", kind: prometheus.GaugeValue, help: "Resident bytes / dataset bytes (0 to 1).", scale: 0.01},
	"source_opens":               counter("source_opens_total", "Files opened on the source."),
	"source_reads":               counter("source_reads_total", "Read calls to the source."),
	"source_bytes":               counter("source_read_bytes_total", "Bytes read from the source."),
	"source_stats":               counter("source_metadata_ops_total", "Metadata calls to the source after the first walk."),
	"source_errors":              counter("source_errors_total", "Source operations that failed (missing files excluded)."),
	"source_timeouts":            counter("source_timeouts_total", "Source operations abandoned at placement.source_timeout."),
	"source_stuck":               gauge("source_stuck_calls", "Abandoned source operations still blocked now."),
	"served_stale_on_error":      counter("served_stale_on_error_total", "Opens of resident files served without validation because the source failed."),
	"files_removed":              counter("files_removed_total", "Files dropped because the source no longer has them."),
	"placements_queued":          gauge("placement_queue_depth", "Copies into the tiers waiting or running."),
	"placements_done":            counter("placements_done_total", "Copies installed in a tier."),
	"placements_failed":          counter("placements_failed_total", "Copies that failed."),
	"placements_skipped_nospace": counter("placements_skipped_nospace_total", "Files that fit no tier."),
	"placements_bytes":           counter("placed_bytes_total", "Bytes copied into the tiers."),
	"catalog_pending":            gauge("catalog_pending_entries", "Catalog updates not yet written (the state directory is full)."),
	"copies_lost":                gauge("copies_lost_at_mount", "Recorded tier copies found missing or wrong at mount."),
	"jobs":                       gauge("jobs", "Live training jobs."),
	"buffer_budget":              gauge("buffer_budget_bytes", "The shared buffer's budget."),
	"buffer_bytes":               gauge("buffer_bytes", "Bytes in the shared buffer."),
	"buffer_entries":             gauge("buffer_entries", "Files in the shared buffer."),
	"buffer_fetches":             counter("buffer_fetches_total", "Files fetched into the shared buffer."),
	"buffer_hits":                counter("buffer_hits_total", "Opens served from the shared buffer."),
	"buffer_hits_waiting":        counter("buffer_hits_waiting_total", "Opens served from the shared buffer that waited for its fetch to end."),
	"buffer_refused":             counter("buffer_refused_total", "Fetches the shared buffer had no room for."),
	"revalidate_pending":         gauge("revalidate_pending_files", "Resident files checked longer ago than validate_ttl, waiting for the background revalidation."),
	"read_ahead_copies":          counter("read_ahead_copies_total", "Copies started ahead of a reader going through the dataset in path order."),
	"fills":                      counter("fills_total", "Directories whose rest was queued for copying after a user read placement.fill_after of their files in no order."),
	"fill_copies":                counter("fill_copies_total", "Files queued by those fills."),
	"xattr_requests":             counter("xattr_requests_total", "GETXATTR and LISTXATTR requests for dataset entries."),
	"dir_opens":                  counter("dir_opens_total", "Opens of dataset directories."),
	"dir_entries":                counter("dir_entries_total", "Directory entries the daemon sent in listings (none for a listing the kernel has cached)."),
	"passthrough":                gauge("passthrough", "1 if resident files are served by FUSE passthrough."),
	"transport":                  {label: true},
	"io_uring_queues":            gauge("io_uring_queues", "FUSE over io_uring queues (0: requests come through /dev/fuse)."),
	"io_uring_requests":          counter("io_uring_requests_total", "Requests answered through FUSE over io_uring."),
	"io_uring_helpers":           counter("io_uring_helpers_total", "Threads started for io_uring queues held up by a slow request."),
}

// tierSpecs name the keys tier.NAME.KEY; the metrics carry a tier label.
var tierSpecs = map[string]spec{
	"quota":       gauge("tier_quota_bytes", "The tier's byte quota."),
	"used":        gauge("tier_used_bytes", "Bytes of the tier's installed copies."),
	"files":       gauge("tier_files", "The tier's installed copies."),
	"errors":      counter("tier_errors_total", "I/O errors of the tier."),
	"healthy":     gauge("tier_healthy", "1 if the tier takes copies (not resting after errors)."),
	"passthrough": gauge("tier_passthrough", "1 if the tier's files are served by FUSE passthrough."),
}

// jobSpecs name the keys of a job's status; the metrics carry job and
// owner labels.
var jobSpecs = map[string]spec{
	"batch_size":     gauge("job_batch_size", "The job's batch size."),
	"size":           gauge("job_samples", "Samples in the job's subset of the dataset."),
	"epoch":          gauge("job_epoch", "The job's epoch (1-based; 0 before its first batch)."),
	"position":       gauge("job_position_samples", "Samples served this epoch."),
	"planned":        gauge("job_planned_samples", "Samples drawn ahead of the job's reads."),
	"batches":        counter("job_batches_total", "Batches served."),
	"resident_reads": counter("job_resident_reads_total", "Samples served while in a tier."),
	"buffer_reads":   counter("job_buffer_reads_total", "Samples served from the shared buffer."),
	"source_reads":   counter("job_source_reads_total", "Samples the job read from the source."),
	"peer_reads":     counter("job_peer_reads_total", "Samples another node kept (cluster data = \"peers\")."),
	"substitutions":  counter("job_substitutions_total", "Draws replaced by buffered samples (ODS)."),
	"shared_draws":   counter("job_shared_draws_total", "Draws shared with another job (DSA)."),
	"ranks_live":     gauge("job_ranks_live", "The job's ranks reading now."),
	"rank_losses":    counter("job_rank_losses_total", "Ranks lost (no read for the job's lease) since the job began."),
}

// jobEpochSpecs name the keys epoch.N.KEY of a job's status: the metrics
// carry an epoch label besides the job's.
var jobEpochSpecs = map[string]spec{
	"reads_local":  gauge("job_epoch_reads_local_samples", "Samples of the epoch kept in this node's tiers when handed out."),
	"reads_peer":   gauge("job_epoch_reads_peer_samples", "Samples of the epoch kept by another node when handed out."),
	"reads_source": gauge("job_epoch_reads_source_samples", "Samples of the epoch kept only on the source when handed out."),
}

// specFor returns the spec of key in table, or one derived from the key:
// a gauge named after it (a key's unit is then the status file's).
func specFor(table map[string]spec, prefix, key string) spec {
	if s, ok := table[key]; ok {
		return s
	}
	return gauge(prefix+sanitize(key), "Status key "+key+" (see docs/ctl.md).")
}

// sanitize makes a key a valid metric name part.
func sanitize(key string) string {
	b := []byte(key)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// statusCollector turns the status into metrics at each scrape. It
// describes nothing in advance (an unchecked collector): the set of keys
// is the status file's.
type statusCollector struct{ m *Metrics }

func (c *statusCollector) Describe(chan<- *prometheus.Desc) {}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	info := map[string]string{}
	tierInfo := map[string]map[string]string{}
	for _, e := range c.m.o.Status().Fields() {
		if rest, ok := strings.CutPrefix(e.Key, "tier."); ok {
			name, key, ok := strings.Cut(rest, ".")
			if !ok {
				continue
			}
			s := specFor(tierSpecs, "tier_", key)
			if !emit(ch, s, e, []string{"tier"}, []string{name}) {
				if tierInfo[name] == nil {
					tierInfo[name] = map[string]string{}
				}
				tierInfo[name][sanitize(key)] = e.Value
			}
			continue
		}
		if e.Kind == status.Time {
			// An instant is a timestamp gauge (absent while it is the zero
			// instant), never a label: a label that changes at every probe
			// (source_last_answer) would make each scrape a new series of
			// epochfs_info, and no alert on it would ever last its for:.
			if e.Num > 0 {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("epochfs_"+sanitize(e.Key)+"_timestamp_seconds",
					"Status key "+e.Key+" as Unix seconds (see docs/ctl.md).", nil, nil), prometheus.GaugeValue, e.Num)
			}
			continue
		}
		s := specFor(statusSpecs, "", e.Key)
		if s.label || !emit(ch, s, e, nil, nil) {
			info[sanitize(e.Key)] = e.Value
		}
	}
	ch <- infoMetric("epochfs_info", "The mount's identity and settings as labels.", info, nil, nil)
	for name, kv := range tierInfo {
		ch <- infoMetric("epochfs_tier_info", "A tier's settings as labels.", kv, []string{"tier"}, []string{name})
	}
	if c.m.o.Jobs == nil {
		return
	}
	for _, j := range c.m.o.Jobs() {
		labels, values := []string{"job", "owner"}, []string{j.Name, j.Owner}
		jinfo := map[string]string{}
		for _, e := range j.Status.Fields() {
			if e.Key == "name" {
				continue
			}
			if e.Kind == status.Time { // last_read, paused_until: timestamps, as above
				if e.Num > 0 {
					ch <- prometheus.MustNewConstMetric(
						prometheus.NewDesc("epochfs_job_"+sanitize(e.Key)+"_timestamp_seconds", "The job's "+e.Key+" as Unix seconds.", labels, nil),
						prometheus.GaugeValue, e.Num, values...)
				}
				continue
			}
			if rest, ok := strings.CutPrefix(e.Key, "epoch."); ok {
				if ep, key, ok := strings.Cut(rest, "."); ok {
					emit(ch, specFor(jobEpochSpecs, "job_epoch_", key), e, append(labels[:2:2], "epoch"), append(values[:2:2], ep))
					continue
				}
			}
			if !emit(ch, specFor(jobSpecs, "job_", e.Key), e, labels, values) {
				jinfo[sanitize(e.Key)] = e.Value
			}
		}
		ch <- infoMetric("epochfs_job_info", "A job's settings as labels.", jinfo, labels, values)
	}
}

// emit sends e as the metric s names, and reports whether it could: a
// number or a flag can, text and instants cannot (a version is text, even
// "1.2").
func emit(ch chan<- prometheus.Metric, s spec, e status.Field, labels, values []string) bool {
	if e.Kind != status.Int && e.Kind != status.Float && e.Kind != status.Flag {
		return false
	}
	v := e.Num
	if s.scale != 0 {
		v *= s.scale
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("epochfs_"+s.name, s.help, labels, nil), s.kind, v, values...)
	return true
}

// infoMetric is a gauge of 1 whose labels carry text values.
func infoMetric(name, help string, kv map[string]string, labels, values []string) prometheus.Metric {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	labels = append(append([]string(nil), labels...), keys...)
	values = append([]string(nil), values...)
	for _, k := range keys {
		values = append(values, kv[k])
	}
	return prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue, 1, values...)
}

// Package metrics serves one mount's counters to Prometheus.
//
// It keeps no second list of what the mount counts. At each scrape it takes
// the mount's status document (.epochfs/status, a status.Doc) and each live
// job's, and turns every typed field into a metric by rule (names.go): a
// number becomes a gauge or a counter whose name carries its unit,
// "tier.NAME.KEY" becomes a per-tier metric labelled tier, a flag (on/off,
// yes/no) a 1/0 gauge, and text and instants become labels of an _info
// gauge (a job's last read: a timestamp gauge). It parses no text. A key added to the status later is exported under a
// derived name without a change here; names.go only gives known keys their
// Prometheus names, types and help.
//
// Two histograms time what the daemon itself sees of reads. Reads of a
// resident file go from the kernel straight to the tier file through FUSE
// passthrough and never reach the daemon; what it sees of them is their
// open (the validation against the source, when the mode asks for one, and
// the open of the tier copy): epochfs_resident_open_seconds. Reads from the
// source (copies into the tiers and reads of files not yet copied) are
// timed per read call: epochfs_source_read_seconds.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Job is one live training job of the mount.
type Job struct {
	Name   string
	Owner  string      // user name (or uid) of who made the job; "" if unknown
	Status *status.Doc // the job's status file
}

// Options configure the metrics of one mount.
type Options struct {
	// Status returns the mount's status (required).
	Status func() *status.Doc
	// Jobs returns the live jobs (nil: none).
	Jobs   func() []Job
	Logger *zap.Logger
}

// Metrics is the registry of one mount.
type Metrics struct {
	o            Options
	reg          *prometheus.Registry
	residentOpen prometheus.Histogram
	sourceRead   prometheus.Histogram
}

// Histogram buckets, in seconds: a resident open is a local open (plus a
// stat of the source when validated), a source read a network read of up
// to a copy buffer.
var (
	residentOpenBuckets = prometheus.ExponentialBuckets(10e-6, 4, 10)  // 10 µs … 2.6 s
	sourceReadBuckets   = prometheus.ExponentialBuckets(100e-6, 4, 10) // 100 µs … 26 s
)

// New builds the registry: the status collector, the two read histograms,
// and Go's runtime and process collectors.
func New(o Options) *Metrics {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	m := &Metrics{o: o, reg: prometheus.NewRegistry()}
	m.residentOpen = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "epochfs_resident_open_seconds",
		Help:    "Opens of resident files as the daemon serves them (validation and the tier open; passthrough reads never reach the daemon).",
		Buckets: residentOpenBuckets,
	})
	m.sourceRead = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "epochfs_source_read_seconds",
		Help:    "Read calls to the source (copies into the tiers and reads of files not yet copied).",
		Buckets: sourceReadBuckets,
	})
	m.reg.MustRegister(m.residentOpen, m.sourceRead, &statusCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveOpen records an open of a dataset file; only opens of resident
// files are timed (the others start or join a copy).
func (m *Metrics) ObserveOpen(resident bool, took time.Duration) {
	if resident {
		m.residentOpen.Observe(took.Seconds())
	}
}

// ObserveSourceRead records one read call to the source.
func (m *Metrics) ObserveSourceRead(n int, took time.Duration) {
	m.sourceRead.Observe(took.Seconds())
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: zapErrorLog{m.o.Logger}})
}

// Registry is the registry (tests gather from it directly).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

type zapErrorLog struct{ log *zap.Logger }

func (z zapErrorLog) Println(v ...any) { z.log.Warn("metrics: " + fmt.Sprint(v...)) }

// Server is the HTTP endpoint of one mount's metrics.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Listen serves /metrics on addr (host:port; port 0 picks one), and Go's
// profiles under /debug/pprof/ when pprof is set.
func (m *Metrics) Listen(addr string, pprof bool) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "epochfs metrics: /metrics")
	})
	s := &Server{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.o.Logger.Warn("metrics: server stopped", zap.Error(err))
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: scrapes in progress get a second to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("metrics: close: %w", err)
	}
	return nil
}

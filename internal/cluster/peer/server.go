package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Store is what a node serves: its own copies of dataset files.
type Store interface {
	// Open returns this node's copy of version k of a file, or an error
	// matching ErrNotHeld when it holds none (or another version).
	Open(k Key) (File, error)
	// Fetch asks this node to copy version k now, for a peer that needs
	// it: nil once the copy runs or is done; ErrNoRoom when no tier has
	// room for it; ErrNotHeld when the dataset has no such version here.
	Fetch(ctx context.Context, k Key) error
}

// File is an open copy.
type File interface {
	io.ReaderAt
	Close() error
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Signer Signer
	Store  Store
	// MaxInFlight bounds the requests served at once (the rest get 503:
	// the caller reads another holder or the source). Default 64.
	MaxInFlight int
	// TLS, if set, serves HTTPS (HTTP/2 over TLS); otherwise HTTP/2
	// without TLS (prior knowledge) and HTTP/1.1.
	TLS    *tls.Config
	Logger *zap.Logger
	// Now is the clock requests are checked against (tests).
	Now func() time.Time
}

// Server serves this node's copies to its peers.
type Server struct {
	o    ServerOptions
	hs   *http.Server
	sem  chan struct{}
	st   ServerStats
	done chan struct{}
}

// ServerStats are the server's counters.
type ServerStats struct {
	Served, ServedBytes, Refused, NotHeld, Busy, Fetches atomic.Int64
}

// NewServer makes a server; Serve starts it.
func NewServer(o ServerOptions) *Server {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, sem: make(chan struct{}, o.MaxInFlight), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/range", s.serveRange)
	mux.HandleFunc("POST /v1/fetch", s.serveFetch)
	mux.HandleFunc("GET /v1/health", s.serveHealth)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(o.TLS == nil)
	s.hs = &http.Server{
		Handler:           s.auth(mux),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		TLSConfig:         o.TLS,
		Protocols:         &p,
		ErrorLog:          zap.NewStdLog(o.Logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))),
	}
	return s
}

// Stats are the server's counters.
func (s *Server) Stats() *ServerStats { return &s.st }

// Serve serves l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	var err error
	if s.o.TLS != nil {
		err = s.hs.ServeTLS(l, "", "")
	} else {
		err = s.hs.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving: the requests being served are cut.
func (s *Server) Close() error { return s.hs.Close() }

// auth refuses unsigned, wrongly signed and stale requests, and requests
// past MaxInFlight.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.o.Signer.Check(r, s.o.Now()); err != nil {
			s.st.Refused.Add(1)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			s.st.Busy.Add(1)
			http.Error(w, ErrBusy.Error(), http.StatusServiceUnavailable)
			return
		}
		defer func() { <-s.sem }()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "ok\n")
}

func (s *Server) serveRange(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k, err := parseKey(q)
	var off, n int64
	if err == nil {
		off, n, err = parseRange(q, k.Size)
	}
	if err != nil {
		s.st.Refused.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := s.o.Store.Open(k)
	if err != nil {
		if !errors.Is(err, ErrNotHeld) {
			s.o.Logger.Warn("peer read: cannot open a copy", zap.String("path", k.Path), zap.Error(err))
		}
		s.st.NotHeld.Add(1)
		http.Error(w, ErrNotHeld.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	m, err := io.Copy(w, io.NewSectionReader(f, off, n))
	s.st.ServedBytes.Add(m)
	if err != nil {
		// The length was promised: the caller sees a short answer.
		s.o.Logger.Debug("peer read cut", zap.String("path", k.Path), zap.Error(err))
		return
	}
	s.st.Served.Add(1)
}

func (s *Server) serveFetch(w http.ResponseWriter, r *http.Request) {
	k, err := parseKey(r.URL.Query())
	if err != nil {
		s.st.Refused.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.st.Fetches.Add(1)
	switch err := s.o.Store.Fetch(r.Context(), k); {
	case err == nil:
		w.WriteHeader(http.StatusAccepted)
	case errors.Is(err, ErrNoRoom):
		http.Error(w, ErrNoRoom.Error(), http.StatusConflict)
	case errors.Is(err, ErrNotHeld):
		http.Error(w, ErrNotHeld.Error(), http.StatusNotFound)
	default:
		http.Error(w, "fetch failed", http.StatusInternalServerError)
	}
}

// query builds the query naming version k.
func query(k Key) url.Values {
	v := url.Values{}
	v.Set("path", k.Path)
	v.Set("size", strconv.FormatInt(k.Size, 10))
	v.Set("mtime", strconv.FormatInt(k.Mtime, 10))
	return v
}

// parseKey reads the file version a request names.
func parseKey(q url.Values) (Key, error) {
	p := q.Get("path")
	if p == "" || len(p) > 4096 {
		return Key{}, errors.New("peer: path: empty or longer than 4096 bytes")
	}
	size, err := strconv.ParseInt(q.Get("size"), 10, 64)
	if err != nil || size < 0 {
		return Key{}, fmt.Errorf("peer: size %q: not a size", q.Get("size"))
	}
	mtime, err := strconv.ParseInt(q.Get("mtime"), 10, 64)
	if err != nil {
		return Key{}, fmt.Errorf("peer: mtime %q: not a time", q.Get("mtime"))
	}
	return Key{Path: p, Size: size, Mtime: mtime}, nil
}

// parseRange reads a range of a file of size bytes: at most MaxRange, all
// inside the file.
func parseRange(q url.Values, size int64) (off, n int64, err error) {
	off, err = strconv.ParseInt(q.Get("off"), 10, 64)
	if err != nil || off < 0 {
		return 0, 0, fmt.Errorf("peer: off %q: not an offset", q.Get("off"))
	}
	n, err = strconv.ParseInt(q.Get("len"), 10, 64)
	if err != nil || n <= 0 || n > MaxRange {
		return 0, 0, fmt.Errorf("peer: len %q: want 1 to %d", q.Get("len"), MaxRange)
	}
	if off > size || n > size-off {
		return 0, 0, fmt.Errorf("peer: range %d+%d past the end (%d)", off, n, size)
	}
	return off, n, nil
}

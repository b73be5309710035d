package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/test/pki"
)

func TestOwnersAreStableAndMoveOnlyTheLeaversShare(t *testing.T) {
	members := []string{"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070", "10.0.0.4:7070"}
	const files = 20000
	count := map[string]int{}
	before := make([]string, files)
	for i := range files {
		id := fmt.Sprintf("%032x", i)
		o := Owners(nil, id, members, 2)
		if len(o) != 2 || o[0] == o[1] {
			t.Fatalf("file %d: owners %v, want two distinct", i, o)
		}
		// The order of the members list does not matter.
		rev := []string{members[3], members[1], members[0], members[2]}
		if o2 := Owners(nil, id, rev, 2); o2[0] != o[0] || o2[1] != o[1] {
			t.Fatalf("file %d: owners %v from one order, %v from another", i, o, o2)
		}
		count[o[0]]++
		before[i] = o[0]
	}
	for m, n := range count {
		if n < files/4*8/10 || n > files/4*12/10 {
			t.Errorf("member %s owns %d of %d files, want about %d", m, n, files, files/4)
		}
	}
	// Member 2 leaves: only its files move, spread over the others.
	left := []string{members[0], members[2], members[3]}
	moved := 0
	for i := range files {
		o := Owners(nil, fmt.Sprintf("%032x", i), left, 1)[0]
		if before[i] != members[1] && o != before[i] {
			t.Fatalf("file %d moved from %s to %s though its owner stayed", i, before[i], o)
		}
		if before[i] == members[1] {
			moved++
		}
	}
	if moved != count[members[1]] {
		t.Fatalf("%d files moved, want the leaver's %d", moved, count[members[1]])
	}
	if got := Owners(nil, "x", members, 9); len(got) != 4 {
		t.Fatalf("Owners of 9 among 4: %v", got)
	}
	if got := Owners(nil, "x", nil, 1); len(got) != 0 {
		t.Fatalf("Owners among none: %v", got)
	}
}

func TestSignatureCoversTheRequestAndExpires(t *testing.T) {
	s := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	other := NewSigner([]byte("another key, also 32 characters!"))
	now := time.Unix(1800000000, 0)
	req := func() *http.Request {
		r, _ := http.NewRequest("GET", "http://h/v1/range?path=a&off=0&len=5", nil)
		return r
	}
	r := req()
	s.Sign(r, "node1", now)
	if node, err := s.Check(r, now.Add(10*time.Second)); err != nil || node != "node1" {
		t.Fatalf("Check of a good request: %q, %v", node, err)
	}
	if _, err := other.Check(r, now); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check under another key: %v, want ErrRefused", err)
	}
	if _, err := s.Check(r, now.Add(2*MaxSkew)); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check of a stale request: %v, want ErrRefused", err)
	}
	r.URL.RawQuery = "path=a&off=0&len=6"
	if _, err := s.Check(r, now); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check of an altered query: %v, want ErrRefused", err)
	}
	r = req()
	s.Sign(r, "node1", now)
	r.Header.Set(headerNode, "node2")
	if _, err := s.Check(r, now); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check with another node's name: %v, want ErrRefused", err)
	}
	if _, err := s.Check(req(), now); !errors.Is(err, ErrRefused) {
		t.Fatalf("Check of an unsigned request: %v, want ErrRefused", err)
	}
}

// memStore holds files in memory; fetch records what it was asked.
type memStore struct {
	mu      sync.Mutex
	files   map[Key][]byte
	fetched []Key
	block   chan struct{} // if set, Open says so on entered and waits on it
	entered chan struct{}
}

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m *memStore) Open(k Key) (File, error) {
	if m.block != nil {
		m.entered <- struct{}{}
		<-m.block
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[k]
	if !ok {
		return nil, ErrNotHeld
	}
	return memFile{bytes.NewReader(b)}, nil
}

func (m *memStore) Fetch(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k.Path == "full" {
		return ErrNoRoom
	}
	if k.Path == "unknown" {
		return ErrNotHeld
	}
	m.fetched = append(m.fetched, k)
	return nil
}

func serve(t *testing.T, st Store, key string, maxInFlight int) (string, *Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerOptions{Signer: NewSigner([]byte(key)), Store: st, MaxInFlight: maxInFlight})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String(), s
}

const testKey = "0123456789abcdef0123456789abcdef"

func TestRangesAreServedOverHTTP2ToKeyHoldersOnly(t *testing.T) {
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	k := Key{Path: "train/a b/ü.jpg", Size: int64(len(data)), Mtime: 1700000000123456789}
	st := &memStore{files: map[Key][]byte{k: data}}
	addr, srv := serve(t, st, testKey, 0)
	c := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n1"})
	defer c.Close()
	ctx := context.Background()
	for _, r := range [][2]int64{{0, 1 << 20}, {1 << 20, 1 << 20}, {3 << 20, 17}, {5, 1}} {
		got, err := c.Range(ctx, addr, k, r[0], int(r[1]))
		if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("Range %v: %d bytes, %v; want the file's bytes", r, len(got), err)
		}
	}
	// HTTP/2 without TLS, one connection.
	u := "http://" + addr + "/v1/health"
	req, _ := http.NewRequest("GET", u, nil)
	NewSigner([]byte(testKey)).Sign(req, "n1", time.Now())
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("health: %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
	}
	// Without the key: refused, nothing read.
	bad := NewClient(ClientOptions{Signer: NewSigner([]byte("not the key, but 32 bytes long!!")), Node: "n2"})
	defer bad.Close()
	if _, err := bad.Range(ctx, addr, k, 0, 10); !errors.Is(err, ErrRefused) {
		t.Fatalf("Range without the key: %v, want ErrRefused", err)
	}
	plain, err := http.Get("http://" + addr + "/v1/range?" + query(k).Encode() + "&off=0&len=10")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(plain.Body)
	plain.Body.Close()
	if plain.StatusCode != http.StatusUnauthorized || bytes.Contains(body, data[:10]) {
		t.Fatalf("unsigned GET: %d %q, want 401 and no data", plain.StatusCode, body)
	}
	if srv.Stats().Refused.Load() != 2 {
		t.Fatalf("refused %d, want 2", srv.Stats().Refused.Load())
	}
	// Another version, another file: not held.
	for _, o := range []Key{{Path: k.Path, Size: k.Size, Mtime: k.Mtime + 1}, {Path: "other", Size: 5}} {
		if _, err := c.Range(ctx, addr, o, 0, 1); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Range of %v: %v, want ErrNotHeld", o, err)
		}
	}
	// Ranges outside the file are refused before the store is asked.
	for _, r := range [][2]int64{{k.Size, 1}, {-1, 5}, {k.Size - 1, 2}} {
		if _, err := c.Range(ctx, addr, k, r[0], int(r[1])); !errors.Is(err, ErrRefused) {
			t.Fatalf("Range %v: %v, want ErrRefused", r, err)
		}
	}
	if _, err := c.Range(ctx, addr, k, 0, MaxRange+1); err == nil {
		t.Fatal("Range past MaxRange: no error")
	}
	// Fetch.
	if err := c.Fetch(ctx, addr, k); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if err := c.Fetch(ctx, addr, Key{Path: "full", Size: 1}); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("Fetch with no room: %v", err)
	}
	if err := c.Fetch(ctx, addr, Key{Path: "unknown", Size: 1}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Fetch of an unknown file: %v", err)
	}
	if len(st.fetched) != 1 || st.fetched[0] != k {
		t.Fatalf("fetched %v, want [%v]", st.fetched, k)
	}
}

func TestAPeerAtItsLimitAnswersBusy(t *testing.T) {
	k := Key{Path: "f", Size: 4}
	st := &memStore{files: map[Key][]byte{k: []byte("abcd")}, block: make(chan struct{}), entered: make(chan struct{}, 1)}
	addr, _ := serve(t, st, testKey, 1)
	c := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n1"})
	defer c.Close()
	first := make(chan error, 1)
	go func() {
		_, err := c.Range(context.Background(), addr, k, 0, 4)
		first <- err
	}()
	<-st.entered // the first request holds the only place
	_, err := c.Range(context.Background(), addr, k, 0, 4)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("second request while the first is served: %v, want ErrBusy", err)
	}
	close(st.block)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
}

func TestAShortOrLongAnswerIsRefused(t *testing.T) {
	// A peer that answers with the wrong length (a file truncated under
	// it, or a liar) never passes as the range.
	for _, extra := range []int{-3, 3} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("len"))
			w.Write(make([]byte, n+extra))
		})}
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		p.SetHTTP1(true)
		hs.Protocols = &p
		go hs.Serve(l)
		c := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n1"})
		_, err = c.Range(context.Background(), l.Addr().String(), Key{Path: "f", Size: 100}, 0, 50)
		c.Close()
		hs.Close()
		if !errors.Is(err, ErrShort) {
			t.Fatalf("answer %+d bytes: %v, want ErrShort", extra, err)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add("train/a.jpg", "100", "1700000000", "0", "100")
	f.Add("", "-1", "x", "5", "0")
	f.Add("a", "9223372036854775807", "0", "9223372036854775806", "67108864")
	f.Fuzz(func(t *testing.T, p, size, mtime, off, n string) {
		q := url.Values{"path": {p}, "size": {size}, "mtime": {mtime}, "off": {off}, "len": {n}}
		k, err := parseKey(q)
		if err != nil {
			return
		}
		if k.Path == "" || k.Size < 0 {
			t.Fatalf("parseKey accepted %+v", k)
		}
		o, l, err := parseRange(q, k.Size)
		if err != nil {
			return
		}
		if o < 0 || l <= 0 || l > MaxRange || o+l > k.Size || o+l < o {
			t.Fatalf("parseRange accepted %d+%d of %d", o, l, k.Size)
		}
	})
}

func TestRangesOverTLSReachOnlyAClientThatTrustsTheCA(t *testing.T) {
	p := pki.Write(t, "127.0.0.1")
	files := TLSFiles(p)
	srvConf, cliConf, err := files.Configs()
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Path: "f", Size: 5000}
	data := make([]byte, k.Size)
	rand.Read(data)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerOptions{Signer: NewSigner([]byte(testKey)), Store: &memStore{files: map[Key][]byte{k: data}}, TLS: srvConf})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() { s.Close(); <-done }()
	addr := l.Addr().String()
	c := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n1", TLS: cliConf})
	defer c.Close()
	got, err := c.Range(context.Background(), addr, k, 100, 1000)
	if err != nil || !bytes.Equal(got, data[100:1100]) {
		t.Fatalf("Range over TLS: %d bytes, %v", len(got), err)
	}
	req, _ := http.NewRequest("GET", "https://"+addr+"/v1/health", nil)
	NewSigner([]byte(testKey)).Sign(req, "n1", time.Now())
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Fatalf("health: %s, TLS %v; want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	// A client that does not trust the CA, and a client without TLS, read
	// nothing.
	other := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n2", TLS: &tls.Config{MinVersion: tls.VersionTLS13}})
	defer other.Close()
	if _, err := other.Range(context.Background(), addr, k, 0, 10); err == nil {
		t.Fatal("a client that does not trust the CA read a range")
	}
	plain := NewClient(ClientOptions{Signer: NewSigner([]byte(testKey)), Node: "n3"})
	defer plain.Close()
	if _, err := plain.Range(context.Background(), addr, k, 0, 10); err == nil {
		t.Fatal("a client without TLS read a range from a TLS server")
	}
	// Bad files are named.
	if _, _, err := (TLSFiles{Cert: files.Cert, Key: files.CA}).Configs(); err == nil || !strings.Contains(err.Error(), "peer_key_file") {
		t.Fatalf("a CA as the key: %v", err)
	}
	if _, _, err := (TLSFiles{Cert: files.Cert, Key: files.Key, CA: files.Key}).Configs(); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Fatalf("a key as the CA: %v", err)
	}
}

package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/epochfs/epochfs/internal/sampler"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/test/rediscluster"
	"github.com/redis/go-redis/v9"
)

// testKey is the key file of every test node but the forgers.
var testKey = "k4lU6Q0x9y2mJv7pHc3sW8bN1eRt5aZfGdLqXo0Vh2I="

// writeSecret writes a root-only secret file into a fresh directory.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// node opens one client ("a node") on rc with test timings: the test key,
// no password (insecure).
func node(t *testing.T, rc *rediscluster.Cluster, dataset string, quota int64, edit ...func(*Options)) *Cluster {
	t.Helper()
	o := Options{
		Addrs: rc.Addrs(), DatasetID: dataset, Quota: quota, KeyFile: writeSecret(t, testKey), Insecure: true,
		Lease: 900 * time.Millisecond, Timeout: 300 * time.Millisecond, MaxWait: 5 * time.Second,
		ProbeInterval: 100 * time.Millisecond,
	}
	for _, f := range edit {
		f(&o)
	}
	c, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// source is a file on "the PFS" that counts its reads.
type source struct {
	data  []byte
	reads atomic.Int64 // whole reads started
	delay time.Duration
}

func newSource(t *testing.T, n int) *source {
	b := make([]byte, n)
	rand.Read(b)
	return &source{data: b}
}

func (s *source) copy(w io.Writer, progress func(int64)) (int64, error) {
	s.reads.Add(1)
	var off int64
	for off < int64(len(s.data)) {
		time.Sleep(s.delay)
		end := min(off+300<<10, int64(len(s.data)))
		if _, err := w.Write(s.data[off:end]); err != nil {
			return off, err
		}
		off = end
		progress(off)
	}
	return off, nil
}

func key(path string, s *source) FileKey {
	return FileKey{Path: path, Size: int64(len(s.data)), Mtime: 1700000000123456789}
}

func copyOf(t *testing.T, c *Cluster, k FileKey, s *source) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := c.Copy(context.Background(), k, &buf, nil, s.copy)
	if err != nil {
		t.Fatalf("Copy %s: %v", k.Path, err)
	}
	if n != k.Size || !bytes.Equal(buf.Bytes(), s.data) {
		t.Fatalf("Copy %s: %d bytes, equal=%v; want the %d source bytes", k.Path, n, bytes.Equal(buf.Bytes(), s.data), k.Size)
	}
	return buf.Bytes()
}

func stat(c *Cluster, name string) string {
	d := status.New()
	c.Status(d)
	return d.Value(name)
}

func TestFileFilledByOneNodeIsReadFromTheClusterByTheOthers(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	a := node(t, rc, "ds1", 1<<30)
	b := node(t, rc, "ds1", 1<<30)
	for _, size := range []int{0, 1, ChunkSize, 2*ChunkSize + 12345} {
		s := newSource(t, size)
		k := key(fmt.Sprintf("dir/f%d", size), s)
		copyOf(t, a, k, s)
		copyOf(t, b, k, s)
		copyOf(t, a, k, s)
		if got := s.reads.Load(); got != 1 {
			t.Errorf("size %d: the source was read %d times by two nodes, want once", size, got)
		}
	}
	if stat(a, "fills") != "4" || stat(b, "hits") != "4" {
		t.Errorf("status: a fills=%s, b hits=%s; want 4 and 4", stat(a, "fills"), stat(b, "hits"))
	}
	// Another dataset id never sees these keys.
	other := node(t, rc, "ds2", 1<<30)
	s := newSource(t, 100)
	k := key("dir/f1", s)
	copyOf(t, other, k, s)
	if s.reads.Load() != 1 {
		t.Error("a file of dataset ds1 was served to dataset ds2")
	}
}

// TestRangesOfAStoredFileAreReadFromTheCluster: another node reads parts
// of a stored file (as a read of a file no tier of its can hold does), at
// any offset and length, concurrently, and gets the source's bytes; a
// corrupt chunk is an error, never served.
func TestRangesOfAStoredFileAreReadFromTheCluster(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	// 16 chunk reads of 1 MiB at once: the test's short timeout is for
	// tests of a dead Redis, not for a loaded machine's (-race).
	slowOK := func(o *Options) { o.Timeout = 5 * time.Second }
	a := node(t, rc, "ds", 1<<30, slowOK)
	b := node(t, rc, "ds", 1<<30, slowOK)
	s := newSource(t, 3*ChunkSize+777)
	k := key("big/file", s)
	copyOf(t, a, k, s)
	cp, err := b.Lookup(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(s.data))
	ranges := [][2]int64{{0, 10}, {ChunkSize - 5, 10}, {0, size}, {size - 3, 100}, {size, 10},
		{2*ChunkSize + 1, ChunkSize}, {5, 3 * ChunkSize}, {ChunkSize, ChunkSize}}
	var wg sync.WaitGroup
	for _, r := range ranges {
		for range 2 { // twice each, concurrently: the cached chunk and fresh ones
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, r[1])
				n, err := cp.ReadAt(context.Background(), buf, r[0])
				want := s.data[min(r[0], size):min(r[0]+r[1], size)]
				if err != nil || !bytes.Equal(buf[:n], want) {
					t.Errorf("ReadAt(%d bytes at %d) = %d, %v; want the source's %d bytes", r[1], r[0], n, err, len(want))
				}
			}()
		}
	}
	wg.Wait()
	if s.reads.Load() != 1 {
		t.Errorf("the source was read %d times, want once (a's fill)", s.reads.Load())
	}
	// A bad chunk: an error, and the copy is dropped.
	if err := rc.SetRaw(layout.New("ds").File(k).Chunk(3), bytes.Repeat([]byte{'x'}, 777)); err != nil {
		t.Fatal(err)
	}
	cp, err = b.Lookup(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if n, err := cp.ReadAt(context.Background(), buf, 3*ChunkSize+1); !errors.Is(err, ErrCorrupt) || n != 0 {
		t.Errorf("a read of a corrupt chunk: %d bytes, %v; want 0 and ErrCorrupt", n, err)
	}
	if _, err := b.Lookup(context.Background(), k); !errors.Is(err, ErrMiss) {
		t.Errorf("after a corrupt chunk, Lookup: %v, want ErrMiss (dropped)", err)
	}
}

func TestConcurrentNodesReadEachFileFromTheSourceOnce(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	var nodes []*Cluster
	for range 3 {
		nodes = append(nodes, node(t, rc, "ds", 1<<30))
	}
	var files []*source
	for range 6 {
		s := newSource(t, 3*ChunkSize/2)
		s.delay = 20 * time.Millisecond
		files = append(files, s)
	}
	var wg sync.WaitGroup
	for ni, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range files {
				i := (j + 2*ni) % len(files)
				s := files[i]
				var buf bytes.Buffer
				if _, err := c.Copy(context.Background(), key(fmt.Sprintf("f%d", i), s), &buf, nil, s.copy); err != nil {
					t.Errorf("node %d file %d: %v", ni, i, err)
				} else if !bytes.Equal(buf.Bytes(), s.data) {
					t.Errorf("node %d file %d: wrong bytes", ni, i)
				}
			}
		}()
	}
	wg.Wait()
	for i, s := range files {
		if n := s.reads.Load(); n != 1 {
			t.Errorf("file %d read from the source %d times by 3 nodes, want once", i, n)
		}
	}
}

func TestCorruptedValueIsDroppedAndNeverServed(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	a := node(t, rc, "ds", 1<<30)
	b := node(t, rc, "ds", 1<<30)
	s := newSource(t, 2*ChunkSize+100)
	k := key("img/1.jpg", s)
	copyOf(t, a, k, s)
	// Overwrite chunk 1 with bytes of the same length.
	bad := bytes.Repeat([]byte{'x'}, ChunkSize)
	if err := rc.SetRaw(layout.New("ds").File(k).Chunk(1), bad); err != nil {
		t.Fatal(err)
	}
	copyOf(t, b, k, s) // the right bytes: the source's
	if s.reads.Load() != 2 {
		t.Errorf("source reads %d, want 2 (the fill, then the fallback past the bad chunk)", s.reads.Load())
	}
	if stat(b, "corrupt") != "1" {
		t.Errorf("cluster.corrupt = %s, want 1", stat(b, "corrupt"))
	}
	if out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); out != "0\n" {
		t.Errorf("the manifest of the bad copy is still there: EXISTS = %q", out)
	}
	// Filled again by the next reader, then served from the cluster.
	copyOf(t, a, k, s)
	copyOf(t, b, k, s)
	if s.reads.Load() != 3 {
		t.Errorf("source reads %d, want 3", s.reads.Load())
	}
	// A corrupted manifest is dropped as well.
	if err := rc.SetRaw(layout.New("ds").File(k).Manifest, []byte("EPM1 garbage")); err != nil {
		t.Fatal(err)
	}
	copyOf(t, b, k, s)
	if s.reads.Load() != 4 {
		t.Errorf("source reads %d, want 4 after a bad manifest", s.reads.Load())
	}
	// And a bad chunk 0, which arrives with the manifest.
	copyOf(t, a, k, s) // filled again
	if err := rc.SetRaw(layout.New("ds").File(k).Chunk(0), bad); err != nil {
		t.Fatal(err)
	}
	copyOf(t, b, k, s)
	if s.reads.Load() != 5 || stat(b, "corrupt") != "3" {
		t.Errorf("source reads %d, corrupt %s; want 5 and 3 after a bad chunk 0", s.reads.Load(), stat(b, "corrupt"))
	}
}

// A writer of the cluster without the key (another tenant, a leaked
// password) can store a well-formed copy of a file, move a real one, swap
// chunks or publish a catalog: nodes with the key serve none of it.
func TestValuesWrittenWithoutTheKeyAreNeverServed(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	good := node(t, rc, "ds", 1<<30)
	forger := node(t, rc, "ds", 1<<30, func(o *Options) { o.KeyFile = writeSecret(t, strings.Repeat("z", 44)) })
	keyless := node(t, rc, "ds", 1<<30, func(o *Options) { o.KeyFile = "" })

	// A forged copy: the right path, size and mtime, the forger's bytes.
	s := newSource(t, ChunkSize+10)
	k := key("train/cat/1.jpg", s)
	for _, w := range []*Cluster{forger, keyless} {
		evil := &source{data: bytes.Repeat([]byte{'E'}, len(s.data))}
		var sink bytes.Buffer
		if _, err := w.Copy(context.Background(), k, &sink, nil, evil.copy); err != nil {
			t.Fatal(err)
		}
		if out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); out != "1\n" {
			t.Fatal("the forger's copy was not stored; the test checks nothing")
		}
		before := s.reads.Load()
		copyOf(t, good, k, s) // compares with the source's bytes
		if s.reads.Load() != before+1 {
			t.Errorf("the node with the key did not read the source past a forged copy")
		}
		rc.CLI("DEL", layout.New("ds").File(k).Manifest, layout.New("ds").File(k).Chunk(0), layout.New("ds").File(k).Chunk(1))
		rc.CLI("DEL", "epochfs:ds:{q}:bytes", "epochfs:ds:{q}:sizes")
	}
	if stat(good, "corrupt") != "2" {
		t.Errorf("cluster.corrupt = %s after two forged copies, want 2", stat(good, "corrupt"))
	}

	// A real copy moved to another file's keys (same size, other path).
	copyOf(t, good, k, s)
	k2 := FileKey{Path: "train/dog/2.jpg", Size: k.Size, Mtime: k.Mtime}
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs()})
	defer raw.Close()
	ctx := context.Background()
	move := func(from, to string) {
		t.Helper()
		v, err := raw.Get(ctx, from).Bytes()
		if err == nil {
			err = raw.Set(ctx, to, v, 0).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	move(layout.New("ds").File(k).Manifest, layout.New("ds").File(k2).Manifest)
	move(layout.New("ds").File(k).Chunk(0), layout.New("ds").File(k2).Chunk(0))
	move(layout.New("ds").File(k).Chunk(1), layout.New("ds").File(k2).Chunk(1))
	s2 := newSource(t, len(s.data))
	copyOf(t, good, k2, s2)
	if s2.reads.Load() != 1 {
		t.Errorf("a copy moved from %s was taken for %s", k.Path, k2.Path)
	}

	// Chunks of one copy swapped: each is a chunk of the file, at the
	// wrong index.
	big := newSource(t, 2*ChunkSize)
	kb := key("big.bin", big)
	copyOf(t, good, kb, big)
	c0, _ := raw.Get(ctx, layout.New("ds").File(kb).Chunk(0)).Bytes()
	move(layout.New("ds").File(kb).Chunk(1), layout.New("ds").File(kb).Chunk(0))
	if err := raw.Set(ctx, layout.New("ds").File(kb).Chunk(1), c0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	copyOf(t, good, kb, big)
	if big.reads.Load() != 2 {
		t.Errorf("swapped chunks were served: source reads %d, want 2", big.reads.Load())
	}

	// A catalog published by the forger is walked over.
	walks := 0
	walk := func(context.Context) ([]byte, error) { walks++; return []byte("the real tree"), nil }
	evilWalk := func(context.Context) ([]byte, error) {
		return []byte("a tree with modes of the forger's choosing"), nil
	}
	if _, walked, err := forger.LoadOrWalk(context.Background(), "/pfs/data", false, evilWalk); err != nil || !walked {
		t.Fatalf("the forger's publication: walked %v, %v", walked, err)
	}
	doc, walked, err := good.LoadOrWalk(context.Background(), "/pfs/data", false, walk)
	if err != nil || !walked || walks != 1 || string(doc) != "the real tree" {
		t.Errorf("after a forged catalog: %q walked=%v walks=%d err=%v; want the real tree, walked", doc, walked, walks, err)
	}
	// What the node with the key published is loaded by another such node.
	other := node(t, rc, "ds", 1<<30)
	if doc, walked, err := other.LoadOrWalk(context.Background(), "/pfs/data", false, walk); err != nil || walked || string(doc) != "the real tree" {
		t.Errorf("a node with the key: %q walked=%v err=%v; want the published tree, loaded", doc, walked, err)
	}
}

// roundTrips counts a client's trips to the cluster for file keys (the
// prober's own commands aside): one per command, one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func fileCmd(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), ":{f")
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if fileCmd(cmd) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && fileCmd(cmds[0]) {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestAHitOnAOneChunkFileIsOneRoundTrip(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	a := node(t, rc, "ds", 1<<30)
	b := node(t, rc, "ds", 1<<30)
	var rt roundTrips
	b.rdb.AddHook(&rt)
	for _, size := range []int{100 << 10, ChunkSize, 3 * ChunkSize} {
		s := newSource(t, size)
		k := key(fmt.Sprintf("img/%d.jpg", size), s)
		copyOf(t, a, k, s)
		before := rt.n.Load()
		copyOf(t, b, k, s)
		chunks := int64((size + ChunkSize - 1) / ChunkSize)
		if got := rt.n.Load() - before; got != chunks {
			t.Errorf("a hit on a file of %d chunk(s) took %d round trips, want %d", chunks, got, chunks)
		}
		if s.reads.Load() != 1 {
			t.Errorf("size %d: source read %d times, want once", size, s.reads.Load())
		}
	}
}

func TestQuotaIsNeverExceeded(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	const quota = 5 * ChunkSize / 2
	var nodes []*Cluster
	for range 3 {
		nodes = append(nodes, node(t, rc, "ds", quota))
	}
	var files []*source
	for range 8 {
		files = append(files, newSource(t, ChunkSize))
	}
	var wg sync.WaitGroup
	for _, c := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, s := range files {
				var buf bytes.Buffer
				if _, err := c.Copy(context.Background(), key(fmt.Sprintf("f%d", i), s), &buf, nil, s.copy); err != nil || !bytes.Equal(buf.Bytes(), s.data) {
					t.Errorf("file %d: err %v, equal %v", i, err, bytes.Equal(buf.Bytes(), s.data))
				}
			}
		}()
	}
	wg.Wait()
	out, err := rc.CLI("GET", layout.New("ds").QuotaBytes())
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	fmt.Sscan(out, &used)
	if used > quota || used != 2*ChunkSize {
		t.Errorf("quota counter %d, want 2 files (%d) within the quota %d", used, 2*ChunkSize, quota)
	}
	var stored int
	for i, s := range files {
		if o, _ := rc.CLI("EXISTS", layout.New("ds").File(key(fmt.Sprintf("f%d", i), s)).Manifest); o == "1\n" {
			stored++
		}
	}
	if stored != 2 {
		t.Errorf("%d files stored, want 2", stored)
	}
}

func TestNodeKilledMidFillLeavesNothingVisibleAndAnotherFills(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	dead := node(t, rc, "ds", 1<<30)
	s := newSource(t, 3*ChunkSize)
	k := key("big", s)
	f, err := dead.Fill(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(context.Background(), s.data[:2*ChunkSize]); err != nil {
		t.Fatal(err)
	}
	// The node dies: its renewals stop, nothing is cleaned up.
	dead.stop()
	dead.wg.Wait()
	if o, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); o != "0\n" {
		t.Fatal("a half-filled file is visible")
	}
	b := node(t, rc, "ds", 1<<30)
	start := time.Now()
	copyOf(t, b, k, s)
	if s.reads.Load() != 1 {
		t.Errorf("source reads %d, want 1 (the survivor's fill)", s.reads.Load())
	}
	if stat(b, "fills") != "1" || stat(b, "lease_waits") == "0" {
		t.Errorf("fills=%s lease_waits=%s: want the survivor to wait for the lease, then fill", stat(b, "fills"), stat(b, "lease_waits"))
	}
	t.Logf("survivor took %v (lease 900ms)", time.Since(start))
	c := node(t, rc, "ds", 1<<30)
	copyOf(t, c, k, s)
	if s.reads.Load() != 1 {
		t.Error("the survivor's fill was not served to a third node")
	}
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{Password: "s3cret-pw"})
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(good, []byte("s3cret-pw\n"), 0o600)
	os.WriteFile(bad, []byte("wrong-pw\n"), 0o600)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("s3cret-pw\n"), 0o640)
	keyFile := writeSecret(t, testKey)
	openKey := filepath.Join(dir, "openkey")
	os.WriteFile(openKey, []byte(testKey), 0o604)
	nobodysKey := filepath.Join(dir, "nobodys")
	os.WriteFile(nobodysKey, []byte(testKey), 0o600)
	os.Chown(nobodysKey, 65534, 65534)
	shortKey := writeSecret(t, "short")
	linkKey := filepath.Join(dir, "link")
	os.Symlink(keyFile, linkKey)
	plain := rediscluster.StartPlain(t)
	cases := []struct {
		name  string
		o     Options
		match error
	}{
		{"unreachable", Options{Addrs: []string{rediscluster.ClosedPort(t)}, Insecure: true}, ErrUnreachable},
		{"wrong password", Options{Addrs: rc.Addrs()[:1], PasswordFile: bad, KeyFile: keyFile}, ErrAuth},
		{"no password", Options{Addrs: rc.Addrs()[:1], Insecure: true}, ErrAuth},
		{"not a cluster", Options{Addrs: []string{plain}, Insecure: true}, ErrNotCluster},
		{"bad dataset", Options{Addrs: rc.Addrs(), PasswordFile: good, KeyFile: keyFile, DatasetID: "a{b}"}, ErrConfig},
		{"missing password file", Options{Addrs: rc.Addrs(), PasswordFile: filepath.Join(dir, "none"), KeyFile: keyFile}, ErrConfig},
		{"no key file", Options{Addrs: rc.Addrs(), PasswordFile: good}, ErrConfig},
		{"no password file", Options{Addrs: rc.Addrs(), KeyFile: keyFile}, ErrConfig},
		{"group-readable password file", Options{Addrs: rc.Addrs(), PasswordFile: open, KeyFile: keyFile}, ErrConfig},
		{"other-readable key file", Options{Addrs: rc.Addrs(), PasswordFile: good, KeyFile: openKey}, ErrConfig},
		{"key file of another user", Options{Addrs: rc.Addrs(), PasswordFile: good, KeyFile: nobodysKey}, ErrConfig},
		{"short key", Options{Addrs: rc.Addrs(), PasswordFile: good, KeyFile: shortKey}, ErrConfig},
		{"key file a symlink", Options{Addrs: rc.Addrs(), PasswordFile: good, KeyFile: linkKey}, ErrConfig},
	}
	for _, tc := range cases {
		o := tc.o
		if o.DatasetID == "" {
			o.DatasetID = "ds"
		}
		o.Timeout = 300 * time.Millisecond
		c, err := Open(context.Background(), o)
		if err == nil {
			c.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if !errors.Is(err, tc.match) || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v; want %v and ErrConfig", tc.name, err, tc.match)
		}
		if bytes.Contains([]byte(err.Error()), []byte("s3cret")) || bytes.Contains([]byte(err.Error()), []byte("\n")) {
			t.Errorf("%s: error reveals the password or is not one line: %q", tc.name, err)
		}
	}
	c := node(t, rc, "ds", 1<<20, func(o *Options) { o.PasswordFile, o.Insecure = good, false })
	s := newSource(t, 1000)
	copyOf(t, c, key("x", s), s)
	if stat(c, "reachable") != "yes" || stat(c, "fills") != "1" {
		t.Errorf("with the right password: reachable=%s fills=%s", stat(c, "reachable"), stat(c, "fills"))
	}
}

func TestMasterDownFallsBackToTheSourceAndRecovers(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	a := node(t, rc, "ds", 1<<30)
	var files []*source
	for i := range 12 {
		s := newSource(t, 50000+i)
		files = append(files, s)
		copyOf(t, a, key(fmt.Sprintf("f%d", i), s), s)
	}
	rc.Kill(1)
	for round := range 2 {
		for i, s := range files {
			start := time.Now()
			copyOf(t, a, key(fmt.Sprintf("f%d", i), s), s)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("round %d file %d took %v with a master down: not bounded by the timeouts", round, i, d)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for stat(a, "reachable") != "no" {
		if time.Now().After(deadline) {
			t.Fatal("status never said the cluster is unreachable with a master down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rc.Restart(1)
	deadline = time.Now().Add(20 * time.Second)
	for stat(a, "reachable") != "yes" {
		if time.Now().After(deadline) {
			t.Fatal("the node did not resume using the cluster once it was whole")
		}
		time.Sleep(50 * time.Millisecond)
	}
	hits := stat(a, "hits")
	s := newSource(t, 1234)
	copyOf(t, a, key("after", s), s)
	copyOf(t, a, key("after", s), s)
	if s.reads.Load() != 1 || stat(a, "hits") == hits {
		t.Errorf("after recovery: source reads %d (want 1), hits %s → %s", s.reads.Load(), hits, stat(a, "hits"))
	}
}

func TestCatalogIsWalkedByOneNodeAndLoadedByTheOthers(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	doc := make([]byte, 2*ChunkSize+77)
	rand.Read(doc)
	var walks atomic.Int64
	walk := func(context.Context) ([]byte, error) {
		walks.Add(1)
		time.Sleep(1500 * time.Millisecond) // longer than the lease: it is renewed
		return doc, nil
	}
	var wg sync.WaitGroup
	var walkedBy atomic.Int64
	for range 3 {
		c := node(t, rc, "ds", 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, walked, err := c.LoadOrWalk(context.Background(), "/pfs/data", false, walk)
			if err != nil || !bytes.Equal(got, doc) {
				t.Errorf("LoadOrWalk: err %v, same document %v", err, bytes.Equal(got, doc))
			}
			if walked {
				walkedBy.Add(1)
			}
		}()
	}
	wg.Wait()
	if walks.Load() != 1 || walkedBy.Load() != 1 {
		t.Errorf("3 nodes walked %d times (%d said they walked), want once", walks.Load(), walkedBy.Load())
	}
	// Another source is another catalog; a rescan walks and republishes.
	c := node(t, rc, "ds", 0)
	if _, walked, _ := c.LoadOrWalk(context.Background(), "/pfs/other", false, walk); !walked {
		t.Error("the catalog of another source was loaded")
	}
	doc2 := []byte("rescanned")
	if got, walked, err := c.LoadOrWalk(context.Background(), "/pfs/data", true, func(context.Context) ([]byte, error) { return doc2, nil }); err != nil || !walked || string(got) != "rescanned" {
		t.Errorf("rescan: %q walked=%v err=%v", got, walked, err)
	}
	if got, walked, _ := node(t, rc, "ds", 0).LoadOrWalk(context.Background(), "/pfs/data", false, walk); walked || string(got) != "rescanned" {
		t.Errorf("after the rescan another node got %q (walked=%v), want the republished catalog", got, walked)
	}
}

func TestClusterJobClaimsGiveEverySampleToExactlyOneRankPerEpoch(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	const n, ranks = 1000, 2
	var nodes []*Cluster
	var runs []string
	for range ranks {
		c := node(t, rc, "ds", 0)
		run, err := c.JoinJob(context.Background(), "train", "world_size=2\nseed=1")
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, c)
		runs = append(runs, run)
	}
	if runs[0] != runs[1] {
		t.Fatalf("two nodes of one job got runs %q and %q", runs[0], runs[1])
	}
	if _, err := node(t, rc, "ds", 0).JoinJob(context.Background(), "train", "world_size=4"); !errors.Is(err, ErrShape) {
		t.Errorf("a node with another config joined: %v", err)
	}
	for ep := range 3 {
		got := make([][]int32, ranks)
		var wg sync.WaitGroup
		for r, c := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each rank proposes every sample, in its own order.
				cands := make([]int32, n)
				for i := range cands {
					cands[i] = int32((i*7 + r*501) % n)
				}
				for len(cands) > 0 {
					res, err := c.Claim(context.Background(), "train", runs[0],
						ClaimRequest{Epoch: ep, Rank: r, Share: n / ranks, Want: 32, World: ranks, Cands: cands})
					if err != nil {
						t.Error(err)
						return
					}
					claimed, examined := res.Claimed, res.Examined
					got[r] = append(got[r], claimed...)
					cands = cands[examined:]
					if len(claimed) == 0 && examined == 0 {
						return // quota reached
					}
				}
			}()
		}
		wg.Wait()
		seen := make([]int, n)
		for r := range ranks {
			if len(got[r]) != n/ranks {
				t.Errorf("epoch %d rank %d: %d samples, want %d", ep, r, len(got[r]), n/ranks)
			}
			for _, s := range got[r] {
				seen[s]++
			}
		}
		for s, k := range seen {
			if k != 1 {
				t.Fatalf("epoch %d: sample %d went to %d ranks, want exactly one", ep, s, k)
			}
		}
	}
	// Epoch 5 is not claimed from until every rank ended epoch 3.
	ctx := context.Background()
	ahead := func() error {
		_, err := nodes[0].Claim(ctx, "train", runs[0],
			ClaimRequest{Epoch: 5, Share: 10, Want: 1, World: ranks, CheckAhead: true, Cands: []int32{1}})
		return err
	}
	if err := ahead(); !errors.Is(err, ErrAhead) {
		t.Errorf("epoch 5 claimed with no rank past epoch 0: %v", err)
	}
	for r, c := range nodes {
		if err := c.EndEpoch(ctx, "train", runs[0], 3, r); err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			if err := ahead(); !errors.Is(err, ErrAhead) {
				t.Errorf("epoch 5 claimed with rank 1 in epoch 3: %v", err)
			}
			// An older epoch's end never moves a rank back.
			if err := c.EndEpoch(ctx, "train", runs[0], 2, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res, err := nodes[0].Claim(ctx, "train", runs[0],
		ClaimRequest{Epoch: 5, Share: 10, Want: 1, World: ranks, CheckAhead: true, Cands: []int32{1}}); err != nil || len(res.Claimed) != 1 {
		t.Errorf("epoch 5 after every rank ended epoch 3: claimed %v, %v", res.Claimed, err)
	}
	// Epoch 6: rank 1 claims 10 samples and is lost after 4 were handed:
	// the other 6 go back, and what it had not read of its share is
	// shared out over the other ranks: every sample is claimed once.
	claimAll := func(r int, want int) []int32 {
		var out []int32
		cands := make([]int32, n)
		for i := range cands {
			cands[i] = int32((i*11 + r*37) % n)
		}
		for len(cands) > 0 {
			res, err := nodes[r].Claim(ctx, "train", runs[0],
				ClaimRequest{Epoch: 6, Rank: r, Share: n / ranks, Want: min(want, 32), World: ranks, Cands: cands})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Claimed...)
			cands = cands[res.Examined:]
			if want -= len(res.Claimed); want <= 0 || res.Examined == 0 {
				break
			}
		}
		return out
	}
	lostPlan := claimAll(1, 10)
	if err := nodes[1].LoseRank(ctx, "train", runs[0], 6, 1, lostPlan[4:]); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].LoseRank(ctx, "train", runs[0], 6, 1, lostPlan); err != nil { // a second report changes nothing
		t.Fatal(err)
	}
	seen := map[int32]int{}
	for _, s := range lostPlan[:4] {
		seen[s]++
	}
	left, live := n/ranks-4, ranks-1
	for r := range ranks {
		if r == 1 {
			continue
		}
		got := claimAll(r, n)
		want := n/ranks + left/live
		if r-min(r, 1) < left%live {
			want++ // the remainder goes to the lowest live ranks
		}
		if len(got) != want {
			t.Errorf("epoch 6: rank %d claimed %d after rank 1 was lost, want %d", r, len(got), want)
		}
		for _, s := range got {
			seen[s]++
		}
	}
	res, err := nodes[1].Claim(ctx, "train", runs[0], ClaimRequest{Epoch: 6, Rank: 1, Share: n / ranks, Want: 1, World: ranks, Cands: []int32{0}})
	if err != nil || res.Quota != 4 || res.Losses != 1 || len(res.Claimed) != 0 {
		t.Errorf("the lost rank's claim: %+v %v, want quota 4, 1 loss, nothing claimed", res, err)
	}
	if len(seen) != n {
		t.Errorf("epoch 6: %d of %d samples claimed", len(seen), n)
	}
	for s, k := range seen {
		if k != 1 {
			t.Fatalf("epoch 6: sample %d claimed %d times", s, k)
		}
	}
	for _, c := range nodes {
		if err := c.LeaveJob(context.Background(), "train"); err != nil {
			t.Error(err)
		}
	}
}

// TestClusterClaimQuotaIsTheSamplersRule: the claim script's quota, over
// random lost and done ranks, is sampler.ClusterQuota's, and a probe at a
// rank's quota records it as done (a lost rank's report then changes
// nothing).
func TestClusterClaimQuotaIsTheSamplersRule(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	c := node(t, rc, "ds", 0)
	ctx := context.Background()
	run, err := c.JoinJob(ctx, "q", "world_size=6")
	if err != nil {
		t.Fatal(err)
	}
	jk := c.keys.Job("q")
	rng := mrand.New(mrand.NewPCG(1, 2))
	for ep := 1; ep <= 200; ep++ {
		world, share := 1+rng.IntN(6), 1+rng.IntN(40)
		lost, done := map[int]int{}, map[int]int{}
		for r := range world {
			switch rng.IntN(4) {
			case 0:
				lost[r] = rng.IntN(share + 1)
				c.rdb.HSet(ctx, jk.Lost(run, ep), r, lost[r])
			case 1:
				done[r] = share + rng.IntN(5)
				c.rdb.HSet(ctx, jk.Done(run, ep), r, done[r])
			}
		}
		for r := range world {
			res, err := c.Claim(ctx, "q", run, ClaimRequest{Epoch: ep, Rank: r, Share: share, World: world})
			if err != nil {
				t.Fatal(err)
			}
			if want := sampler.ClusterQuota(share, world, r, lost, done); res.Quota != want || res.Losses != len(lost) {
				t.Fatalf("epoch %d (world %d, share %d, lost %v, done %v): rank %d quota %d, %d losses; want %d, %d",
					ep, world, share, lost, done, r, res.Quota, res.Losses, want, len(lost))
			}
		}
	}
	// A probe at the quota: done; a report of its loss after: ignored.
	res, err := c.Claim(ctx, "q", run, ClaimRequest{Epoch: 300, Rank: 0, Share: 3, Padded: 3, World: 2, Probe: true})
	if err != nil || res.Quota != 3 {
		t.Fatalf("probe: %+v %v", res, err)
	}
	if err := c.LoseRank(ctx, "q", run, 300, 0, nil); err != nil {
		t.Fatal(err)
	}
	res, err = c.Claim(ctx, "q", run, ClaimRequest{Epoch: 300, Rank: 1, Share: 3, World: 2})
	if err != nil || res.Quota != 3 || res.Losses != 0 {
		t.Fatalf("the other rank after a done rank's loss report: %+v %v, want quota 3 and no loss", res, err)
	}
}

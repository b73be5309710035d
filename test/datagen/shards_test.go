package datagen

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestShardsHoldExactlyTheSamplesInOrder(t *testing.T) {
	o := testOptions(t, 40)
	o.Shards = true
	o.ShardBytes = 12 * int64(o.MeanBytes) // about a dozen samples per shard
	m := mustGenerate(t, o)
	if len(m.Shards) < 2 {
		t.Fatalf("%d shards, want several with ShardBytes %d", len(m.Shards), o.ShardBytes)
	}
	next := 0 // index of the next sample expected
	for n, shard := range m.Shards {
		if want := filepath.Join(o.Dir+"-shards", ShardName(n)); shard != want {
			t.Errorf("shard %d is %s, want %s", n, shard, want)
		}
		fi, err := os.Stat(shard)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(shard)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(f)
		members := 0
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", shard, err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if next >= len(m.Samples) {
				t.Fatalf("%s: extra member %s", shard, hdr.Name)
			}
			s := m.Samples[next]
			key := ShardKey(s)
			if members%2 == 0 {
				want, err := os.ReadFile(filepath.Join(o.Dir, s.Path))
				if err != nil {
					t.Fatal(err)
				}
				if hdr.Name != key+".jpg" || !bytes.Equal(data, want) {
					t.Errorf("%s member %d: %s (%d bytes), want %s.jpg with the bytes of %s", shard, members, hdr.Name, len(data), key, s.Path)
				}
			} else {
				if hdr.Name != key+".cls" || string(data) != strconv.Itoa(s.Class) {
					t.Errorf("%s member %d: %s = %q, want %s.cls = %d", shard, members, hdr.Name, data, key, s.Class)
				}
				next++
			}
			members++
		}
		f.Close()
		if fi.Size() > o.ShardBytes && members > 2 {
			t.Errorf("%s is %d bytes with %d samples, over ShardBytes %d", shard, fi.Size(), members/2, o.ShardBytes)
		}
	}
	if next != len(m.Samples) {
		t.Errorf("shards hold %d samples, want %d", next, len(m.Samples))
	}
	ents, _ := os.ReadDir(o.Dir + "-shards")
	if len(ents) != len(m.Shards) {
		t.Errorf("%d entries in the shard directory, want %d shards only", len(ents), len(m.Shards))
	}
}

// Command shardread is the raw reader of the epoch benchmarks for the shard
// layout: WebDataset-style tar shards read with no decoding, the way a
// streaming loader reads them.
//
// Each epoch visits every *.tar shard under DIR once in a fresh random order;
// -workers goroutines each take the next shard, open it, walk its tar entries
// in order and read every member whole (1 MiB buffer), then close it. Between
// epochs the -snapshot command is run and its key=value output kept, so the
// caller can charge source traffic and daemon CPU to each epoch.
//
// Output: one JSON object on stdout in the same form as train.py's:
// {"scan_s", "samples", "epochs": [{"epoch", "seconds", "samples", "bytes"}],
// "snapshots": [{...}]}; snapshots[0] is taken before epoch 1.
package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type epoch struct {
	Epoch   int     `json:"epoch"`
	Seconds float64 `json:"seconds"`
	Samples int64   `json:"samples"`
	Bytes   int64   `json:"bytes"`
}

type result struct {
	ScanS     float64             `json:"scan_s"`
	Samples   int64               `json:"samples"`
	Epochs    []epoch             `json:"epochs"`
	Snapshots []map[string]string `json:"snapshots"`
}

func main() {
	epochs := flag.Int("epochs", 3, "number of epochs")
	workers := flag.Int("workers", 2, "concurrent shard readers")
	seed := flag.Int64("seed", 0, "seed of the shard order")
	snap := flag.String("snapshot", "", "shell command printing key=value counters, run before epoch 1 and after each epoch")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: shardread [flags] DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *epochs < 1 || *workers < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *epochs, *workers, *seed, *snap); err != nil {
		fmt.Fprintln(os.Stderr, "shardread:", err)
		os.Exit(1)
	}
}

func run(dir string, epochs, workers int, seed int64, snap string) error {
	t0 := time.Now()
	shards, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	if len(shards) == 0 {
		return fmt.Errorf("no *.tar shards in %s", dir)
	}
	sort.Strings(shards)
	res := result{ScanS: time.Since(t0).Seconds()}
	s, err := snapshot(snap)
	if err != nil {
		return err
	}
	res.Snapshots = append(res.Snapshots, s)
	rng := rand.New(rand.NewSource(seed))
	for e := 1; e <= epochs; e++ {
		order := append([]string(nil), shards...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		ep, err := readEpoch(order, workers)
		if err != nil {
			return err
		}
		ep.Epoch = e
		res.Epochs = append(res.Epochs, ep)
		res.Samples = ep.Samples
		fmt.Fprintf(os.Stderr, "shardread: epoch %d: %.2f s, %.0f MB/s\n", e, ep.Seconds, float64(ep.Bytes)/ep.Seconds/1e6)
		if s, err = snapshot(snap); err != nil {
			return err
		}
		res.Snapshots = append(res.Snapshots, s)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// readEpoch reads every shard of order once with workers readers.
func readEpoch(order []string, workers int) (epoch, error) {
	var (
		next           atomic.Int64
		samples, bytes atomic.Int64
		wg             sync.WaitGroup
		mu             sync.Mutex
		firstErr       error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				i := int(next.Add(1)) - 1
				if i >= len(order) {
					return
				}
				n, b, err := readShard(order[i], buf)
				samples.Add(n)
				bytes.Add(b)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return epoch{Seconds: time.Since(start).Seconds(), Samples: samples.Load(), Bytes: bytes.Load()}, firstErr
}

// readShard reads every regular member of one tar shard whole; a sample is
// counted per .jpg member.
func readShard(path string, buf []byte) (samples, n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return samples, n, nil
		}
		if err != nil {
			return samples, n, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		m, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{tr}, buf)
		n += m
		if err != nil {
			return samples, n, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
		if strings.HasSuffix(h.Name, ".jpg") {
			samples++
		}
	}
}

func snapshot(cmd string) (map[string]string, error) {
	kv := map[string]string{}
	if cmd == "" {
		return kv, nil
	}
	out, err := exec.Command("/bin/sh", "-c", cmd).Output()
	if err != nil {
		return nil, fmt.Errorf("snapshot %q: %w", cmd, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv, nil
}

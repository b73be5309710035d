// Command catalog measures the catalog at ImageNet scale: the first walk of
// a source tree, the remount load (no walk), and the memory each file costs
// once loaded.
//
//	go run ./test/bench/catalog -dir /var/tmp/epochfs-catalog -files 1281167
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

func main() {
	dir := flag.String("dir", "/var/tmp/epochfs-catalog", "work directory (the tree is kept for reruns)")
	files := flag.Int("files", 1281167, "files in the tree (ImageNet-1k train: 1281167)")
	classes := flag.Int("classes", 1000, "directories")
	flag.Parse()
	src := filepath.Join(*dir, "src")
	if err := makeTree(src, *files, *classes); err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
	state := filepath.Join(*dir, "state")
	os.RemoveAll(state)

	t0 := time.Now()
	cat, err := catalog.Open(context.Background(), catalog.Options{StateDir: state, Source: src, Tiers: []string{"mem"}, Workers: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
	walk := time.Since(t0)
	n := cat.Files()
	cat.Close()
	cat = nil

	runtime.GC()
	debug.FreeOSMemory()
	rssBefore := rss()
	var heapBefore runtime.MemStats
	runtime.ReadMemStats(&heapBefore)
	t0 = time.Now()
	cat, err = catalog.Open(context.Background(), catalog.Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
	load := time.Since(t0)
	runtime.GC()
	debug.FreeOSMemory()
	var heapAfter runtime.MemStats
	runtime.ReadMemStats(&heapAfter)
	rssAfter := rss()
	fmt.Printf("files=%d walk_s=%.2f remount_load_s=%.2f heap_bytes_per_file=%.0f rss_bytes_per_file=%.0f walked_on_remount=%v\n",
		n, walk.Seconds(), load.Seconds(),
		float64(heapAfter.HeapInuse-heapBefore.HeapInuse)/float64(n),
		float64(rssAfter-rssBefore)/float64(n), cat.Walked())
	runtime.KeepAlive(cat)
	cat.Close()
}

// makeTree creates files zero-filled sparse files of ImageNet-like sizes
// in classes directories, once.
func makeTree(src string, files, classes int) error {
	marker := src + ".complete-" + strconv.Itoa(files)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	os.RemoveAll(src)
	start := time.Now()
	for i := 0; i < files; i++ {
		d := filepath.Join(src, fmt.Sprintf("n%08d", i%classes))
		if i < classes {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		p := filepath.Join(d, fmt.Sprintf("n%08d_%07d.JPEG", i%classes, i))
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		f.Truncate(int64(60000 + (i*7919)%100000))
		f.Close()
		if i%100000 == 0 {
			fmt.Fprintf(os.Stderr, "\rcreating %d/%d files (%s)", i, files, time.Since(start).Round(time.Second))
		}
	}
	fmt.Fprintln(os.Stderr)
	return os.WriteFile(marker, nil, 0o644)
}

// rss reads this process's resident set size in bytes.
func rss() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v * 1024
		}
	}
	return 0
}

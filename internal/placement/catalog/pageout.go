package catalog

// Handing the catalog's mapped pages back. badger maps its files (tables,
// value log, memtables) shared; reading the whole catalog (a walk's store,
// a load) leaves their pages mapped into the daemon, counted in its RSS
// (14 MB of the 233 MB after a remount of 1,000,000 files) although they
// are clean pages of files the page cache would keep or drop as it
// needs. PageOut asks the kernel to reclaim them (MADV_PAGEOUT); a later
// read of the catalog faults a page back in. MADV_PAGEOUT loses no data
// whatever it is given (a page is written back or kept), so a mapping
// badger replaced between the read of /proc/self/maps and the call, its
// range then reused, costs at most a page-in.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PageOut reclaims the pages of the catalog's mapped files and returns the
// bytes of mappings it asked about. A kernel without MADV_PAGEOUT (before
// 5.4) reclaims nothing and returns no error.
func (c *Catalog) PageOut() (int64, error) {
	dir := c.mapDir
	if dir == "" {
		return 0, nil
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("catalog: page out: %w", err)
	}
	defer f.Close()
	var ranges [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if r, ok := mappedUnder(sc.Bytes(), dir); ok {
			ranges = append(ranges, r)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("catalog: page out: %w", err)
	}
	var n int64
	for _, r := range ranges {
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_PAGEOUT)
		if errno == unix.EINVAL {
			return n, nil // no MADV_PAGEOUT
		}
		n += int64(r[1] - r[0])
	}
	return n, nil
}

// mappedUnder parses a line of /proc/self/maps ("start-end perms offset
// dev inode path") and returns its range when it maps, shared, a file
// under dir.
func mappedUnder(line []byte, dir string) ([2]uintptr, bool) {
	fields := bytes.Fields(line)
	if len(fields) < 6 || len(fields[1]) != 4 || fields[1][3] != 's' {
		return [2]uintptr{}, false
	}
	p := string(bytes.Join(fields[5:], []byte(" ")))
	if !strings.HasPrefix(p, dir+"/") {
		return [2]uintptr{}, false
	}
	lo, hi, ok := strings.Cut(string(fields[0]), "-")
	if !ok {
		return [2]uintptr{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return [2]uintptr{}, false
	}
	return [2]uintptr{uintptr(start), uintptr(end)}, true
}

// mappedDir is the catalog directory as /proc/self/maps names its files:
// absolute, symlinks resolved ("" when it cannot be resolved).
func mappedDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return ""
}

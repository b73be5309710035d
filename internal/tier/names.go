package tier

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"syscall"
)

const (
	// pathMax is Linux's PATH_MAX: the longest path a system call takes,
	// its terminating NUL included.
	pathMax = 4096
	// defaultNameMax is NAME_MAX, assumed when statfs does not say.
	defaultNameMax = 255
)

// Path is where the installed copy of the dataset file rel lives:
// DIR/data/rel, or DIR/hashed/XY/SHA when that name is too long for the
// tier's file system (the package comment gives the rule). Every operation
// on a copy goes through Path.
func (t *Tier) Path(rel string) string {
	p := filepath.Join(t.opts.Dir, dataDir, rel)
	if len(p) < pathMax && !hasLongName(rel, t.nameMax) {
		return p
	}
	return t.hashedPath(rel)
}

// hashedPath is the hashed name of rel. 256 subdirectories keep each
// directory small when many files are hashed.
func (t *Tier) hashedPath(rel string) string {
	sum := sha256.Sum256([]byte(rel))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(t.opts.Dir, hashedDir, h[:2], h)
}

// hasLongName reports whether a component of rel is longer than max bytes.
func hasLongName(rel string, max int) bool {
	for len(rel) > max {
		i := strings.IndexByte(rel, '/')
		if i < 0 || i > max {
			return true
		}
		rel = rel[i+1:]
	}
	return false
}

// nameLimit reads the longest file name dir's file system takes.
func nameLimit(dir string) int {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Namelen <= 0 {
		return defaultNameMax
	}
	return int(st.Namelen)
}

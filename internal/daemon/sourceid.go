package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/epochfs/epochfs/internal/source"
)

// The source root's identity at the last mount is kept in the state
// directory: a mount whose source does not answer (a hung or dead client,
// or a mount point left empty by a client that is gone) serves what the
// last mount left, the catalog and the resident copies, and finds the
// source when its root answers as that file system again.
const sourceIDFile = "source-id"

type sourceRecord struct {
	Source string `json:"source"`
	source.RootIdentity
}

// LastSourceID is the identity of the source root at path root that the
// last mount with state directory dir found, if any.
func LastSourceID(dir, root string) (source.RootIdentity, bool) {
	b, err := os.ReadFile(filepath.Join(dir, sourceIDFile))
	if err != nil {
		return source.RootIdentity{}, false
	}
	var r sourceRecord
	if json.Unmarshal(b, &r) != nil || r.Source != root || r.FSType == 0 && r.Ino == 0 {
		return source.RootIdentity{}, false
	}
	return r.RootIdentity, true
}

// saveSourceID records id as the identity of the source root (a new file
// renamed over the old).
func saveSourceID(dir, root string, id source.RootIdentity) error {
	if old, ok := LastSourceID(dir, root); ok && old == id {
		return nil
	}
	b, err := json.Marshal(sourceRecord{Source: root, RootIdentity: id})
	if err != nil {
		return err
	}
	p := filepath.Join(dir, sourceIDFile)
	tmp := p + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("daemon: %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("daemon: %s: %w", p, err)
	}
	return nil
}

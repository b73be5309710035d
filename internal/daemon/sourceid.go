package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/epochfs/epochfs/internal/tier"
)

// The source root's identity at the last mount is kept in the state
// directory: a mount whose source does not answer (a hung or dead client,
// or a mount point left empty by a client that is gone) serves what the
// last mount left, the catalog and the resident copies, and finds the
// source when its root answers as that file system again.
const sourceIDFile = "source-id"

type sourceRecord struct {
	Source string `json:"source"`
	tier.RootIdentity
}

// LastSourceID is the identity of source's root that the last mount with
// state directory dir found, if any.
func LastSourceID(dir, source string) (tier.RootIdentity, bool) {
	b, err := os.ReadFile(filepath.Join(dir, sourceIDFile))
	if err != nil {
		return tier.RootIdentity{}, false
	}
	var r sourceRecord
	if json.Unmarshal(b, &r) != nil || r.Source != source || r.FSType == 0 && r.Ino == 0 {
		return tier.RootIdentity{}, false
	}
	return r.RootIdentity, true
}

// saveSourceID records id as source's root identity (a new file renamed
// over the old).
func saveSourceID(dir, source string, id tier.RootIdentity) error {
	if old, ok := LastSourceID(dir, source); ok && old == id {
		return nil
	}
	b, err := json.Marshal(sourceRecord{Source: source, RootIdentity: id})
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

package tier

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// A tier directory holds the copies of one catalog's dataset. The catalog
// records which of its files have a copy in which tier by path, size and
// mtime: a second catalog using the same directory would serve the first
// one's bytes for its own files of the same path, size and mtime (and plain
// verify would see nothing). So the first mount that opens a tier directory
// records its owner inside it (ownerFile), and a mount of another catalog
// is refused. A catalog is named by its state directory (one catalog per
// state directory, locked while mounted; the catalog refuses another
// source). A directory used before owners were recorded is claimed by the
// next mount.

// ownerFile is the owner record in the tier's root directory.
const ownerFile = "owner.json"

// maxOwnerRecord bounds what is read of an owner record.
const maxOwnerRecord = 64 << 10

// Owner names the catalog a tier directory belongs to. StateDir is its
// identity; Source and Mountpoint are told to whoever is refused.
type Owner struct {
	StateDir   string `json:"state_dir"`
	Source     string `json:"source"`
	Mountpoint string `json:"mountpoint"`
}

// ErrOwned means a tier directory belongs to another catalog.
var ErrOwned = errors.New("tier: directory belongs to another catalog")

// OwnedError is ErrOwned with the directory and its recorded owner.
type OwnedError struct {
	Dir   string
	Owner Owner
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("tier directory %s holds the copies of the mount of %s at %s (state directory %s): a tier directory serves one catalog; give this mount its own tier directory, or remove that one's contents once it is unmounted for good",
		e.Dir, e.Owner.Source, e.Owner.Mountpoint, e.Owner.StateDir)
}

func (e *OwnedError) Unwrap() error { return ErrOwned }

// claim records o as the owner of the tier directory dir, or checks that
// it is: a directory owned by another state directory is refused with an
// *OwnedError. The record is created exclusively (two first mounts of one
// directory cannot both claim it) and rewritten in place of the old one
// when the owner's source or mount point changed.
func claim(dir string, o Owner) error {
	p := filepath.Join(dir, ownerFile)
	doc, err := json.Marshal(o)
	if err != nil {
		return err
	}
	doc = append(doc, '\n')
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		_, werr := f.Write(doc)
		if serr := f.Sync(); werr == nil {
			werr = serr
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(p)
			return fmt.Errorf("record the owner of %s: %w", dir, werr)
		}
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("record the owner of %s: %w", dir, err)
	}
	cur, err := readOwner(p)
	if err != nil {
		return fmt.Errorf("owner record %s: %w (remove it if no other mount uses %s)", p, err, dir)
	}
	if cur.StateDir != o.StateDir {
		return &OwnedError{Dir: dir, Owner: cur}
	}
	if cur == o {
		return nil
	}
	tmp := p + ".new"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		return fmt.Errorf("record the owner of %s: %w", dir, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record the owner of %s: %w", dir, err)
	}
	return nil
}

// CheckOwner reports, without writing anything, whether a mount of
// catalog o may use the tier directory dir: an *OwnedError when another
// catalog's record is there, an error when the record cannot be read.
func CheckOwner(dir string, o Owner) error {
	p := filepath.Join(dir, ownerFile)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	cur, err := readOwner(p)
	if err != nil {
		return fmt.Errorf("owner record %s: %w", p, err)
	}
	if cur.StateDir != o.StateDir {
		return &OwnedError{Dir: dir, Owner: cur}
	}
	return nil
}

// readOwner reads an owner record: a regular file (never followed if a
// link), of bounded size, naming a state directory.
func readOwner(p string) (Owner, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Owner{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return Owner{}, err
	} else if !fi.Mode().IsRegular() {
		return Owner{}, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxOwnerRecord+1))
	if err != nil {
		return Owner{}, err
	}
	if len(data) > maxOwnerRecord {
		return Owner{}, fmt.Errorf("larger than %d bytes", maxOwnerRecord)
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil {
		return Owner{}, fmt.Errorf("not an owner record: %w", err)
	}
	if o.StateDir == "" {
		return Owner{}, errors.New("not an owner record: no state_dir")
	}
	return o, nil
}

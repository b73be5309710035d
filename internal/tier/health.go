package tier

import (
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/status"
)

// A tier's health follows the errors of its operations, in three classes:
//
//   - An error about one file: its name is too long (ENAMETOOLONG), it or a
//     directory on its way is missing or not what the name says (ENOENT,
//     ENOTDIR, EISDIR, ELOOP), the name is taken by a directory (EEXIST,
//     ENOTEMPTY: Go's os.Rename reports EEXIST for a file renamed onto a
//     directory), it is not permitted (EACCES, EPERM), or the call does not
//     apply to it (EINVAL). Only that file's copy fails; the
//     tier neither counts it nor rests. The caller serves the file from the
//     source.
//   - No space (ENOSPC, EDQUOT): counted, never a rest. The quota and the
//     free-space floor handle it; the copy fails and smaller files still fit.
//   - Anything else says the storage is failing (EIO, EROFS, ENXIO, ENODEV,
//     ESTALE, and errors nobody classified): counted, and maxErrors in a row
//     rest the tier for coolDown.
//
// The class depends on the operation as well as the errno. An operation
// on one file's name (open, mkdir of its directories, rename into place,
// remove) goes through noteFileError. An operation on the tier itself
// (statfs, the temp directory, writes and fsyncs of a temp file) goes
// through noteError: when the tier's own .tmp cannot be created every copy
// fails, whatever the errno says.

// IsFileError reports whether err is about one file rather than the
// storage that holds it. Callers use it to tell a file that cannot be
// placed from a failing tier.
func IsFileError(err error) bool {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return true
	}
	for _, e := range [...]syscall.Errno{
		syscall.ENAMETOOLONG, syscall.ENOENT, syscall.EACCES, syscall.EPERM,
		syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP, syscall.EEXIST, syscall.ENOTEMPTY,
		syscall.EINVAL,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// NoteError lets callers report an error on a tier file (e.g. a failed
// read) so the tier's health reflects it. It is classified as an error of
// that file: only a storage error counts.
func (t *Tier) NoteError(err error) { t.noteFileError(err) }

// noteFileError notes the error of an operation on one file's name.
func (t *Tier) noteFileError(err error) {
	if err == nil || IsFileError(err) {
		return
	}
	t.noteError(err)
}

// noteError notes the error of an operation on the tier itself.
func (t *Tier) noteError(err error) {
	if err == nil {
		return
	}
	t.errTotal.Add(1)
	if isNoSpace(err) {
		return
	}
	if t.errRun.Add(1) >= maxErrors {
		t.restUntil.Store(time.Now().Add(coolDown).UnixNano())
		t.errRun.Store(0)
	}
}

// Healthy reports whether the tier takes copies now.
func (t *Tier) Healthy() bool {
	until := t.restUntil.Load()
	return until == 0 || time.Now().UnixNano() >= until
}

// Status fills the tier's section of the mount's status (d: the section
// tier.NAME.): where it is, its quota and use, its errors and health.
func (t *Tier) Status(d *status.Doc) {
	d.Text("path", t.Dir())
	d.Int("quota", t.Quota())
	d.Int("used", t.Used())
	d.Int("files", t.Files())
	d.Int("errors", t.Errors())
	d.Flag("healthy", t.Healthy(), status.YesNo)
}

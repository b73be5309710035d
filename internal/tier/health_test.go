package tier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var (
	fileErrnos    = []syscall.Errno{syscall.ENAMETOOLONG, syscall.ENOENT, syscall.EACCES, syscall.EPERM, syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP, syscall.EEXIST, syscall.ENOTEMPTY, syscall.EINVAL}
	storageErrnos = []syscall.Errno{syscall.EIO, syscall.EROFS, syscall.ENXIO, syscall.ENODEV, syscall.ESTALE}
)

// wrapped gives err in the forms tier operations produce.
func wrapped(err error) []error {
	return []error{
		err,
		&os.PathError{Op: "rename", Path: "x", Err: err},
		&os.LinkError{Op: "rename", Old: "a", New: "b", Err: err},
		fmt.Errorf("tier t: open a/b: %w", &os.PathError{Op: "open", Path: "x", Err: err}),
	}
}

func TestIsFileErrorClassifies(t *testing.T) {
	for _, e := range fileErrnos {
		for _, err := range wrapped(e) {
			if !IsFileError(err) {
				t.Errorf("IsFileError(%v) = false", err)
			}
		}
	}
	for _, e := range append(storageErrnos, syscall.ENOSPC, syscall.EDQUOT) {
		for _, err := range wrapped(e) {
			if IsFileError(err) {
				t.Errorf("IsFileError(%v) = true", err)
			}
		}
	}
	for _, err := range []error{fs.ErrNotExist, fs.ErrPermission} {
		if !IsFileError(err) {
			t.Errorf("IsFileError(%v) = false", err)
		}
	}
	if IsFileError(errors.New("something unknown")) || IsFileError(nil) {
		t.Error("unknown or nil errors classified as file errors")
	}
}

func TestErrorsOfOneFileNeverRestTheTier(t *testing.T) {
	tr := openTier(t, Options{Quota: 100})
	for i := 0; i < 3*maxErrors; i++ {
		for _, e := range fileErrnos {
			for _, err := range wrapped(e) {
				tr.NoteError(err)
			}
		}
	}
	if !tr.Healthy() || tr.Errors() != 0 {
		t.Fatalf("after errors of single files: Healthy=%v Errors=%d, want true 0", tr.Healthy(), tr.Errors())
	}
	if _, err := tr.Reserve(1); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
}

func TestStorageErrorsRestTheTier(t *testing.T) {
	for _, e := range append(storageErrnos, syscall.Errno(0x7ff)) {
		tr := openTier(t, Options{Quota: 100})
		for i := 0; i < maxErrors; i++ {
			tr.NoteError(&os.PathError{Op: "read", Path: "x", Err: e})
		}
		if tr.Healthy() || tr.Errors() != maxErrors {
			t.Errorf("%v ×%d: Healthy=%v Errors=%d, want false %d", e, maxErrors, tr.Healthy(), tr.Errors(), maxErrors)
		}
		if _, err := tr.Reserve(1); !errors.Is(err, ErrUnhealthy) {
			t.Errorf("%v: Reserve on a resting tier: %v", e, err)
		}
	}
}

// Real operations: a name in the way of many copies (ENOTDIR, EISDIR)
// fails those copies and leaves the tier healthy; the tier's own temp
// directory gone bad fails every copy and rests it.
func TestFailedInstallsOfSingleFilesLeaveTheTierHealthy(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	install(t, tr, "f", []byte("a file"))
	if err := os.MkdirAll(filepath.Join(tr.Path("d"), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*maxErrors; i++ {
		for _, rel := range []string{fmt.Sprintf("f/under-a-file-%d", i), "d"} {
			res, err := tr.Reserve(3)
			if err != nil {
				t.Fatalf("Reserve after %d failed installs: %v", i, err)
			}
			tp, err := tr.Create(rel, res)
			if err != nil {
				t.Fatal(err)
			}
			tp.Write([]byte("abc"))
			if err := tp.Install(3); err == nil {
				t.Fatalf("Install(%s) succeeded", rel)
			}
			tp.Close()
		}
	}
	if !tr.Healthy() || tr.Errors() != 0 {
		t.Errorf("Healthy=%v Errors=%d after failed installs of single files", tr.Healthy(), tr.Errors())
	}
	checkAccounting(t, tr, 6, 1, 0)
	install(t, tr, "g", []byte("still takes copies"))
}

func TestABrokenTempDirectoryRestsTheTier(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	tmp := filepath.Join(tr.Dir(), tmpDir)
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxErrors; i++ {
		res, err := tr.Reserve(1)
		if err != nil {
			t.Fatalf("Reserve %d: %v", i, err)
		}
		_, err = tr.Create("a", res)
		if !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), "create temp") {
			t.Fatalf("Create with .tmp a file: %v", err)
		}
		res.Release()
	}
	if tr.Healthy() || tr.Errors() != maxErrors {
		t.Errorf("Healthy=%v Errors=%d; the tier's own directory failing must rest it", tr.Healthy(), tr.Errors())
	}
}

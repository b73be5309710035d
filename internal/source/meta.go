package source

// Metadata operations on the source: stat, readdir, readlink, each
// resolved beneath the root and bounded by the deadline (call).

import (
	"context"
	"os"
)

// Stat lstats the source file rel, resolved beneath the root (counted as
// a metadata call).
func (s *Source) Stat(ctx context.Context, rel string) (os.FileInfo, error) {
	s.stats.Add(1)
	return s.lstat(ctx, rel)
}

func (s *Source) lstat(ctx context.Context, rel string) (os.FileInfo, error) {
	if err := s.usable(ctx, "stat", rel); err != nil {
		return nil, err
	}
	var fi os.FileInfo
	err, _ := s.call(ctx, "stat", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		si, err := b.lstat(rel)
		if err == nil {
			fi = si
		}
		return err
	}, nil)
	if err = s.believe(ctx, "stat", rel, err); err != nil {
		return nil, err
	}
	return fi, nil
}

// ReadDir reads the names and types of the source directory rel (counted
// as a metadata call), sorted by name. Each entry's Info is the lstat of
// the entry, taken on the directory's descriptor.
func (s *Source) ReadDir(ctx context.Context, rel string) ([]os.DirEntry, error) {
	s.stats.Add(1)
	return s.readDir(ctx, rel)
}

// WalkReadDir is ReadDir for the walk of the catalog (not counted).
func (s *Source) WalkReadDir(ctx context.Context, rel string) ([]os.DirEntry, error) {
	return s.readDir(ctx, rel)
}

func (s *Source) readDir(ctx context.Context, rel string) ([]os.DirEntry, error) {
	if err := s.usable(ctx, "readdir", rel); err != nil {
		return nil, err
	}
	var des []os.DirEntry
	err, _ := s.call(ctx, "readdir", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		des, err = b.readDir(rel)
		return err
	}, nil)
	if err = s.believe(ctx, "readdir", rel, err); err != nil {
		return nil, err
	}
	return des, nil
}

// Readlink reads the target of the source symlink rel.
func (s *Source) Readlink(ctx context.Context, rel string) (string, error) {
	s.stats.Add(1)
	return s.readlink(ctx, rel)
}

// WalkReadlink is Readlink for the walk of the catalog (not counted).
func (s *Source) WalkReadlink(ctx context.Context, rel string) (string, error) {
	return s.readlink(ctx, rel)
}

func (s *Source) readlink(ctx context.Context, rel string) (string, error) {
	if err := s.usable(ctx, "readlink", rel); err != nil {
		return "", err
	}
	var target string
	err, _ := s.call(ctx, "readlink", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		target, err = b.readlink(rel)
		return err
	}, nil)
	if err = s.believe(ctx, "readlink", rel, err); err != nil {
		return "", err
	}
	return target, nil
}

package placement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// CheckPath checks a path a request of who's names, as it is written:
// the same check as a warmup's (who may open it) for a verify and for a
// refresh of a user's; root's refresh may also name a path the source
// gained since the walk, refused only when neither the catalog nor the
// source has it (ErrNoEntry).
func (s *Scrubber) CheckPath(who *catalog.Cred, kind ScrubKind, path string) error {
	cat := s.cat
	if kind != ScrubRefresh || !who.Root() {
		_, err := cat.LookupAs(who, path)
		return err
	}
	if cat.Find(path) != nil {
		return nil
	}
	// The first component below the deepest directory the catalog has:
	// if the source lacks it, it lacks the path.
	parts := strings.Split(strings.Trim(path, "/"), "/")
	next := path
	for k := len(parts) - 1; k > 0; k-- {
		if d := cat.Find(strings.Join(parts[:k], "/")); d != nil {
			if d.Kind() != catalog.KindDir {
				return fmt.Errorf("%w: %q (%s is not a directory)", ErrNoEntry, path, d.Path())
			}
			next = strings.Join(parts[:k+1], "/")
			break
		}
		next = parts[0]
	}
	if _, err := s.src.Stat(context.Background(), next); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %q (not in the dataset, nor on the source)", ErrNoEntry, path)
	}
	return nil
}

package fs

import "testing"

func TestEachContentOfAFileHasItsOwnInode(t *testing.T) {
	for _, id := range []uint64{1, 2, 1<<40 - 1} {
		if got := fileIno(id, 0); got != id {
			t.Errorf("fileIno(%d, 0) = %d, want the catalog ID", id, got)
		}
		seen := map[uint64]uint32{}
		for v := uint32(0); v < 2000; v++ {
			ino := fileIno(id, v)
			if ino >= inoAugmentedBase {
				t.Fatalf("fileIno(%d, %d) = %#x: past the dataset's range", id, v, ino)
			}
			if ino&(1<<inoVersionShift-1) != id {
				t.Fatalf("fileIno(%d, %d) = %#x: the low bits are not the catalog ID", id, v, ino)
			}
			if w, dup := seen[ino]; dup {
				t.Fatalf("versions %d and %d of %d share inode %#x", w, v, id, ino)
			}
			seen[ino] = v
		}
		// The numbers come back after inoVersions changes, never to 0's.
		if a, b := fileIno(id, 1), fileIno(id, 1+inoVersions); a != b {
			t.Errorf("version %d is %#x, want version 1's %#x", 1+inoVersions, b, a)
		}
		if got := fileIno(id, inoVersions); got == id {
			t.Errorf("version %d has version 0's inode", inoVersions)
		}
		if got := fileIno(id, ^uint32(0)); got == id || got >= inoAugmentedBase {
			t.Errorf("the last version's inode %#x", got)
		}
	}
	if got := fileIno(1<<40, 3); got != 1<<40 {
		t.Errorf("an ID of 2^40 has versions: %#x", got)
	}
}

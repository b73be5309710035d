package layout

import (
	"regexp"
	"strings"
	"testing"
)

// hashTag is the part of a key Redis Cluster hashes.
func hashTag(k string) string {
	i := strings.IndexByte(k, '{')
	j := strings.IndexByte(k[i+1:], '}')
	return k[i+1 : i+1+j]
}

// The keys a script touches together share one hash slot; a file's keys
// follow the documented layout; another version, dataset or job never
// shares a key.
func TestKeysShareTheirSlotAndNeverCollide(t *testing.T) {
	k := New("ds")
	fk := FileKey{Path: "train/a.jpg", Size: 100, Mtime: 5}
	f := k.File(fk)
	if !regexp.MustCompile(`^epochfs:ds:\{f[0-9a-f]{32}\}:m$`).MatchString(f.Manifest) {
		t.Errorf("manifest key %q does not follow the layout", f.Manifest)
	}
	for _, key := range []string{f.Lease, f.Holders, f.Chunk(0), f.Chunk(17)} {
		if hashTag(key) != hashTag(f.Manifest) {
			t.Errorf("%q is not in the manifest's slot (%q)", key, f.Manifest)
		}
	}
	if hashTag(k.QuotaBytes()) != hashTag(k.QuotaSizes()) {
		t.Error("the quota's two keys are in two slots")
	}
	j := k.Job("resnet")
	for _, key := range []string{j.Members, j.Seen("r1", 2), j.Got("r1", 2), j.Lost("r1", 2), j.Done("r1", 2), j.Ended("r1")} {
		if hashTag(key) != hashTag(j.Shape) {
			t.Errorf("job key %q is not in the job's slot", key)
		}
	}
	c := k.Catalog("/pfs/imagenet")
	if hashTag(c.Chunk("g1", 3)) != hashTag(c.Manifest) || hashTag(c.Lease) != hashTag(c.Manifest) {
		t.Error("the catalog's keys are in several slots")
	}
	seen := map[string]string{}
	for name, key := range map[string]string{
		"file":          f.Manifest,
		"newer version": k.File(FileKey{Path: fk.Path, Size: fk.Size, Mtime: 6}).Manifest,
		"bigger":        k.File(FileKey{Path: fk.Path, Size: 101, Mtime: 5}).Manifest,
		"other dataset": New("ds2").File(fk).Manifest,
		"other job":     k.Job("resnet2").Shape,
		"job":           j.Shape,
		"members":       k.Members(),
		"holders":       f.Holders,
	} {
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share the key %q", name, other, key)
		}
		seen[key] = name
	}
}

package datagen

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// shardTime is the fixed modification time of every tar member, so shards
// are byte-identical across runs.
var shardTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// ShardName is the file name of shard n.
func ShardName(n int) string { return fmt.Sprintf("shard-%06d.tar", n) }

// ShardKey is a sample's WebDataset key: its file name without extension
// ("n00000003_000042"), unique across classes. Its members are key+".jpg"
// (the JPEG bytes) and key+".cls" (the class index in decimal).
func ShardKey(s Sample) string {
	base := path.Base(s.Path)
	return strings.TrimSuffix(base, path.Ext(base))
}

// tarBytes is what a sample adds to a tar file: a header block and the padded
// data for each of its two members.
func tarBytes(s Sample, clsLen int) int64 {
	pad := func(n int64) int64 { return (n + 511) / 512 * 512 }
	return 512 + pad(s.Bytes) + 512 + pad(int64(clsLen))
}

// writeShards packs the samples, in index order, into tar files of at most
// o.ShardBytes each, reading back the files writeSamples wrote.
func writeShards(ctx context.Context, o *Options, samples []Sample) ([]string, error) {
	const trailer = 1024 // two zero blocks end a tar file
	var shards []string
	for start := 0; start < len(samples); {
		size := int64(trailer)
		end := start
		for end < len(samples) {
			n := tarBytes(samples[end], len(strconv.Itoa(samples[end].Class)))
			if end > start && size+n > o.ShardBytes {
				break
			}
			size += n
			end++
		}
		name := filepath.Join(o.ShardDir, ShardName(len(shards)))
		if err := writeShard(ctx, o, name, samples[start:end]); err != nil {
			return nil, err
		}
		shards = append(shards, name)
		start = end
	}
	return shards, nil
}

func writeShard(ctx context.Context, o *Options, name string, samples []Sample) (err error) {
	f, err := os.CreateTemp(o.ShardDir, "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	tw := tar.NewWriter(f)
	put := func(member string, data []byte) error {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     member,
			Size:     int64(len(data)),
			Mode:     0o644,
			ModTime:  shardTime,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, s := range samples {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("datagen: interrupted, %s is incomplete: %w", o.ShardDir, err)
		}
		data, err := os.ReadFile(filepath.Join(o.Dir, filepath.FromSlash(s.Path)))
		if err != nil {
			return fmt.Errorf("datagen: shard: %w", err)
		}
		key := ShardKey(s)
		if err := put(key+".jpg", data); err != nil {
			return fmt.Errorf("datagen: write %s: %w", name, err)
		}
		if err := put(key+".cls", []byte(strconv.Itoa(s.Class))); err != nil {
			return fmt.Errorf("datagen: write %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("datagen: write %s: %w", name, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("datagen: write %s: %w", name, err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}

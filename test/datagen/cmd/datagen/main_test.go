package main

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBadFlagsAreOneLineUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-files", "10"},
		{"-out", dir + "/x"},
		{"-out", dir + "/x", "-files", "0"},
		{"-out", dir + "/x", "-files", "-5"},
		{"-out", dir + "/x", "-files", "ten"},
		{"-out", dir + "/x", "-files", "10", "-mean-bytes", "lots"},
		{"-out", dir + "/x", "-files", "10", "-shard-bytes", "0"},
		{"-out", dir + "/x", "-files", "10", "-bogus"},
		{"-out", dir + "/x", "-files", "10", "extra"},
		{"-out", dir + "/x", "-files", "3", "-classes", "5"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr, false)
		msg := stderr.String()
		if code != exitUsage || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "datagen: ") || stdout.Len() > 0 {
			t.Errorf("run(%q) = %d, stderr %q, stdout %q; want exit 2 and one 'datagen: ' line", args, code, msg, stdout.String())
		}
	}
	if _, err := os.Stat(dir + "/x"); err == nil {
		t.Errorf("a usage error created the output directory")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"110000": 110000, "110KB": 110000, "110kb": 110000, "110K": 110000,
		"256MiB": 256 << 20, "1GiB": 1 << 30, "2M": 2e6, "7 B": 7,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KB", "-1", "1.5MB", "12XB", "99999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded", in)
		}
	}
}

// writePhoto writes a small synthetic photograph, so this test of the CLI's
// plumbing needs neither mate-backgrounds nor the time to decode it.
func writePhoto(t *testing.T, path string) {
	img := image.NewRGBA(image.Rect(0, 0, 320, 240))
	for y := 0; y < 240; y++ {
		for x := 0; x < 320; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x*y>>5) ^ uint8(x*7), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRunPrintsOneLineSummary(t *testing.T) {
	photos := t.TempDir()
	writePhoto(t, filepath.Join(photos, "p.png"))
	out := filepath.Join(t.TempDir(), "ds")
	var stdout, stderr bytes.Buffer
	args := []string{"-out", out, "-files", "9", "-classes", "3", "-seed", "5", "-width", "96", "-height", "72",
		"-mean-bytes", "3KB", "-shards", "-shard-bytes", "16KiB", "-photos", photos}
	if code := run(context.Background(), args, &stdout, &stderr, false); code != exitOK {
		t.Fatalf("run = %d, stderr %q", code, stderr.String())
	}
	re := regexp.MustCompile(`^datagen: 9 files in 3 classes, [0-9.]+ KB \(mean [0-9.]+ KB\) in [0-9.]+s \([0-9]+ files/s\) -> \S+; [0-9]+ shards? -> \S+-shards\n$`)
	if !re.MatchString(stdout.String()) || stderr.Len() > 0 {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	// A second run into the now non-empty directory is a usage error.
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), args, &stdout, &stderr, false); code != exitUsage || !strings.Contains(stderr.String(), "not empty") {
		t.Errorf("rerun = %d, stderr %q; want exit 2, 'not empty'", code, stderr.String())
	}
}

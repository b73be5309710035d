package mount

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/npytest"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/views"
)

// makeJPEGs writes n small JPEGs of varied sizes under src/class{0,1}/
// and returns their dataset paths.
func makeJPEGs(t *testing.T, src string, n int) []string {
	t.Helper()
	return makeJPEGsOfSize(t, src, n, 90, 70)
}

// makeJPEGsOfSize is makeJPEGs with images of at least w0×h0 (and up to
// 80 pixels more each way).
func makeJPEGsOfSize(t *testing.T, src string, n, w0, h0 int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	var paths []string
	for i := 0; i < n; i++ {
		w, h := w0+rng.IntN(80), h0+rng.IntN(80)
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.Set(x, y, color.RGBA{uint8(x * 3), uint8(y * 2), uint8(rng.IntN(256)), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("class"+strconv.Itoa(i%2), "img"+strconv.Itoa(i)+".jpg")
		os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(src, p), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

var viewPipeline = preprocess.Options{Static: []string{"resize:64", "center_crop:48"},
	Augment: []string{"random_resized_crop:32", "hflip:0.5"}, Output: "uint8_hwc"}

func TestDecodedViewsAreTheStaticStepsOfEachFile(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	paths := makeJPEGs(t, src, 12)
	os.WriteFile(filepath.Join(src, "class0", "corrupt.jpg"), []byte("\xff\xd8\xffnot really"), 0o644)
	os.WriteFile(filepath.Join(src, "class1", "secret.jpg"), mustRead(t, filepath.Join(src, paths[0])), 0o600)
	e := newEnv(t, src, 1<<30)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, DecodedBytes: 1 << 20, AugmentedBytes: 1 << 20}
	e.mount()
	p, err := preprocess.New(viewPipeline)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, rel := range paths {
		data, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs/views/decoded", rel+".npy"))
		if err != nil {
			t.Fatalf("view of %s: %v", rel, err)
		}
		got, err := npytest.Decode(data)
		if err != nil {
			t.Fatalf("view of %s is not a .npy: %v", rel, err)
		}
		want, err := p.Decode(mustRead(t, filepath.Join(src, rel)))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Shape) != 3 || got.Shape[0] != 48 || got.Shape[1] != 48 || got.Shape[2] != 3 || !bytes.Equal(got.U8, compact(want)) {
			t.Fatalf("view of %s: shape %v, differs from the static steps", rel, got.Shape)
		}
	}
	// Listing: every file with .npy, directories as they are.
	ls, err := exec.Command("ls", filepath.Join(e.mnt, ".epochfs/views/decoded/class0")).Output()
	if err != nil || !strings.Contains(string(ls), "img0.jpg.npy") || !strings.Contains(string(ls), "corrupt.jpg.npy") {
		t.Fatalf("ls of a views directory: %v\n%s", err, ls)
	}
	// A corrupt image: EIO, named in errors; the daemon lives on.
	_, err = os.ReadFile(filepath.Join(e.mnt, ".epochfs/views/decoded/class0/corrupt.jpg.npy"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("view of a corrupt image: %v, want EIO", err)
	}
	errs, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs/errors"))
	if !bytes.Contains(errs, []byte("class0/corrupt.jpg")) {
		t.Errorf(".epochfs/errors does not name the corrupt image:\n%s", errs)
	}
	st := e.status()
	if st["decoded_cache_entries"] != strconv.Itoa(len(paths)) || st["preprocess_failed"] != "1" {
		t.Errorf("status: decoded_cache_entries=%s preprocess_failed=%s", st["decoded_cache_entries"], st["preprocess_failed"])
	}
	// A second read comes from the decoded cache.
	before := e.num("source_reads")
	if _, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs/views/decoded", paths[1]+".npy")); err != nil {
		t.Fatal(err)
	}
	if e.num("source_reads") != before {
		t.Error("a cached decoded view read the file again")
	}
	// A user who may not read a file may not read its view.
	uid, gid := testUser(t)
	os.Chmod(filepath.Dir(e.mnt), 0o755)
	cmd := exec.Command("cat", filepath.Join(e.mnt, ".epochfs/views/decoded/class1/secret.jpg.npy"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("another user read the view of a 0600 file: %v: %s", err, out)
	}
}

func TestModelSplitsTheMemoryBudgetBetweenTheRAMTierAndTheCaches(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	makeJPEGs(t, src, 6)
	e := newEnv(t, src, 0) // quota 0: the model's encoded share
	// A RAM tier: a tmpfs of its own.
	if err := os.MkdirAll(e.tiers[0].dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", e.tiers[0].dir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(e.tiers[0].dir, syscall.MNT_DETACH) })
	budget, tgpu, tda, ta, bst := float64(64<<20), 2000.0, 300.0, 900.0, 50e6
	e.opts.model = &model.Settings{MemoryBudget: &budget, MemoryBudgetText: "64MiB", TGPU: &tgpu,
		TDecodeAugment: &tda, TAugment: &ta, BStorage: &bst, Split: "50-30-20"}
	e.opts.views = &views.Config{Pipeline: viewPipeline, DecodedBytes: -1, AugmentedBytes: 8 << 20}
	e.mount()
	data, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs/model"))
	if err != nil {
		t.Fatal(err)
	}
	kv := status.Parse(data).Map()
	want := map[string]string{
		"split_encoded_pct": "50", "split_decoded_pct": "30", "split_augmented_pct": "20",
		"applied.tier.t0.quota": strconv.Itoa(32 << 20), "applied.decoded_cache_bytes": strconv.FormatInt(int64(0.3*budget), 10),
		"applied.augmented_cache_bytes": strconv.Itoa(8 << 20),
	}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf(".epochfs/model %s = %q, want %q\n%s", k, kv[k], v, data)
		}
	}
	// What the config does not give, the mount measures on its files.
	for _, k := range []string{"decoded_bytes", "augmented_bytes"} {
		if v, _ := strconv.ParseFloat(kv["input."+k], 64); v <= 0 || !strings.Contains(kv["input."+k+".source"], "at mount") {
			t.Errorf(".epochfs/model input.%s = %q (%s), want measured at mount", k, kv["input."+k], kv["input."+k+".source"])
		}
	}
	if !strings.Contains(kv["applied.augmented_cache_bytes.source"], "overrides the model") {
		t.Errorf("the explicit augmented budget is not reported as an override: %q", kv["applied.augmented_cache_bytes.source"])
	}
	st := e.status()
	if st["tier.t0.quota"] != strconv.Itoa(32<<20) || st["decoded_cache_budget"] != want["applied.decoded_cache_bytes"] ||
		st["augmented_cache_budget"] != strconv.Itoa(8<<20) {
		t.Errorf("status: tier quota %s, decoded budget %s, augmented budget %s", st["tier.t0.quota"], st["decoded_cache_budget"], st["augmented_cache_budget"])
	}
}

func compact(img *preprocess.Image) []byte {
	return img.Compact().Pix
}

// With only a memory budget, the mount measures its pipeline (T_D+A, T_A,
// the decoded and augmented sizes) on its own files and splits by them.
// The files are photographs' size (640×480 and more) so that decoding one
// costs many times its augmentation, as in training: with thumbnails the
// two measured times are close, and which of the decoded and the encoded
// path wins is the machine's noise.
func TestModelMeasuresThePipelineAtMount(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	makeJPEGsOfSize(t, src, 6, 640, 480)
	e := newEnv(t, src, 1<<30)
	budget := float64(64 << 20)
	e.opts.model = &model.Settings{MemoryBudget: &budget, MemoryBudgetText: "64MiB"}
	e.opts.views = &views.Config{Pipeline: viewPipeline, DecodedBytes: -1, AugmentedBytes: -1}
	e.mount()
	data, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs/model"))
	if err != nil {
		t.Fatal(err)
	}
	kv := status.Parse(data).Map()
	for _, k := range []string{"t_decode_augment", "t_augment", "decoded_bytes", "augmented_bytes"} {
		if v, _ := strconv.ParseFloat(kv["input."+k], 64); v <= 0 || !strings.Contains(kv["input."+k+".source"], "at mount") {
			t.Errorf("input.%s = %q (%s), want measured at mount\n%s", k, kv["input."+k], kv["input."+k+".source"], data)
		}
	}
	// Six small JPEGs fit the budget decoded: one job decodes them all.
	if kv["split_augmented_pct"] != "0" || kv["split_decoded_pct"] == "0" || kv["applied.decoded_cache_bytes.source"] == "" {
		t.Errorf("split %s-%s-%s\n%s", kv["split_encoded_pct"], kv["split_decoded_pct"], kv["split_augmented_pct"], data)
	}
}

// A job's first augmentation of each file (generation 0, made from the
// encoded bytes) is byte for byte what `epochfs preprocess --seed` makes
// of the same file with the same [preprocess] config: the CLI and the mount
// run one pipeline.
func TestAugmentedViewsAreByteIdenticalToEpochfsPreprocess(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	paths := makeJPEGs(t, src, 6)
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	for _, out := range []string{"uint8_hwc", "float32_chw"} {
		cfg := filepath.Join(base, out+".toml")
		os.WriteFile(cfg, []byte(`[preprocess]
static = ["resize:64"]
augment = ["random_resized_crop:40", "hflip:0.5"]
output = "`+out+`"
seed = 17
decoded_cache = "0"
`), 0o644)
		binMount(t, src, mnt, filepath.Join(base, "state-"+out), "--config", cfg, "--tier=t="+filepath.Join(base, "tier-"+out)+":1GiB")
		job := filepath.Join(mnt, ".epochfs/jobs/j")
		if err := os.Mkdir(job, 0o755); err != nil {
			t.Fatal(err)
		}
		outDir := filepath.Join(base, "out-"+out)
		var inputs []string
		for _, p := range paths {
			inputs = append(inputs, filepath.Join(src, p))
		}
		if code, msg := cli(t, append([]string{"preprocess", "--config", cfg, "--seed", "17", "--out", outDir}, inputs...)...); code != 0 {
			t.Fatalf("epochfs preprocess: exit %d: %s", code, msg)
		}
		for _, p := range paths {
			got, err := os.ReadFile(filepath.Join(job, "augmented", p+".npy"))
			if err != nil {
				t.Fatal(err)
			}
			want := mustRead(t, filepath.Join(outDir, strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))+".npy"))
			if !bytes.Equal(got, want) {
				t.Errorf("%s: augmented/%s.npy (%d bytes) differs from epochfs preprocess --seed 17 (%d bytes)", out, p, len(got), len(want))
			}
		}
		if code, msg := cli(t, "unmount", mnt); code != 0 {
			t.Fatalf("unmount: %d %s", code, msg)
		}
	}
}

package jobs

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/sampler"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte("# resnet\nbatch_size=256\n seed = 7 \nsampler=random\n\nsubset=train/n01/\nsubset=val\nworld_size=8\ndrop_last=true\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{BatchSize: 256, Seed: 7, Sampler: sampler.KindRandom, Subset: []string{"train/n01", "val"}, WorldSize: 8, DropLast: true,
		View: ViewAugmented}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
	// Keys not given keep the defaults; one default, one constant.
	cfg, err = ParseConfig(nil)
	if err != nil || !reflect.DeepEqual(cfg, DefaultConfig()) || cfg.BatchSize != DefaultBatchSize || cfg.WorldSize != 1 {
		t.Fatalf("empty config: %+v, %v", cfg, err)
	}
	cfg, _ = ParseConfig([]byte("subset=a\nsubset=all\n"))
	if cfg.Subset != nil {
		t.Fatalf("subset=all must mean every sample: %v", cfg.Subset)
	}
	// A quoted "all" is the file of that name; a quoted path is unquoted.
	cfg, _ = ParseConfig([]byte("subset=\"all\"\nsubset=" + ctlpath.Quote(" a\nb") + "\n"))
	if !reflect.DeepEqual(cfg.Subset, []string{"all", " a\nb"}) {
		t.Fatalf("quoted subsets: %q", cfg.Subset)
	}
	if doc := string(cfg.Format()); !strings.Contains(doc, "subset=\"all\"\n") || !strings.Contains(doc, "subset="+ctlpath.Quote(" a\nb")+"\n") {
		t.Fatalf("rendered %q", doc)
	}
	// The views' keys: a job's own augment steps and output round trip.
	cfg, err = ParseConfig([]byte("view=decoded\naugment=random_resized_crop:96,scale=0.5-1, hflip:0.25\noutput=float32_chw\n"))
	if err != nil || cfg.View != ViewDecoded || !reflect.DeepEqual(cfg.Augment, []string{"random_resized_crop:96,scale=0.5-1", "hflip:0.25"}) || cfg.Output != "float32_chw" {
		t.Fatalf("views keys: %+v, %v", cfg, err)
	}
	if again, err := ParseConfig(cfg.Format()); err != nil || !reflect.DeepEqual(again, cfg) {
		t.Fatalf("views keys do not round trip: %q → %+v, %v", cfg.Format(), again, err)
	}
	if cfg, _ := ParseConfig([]byte("augment=none")); cfg.Augment == nil || len(cfg.Augment) != 0 {
		t.Fatalf("augment=none: %#v", cfg.Augment)
	}
	for _, v := range []string{"True", "1", "false", "FALSE"} {
		if _, err := ParseConfig([]byte("drop_last=" + v)); err != nil {
			t.Errorf("drop_last=%s: %v", v, err)
		}
	}
}

func TestConfigErrorsWrapErrInvalidAndNameTheKeyAndValue(t *testing.T) {
	for in, want := range map[string]string{
		"bach_size=3":                  `line 1: unknown key "bach_size" (want batch_size, seed, sampler, subset, world_size, drop_last, view, augment, output, cluster, fixed)`,
		"batch_size=0":                 `batch_size="0": want an integer in 1..1048576`,
		"batch_size=-1":                `batch_size="-1"`,
		"batch_size=ten":               `batch_size="ten"`,
		"batch_size=99999999999":       `batch_size="99999999999"`,
		"seed=-4":                      `seed="-4"`,
		"sampler=lru":                  `sampler="lru": want ods, random, sequential`,
		"batch_size=1\nbatch_size=2":   "line 2: batch_size given twice",
		"\n\nhello":                    `line 3: "hello" is not key=value`,
		"subset=../etc":                `subset="../etc"`,
		"subset=a/../../b":             `subset="a/../../b"`,
		"subset=\"a\\qb\"":             `bad quoted path`,
		"world_size=0":                 `world_size="0": want an integer in 1..4096`,
		"world_size=4097":              `world_size="4097"`,
		"drop_last=maybe":              `drop_last="maybe": want true or false`,
		"view=tensor":                  `view="tensor": want encoded, decoded or augmented`,
		"augment=hflip:1.5":            `augment="hflip:1.5"`,
		"augment=random_resized_crp:2": `unknown step`,
		"output=float16":               `output="float16": want uint8_hwc, float32_chw, or mount`,
	} {
		_, err := ParseConfig([]byte(in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "jobs: ") {
			t.Errorf("ParseConfig(%q) = %v, want a jobs error containing %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
	_, err := ParseConfig([]byte("subset=\"a\\qb\"\n"))
	if !errors.Is(err, ctlpath.ErrBadQuote) {
		t.Errorf("a bad quote: %v does not wrap ctlpath.ErrBadQuote", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("batch_size=256\nseed=7\nsampler=ods\nsubset=train\nworld_size=4\ndrop_last=true\n"))
	f.Add([]byte("batch_size=0"))
	f.Add([]byte("subset=all\n#x\n\n"))
	f.Add([]byte("sampler = sequential\r\nsubset=a/b/"))
	f.Add([]byte("subset=\"#a\\nb\"\nsubset=\"all\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: not ErrInvalid or not one line", err)
			}
			return
		}
		if cfg.BatchSize <= 0 || cfg.BatchSize > sampler.MaxBatchSize || cfg.WorldSize < 1 || cfg.WorldSize > sampler.MaxWorldSize {
			t.Fatalf("accepted %+v", cfg)
		}
		// What Format writes, ParseConfig reads back the same.
		again, err := ParseConfig(cfg.Format())
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", cfg.Format(), again, err, cfg)
		}
	})
}
